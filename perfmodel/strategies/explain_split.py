"""``explain`` of filter/channel splits (closed forms) and of hypergraph model parallelism
(closed forms of the busiest GPU's work, the schedule simulated)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from ..cost.collectives import allreduce_expr
from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.formulas import p2p, smax
from ..partition.hypergraph import Hypergraph
from .channels import BREAKDOWN_KEYS, replica_exchange, split_counts, split_plan
from .context import Context, weight_group
from .data import buckets, shard_copies_s
from .dimension import optimizer_step_s
from .formula import (
    B_SYM,
    LINK,
    MODULES,
    OPS,
    SYMBOLS,
    E,
    M,
    StepFormula,
    count_words,
    finish,
    layer_exprs,
    ring,
    tier,
)
from .model_parallel import mp_partition
from .mp_schedule import simulate
from .mp_segments import Segments, segments
from .prediction import Prediction
from .spec import Strategy

__all__ = ["explain_split", "explain_mp"]


def explain_split(ctx: Context, s: Strategy, values: dict[sp.Symbol, float], pred: Prediction) -> StepFormula:
    """Filter / channel splits (``filter=N,dp=D``): compute, grouped exchanges, gradient allreduce."""
    mode, n = ("channel", s.channel) if s.channel > 1 else ("filter", s.filter)
    net, g = ctx.net, ctx.hw.gpus_per_node
    plan = split_plan(net, mode, n)
    params = ctx.cc.params * plan.f_par
    fwd, bwd = layer_exprs(ctx, B_SYM, (1, 1, 1), values[B_SYM], split_counts(ctx.cc, plan, 1.0), params)
    # n consecutive ranks; the dp replicas of a shard are n ranks apart (as channels places them)
    split_group = weight_group(Strategy(dp=n), g)
    _, _, where = tier(split_group)
    # each exchange joins its layer's forward or backward time (for the gradient overlap) ...
    fwd_c = list(fwd)
    bwd_c = list(bwd)
    for x in plan.exchanges:
        t = ring(x.op, B_SYM * x.elems_per_sample * E, split_group)
        if x.phase == "fwd":
            fwd_c[x.layer] += t
        else:
            bwd_c[x.layer] += t
    # ... and is shown grouped by pass and collective: one term per pass, one summand per collective
    terms: dict[str, sp.Expr] = {"compute": M * (sp.Add(*fwd) + sp.Add(*bwd))}
    legend: dict[str, str] = {}
    meaning: dict[str, str] = {}
    bw, alpha, where = tier(split_group)
    for phase, key in zip(("fwd", "bwd"), BREAKDOWN_KEYS[mode], strict=True):
        parts, words = [], []
        for op, (short, word, done) in OPS.items():
            xs = [x for x in plan.exchanges if x.phase == phase and x.op == op]
            if not xs:
                continue
            k = len(xs)
            n_sym = sp.Symbol(f"N_{short}_{phase}", positive=True)
            values[n_sym] = float(sum(x.elems_per_sample for x in xs))
            pass_name = "forward" if phase == "fwd" else "backward"
            tensors = count_words(k, "tensor")
            meaning[str(n_sym)] = f"elements per sample of the {tensors} {done} in the {pass_name} pass"
            parts.append(ring(op, B_SYM * n_sym * E, split_group, k))
            twice = "2*" if op == "allreduce" else ""
            words.append(
                f"{count_words(k, 'ring ' + word)}: {twice}(p - 1)/p * b*{n_sym}*e/{bw} + {k}*{twice}(p - 1)*{alpha}"
            )
        if parts:
            terms[key] = M * sp.Add(*parts)
            legend[key] = f"p = {n} GPUs {where}, per micro-batch; " + "; ".join(words)
    body = sp.Add(*terms.values())
    if s.dp > 1:
        exposed, _, _, terms["nccl_contention"] = replica_exchange(ctx, s, n, params, bwd_c, body, LINK)
        terms["gradient_bucket_copies"] = shard_copies_s(ctx.net, params, SYMBOLS)
        terms["gradient_exchange_exposed"] = exposed
        legend["gradient_exchange_exposed"] = (
            f"{s.comm} allreduce of each shard's gradients over the dp = {s.dp} replicas in 25 MiB buckets, "
            "overlapped with the last backward pass (exchanges included) as for data parallelism"
        )
    terms["optimizer_step"] = optimizer_step_s(float(params.sum()), ctx.optimizer, SYMBOLS)
    notes = [
        f"{mode}={n}: every exchanged tensor of |y| elements per sample is one ring collective of n = b*|y|*e "
        "bytes; the k tensors of one collective in one pass are one summand with k latencies and N = sum |y| "
        "elements (N_ag_fwd, ...). Exchanges are not overlapped with compute."
    ]
    return finish(terms, values, pred, legend=legend, meaning=meaning, notes=notes)


#: The two tiers a message of an mp plan crosses: (across nodes?, (bandwidth, latency, name)).
_TIERS = ((False, (LINK.bw_intra, LINK.alpha_intra, "intra")), (True, (LINK.bw_net_per_gpu, LINK.alpha_net, "net")))


@dataclass(frozen=True)
class _Mp:
    """What an ``mp`` formula is built from: the partition's units, segments and messages, each
    layer's seconds as expressions, the busiest GPU and the simulated symbols."""

    ctx: Context
    s: Strategy
    hg: Hypergraph
    seg: Segments
    assignment: np.ndarray
    across: np.ndarray
    fwd: list[Any]
    bwd: list[Any]
    crit: int
    idle: sp.Symbol
    starts: list[sp.Symbol]

    def units(self, per_layer: list[Any], units: np.ndarray) -> list[Any]:
        """Expressions of ``units``: each its layer's, times its share of the layer."""
        out = []
        for u in units:
            x, w = per_layer[int(self.hg.unit_layer[u])], float(self.hg.unit_share[u])
            out.append(x if w == 1.0 else w * x)
        return out


def _mp_sends(q: _Mp, terms: dict[str, Any], values: dict[sp.Symbol, float], legend: dict[str, str],
              meaning: dict[str, str]) -> None:
    """Point-to-point messages the busiest GPU sends per micro-batch, grouped by tier."""
    sends, words = [], []
    for net_tier, (bw, alpha, tier_name) in _TIERS:
        sel = (q.seg.msg_src == q.crit) & (q.across == net_tier)
        k = int(sel.sum())
        if not k:
            continue
        n_sym = sp.Symbol(f"N_p2p_{tier_name}", positive=True)
        values[n_sym] = float(q.seg.msg_elems[sel].sum())
        msgs = count_words(k, "message")
        meaning[str(n_sym)] = f"elements per sample of the {msgs} GPU {q.crit} sends ({tier_name} links)"
        sends.append(p2p(B_SYM * n_sym * E, bw, alpha) + (k - 1) * alpha)
        words.append(f"{msgs} over {tier_name} links, alpha + n/beta each: {k}*{alpha} + b*{n_sym}*e/{bw}")
    if sends:
        terms["pipeline_p2p"] = M * sp.Add(*sends)
        legend["pipeline_p2p"] = f"sent by GPU {q.crit} after its compute, per micro-batch; " + "; ".join(words)


def _mp_exchange(q: _Mp, body: Any, meaning: dict[str, str]) -> Any:
    """Exposed seconds of the parts' gradient allreduce over the replicas: each bucket once its
    gradients are ready in the simulated last backward of their segments, and the last is done."""
    s, K = q.s, q.s.mp
    # a part's replicas are K ranks apart, as model_parallel places them
    group = weight_group(Strategy(dp=s.dp, pp=K), q.ctx.hw.gpus_per_node)
    # a unit's gradient is complete when the last micro-batch's backward of its segment has run
    # it: the segment's start (simulated) plus its units' backward, last layer first
    ready: dict[int, tuple[int, Any]] = {}
    for i, units in enumerate(q.seg.units):
        t: Any = q.starts[i]
        for u in units[::-1]:
            t = t + q.units(q.bwd, np.array([u]))[0]
            ready[int(u)] = (i, t)
        meaning[str(q.starts[i])] = (
            f"when segment {i}'s (GPU {int(q.seg.part[i])}) last backward begins in the simulated schedule, s"
        )
    grad_units = q.hg.layer_values(q.ctx.cc.params) * GRAD_BYTES_PER_PARAM
    end_max: Any = 0
    for d in range(K):
        units = np.flatnonzero(q.assignment == d)[::-1]  # DDP fills buckets last layer first
        marks = dict(buckets(grad_units[units]))
        latest: dict[int, Any] = {}  # per segment, its latest ready unit so far (ready times grow)
        end: Any = 0
        for j, u in enumerate(units):
            i, t = ready[int(u)]
            latest[i] = t
            if j in marks:  # a bucket is full: reduced once all its gradients are ready and the last is done
                got = smax(*latest.values()) if len(latest) > 1 else t
                end = (got if end == 0 else smax(end, got)) + allreduce_expr(marks[j], group, LINK, s.comm)
        end_max = end if end_max == 0 else smax(end_max, end)
    return smax(0, end_max - body)


def _mp_resimulate(q: _Mp) -> tuple[Callable[[dict[sp.Symbol, float]], dict[sp.Symbol, float]], set[sp.Symbol]]:
    """The simulation run on the closed forms at any values, and the symbols it reads."""
    layer_args = sorted(set().union(*(x.free_symbols for x in q.fwd + q.bwd)), key=str)
    layer_fn = sp.lambdify(layer_args, q.fwd + q.bwd, modules=MODULES)
    n_layers, seg, crit = len(q.fwd), q.seg, q.crit
    across_l = q.across.tolist()
    elems = seg.msg_elems.tolist()

    def resimulate(vals: dict[sp.Symbol, float]) -> dict[sp.Symbol, float]:
        per_layer = np.array(layer_fn(*(vals[x] for x in layer_args)), dtype=float)
        u_f, u_b = q.hg.layer_values(per_layer[:n_layers]), q.hg.layer_values(per_layer[n_layers:])
        seg_f = np.array([u_f[u].sum() for u in seg.units])
        seg_b = np.array([u_b[u].sum() for u in seg.units])
        mb, e = vals[B_SYM], vals[E]
        msg_s = np.array([
            p2p(mb * x * e, vals[LINK.bw_net_per_gpu], vals[LINK.alpha_net]) if net_tier
            else p2p(mb * x * e, vals[LINK.bw_intra], vals[LINK.alpha_intra])
            for x, net_tier in zip(elems, across_l, strict=True)
        ])
        sched = simulate(seg, seg_f, seg_b, msg_s, int(vals[M]), q.s.recompute)
        busy = sched.compute_s[crit] + sched.recompute_s[crit] + sched.send_s[crit]
        out = {q.idle: float(sched.total_s - busy)}
        out.update((q.starts[i], float(sched.bwd_start_s[i])) for i in range(seg.count))
        return out

    # the symbols the simulation reads are part of the formula too (other GPUs' links, layers)
    sim_symbols = set(layer_args) | {E, B_SYM, M}
    for net_tier, (bw, alpha, _) in _TIERS:
        if bool((q.across == net_tier).any()):
            sim_symbols |= {bw, alpha}
    return resimulate, sim_symbols


def explain_mp(
    ctx: Context, s: Strategy, details: dict[str, Any], values: dict[sp.Symbol, float], pred: Prediction
) -> StepFormula:
    """Hypergraph model parallelism: closed forms of the busiest GPU's work, the schedule simulated."""
    K, g = s.mp, ctx.hw.gpus_per_node
    part = mp_partition(ctx, K)
    seg = segments(part)
    fwd, bwd = layer_exprs(ctx, B_SYM, (1, 1, 1), values[B_SYM])
    q = _Mp(
        ctx, s, part.hypergraph, seg, np.asarray(part.assignment), (seg.msg_src // g) != (seg.msg_dst // g), fwd, bwd,
        int(details["critical_gpu"]), sp.Symbol("T_idle_sim", positive=True),
        [sp.Symbol(f"T_bwd_start_{i}", positive=True) for i in range(seg.count)],
    )
    mine = np.flatnonzero(q.assignment == q.crit)
    f_d, b_d = sp.Add(*q.units(fwd, mine)), sp.Add(*q.units(bwd, mine))
    terms: dict[str, Any] = {"compute": M * (f_d + b_d)}
    on_crit = f"{len(mine)} layers on GPU {q.crit} (the busiest)"
    legend = {"compute": f"forward and backward of the {on_crit}, per micro-batch"}
    meaning: dict[str, str] = {}
    if s.recompute:
        terms["recompute"] = (M - 1) * f_d
        legend["recompute"] = "the forward pass again before every backward but the last micro-batch's"
    _mp_sends(q, terms, values, legend, meaning)
    terms["pipeline_bubble"] = q.idle
    meaning["T_idle_sim"] = f"GPU {q.crit}'s idle time in the simulated schedule (critical path minus its busy time), s"
    legend["pipeline_bubble"] = (
        "simulated: the GPipe schedule of the segments over the parts (mp_schedule.simulate), evaluated numerically"
    )
    if s.dp > 1:
        terms["gradient_exchange_exposed"] = _mp_exchange(q, sp.Add(*terms.values()), meaning)
        legend["gradient_exchange_exposed"] = (
            f"{s.comm} allreduce of each part's gradients over the dp = {s.dp} replicas in 25 MiB buckets, each "
            "once its gradients are ready in the last backward pass of their segments (from T_bwd_start_i, "
            "simulated) and the previous bucket is done"
        )
    u_params = q.hg.layer_values(ctx.cc.params)
    largest = float(max(u_params[q.assignment == d].sum() for d in range(K)))
    terms["optimizer_step"] = optimizer_step_s(largest, ctx.optimizer, SYMBOLS)
    resimulate, sim_symbols = _mp_resimulate(q)
    values.update(resimulate(values))
    notes = [
        f"mp={K}: the step's critical path is simulated (the GPipe schedule of {seg.count} segments "
        f"on {K} GPUs, {len(seg.msg_elems)} messages per micro-batch), so it has no closed form: "
        "T_idle_sim" + (" and T_bwd_start_i are" if s.dp > 1 else " is")
        + " evaluated numerically from the closed forms of every segment's compute and every message's "
        "alpha + n/beta; a what-if re-runs the simulation.",
    ]
    return finish(
        terms, values, pred, legend=legend, meaning=meaning, notes=notes, resimulate=resimulate, also=sim_symbols
    )

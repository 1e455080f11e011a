"""``explain`` of filter/channel splits (closed forms) and of hypergraph model parallelism
(closed forms of the busiest GPU's work, the schedule simulated)."""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from ..cost.collectives import allreduce_expr
from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.formulas import p2p, smax
from .channels import BREAKDOWN_KEYS, split_counts, split_plan
from .context import Context, weight_group
from .data import buckets, overlapped_exchange
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
from .mp_segments import segments
from .prediction import Prediction
from .spec import Strategy

__all__ = ["explain_split", "explain_mp"]


def explain_split(ctx: Context, s: Strategy, values: dict[sp.Symbol, float], pred: Prediction) -> StepFormula:
    """Filter / channel splits (``filter=N,dp=D``): compute, grouped exchanges, gradient allreduce."""
    mode, n = ("channel", s.channel) if s.channel > 1 else ("filter", s.filter)
    net, g = ctx.net, ctx.hw.gpus_per_node
    plan = split_plan(net, mode, n)
    params = ctx.cc.params * plan.f_par
    fwd, bwd = layer_exprs(ctx, B_SYM, (1, 1, 1), split_counts(ctx.cc, plan, 1.0), params)
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
        dp_group = weight_group(Strategy(dp=s.dp, pp=n), g)
        bw_rev = bwd_c[::-1]
        grad_rev = (params * GRAD_BYTES_PER_PARAM)[::-1]
        end, _ = overlapped_exchange(
            bw_rev, grad_rev, lambda n: allreduce_expr(n, dp_group, LINK, s.comm), body - sp.Add(*bw_rev)
        )
        terms["gradient_exchange_exposed"] = smax(0, end - body)
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


def explain_mp(
    ctx: Context, s: Strategy, details: dict[str, Any], values: dict[sp.Symbol, float], pred: Prediction
) -> StepFormula:
    """Hypergraph model parallelism: closed forms of the busiest GPU's work, the schedule simulated."""
    K, g = s.mp, ctx.hw.gpus_per_node
    part = mp_partition(ctx, K)
    hg = part.hypergraph
    seg = segments(part)
    a = np.asarray(part.assignment)
    crit = int(details["critical_gpu"])
    fwd, bwd = layer_exprs(ctx, B_SYM, (1, 1, 1))
    layer_of, share = hg.unit_layer, hg.unit_share

    def unit_exprs(per_layer: list[Any], units: np.ndarray) -> list[Any]:
        out = []
        for u in units:
            x, w = per_layer[int(layer_of[u])], float(share[u])
            out.append(x if w == 1.0 else w * x)
        return out

    mine = np.flatnonzero(a == crit)
    f_d, b_d = sp.Add(*unit_exprs(fwd, mine)), sp.Add(*unit_exprs(bwd, mine))
    terms: dict[str, sp.Expr] = {"compute": M * (f_d + b_d)}
    legend = {"compute": f"forward and backward of the {len(mine)} layers on GPU {crit} (the busiest), per micro-batch"}
    meaning: dict[str, str] = {}
    if s.recompute:
        terms["recompute"] = (M - 1) * f_d
        legend["recompute"] = "the forward pass again before every backward but the last micro-batch's"
    # point-to-point messages the busiest GPU sends per micro-batch, by tier
    across = (seg.msg_src // g) != (seg.msg_dst // g)
    sends, words = [], []
    tiers = ((False, (LINK.bw_intra, LINK.alpha_intra, "intra")), (True, (LINK.bw_net_per_gpu, LINK.alpha_net, "net")))
    for net_tier, (bw, alpha, tier_name) in tiers:
        sel = (seg.msg_src == crit) & (across == net_tier)
        k = int(sel.sum())
        if not k:
            continue
        n_sym = sp.Symbol(f"N_p2p_{tier_name}", positive=True)
        values[n_sym] = float(seg.msg_elems[sel].sum())
        msgs = count_words(k, "message")
        meaning[str(n_sym)] = f"elements per sample of the {msgs} GPU {crit} sends ({tier_name} links)"
        sends.append(p2p(B_SYM * n_sym * E, bw, alpha) + (k - 1) * alpha)
        words.append(f"{msgs} over {tier_name} links, alpha + n/beta each: {k}*{alpha} + b*{n_sym}*e/{bw}")
    if sends:
        terms["pipeline_p2p"] = M * sp.Add(*sends)
        legend["pipeline_p2p"] = f"sent by GPU {crit} after its compute, per micro-batch; " + "; ".join(words)
    idle = sp.Symbol("T_idle_sim", positive=True)
    terms["pipeline_bubble"] = idle
    meaning["T_idle_sim"] = f"GPU {crit}'s idle time in the simulated schedule (critical path minus its busy time), s"
    legend["pipeline_bubble"] = (
        "simulated: the GPipe schedule of the segments over the parts (model_parallel.simulate), evaluated numerically"
    )
    body = sp.Add(*terms.values())
    starts = [sp.Symbol(f"T_bwd_start_{i}", positive=True) for i in range(seg.count)]
    if s.dp > 1:
        # a part's replicas are K ranks apart, as model_parallel places them
        group = weight_group(Strategy(dp=s.dp, pp=K), g)
        # a unit's gradient is complete when the last micro-batch's backward of its segment has run
        # it: the segment's start (simulated) plus its units' backward, last layer first
        ready: dict[int, tuple[int, Any]] = {}
        for i, units in enumerate(seg.units):
            t: Any = starts[i]
            for u in units[::-1]:
                t = t + unit_exprs(bwd, np.array([u]))[0]
                ready[int(u)] = (i, t)
            meaning[str(starts[i])] = (
                f"when segment {i}'s (GPU {int(seg.part[i])}) last backward begins in the simulated schedule, s"
            )
        grad_units = hg.layer_values(ctx.cc.params) * GRAD_BYTES_PER_PARAM
        end_max: Any = 0
        for d in range(K):
            units = np.flatnonzero(a == d)[::-1]  # DDP fills buckets last layer first
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
        terms["gradient_exchange_exposed"] = smax(0, end_max - body)
        legend["gradient_exchange_exposed"] = (
            f"{s.comm} allreduce of each part's gradients over the dp = {s.dp} replicas in 25 MiB buckets, each "
            "once its gradients are ready in the last backward pass of their segments (from T_bwd_start_i, "
            "simulated) and the previous bucket is done"
        )
    u_params = hg.layer_values(ctx.cc.params)
    largest = float(max(u_params[a == d].sum() for d in range(K)))
    terms["optimizer_step"] = optimizer_step_s(largest, ctx.optimizer, SYMBOLS)

    # the simulation, run on the closed forms at any values
    layer_args = sorted(set().union(*(x.free_symbols for x in fwd + bwd)), key=str)
    layer_fn = sp.lambdify(layer_args, fwd + bwd, modules=MODULES)
    n_layers = len(fwd)
    across_l = across.tolist()
    elems = seg.msg_elems.tolist()

    def resimulate(vals: dict[sp.Symbol, float]) -> dict[sp.Symbol, float]:
        per_layer = np.array(layer_fn(*(vals[x] for x in layer_args)), dtype=float)
        u_f, u_b = hg.layer_values(per_layer[:n_layers]), hg.layer_values(per_layer[n_layers:])
        seg_f = np.array([u_f[u].sum() for u in seg.units])
        seg_b = np.array([u_b[u].sum() for u in seg.units])
        mb, e = vals[B_SYM], vals[E]
        msg_s = np.array([
            p2p(mb * x * e, vals[LINK.bw_net_per_gpu], vals[LINK.alpha_net]) if net_tier
            else p2p(mb * x * e, vals[LINK.bw_intra], vals[LINK.alpha_intra])
            for x, net_tier in zip(elems, across_l, strict=True)
        ])
        sched = simulate(seg, seg_f, seg_b, msg_s, int(vals[M]), s.recompute)
        busy = sched.compute_s[crit] + sched.recompute_s[crit] + sched.send_s[crit]
        out = {idle: float(sched.total_s - busy)}
        out.update((starts[i], float(sched.bwd_start_s[i])) for i in range(seg.count))
        return out

    values.update(resimulate(values))
    # the symbols the simulation reads are part of the formula too (other GPUs' links, layers)
    sim_symbols = set(layer_args) | {E, B_SYM, M}
    for net_tier, (bw, alpha, _) in tiers:
        if bool((across == net_tier).any()):
            sim_symbols |= {bw, alpha}
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



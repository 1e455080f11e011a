"""``explain`` of filter/channel splits (closed forms) and of hypergraph model parallelism
(closed forms of the busiest GPU's work, the schedule simulated)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from ..cost.formulas import p2p
from ..partition.hypergraph import Hypergraph
from .amp_step import AMP_CASTS_WORDS, amp_update_words, part_amp_step
from .channels import split_counts, split_plan
from .context import Context, weight_group
from .expr_code import compile_expr
from .formula import (
    B_SYM,
    LINK,
    E,
    M,
    StepFormula,
    count_words,
    finish,
    layer_exprs,
    symbol_valuation,
    tier,
)
from .model_parallel import mp_gradient_exchange, mp_sends, mp_terms
from .mp_candidates import mp_candidates
from .mp_schedule import simulate
from .mp_segments import Segments, segments
from .prediction import Prediction
from .spec import Strategy
from .split_terms import BREAKDOWN_KEYS, OPS, split_terms
from .wording import contention_words, copies_words, param_dtype

__all__ = ["explain_split", "explain_mp"]


def explain_split(ctx: Context, s: Strategy, values: dict[sp.Symbol, float], pred: Prediction) -> StepFormula:
    """Filter / channel splits (``filter=N,dp=D``): :func:`.split_terms.split_terms`, the function
    that gives predict's breakdown, on symbols: compute, grouped exchanges, gradient allreduce."""
    mode, n = ("channel", s.channel) if s.channel > 1 else ("filter", s.filter)
    plan = split_plan(ctx.net, mode, n)
    params = ctx.cc.params * plan.f_par
    fwd, bwd = layer_exprs(ctx, B_SYM, (1, 1, 1), values[B_SYM], split_counts(ctx.cc, plan, 1.0), params,
                           plan.tensor_shares)
    val = symbol_valuation(values)
    terms, _, _ = split_terms(ctx, s, mode, n, plan.exchanges, fwd, bwd, params, val)
    group = weight_group(Strategy(dp=n), ctx.hw.gpus_per_node)
    _, _, where = tier(group)
    legend = {"compute": f"forward and backward of every layer's share on the busiest of the {n} GPUs, M micro-batches"}
    for phase, key in zip(("fwd", "bwd"), BREAKDOWN_KEYS[mode], strict=True):
        ops = sorted({OPS[x.op][1] for x in plan.exchanges if x.phase == phase and x.op in OPS})
        legend[key] = (
            f"p = {n} GPUs {where}, M micro-batches; one ring {' / '.join(ops)} per tensor, those of one collective "
            "summed: (p - 1)/p * b*N*e/beta + k*(alpha_0 + (p - q)*alpha_intra + (q - 1)*alpha_net) over q nodes "
            "(NCCL's ring model; an allreduce twice the bytes and hops)" if ops
            else "no exchange in this pass"
        )
    if "halo_exchange" in terms:
        legend["halo_exchange"] = (f"p = {n} GPUs {where}, M micro-batches; before each cross-channel window layer's "
                                   "forward and backward, the channels of its window the neighbours hold, point to "
                                   "point: one latency each plus 2*b*N_halo*e over the link")
    when = "after" if s.overlap == "none" else "overlapped with"
    legend["gradient_exchange_exposed"] = (
        f"{s.comm} allreduce of each shard's gradients over the dp = {s.dp} replicas in 25 MiB buckets, "
        f"{when} the last backward pass (exchanges included) as for data parallelism"
        if s.dp > 1 else "one replica: no gradient exchange"
    )
    if s.dp > 1:
        legend["nccl_contention"] = contention_words(s.overlap)
        legend["gradient_bucket_copies"] = copies_words(ctx.param_bytes)
    legend["optimizer_step"] = (f"the update of the shard's weights: {param_dtype(ctx.param_bytes)} traffic over the "
                                "memory bandwidth, launches and the step's fixed cost"
                                + amp_update_words(ctx.precision, ctx.amp_runtime))
    legend["amp_casts"] = AMP_CASTS_WORDS
    notes = [
        f"{mode}={n}: every exchanged tensor of |y| elements per sample is one ring collective of n = b*|y|*e "
        "bytes; the k tensors of one collective in one pass are one summand with k latencies and N = sum |y| "
        "elements (N_ag_fwd, ...). Exchanges are not overlapped with compute."
    ]
    return finish(terms, values, pred, legend=legend, meaning=val.meaning, notes=notes,
                  definitions=val.definitions, definition_functions=val.definition_functions)


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


def _sends_words(q: _Mp) -> str:
    """What the busiest GPU sends, in words (the term is :func:`.model_parallel.mp_sends`)."""
    words = []
    for net_tier, (bw, alpha, tier_name) in _TIERS:
        k = int(((q.seg.msg_src == q.crit) & (q.across == net_tier)).sum())
        if k:
            words.append(f"{count_words(k, 'message')} over {tier_name} links, alpha + n/beta each: "
                         f"{k}*{alpha} + b*N_p2p_{tier_name}*e/{bw}")
    if not words:
        return f"GPU {q.crit} sends nothing"
    return f"sent by GPU {q.crit} after its compute, M micro-batches; " + "; ".join(words)


def _mp_exchange(q: _Mp, body: Any, meaning: dict[str, str]) -> Any:
    """Exposed seconds of the parts' gradient allreduce over the replicas: predict's
    :func:`.model_parallel.mp_gradient_exchange` on the link symbols, each segment's last
    backward start a simulated symbol ``T_bwd_start_i``."""
    for i, start in enumerate(q.starts):
        meaning[str(start)] = (
            f"when segment {i}'s (GPU {int(q.seg.part[i])}) last backward begins in the simulated schedule, s"
        )
    unit_bwd = [q.units(q.bwd, np.array([u]))[0] for u in range(q.hg.num_units)]
    u_params = q.hg.layer_values(q.ctx.cc.params)
    exposed, _, _ = mp_gradient_exchange(q.ctx, q.s, q.seg, q.assignment, q.starts, unit_bwd, u_params, body, LINK)
    return exposed


def _mp_resimulate(q: _Mp) -> tuple[Callable[[dict[sp.Symbol, float]], dict[sp.Symbol, float]], set[sp.Symbol]]:
    """The simulation run on the closed forms at any values, and the symbols it reads."""
    layer_args = sorted(set().union(*(x.free_symbols for x in q.fwd + q.bwd)), key=str)
    layer_fn = compile_expr(layer_args, q.fwd + q.bwd)
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
    part = mp_candidates(ctx, K, int(details["micro_batch"]))[details["partition_choice"]["chosen"]]
    seg = segments(part)
    fwd, bwd = layer_exprs(ctx, B_SYM, (1, 1, 1), values[B_SYM])
    q = _Mp(
        ctx, s, part.hypergraph, seg, np.asarray(part.assignment), (seg.msg_src // g) != (seg.msg_dst // g), fwd, bwd,
        int(details["critical_gpu"]), sp.Symbol("T_idle_sim", positive=True),
        [sp.Symbol(f"T_bwd_start_{i}", positive=True) for i in range(seg.count)],
    )
    mine = np.flatnonzero(q.assignment == q.crit)
    f_d, b_d = sp.Add(*q.units(fwd, mine)), sp.Add(*q.units(bwd, mine))
    on_crit = f"{len(mine)} layers on GPU {q.crit} (the busiest)"
    legend = {"compute": f"forward and backward of the {on_crit}, M micro-batches"}
    meaning: dict[str, str] = {"T_idle_sim": (
        f"GPU {q.crit}'s idle time in the simulated schedule (critical path minus its busy time), s")}
    legend["recompute"] = "the forward pass again before every backward but the last micro-batch's"
    val = symbol_valuation(values)
    sends = mp_sends(q.seg, q.crit, q.across, val)
    legend["pipeline_p2p"] = _sends_words(q)
    legend["pipeline_bubble"] = (
        "simulated: the GPipe schedule of the segments over the parts (mp_schedule.simulate), evaluated numerically"
    )

    def exposed(body: Any) -> Any:
        if s.dp <= 1:
            return 0
        return _mp_exchange(q, val.define("E_body", body, "when the schedule's body ends on the busiest GPU: the "
                                          "terms above the gradient exchange's, s"), meaning)

    legend["gradient_exchange_exposed"] = (
        f"{s.comm} allreduce of each part's gradients over the dp = {s.dp} replicas in 25 MiB buckets, each "
        "once its gradients are ready in the last backward pass of their segments (from T_bwd_start_i, "
        "simulated) and the previous bucket is done" if s.dp > 1
        else "one replica: no gradient exchange"
    )
    u_params = q.hg.layer_values(ctx.cc.params)
    largest = float(max(u_params[q.assignment == d].sum() for d in range(K)))
    resimulate, sim_symbols = _mp_resimulate(q)
    values.update(resimulate(values))  # the simulated symbols, valued before a part reads them
    terms = mp_terms(s, ctx.optimizer, val, f_d, b_d, sends, q.idle, exposed, largest,
                     part_amp_step(ctx, q.hg.unit_layer, u_params, q.assignment), ctx.param_bytes)
    legend["optimizer_step"] = (f"the update of the largest part's weights: {param_dtype(ctx.param_bytes)} traffic "
                                "over the memory bandwidth, launches and the step's fixed cost"
                                + amp_update_words(ctx.precision, ctx.amp_runtime))
    legend["amp_casts"] = AMP_CASTS_WORDS
    notes = [
        f"mp={K}: the step's critical path is simulated (the GPipe schedule of {seg.count} segments "
        f"on {K} GPUs, {len(seg.msg_elems)} messages per micro-batch), so it has no closed form: "
        "T_idle_sim" + (" and T_bwd_start_i are" if s.dp > 1 else " is")
        + " evaluated numerically from the closed forms of every segment's compute and every message's "
        "alpha + n/beta; a what-if re-runs the simulation.",
    ]
    return finish(
        terms, values, pred, legend=legend, meaning={**meaning, **val.meaning}, notes=notes, resimulate=resimulate,
        also=sim_symbols, definitions=val.definitions, definition_functions=val.definition_functions,
    )

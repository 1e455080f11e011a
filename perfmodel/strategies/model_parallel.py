"""Hypergraph-partitioned model parallelism (``mp=K``): micro-batches pipelined over the parts.

The network's layer hypergraph is cut into K parts by KaHyPar (``perfmodel.partition``),
one part per GPU of a replica. The layers are weighted by their times for the plan's
micro-batch (the batch every part runs: a layer's time is not linear in the batch, through
wave quantisation, launch and host floors and memory-bound kernels, so parts balanced at
another batch are not balanced at this one) on a fixed reference profile
(:data:`~perfmodel.hardware.REFERENCE_PROFILE`), not on the profile priced, so a network has
the same candidate partitions per (K, micro-batch, precision) whatever the hardware: that one,
KaHyPar's weighted at 32 samples and the contiguous cut (:mod:`.mp_candidates`); the plan
runs the fastest of them on the profile priced (balanced parts with a cycle between them can
idle more than less balanced ones without). A part need
not be a contiguous run of layers, so parts exchange tensors along the network's DAG,
possibly in both directions (the quotient graph of the parts may have cycles). The step is
therefore priced by simulating the schedule rather than with the closed form of a linear
pipeline:

* each part's layers are cut into *segments*: maximal runs of consecutive layers (in the
  network's topological order) on the part, cut before a layer that reads a tensor from
  another part and after a layer whose tensor another part reads;
* one task per (micro-batch, segment) forward and backward; a segment's forward waits for
  the tensors it reads, its backward for its own forward and for the gradients of the
  tensors it produced; a tensor crossing parts is one point-to-point message per
  (tensor, reading part), forward with the activation and backward with the gradient
  (a partial sum when several layers of that part read it);
* a GPU runs one task at a time and sends its messages after its compute (sending occupies
  it, as in :func:`~perfmodel.strategies.pipeline.pipeline_timing`); GPipe's schedule: a
  GPU starts backward work only after all its forward work, and all micro-batches'
  activations stay in memory until their backward;
* every GPU runs its tasks in a fixed order, as soon as it is free and their inputs have
  arrived: the order a greedy list schedule (earliest micro-batch first) dispatches them in
  on the reference profile's durations (:func:`schedule_order`).

With ``dp=D`` every part's gradients are allreduced over the D replicas in buckets, last
layer first, each bucket as soon as the last micro-batch's backward has produced all its
gradients (:func:`mp_gradient_exchange`, from the simulation) and the previous bucket is done,
overlapping the backward pass. (Dating the buckets back from the part's last backward end,
as if its backward ran without a gap, is not monotone: when a wait on another part ends the
part's backward, a shorter early segment moves its buckets' ready times later.)

A faster device or link never makes an ``mp`` plan slower: the candidate partitions, their
segments, messages and the order of every GPU's tasks do not depend on the profile, the step is
the smallest of the candidates' steps, and each start
and end time of the replayed schedule, each gradient bucket's ready time and each
allreduce's end is a maximum of sums of compute, message and collective times, none of
which grows on faster hardware. Taking the order from a greedy run on the priced durations
would not be monotone (Graham's scheduling anomalies): layers ``u0 -> u1 -> u2`` with GPU 0
running ``u0`` and ``u2`` and GPU 1 running ``u1``, 3 micro-batches, forward seconds
``2, 1, 1``, backward ``2, 2, 5``, messages of 2 s (``u0`` forward), 0 s (``u1``
forward) and 1 s (both gradients) take 41 s greedily; with ``u1``'s backward 1 s shorter
micro-batch 1's gradient reaches GPU 0 before micro-batch 2's ``u2`` backward starts, GPU 0
runs the 2 s ``u0`` backward first, delays the critical 5 s ``u2`` backward and the step
takes 42 s. For a contiguous partition (an acyclic chain of parts) the fixed order is
GPipe's and the simulation equals :func:`pipeline_timing`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cost.collectives import Group, LinkParams, link_params, point_to_point
from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.formulas import Num, p2p, smax, ssum
from ..errors import StrategyError
from ..partition.hypergraph import REFERENCE_PROFILE
from ..partition.metrics import imbalance, is_acyclic, quotient_edges
from ..partition.plan import DEFAULT_EPSILON, DEFAULT_SEED, Partition
from .amp_step import AmpStep, part_amp_step
from .context import Context, split_batch, transient_bytes, weight_group
from .data import BUCKET_BYTES, bucket_reducer, buckets
from .dimension import Valuation, memory_parts, step_tail_terms
from .mp_candidates import (
    CANDIDATE_WORDS,
    GRANULARITY,
    CandidatePrice,
    choose,
    mid_pass_waits,
    mp_candidates,
    mp_partition,
    short_why,
    why_chosen,
)
from .mp_schedule import Schedule, simulate
from .mp_segments import Segments, segments
from .priced import Priced
from .spec import Strategy

__all__ = ["GRANULARITY", "price_model_parallel", "mp_partition", "mp_terms", "mp_gradient_exchange", "mp_sends"]

def _check(ctx: Context, s: Strategy) -> None:
    if s.is_ps:
        raise StrategyError("parameter servers (comm=ps-*) are modelled for data parallelism only (use dp=N)")
    if s.schedule != "gpipe":
        raise StrategyError("mp plans are priced with GPipe's schedule only (drop schedule=...)")
    if s.balance:
        raise StrategyError("balance= fixes pipeline stages; mp plans take their parts from the partitioner")
    n_layers = len(ctx.net.layers)
    if n_layers < s.mp:
        raise StrategyError(
            f"mp={s.mp} parts but {ctx.net.name} has only {n_layers} layers (valid: mp <= {n_layers})"
        )


@dataclass(frozen=True)
class _Run:
    """One micro-batch of ``m`` samples over the parts: per-unit seconds, parameters and saved
    bytes; each part's units; the messages; the simulated schedule."""

    part: Partition
    seg: Segments
    u_f: np.ndarray
    u_b: np.ndarray
    u_params: np.ndarray
    u_saved: np.ndarray
    part_units: list[np.ndarray]
    part_params: np.ndarray
    msg_bytes: np.ndarray
    sched: Schedule


def _run(ctx: Context, s: Strategy, m: int, p: Partition) -> _Run:
    e, g, hw = ctx.elem_bytes, ctx.hw.gpus_per_node, ctx.hw
    hg, seg = p.hypergraph, segments(p)
    lt, ev = ctx.times(m)
    u_f, u_b = hg.layer_values(lt.fwd), hg.layer_values(lt.bwd)
    u_params = hg.layer_values(ctx.cc.params)
    seg_f = np.array([u_f[u].sum() for u in seg.units])
    seg_b = np.array([u_b[u].sum() for u in seg.units])
    msg_bytes = m * seg.msg_elems * e
    msg_s = np.array(
        [
            point_to_point(float(b), hw, (int(x) // g) != (int(y) // g))
            for b, x, y in zip(msg_bytes, seg.msg_src, seg.msg_dst, strict=True)
        ]
    )
    a = np.asarray(p.assignment)
    part_units = [np.flatnonzero(a == d) for d in range(s.mp)]
    return _Run(
        p, seg, u_f, u_b, u_params, hg.layer_values(ev["saved_elems"] * e + ev["saved_extra_bytes"]), part_units,
        np.array([u_params[u].sum() for u in part_units]), msg_bytes,
        simulate(seg, seg_f, seg_b, msg_s, s.mb, s.recompute),
    )


def _exchange(ctx: Context, s: Strategy, r: _Run, details: dict[str, Any]) -> float:
    """Exposed seconds of each part's gradient allreduce over the dp replicas
    (:func:`mp_gradient_exchange` on the simulated schedule's numbers)."""
    if s.dp <= 1:
        return 0.0
    exposed, total_comm, group = mp_gradient_exchange(
        ctx, s, r.seg, r.part.assignment, list(r.sched.bwd_start_s), list(r.u_b), r.u_params, r.sched.total_s
    )
    details["gradient_allreduce_s"] = float(total_comm)
    details["gradient_group"] = {"gpus": s.dp, "per_node": group.per_node, "algorithm": s.comm}
    return float(exposed)


def mp_gradient_exchange(
    ctx: Context, s: Strategy, seg: Segments, assignment: Sequence[int] | np.ndarray, starts: Sequence[Num],
    unit_bwd: Sequence[Num], unit_params: np.ndarray, body: Num, lp: LinkParams | None = None,
) -> tuple[Num, Num, Group]:
    """(exposed seconds, total allreduce seconds, a part's replica group) of every part's
    gradient allreduce over the dp replicas; numbers, or symbols on ``lp``'s links.

    A unit's gradient is complete when the last micro-batch's backward of its segment has run
    it: from the segment's last backward start (``starts``, simulated), its units last layer
    first (``unit_bwd`` each). A part fills DDP's buckets last layer first; a bucket is reduced
    once all its gradients are complete and the previous bucket is done. Within a segment the
    ready times grow, so a bucket's are the latest of each segment's so far. What ends after
    the schedule's ``body`` is exposed.
    """
    # replica r's part d is rank r * K + d: a part's dp group has ranks K apart, as the
    # replicas of a K-stage pipeline
    group = weight_group(Strategy(dp=s.dp, pp=s.mp), ctx.hw.gpus_per_node)

    reduce, _ = bucket_reducer(ctx.hw, group, s.comm, lp)

    ready: dict[int, tuple[int, Num]] = {}
    for i, units in enumerate(seg.units):
        t = starts[i]
        for u in units[::-1]:
            t = t + unit_bwd[int(u)]
            ready[int(u)] = (i, t)
    grads = unit_params * ctx.param_bytes
    a = np.asarray(assignment)
    end_max: Num = None
    total: Num = 0.0
    for d in range(s.mp):
        units = np.flatnonzero(a == d)[::-1]
        marks = dict(buckets(grads[units]))
        latest: dict[int, Num] = {}
        end: Num = None
        for j, u in enumerate(units.tolist()):
            i, t = ready[u]
            latest[i] = t
            if j in marks:
                got = smax(*latest.values()) if len(latest) > 1 else t
                c = reduce(marks[j])
                end = (got if end is None else smax(end, got)) + c
                total = total + c
        if end is not None:
            end_max = end if end_max is None else smax(end_max, end)
    return (0.0 if end_max is None else smax(0, end_max - body)), total, group


def _memory(ctx: Context, s: Strategy, r: _Run, m: int, per_replica: int) -> tuple[int, dict[str, float]]:
    """(part, memory) of the GPU that needs most: all micro-batches' activations (GPipe) and
    the tensors it received from other parts, kept for the backward pass."""
    K, net, hg = s.mp, ctx.net, r.part.hypergraph
    received = np.zeros(K)
    fwd_msgs = ~r.seg.msg_bwd
    np.add.at(received, r.seg.msg_dst[fwd_msgs], r.msg_bytes[fwd_msgs])
    saved = np.array([r.u_saved[u].sum() for u in r.part_units])
    # with recomputation only the received tensors of every micro-batch stay, plus one
    # micro-batch's activations while it is recomputed
    acts = s.mb * received + saved if s.recompute else s.mb * (saved + received)
    workspace = transient_bytes(ctx, m) + ctx.hw.framework_reserve_bytes
    # a part with a layer reading the network input holds its replica's whole batch (GPipe cuts
    # the micro-batches there), as a pipeline's first stage does
    a = np.asarray(r.part.assignment)
    reads_input = np.zeros(K, dtype=bool)
    for u in range(hg.num_units):
        if "input" in net.layers[int(hg.unit_layer[u])].inputs:
            reads_input[a[u]] = True
    per_gpu = [
        memory_parts(
            float(r.part_params[d]), ctx.precision, ctx.optimizer, s.dp > 1,
            ctx.input_bytes(per_replica) if reads_input[d] else 0.0, float(acts[d]), workspace,
            ctx.amp_runtime,
        )
        for d in range(K)
    ]
    busiest = max(range(K), key=lambda d: sum(per_gpu[d].values()))
    return busiest, per_gpu[busiest]


def _details(ctx: Context, s: Strategy, r: _Run, crit: int) -> dict[str, Any]:
    net, hg, K = ctx.net, r.part.hypergraph, s.mp
    edges = quotient_edges(hg, r.part.assignment)
    return dict(
        parts=[
            {
                "layers": [net.layers[int(hg.unit_layer[u])].name for u in r.part_units[d]],
                "forward_s": float(r.u_f[r.part_units[d]].sum()),
                "backward_s": float(r.u_b[r.part_units[d]].sum()),
                "params": int(round(r.part_params[d])),
                "sent_bytes_per_micro_batch": float(r.msg_bytes[r.seg.msg_src == d].sum()),
            }
            for d in range(K)
        ],
        partitioner=_partitioner_words(r.part),
        partition_imbalance=imbalance(np.array([r.u_f[u].sum() + r.u_b[u].sum() for u in r.part_units])),
        partition_volume_bytes_per_sample=r.part.volume_bytes_per_sample,
        quotient_edges=[list(x) for x in edges],
        quotient_acyclic=is_acyclic(K, edges),
        segments=r.seg.count,
        messages_per_micro_batch=len(r.msg_bytes),
        schedule="gpipe (simulated: each GPU in the greedy order of the reference profile's run, "
        "forward work before backward work)",
        critical_gpu=crit,
        bucket_bytes=BUCKET_BYTES,
    )


def _partitioner_words(p: Partition) -> str:
    """How the partition priced was made, in words."""
    weights = (f"layers weighted at {p.hypergraph.batch} samples on the reference profile {REFERENCE_PROFILE} "
               "(the same parts on every profile)")
    if p.method == "contiguous":
        return f"the chain of links cut into runs minimising the slowest run's compute, {weights}"
    return f"KaHyPar km1, {GRANULARITY} granularity, epsilon {DEFAULT_EPSILON}, seed {DEFAULT_SEED}, {weights}"


def mp_terms(
    s: Strategy, optimizer: str, val: Valuation, busy_f: Num, busy_b: Num, sends: Num, idle: Num,
    exposed: Callable[[Num], Num], largest_params: float, amp: AmpStep | None = None,
    param_bytes: int = GRAD_BYTES_PER_PARAM,
) -> dict[str, Num]:
    """The step's terms on the busiest GPU of the schedule, numbers or symbols: its compute
    (``busy_f + busy_b`` per micro-batch), recomputation (every micro-batch's forward but the
    last's), sends per micro-batch, its ``idle`` time up to the schedule's end (the bubble,
    simulated), the gradient exchange exposed past that body (``exposed(body)``) and the
    largest part's optimizer step (with mixed precision's kernels, ``amp``; ``param_bytes`` per
    element of its weights, gradients and state)."""
    terms: dict[str, Num] = {"compute": val.M * (busy_f + busy_b)}
    if s.recompute:
        terms["recompute"] = (val.M - 1) * busy_f
    terms["pipeline_p2p"] = val.M * sends
    terms["pipeline_bubble"] = idle
    terms["gradient_exchange_exposed"] = exposed(ssum(list(terms.values())))
    terms.update(step_tail_terms(largest_params, optimizer, val.v, amp, val.M, param_bytes))
    return terms


def mp_sends(seg: Segments, gpu: int, across: np.ndarray, val: Valuation) -> Num:
    """Seconds of the point-to-point messages GPU ``gpu`` sends per micro-batch (numbers or
    symbols): per tier (in the node, over the network) its ``k`` messages of ``N`` elements
    per sample in all, ``alpha + n/beta`` each: ``k*alpha + b*N*e/beta``."""
    out: Num = 0.0
    for net_tier, name in ((False, "intra"), (True, "net")):
        sel = (seg.msg_src == gpu) & (across == net_tier)
        k = int(sel.sum())
        if not k:
            continue
        bw, alpha = (val.lp.bw_net_per_gpu, val.lp.alpha_net) if net_tier else (val.lp.bw_intra, val.lp.alpha_intra)
        n = val.count(f"N_p2p_{name}", float(seg.msg_elems[sel].sum()),
                      f"elements per sample of the {k} message{'s' * (k > 1)} GPU {gpu} sends ({name} links)")
        out = out + p2p(val.b * n * val.e, bw, alpha) + (k - 1) * alpha
    return out


@dataclass(frozen=True)
class _Candidate:
    """One candidate partition priced: its run, its terms, its busiest GPU and memory, details."""

    run: _Run
    terms: dict[str, Num]
    crit: int
    busiest: int
    memory: dict[str, float]
    details: dict[str, Any]


def _price_candidate(ctx: Context, s: Strategy, p: Partition, m: int, per_replica: int) -> _Candidate:
    """The step terms on the busiest GPU of ``p``'s simulated schedule, and its memory."""
    r = _run(ctx, s, m, p)
    sched = r.sched
    crit = int(np.argmax(sched.compute_s + sched.recompute_s + sched.send_s))
    mine = r.part_units[crit]
    busy = float(sched.compute_s[crit] + sched.recompute_s[crit] + sched.send_s[crit])
    details: dict[str, Any] = {}
    exposed = _exchange(ctx, s, r, details)
    val = Valuation(ctx.values, link_params(ctx.hw), float(m), s.mb)
    g = ctx.hw.gpus_per_node
    sends = mp_sends(r.seg, crit, (r.seg.msg_src // g) != (r.seg.msg_dst // g), val)
    terms = mp_terms(s, ctx.optimizer, val, float(r.u_f[mine].sum()), float(r.u_b[mine].sum()), sends,
                     max(0.0, sched.total_s - busy), lambda body: exposed, float(r.part_params.max()),
                     part_amp_step(ctx, p.hypergraph.unit_layer, r.u_params, np.asarray(p.assignment)),
                     ctx.param_bytes)
    busiest, memory = _memory(ctx, s, r, m, per_replica)
    return _Candidate(r, terms, crit, busiest, memory, details)


def price_model_parallel(ctx: Context, s: Strategy, global_batch: int) -> Priced:
    """Step terms, memory and details of ``mp=K[,dp=D][,mb=M]`` (see the module docstring).

    Every candidate partition (:func:`.mp_candidates.mp_candidates`) is priced; the plan runs
    the fastest that fits in memory (:func:`.mp_candidates.choose`). Its terms are those of the
    busiest GPU of the simulated schedule: its compute, recomputation and sends, and its idle
    time (the bubble) up to the schedule's end; then the exposed gradient exchange and the
    optimizer step of the largest part.
    """
    _check(ctx, s)
    per_replica, m = split_batch(global_batch, s)
    cands = {n: _price_candidate(ctx, s, p, m, per_replica) for n, p in mp_candidates(ctx, s.mp, m).items()}
    cap = ctx.hw.device.memory_bytes
    prices = {
        n: CandidatePrice(float(ssum(list(c.terms.values()))), sum(c.memory.values()) <= cap,
                          is_acyclic(s.mp, quotient_edges(c.run.part.hypergraph, c.run.part.assignment)),
                          c.run.seg.count, mid_pass_waits(c.run.seg), len(c.run.msg_bytes),
                          {k: float(v) for k, v in c.terms.items()})
        for n, c in cands.items()
    }
    name = choose(prices)
    best = cands[name]
    details: dict[str, Any] = {"micro_batch": m, "samples_per_replica": per_replica, **best.details}
    details["busiest_part"] = best.busiest
    details.update(_details(ctx, s, best.run, best.crit))
    details["partition_choice"] = {
        "chosen": name,
        "why": why_chosen(name, prices, s.mp),
        "short": short_why(name, prices),
        "candidates": [
            {"name": n, "method": CANDIDATE_WORDS[n], "step_s": c.step_s, "fits_in_memory": c.fits,
             "quotient_acyclic": c.acyclic, "segments": c.segments, "mid_pass_waits": c.waits,
             "messages_per_micro_batch": c.messages}
            for n, c in prices.items()
        ],
    }
    return Priced.of(best.terms, best.memory, details)

"""Pipeline parallelism: stage splits of the chain, GPipe / 1F1B step timing and its schedule.

The stage partitioners themselves are in :mod:`perfmodel.partition.stages`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cost.collectives import LinkParams, allreduce, link_params, p2p_expr
from ..cost.formulas import Num, is_symbolic, smax
from ..hardware import load_hardware
from ..network import Network
from ..partition.stages import partition_min_max, partition_with_cut_costs
from .context import Context, context, weight_group
from .spatial import ChainLayers, sample_layers, spatial_layers
from .spec import Strategy

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = [
    "PipelineTiming",
    "pipeline_step",
    "pipeline_parts",
    "critical_stage",
    "pipeline_timing",
    "cut_across_nodes",
    "cut_sends",
    "StageSplit",
    "stage_ranges",
    "stage_split",
    "stage_candidates",
    "STAGE_REFERENCE_PROFILES",
    "PipelineTask",
    "pipeline_tasks",
]


@dataclass(frozen=True)
class PipelineTiming:
    """Seconds of one pipelined step and its parts, for the critical (slowest) stage."""

    total_s: float
    compute_s: float
    p2p_s: float
    recompute_s: float
    bubble_s: float
    last_bwd_end_s: tuple[float, ...]
    critical_stage: int = 0


def pipeline_step(
    fwd: Sequence[Num], bwd: Sequence[Num], send_fwd: Sequence[Num], send_bwd: Sequence[Num], m: Num, recompute: bool
) -> tuple[Num, list[Num]]:
    """(step seconds, when each stage ends its last backward micro-batch) of a synchronous
    pipeline, on numbers or symbols (``explain``); see :func:`pipeline_timing`."""
    f = [x + y for x, y in zip(fwd, send_fwd, strict=True)]
    b = [x + y for x, y in zip(bwd, send_bwd, strict=True)]
    rb = [x + y for x, y in zip(b, fwd, strict=True)] if recompute else b
    total = sum(f) + (m - 1) * smax(*f) + sum(b) + (m - 1) * smax(*rb)
    # stage 0 finishes last, at ``total``; stage s the backward passes of stages < s earlier
    return total, [total - sum(b[:s]) for s in range(len(b))]


def critical_stage(fwd: FloatSeq, bwd: FloatSeq, recompute: bool) -> int:
    """The stage with the largest compute per micro-batch (forward again under recomputation)."""
    f = np.asarray(fwd, dtype=float)
    return int(np.argmax(f + np.asarray(bwd, dtype=float) + (f if recompute else 0.0)))


def pipeline_parts(
    fwd: Sequence[Num], bwd: Sequence[Num], send_fwd: Sequence[Num], send_bwd: Sequence[Num], m: Num,
    recompute: bool, crit: int,
) -> tuple[Num, list[Num], dict[str, Num]]:
    """(step seconds, each stage's last backward end, the step's parts on stage ``crit``):
    its compute, recomputation and sends for ``m`` micro-batches, and the bubble, what is left
    of the step (numbers or symbols; :func:`pipeline_timing`)."""
    total, ends = pipeline_step(fwd, bwd, send_fwd, send_bwd, m, recompute)
    compute = m * (fwd[crit] + bwd[crit])
    p2p = m * (send_fwd[crit] + send_bwd[crit])
    rec = (m - 1) * fwd[crit] if recompute else 0.0
    parts = {"compute": compute, "recompute": rec, "p2p": p2p, "bubble": smax(0, total - compute - p2p - rec)}
    return total, ends, parts


def pipeline_timing(
    fwd: FloatSeq,
    bwd: FloatSeq,
    send_fwd: FloatSeq,
    send_bwd: FloatSeq,
    micro_batches: int,
    recompute: bool,
) -> PipelineTiming:
    """Step time of a synchronous pipeline (GPipe; 1F1B has the same bubble).

    Per micro-batch, stage ``s`` computes forward ``f_s`` and backward ``b_s`` and sends
    ``send_fwd[s]`` (activations to stage s+1) and ``send_bwd[s]`` (gradients to s-1).
    With ``M`` micro-batches the forward phase takes ``sum_s F_s + (M - 1) * max_s F_s``
    (fill, then the bottleneck stage sets the pace; Huang et al., GPipe, NeurIPS 2019,
    section 2.3), likewise the backward phase. With recomputation (torchgpipe's
    ``checkpoint='except_last'``) every micro-batch but the last re-runs its forward pass
    in backward. The parts are those of the critical stage (the largest compute).
    """
    f, b, sf, sb = ([float(x) for x in seq] for seq in (fwd, bwd, send_fwd, send_bwd))
    crit = critical_stage(f, b, recompute)
    total, ends, parts = pipeline_parts(f, b, sf, sb, micro_batches, recompute, crit)
    return PipelineTiming(
        float(total), float(parts["compute"]), float(parts["p2p"]), float(parts["recompute"]),
        float(parts["bubble"]), tuple(float(x) for x in ends), crit,
    )


def cut_sends(
    ctx: Context,
    s: Strategy,
    bounds: Sequence[int] | np.ndarray,
    held: Callable[[int], Num],
    lp: LinkParams,
    elem_bytes: Num,
) -> tuple[list[Num], list[Num]]:
    """Per stage, the point-to-point send after its forward pass (the tensor crossing the cut
    after it, ``held(link)`` samples' worth) and after its backward pass (that tensor's
    gradient, back over the cut before it), over the node's or the network's link
    (:func:`cut_across_nodes`); numbers or symbols by ``lp``, ``held`` and ``elem_bytes``."""
    g = ctx.hw.gpus_per_node
    send_f: list[Num] = [0.0] * s.pp
    send_b: list[Num] = [0.0] * s.pp
    for i in range(s.pp - 1):
        last = int(bounds[i + 1]) - 1
        n_bytes = held(last) * ctx.cut_elems[last] * elem_bytes
        if is_symbolic(n_bytes) or n_bytes > 0:  # nothing crosses an empty cut
            send_f[i] = send_b[i + 1] = p2p_expr(n_bytes, lp, cut_across_nodes(i, s, g))
    return send_f, send_b


def cut_across_nodes(cut: int, s: Strategy, gpus_per_node: int) -> bool:
    """Whether the cut after stage ``cut`` crosses nodes: stages of ``sp`` GPUs each are
    placed in rank order, so it does where stage ``cut + 1`` starts a node and the pipeline
    spans more than one."""
    p_sp = s.sp_degree
    return ((cut + 1) * p_sp) % gpus_per_node == 0 and s.pp * p_sp > gpus_per_node


@dataclass(frozen=True)
class StageSplit:
    """A pipeline split of the chain: stage bounds (in links), per-stage seconds of one
    micro-batch (forward, backward, the sends after each) and the step's timing."""

    balance: tuple[int, ...]
    bounds: np.ndarray
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    send_fwd_s: np.ndarray
    send_bwd_s: np.ndarray
    timing: PipelineTiming

    def stage_sum(self, per_link: np.ndarray, i: int) -> float:
        return float(per_link[self.bounds[i] : self.bounds[i + 1]].sum())

    def layer_ranges(self, ctx: Context) -> list[tuple[int, int]]:
        """Each stage's layers ``[start, stop)``."""
        return stage_ranges(ctx, self.bounds)


def stage_ranges(ctx: Context, bounds: Sequence[int] | np.ndarray) -> list[tuple[int, int]]:
    """Each stage's layers ``[start, stop)`` from its bounds in links."""
    links = ctx.net.links
    return [(int(links[int(bounds[i])].start), int(links[int(bounds[i + 1]) - 1].stop)) for i in range(len(bounds) - 1)]


def stage_split(ctx: Context, s: Strategy, layers: ChainLayers, balance: tuple[int, ...]) -> StageSplit:
    """Price split ``balance``: stage sums of the links' seconds, a point-to-point send of the
    tensor crossing each cut (over the network where the next stage sits in another node)."""
    bounds = np.concatenate([[0], np.cumsum(balance)]).astype(int)
    link_f, link_b = ctx.link_sum(layers.fwd), ctx.link_sum(layers.bwd)
    st_f = np.array([link_f[bounds[i] : bounds[i + 1]].sum() for i in range(s.pp)])
    st_b = np.array([link_b[bounds[i] : bounds[i + 1]].sum() for i in range(s.pp)])
    f, b = cut_sends(ctx, s, bounds, layers.held, link_params(ctx.hw), ctx.elem_bytes)
    send_f, send_b = np.array(f, dtype=float), np.array(b, dtype=float)
    timing = pipeline_timing(st_f, st_b, send_f, send_b, s.mb, s.recompute)
    return StageSplit(tuple(int(x) for x in balance), bounds, st_f, st_b, send_f, send_b, timing)


#: The shipped profiles on which automatic pipeline splits are chosen, so that the candidate
#: splits of a plan do not depend on the profile that prices it: two GPU generations at the
#: two ends of the link classes (Pascal over PCIe, Ampere over NVSwitch). A third (V100 over
#: an NVLink cube-mesh) changed no validation figure and made a 64-GPU search 1.4x slower.
STAGE_REFERENCE_PROFILES = ("p40-24gb-pcie", "a100-80gb-dgx")
_REF_CONTEXTS: dict[tuple[int, str, str, str, int, str, str, str], tuple[Network, Context]] = {}
_STAGE_MEMO: dict[tuple[Any, ...], tuple[Network, list[tuple[int, ...]]]] = {}


def stage_candidates(ctx: Context, s: Strategy, layers: ChainLayers) -> list[tuple[int, ...]]:
    """Stage splits for ``pp=S`` without ``balance``: the seeds of the split search's pool where
    the chain has too many contiguous splits to search them all (:mod:`.split_search`).

    On each profile of :data:`STAGE_REFERENCE_PROFILES` (never on the profile being priced):

    * the split that balances the links' compute seconds (:func:`partition_min_max`,
      optimal for that cost);
    * the same with each link's share of the gradient allreduce over the weight group added
      (a stage whose weights are exchanged after its last backward pass takes fewer links);
    * both again with the point-to-point time of the tensor crossing each cut charged to the
      two stages beside it (:func:`partition_with_cut_costs`: do not cut where a large
      activation crosses).

    The pricing keeps the fastest candidate that fits in memory (the fastest of all if none
    fits). The candidate set depends on the network, precision, optimizer, plan and
    micro-batch only (``layers`` gives the micro-batch), so the step is a minimum over a fixed
    set of prices that each fall when a device or link gets faster: a faster profile never
    makes an automatic split slower (re-choosing the split on the priced profile did: unet
    pp=4,dp=8,mb=8 on 32 GPUs took 53.1 ms with 2x memory bandwidth and 57.5 ms with 4x).
    Candidates from the A100 profile alone cost accuracy (shipped speedup MAPE 9.3% -> 10.7%);
    with the P40's too it stays 9.3%.
    """
    m = layers.m
    key = (id(ctx.net), ctx.precision, ctx.optimizer, ctx.cudnn_major, ctx.memory_format, ctx.fusion, ctx.amp_runtime,
           s.dp, s.sp, s.pp, s.comm, s.recompute, s.decomp, m)
    hit = _STAGE_MEMO.get(key)
    if hit is not None and hit[0] is ctx.net:
        return hit[1]
    candidates: list[tuple[int, ...]] = []
    for name in STAGE_REFERENCE_PROFILES:
        for split in _reference_splits(_reference_context(ctx, name), s, m):
            if split not in candidates:
                candidates.append(split)
    if len(_STAGE_MEMO) > 4096:
        _STAGE_MEMO.clear()
    _STAGE_MEMO[key] = (ctx.net, candidates)
    return candidates


def _reference_context(ctx: Context, name: str) -> Context:
    """``ctx`` with the shipped profile ``name`` in place of its hardware (cached)."""
    key = (id(ctx.net), name, ctx.precision, ctx.optimizer, ctx.cudnn_major, ctx.memory_format, ctx.fusion,
           ctx.amp_runtime)
    hit = _REF_CONTEXTS.get(key)
    if hit is None or hit[0] is not ctx.net:
        if len(_REF_CONTEXTS) > 64:
            _REF_CONTEXTS.clear()
        hit = (ctx.net, context(ctx.net, load_hardware(name), ctx.precision, ctx.optimizer, 1.0, ctx.cudnn_major,
                               ctx.memory_format, reference=True, fusion=ctx.fusion, amp_runtime=ctx.amp_runtime))
        _REF_CONTEXTS[key] = hit
    return hit[1]


def _reference_splits(ref: Context, s: Strategy, m: float) -> list[tuple[int, ...]]:
    """The candidate splits of :func:`stage_candidates` computed on one reference context."""
    hw, e = ref.hw, ref.elem_bytes
    layers = spatial_layers(ref, s, m) if s.sp_degree > 1 else sample_layers(ref, m)
    link_f, link_b = ref.link_sum(layers.fwd), ref.link_sum(layers.bwd)
    costs = link_f + link_b + (link_f if s.recompute else 0.0)
    totals = [costs]
    if s.dp * s.sp_degree > 1 and not s.is_ps:
        group = weight_group(s, hw.gpus_per_node)
        grad = ref.link_sum(ref.cc.params * ref.param_bytes)
        links = link_params(hw, group)
        seen: dict[float, float] = {}  # links of one shape have the same gradient: priced once
        for b in grad.tolist():
            if b and b not in seen:
                seen[b] = allreduce(b, group, hw, s.comm, links)
        totals.append(costs + np.array([seen[b] if b else 0.0 for b in grad.tolist()]))
    # a pipeline spanning nodes sends some cuts over the network; which ones depends on the
    # stage, not the link, so every cut is costed at the slower tier then (do not cut big tensors)
    across = s.pp * s.sp_degree > hw.gpus_per_node
    n_cut = len(costs) - 1
    cut_bytes = np.array([layers.held(k) for k in range(n_cut)]) * np.asarray(ref.cut_elems[:n_cut], dtype=float) * e
    # point_to_point's number, element by element: the send's alpha + n/beta, nothing when empty
    cut_s = np.where(cut_bytes > 0, p2p_expr(cut_bytes, link_params(hw), across), 0.0)
    out: list[tuple[int, ...]] = []
    for total in totals:
        for split in (partition_min_max(total, s.pp), partition_with_cut_costs(total, cut_s, s.pp)):
            if tuple(int(x) for x in split) not in out:
                out.append(tuple(int(x) for x in split))
    return out


# -- the schedule's tasks -------------------------------------------------------------------
@dataclass(frozen=True)
class PipelineTask:
    """One forward or backward pass of one micro-batch on one stage (with the send that follows
    it), in seconds from the start of the step."""

    stage: int
    micro_batch: int
    backward: bool
    start_s: float
    end_s: float


def _orders(stages: int, micro: int, schedule: str) -> list[list[tuple[bool, int]]]:
    """Each stage's sequence of (backward?, micro-batch): GPipe or 1F1B (PipeDream-Flush)."""
    out = []
    for s in range(stages):
        if schedule == "1f1b":
            warm = min(stages - s - 1, micro)
            seq = [(False, m) for m in range(warm)]
            for i in range(micro - warm):
                seq += [(False, warm + i), (True, i)]
            seq += [(True, m) for m in range(micro - warm, micro)]
        else:
            seq = [(False, m) for m in range(micro)] + [(True, m) for m in reversed(range(micro))]
        out.append(seq)
    return out


def pipeline_tasks(
    fwd_s: FloatSeq,
    bwd_s: FloatSeq,
    send_fwd_s: FloatSeq,
    send_bwd_s: FloatSeq,
    micro_batches: int,
    schedule: str = "gpipe",
    recompute: bool = False,
) -> list[PipelineTask]:
    """The step's tasks on each stage, from the same per-stage seconds :func:`pipeline_timing`
    prices (a stage sends after its pass, occupied by the send, as there).

    Each stage runs its schedule in order, a pass starting when the stage is free and its input
    (the previous stage's forward, the next stage's backward) is done. With ``recompute`` a
    backward pass re-runs its forward first, except for the micro-batch whose activations are
    still held. For GPipe without recomputation the last task ends at
    :func:`pipeline_timing`'s ``total_s`` (the fill-drain closed form is exact for identical
    micro-batches); with recomputation or 1F1B the closed form is the model's step and the
    tasks its schedule, which can end a little later.
    """
    n, m = len(fwd_s), micro_batches
    orders = _orders(n, m, schedule)
    done: dict[tuple[int, bool, int], float] = {}
    tasks: list[PipelineTask] = []
    pos, free = [0] * n, [0.0] * n
    while len(tasks) < 2 * n * m:
        progressed = False
        for s in range(n):
            while pos[s] < len(orders[s]):
                back, mb = orders[s][pos[s]]
                if back:
                    dep: tuple[int, bool, int] | None = (s + 1, True, mb) if s + 1 < n else (s, False, mb)
                    redo = fwd_s[s] if recompute and mb != m - 1 else 0.0
                    dur = float(bwd_s[s] + send_bwd_s[s] + redo)
                else:
                    dep = (s - 1, False, mb) if s > 0 else None
                    dur = float(fwd_s[s] + send_fwd_s[s])
                if dep is not None and dep not in done:
                    break
                start = max(free[s], 0.0 if dep is None else done[dep])
                done[(s, back, mb)] = free[s] = start + dur
                tasks.append(PipelineTask(s, mb, back, start, start + dur))
                pos[s] += 1
                progressed = True
        if not progressed:  # pragma: no cover - the orders above cannot deadlock
            raise RuntimeError("pipeline schedule deadlocked")
    return tasks

"""Hypergraph-partitioned model parallelism (``mp=K``): micro-batches pipelined over the parts.

The network's layer hypergraph is cut into K parts by KaHyPar (``perfmodel.partition``),
one part per GPU of a replica. The layers are weighted by their times on a fixed reference
profile (:data:`~perfmodel.hardware.REFERENCE_PROFILE`), not on the profile
priced, so a network has one partition per (K, precision) whatever the hardware. A part need
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
gradients (:func:`gradient_ready_s`, from the simulation) and the previous bucket is done,
overlapping the backward pass. (Dating the buckets back from the part's last backward end,
as if its backward ran without a gap, is not monotone: when a wait on another part ends the
part's backward, a shorter early segment moves its buckets' ready times later.)

A faster device or link never makes an ``mp`` plan slower: the partition, the segments, the
messages and the order of every GPU's tasks do not depend on the profile, and each start
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

import heapq
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cost.collectives import allreduce, point_to_point
from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..errors import StrategyError, UsageError
from ..network import Network
from ..partition.hypergraph import REFERENCE_PROFILE, WEIGHT_BATCH, Hypergraph, reference_hardware
from ..partition.metrics import imbalance, is_acyclic, quotient_edges
from ..partition.plan import DEFAULT_EPSILON, DEFAULT_SEED, Partition, network_partition
from .data import BUCKET_BYTES, overlapped_exchange
from .memory import (
    input_batch_bytes,
    optimizer_bytes_per_param,
    optimizer_traffic_bytes_per_param,
    weight_bytes_per_param,
)
from .spec import Strategy

if TYPE_CHECKING:
    from .predict import Context, _Priced

__all__ = [
    "GRANULARITY",
    "Segments",
    "Schedule",
    "segments",
    "simulate",
    "greedy_schedule",
    "replay",
    "schedule_order",
    "gradient_ready_s",
    "price_model_parallel",
    "mp_partition",
]

#: The hypergraph granularity ``mp=K`` plans are partitioned at (one vertex per layer).
GRANULARITY = "layer"

_PARTITIONS: weakref.WeakKeyDictionary[Network, dict[tuple[int, str], Partition]] = weakref.WeakKeyDictionary()
_SEGMENTS: weakref.WeakKeyDictionary[Partition, Segments] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, eq=False)
class Segments:
    """The per-micro-batch task graph of a partition.

    Segment ``s`` holds units ``units[s]`` on part ``part[s]``. ``fwd_edges`` are
    (producer segment, reader segment, message index or -1 on the same part);
    ``bwd_edges`` (reader segment, producer segment, message index or -1) carry gradients.
    Message ``i`` goes from part ``msg_src[i]`` to ``msg_dst[i]`` with ``msg_elems[i]``
    elements per sample, sent by segment ``msg_seg[i]`` (forward messages first, then the
    backward ones; ``msg_bwd`` marks the latter). ``ref_fwd_s``, ``ref_bwd_s`` and
    ``ref_msg_s`` are the segments' compute and the messages' seconds for a micro-batch of
    :data:`~perfmodel.partition.hypergraph.WEIGHT_BATCH` samples on the hypergraph's weights
    and the reference profile's intra-node link: the durations the schedule's order is taken from.
    """

    parts: int
    part: np.ndarray
    units: tuple[np.ndarray, ...]
    fwd_edges: tuple[tuple[int, int, int], ...]
    bwd_edges: tuple[tuple[int, int, int], ...]
    msg_seg: np.ndarray
    msg_src: np.ndarray
    msg_dst: np.ndarray
    msg_elems: np.ndarray
    msg_bwd: np.ndarray
    ref_fwd_s: np.ndarray
    ref_bwd_s: np.ndarray
    ref_msg_s: np.ndarray

    @property
    def count(self) -> int:
        return len(self.units)


def segments(p: Partition) -> Segments:
    """Cut every part's units into segments and derive the messages between them (cached)."""
    hit = _SEGMENTS.get(p)
    if hit is not None:
        return hit
    hg: Hypergraph = p.hypergraph
    a = np.asarray(p.assignment, dtype=np.int64)
    n = hg.num_units
    producer = hg.pins[hg.offsets[:-1]]
    pin_net = hg.pin_net
    is_reader = np.ones(len(hg.pins), dtype=bool)
    is_reader[hg.offsets[:-1]] = False
    src_part = a[producer][pin_net]
    crossing = is_reader & (a[hg.pins] != src_part)
    ext_in = np.zeros(n, dtype=bool)
    ext_in[hg.pins[crossing]] = True
    ext_out = np.zeros(n, dtype=bool)
    ext_out[producer[pin_net[crossing]]] = True
    start = np.zeros(n, dtype=bool)
    start[0] = True
    start[1:] = (a[1:] != a[:-1]) | ext_in[1:] | ext_out[:-1]
    seg_of = np.cumsum(start) - 1
    bounds = np.flatnonzero(np.concatenate([start, [True]]))
    units = tuple(np.arange(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1))
    part = a[bounds[:-1]]

    fwd: dict[tuple[int, int], int] = {}
    bwd: dict[tuple[int, int], int] = {}
    msgs: list[tuple[int, int, int, float, bool]] = []
    msg_of: dict[tuple[bool, int, int], int] = {}  # (backward, segment, receiving part) -> message

    def add_message(seg: int, frm: int, to: int, backward: bool, n_elems: float) -> int:
        """The message segment ``seg`` sends from part ``frm`` to part ``to``, grown by ``n_elems``."""
        key = (backward, seg, to)
        m = msg_of.get(key)
        if m is None:
            m = msg_of[key] = len(msgs)
            msgs.append((seg, frm, to, 0.0, backward))
        s0, s1, s2, e0, b0 = msgs[m]
        msgs[m] = (s0, s1, s2, e0 + n_elems, b0)
        return m

    for i in range(hg.num_nets):
        pins = hg.net_pins(i)
        ps = int(seg_of[pins[0]])
        src = int(a[pins[0]])
        elems = float(hg.net_elems[i])
        readers: dict[int, list[int]] = {}
        for r in pins[1:]:
            rs = int(seg_of[r])
            if rs != ps:
                readers.setdefault(int(a[r]), []).append(rs)
        for dst, segs in readers.items():
            segs = sorted(set(segs))
            if dst == src:
                for rs in segs:
                    fwd.setdefault((ps, rs), -1)
                    bwd.setdefault((rs, ps), -1)
                continue
            # forward: the producer segment sends the activation once to part ``dst``
            m = add_message(ps, src, dst, False, elems)
            for rs in segs:
                fwd[(ps, rs)] = m
            # backward: the earliest reading segment sends the summed gradient back; the
            # later reading segments of that part feed it first
            first = segs[0]
            for rs in segs[1:]:
                bwd.setdefault((rs, first), -1)
            bwd[(first, ps)] = add_message(first, dst, src, True, elems)
    arr = np.array([m[:4] for m in msgs], dtype=float).reshape(-1, 4)
    # reference durations (profile-independent when the hypergraph is weighted on the reference
    # profile); hand-made hypergraphs without a forward share take a third of each unit's time
    u_fwd = hg.unit_fwd_seconds if hg.unit_fwd_seconds is not None else hg.unit_seconds / 3
    u_bwd = hg.unit_seconds - u_fwd
    ref_bytes = arr[:, 3] * hg.elem_bytes * WEIGHT_BATCH
    ref = reference_hardware()
    out = Segments(
        parts=p.parts,
        part=part,
        units=units,
        fwd_edges=tuple((x, y, m) for (x, y), m in sorted(fwd.items())),
        bwd_edges=tuple((x, y, m) for (x, y), m in sorted(bwd.items())),
        msg_seg=arr[:, 0].astype(np.int64),
        msg_src=arr[:, 1].astype(np.int64),
        msg_dst=arr[:, 2].astype(np.int64),
        msg_elems=arr[:, 3],
        msg_bwd=np.array([m[4] for m in msgs], dtype=bool),
        ref_fwd_s=np.array([u_fwd[u].sum() for u in units]) * WEIGHT_BATCH,
        ref_bwd_s=np.array([u_bwd[u].sum() for u in units]) * WEIGHT_BATCH,
        ref_msg_s=np.array([point_to_point(float(b), ref, False) for b in ref_bytes]),
    )
    _SEGMENTS[p] = out
    return out


@dataclass(frozen=True)
class Schedule:
    """The simulated step body of one replica: when every task ran, and the GPUs' busy times.

    ``bwd_start_s`` is, per segment, when the backward compute of its last micro-batch began
    (after any recomputation): its units' gradients are complete in the order they run from then.
    """

    total_s: float
    compute_s: np.ndarray
    recompute_s: np.ndarray
    send_s: np.ndarray
    last_bwd_end_s: np.ndarray
    tasks: int
    bwd_start_s: np.ndarray


@dataclass(frozen=True)
class _TaskGraph:
    """Per-micro-batch dependencies of the segments' tasks, with the send offsets of their messages."""

    fwd_send: list[float]
    bwd_send: list[float]
    f_out: list[list[tuple[int, float, int]]]  # (target, lag after the source's compute, phase)
    b_out: list[list[tuple[int, float, int]]]
    f_deps: list[int]
    b_deps: list[int]


def _task_graph(seg: Segments, msg_s: np.ndarray) -> _TaskGraph:
    S = seg.count
    fwd_send = np.zeros(S)
    bwd_send = np.zeros(S)
    offset = np.zeros(len(msg_s))
    for i in range(len(msg_s)):
        s = int(seg.msg_seg[i])
        if seg.msg_bwd[i]:
            bwd_send[s] += msg_s[i]
            offset[i] = bwd_send[s]
        else:
            fwd_send[s] += msg_s[i]
            offset[i] = fwd_send[s]
    off = offset.tolist()
    f_out: list[list[tuple[int, float, int]]] = [[] for _ in range(S)]
    b_out: list[list[tuple[int, float, int]]] = [[] for _ in range(S)]
    f_deps = [0] * S
    b_deps = [1] * S  # every backward waits for its own forward
    for x, y, m in seg.fwd_edges:
        f_out[x].append((y, off[m] if m >= 0 else 0.0, 0))
        f_deps[y] += 1
    for x, y, m in seg.bwd_edges:
        b_out[x].append((y, off[m] if m >= 0 else 0.0, 1))
        b_deps[y] += 1
    for s in range(S):
        f_out[s].append((s, float(fwd_send[s]), 1))
    return _TaskGraph(fwd_send.tolist(), bwd_send.tolist(), f_out, b_out, f_deps, b_deps)


def greedy_schedule(
    seg: Segments,
    seg_fwd_s: np.ndarray,
    seg_bwd_s: np.ndarray,
    msg_s: np.ndarray,
    micro_batches: int,
    recompute: bool,
) -> tuple[Schedule, tuple[int, ...]]:
    """Greedy list schedule of ``micro_batches`` micro-batches through the segments (GPipe),
    and the order it dispatched the tasks in.

    Each GPU, when free, starts the ready task of highest priority: forward work before
    backward work (a GPU starts backward only after all its forward tasks), then the earliest
    micro-batch, then the earliest segment (the latest, backward). Task ``phase * S * M + k * S
    + s`` is segment ``s`` of micro-batch ``k`` (phase 0 forward, 1 backward). Greedy list
    scheduling is not monotone: a shorter task can let a low-priority task start first and
    delay a critical one (Graham's anomalies), so prices come from :func:`simulate`, which
    keeps an order fixed.
    """
    S, M, K = seg.count, micro_batches, seg.parts
    part = seg.part.tolist()
    g = _task_graph(seg, msg_s)
    f_c = seg_fwd_s.tolist()
    b_c = seg_bwd_s.tolist()
    remaining = [g.f_deps * M, g.b_deps * M]
    ready_at = [[0.0] * (S * M), [0.0] * (S * M)]
    heaps: list[list[list[tuple[int, int, int]]]] = [[[] for _ in range(K)], [[] for _ in range(K)]]
    fwd_left = [0] * K
    for s in range(S):
        fwd_left[part[s]] += M
    busy_until = [0.0] * K
    compute = np.zeros(K)
    recomp = np.zeros(K)
    send = np.zeros(K)
    last_bwd = np.zeros(K)
    bwd_start = np.zeros(S)
    end = 0.0
    order: list[int] = []
    events: list[tuple[float, int, int, int]] = []  # (time, kind 0 arrive / 1 free, phase, task or part)
    for k in range(M):
        for s in range(S):
            if g.f_deps[s] == 0:
                heapq.heappush(heaps[0][part[s]], (k, s, k * S + s))

    def dispatch(d: int, now: float) -> None:
        nonlocal end
        if busy_until[d] > now:
            return
        if heaps[0][d]:
            k, s, t = heapq.heappop(heaps[0][d])
            phase = 0
        elif fwd_left[d] == 0 and heaps[1][d]:
            k, _, t = heapq.heappop(heaps[1][d])
            s = t % S
            phase = 1
        else:
            return
        start = max(now, ready_at[phase][t])
        if phase == 0:
            fwd_left[d] -= 1
            c = f_c[s]
            compute[d] += c
            send[d] += g.fwd_send[s]
            dur = c + g.fwd_send[s]
            outs = g.f_out[s]
        else:
            r = f_c[s] if (recompute and k < M - 1) else 0.0
            c = b_c[s] + r
            compute[d] += b_c[s]
            recomp[d] += r
            send[d] += g.bwd_send[s]
            dur = c + g.bwd_send[s]
            outs = g.b_out[s]
            last_bwd[d] = max(last_bwd[d], start + dur)
            bwd_start[s] = max(bwd_start[s], start + r)
        order.append(phase * S * M + t)
        busy_until[d] = start + dur
        end = max(end, start + dur)
        heapq.heappush(events, (start + dur, 1, 0, d))
        base = k * S
        for y, lag, ph in outs:
            heapq.heappush(events, (start + c + lag, 0, ph, base + y))

    for d in range(K):
        dispatch(d, 0.0)
    while events:
        now = events[0][0]
        touched: set[int] = set()
        while events and events[0][0] <= now:
            _, kind, ph, x = heapq.heappop(events)
            if kind == 1:
                touched.add(x)
                continue
            remaining[ph][x] -= 1
            if remaining[ph][x] == 0:
                ready_at[ph][x] = now
                k, s = divmod(x, S)
                d = part[s]
                heapq.heappush(heaps[ph][d], (k, s if ph == 0 else -s, x))
                touched.add(d)
        for d in sorted(touched):
            dispatch(d, now)
    if any(fwd_left) or any(h for h in heaps[1]):
        raise StrategyError(
            "model-parallel schedule did not finish (a dependency cycle in the partition)"
        )
    return Schedule(float(end), compute, recomp, send, last_bwd, 2 * S * M, bwd_start), tuple(order)


def replay(
    seg: Segments,
    seg_fwd_s: np.ndarray,
    seg_bwd_s: np.ndarray,
    msg_s: np.ndarray,
    micro_batches: int,
    recompute: bool,
    order: tuple[int, ...],
) -> Schedule:
    """Run the tasks in a fixed ``order`` (a dispatch order of :func:`greedy_schedule`): each
    GPU runs its tasks in that sequence, each as soon as its GPU is free and its inputs arrived.

    Every start and end time is a maximum of sums of durations, so no duration getting shorter
    makes any of them later: a fixed order is monotone, where a greedy one is not.
    """
    S, M, K = seg.count, micro_batches, seg.parts
    part = seg.part.tolist()
    g = _task_graph(seg, msg_s)
    f_c = seg_fwd_s.tolist()
    b_c = seg_bwd_s.tolist()
    if len(order) != 2 * S * M:
        raise StrategyError(f"a schedule order of {len(order)} tasks for {2 * S * M}")
    ready = [[0.0] * (S * M), [0.0] * (S * M)]
    free = [0.0] * K
    compute = np.zeros(K)
    recomp = np.zeros(K)
    send = np.zeros(K)
    last_bwd = np.zeros(K)
    bwd_start = np.zeros(S)
    end = 0.0
    for code in order:
        phase, t = divmod(code, S * M)
        k, s = divmod(t, S)
        d = part[s]
        start = max(free[d], ready[phase][t])
        if phase == 0:
            c = f_c[s]
            compute[d] += c
            send[d] += g.fwd_send[s]
            finish = start + c + g.fwd_send[s]
            outs = g.f_out[s]
        else:
            r = f_c[s] if (recompute and k < M - 1) else 0.0
            c = b_c[s] + r
            compute[d] += b_c[s]
            recomp[d] += r
            send[d] += g.bwd_send[s]
            finish = start + c + g.bwd_send[s]
            outs = g.b_out[s]
            last_bwd[d] = max(last_bwd[d], finish)
            bwd_start[s] = max(bwd_start[s], start + r)
        free[d] = finish
        end = max(end, finish)
        base = k * S
        for y, lag, ph in outs:
            arrive = start + c + lag
            if arrive > ready[ph][base + y]:
                ready[ph][base + y] = arrive
    return Schedule(float(end), compute, recomp, send, last_bwd, 2 * S * M, bwd_start)


_ORDERS: weakref.WeakKeyDictionary[Segments, dict[tuple[int, bool], tuple[int, ...]]] = (
    weakref.WeakKeyDictionary()
)


def schedule_order(seg: Segments, micro_batches: int, recompute: bool) -> tuple[int, ...]:
    """The order :func:`simulate` runs the tasks in: the greedy schedule's on the reference
    durations (``seg.ref_*``), so the same on every profile (cached)."""
    per_seg = _ORDERS.setdefault(seg, {})
    key = (micro_batches, recompute)
    hit = per_seg.get(key)
    if hit is None:
        _, hit = greedy_schedule(seg, seg.ref_fwd_s, seg.ref_bwd_s, seg.ref_msg_s, micro_batches, recompute)
        per_seg[key] = hit
    return hit


def simulate(
    seg: Segments,
    seg_fwd_s: np.ndarray,
    seg_bwd_s: np.ndarray,
    msg_s: np.ndarray,
    micro_batches: int,
    recompute: bool,
) -> Schedule:
    """The GPipe schedule of ``micro_batches`` micro-batches through the segments.

    ``seg_fwd_s``/``seg_bwd_s`` are compute seconds of one micro-batch per segment and
    ``msg_s`` the seconds of each message. A task's sends follow its compute on its GPU; a
    message arrives when its send ends. Every GPU runs its tasks in :func:`schedule_order`
    (the greedy GPipe order on the reference profile's durations) as soon as it is free and
    their inputs arrived (:func:`replay`): shorter durations never make the step longer.
    """
    order = schedule_order(seg, micro_batches, recompute)
    return replay(seg, seg_fwd_s, seg_bwd_s, msg_s, micro_batches, recompute, order)


def gradient_ready_s(seg: Segments, sched: Schedule, unit_bwd_s: np.ndarray) -> np.ndarray:
    """When every unit's gradient is complete: when the last micro-batch's backward of its
    segment has run it (a segment runs its units last layer first, ``unit_bwd_s`` each)."""
    ready = np.zeros(len(unit_bwd_s))
    for i, units in enumerate(seg.units):
        rev = units[::-1]
        ready[rev] = sched.bwd_start_s[i] + np.cumsum(unit_bwd_s[rev])
    return ready


def mp_partition(ctx: Context, parts: int) -> Partition:
    """KaHyPar's ``parts``-way layer partition of the context's network, its layers weighted by
    their times on the reference profile (:data:`~perfmodel.hardware.REFERENCE_PROFILE`),
    not the context's profile: one partition per (network, parts, precision), cached, so a
    faster device or link prices the same parts and never a worse cut of them."""
    per_net = _PARTITIONS.setdefault(ctx.net, {})
    key = (parts, ctx.precision)
    hit = per_net.get(key)
    if hit is None:
        try:
            hit = network_partition(
                ctx.net, None, ctx.precision, parts, GRANULARITY, DEFAULT_EPSILON, DEFAULT_SEED
            )
        except UsageError as exc:
            raise StrategyError(f"mp={parts}: {exc}") from None
        per_net[key] = hit
    return hit


def price_model_parallel(ctx: Context, s: Strategy, global_batch: int) -> _Priced:
    """Step time, breakdown and memory of ``mp=K[,dp=D][,mb=M]`` (see the module docstring)."""
    from .predict import OPTIMIZER_LAUNCHES, _Priced, _split_batch, _transient_bytes, weight_group

    net, hw = ctx.net, ctx.hw
    K = s.mp
    if s.is_ps:
        raise StrategyError(
            "parameter servers (comm=ps-*) are modelled for data parallelism only (use dp=N)"
        )
    if s.schedule != "gpipe":
        raise StrategyError("mp plans are priced with GPipe's schedule only (drop schedule=...)")
    if s.balance:
        raise StrategyError(
            "balance= fixes pipeline stages; mp plans take their parts from the partitioner"
        )
    n_layers = len(net.layers)
    if n_layers < K:
        raise StrategyError(
            f"mp={K} parts but {net.name} has only {n_layers} layers (valid: mp <= {n_layers})"
        )
    per_replica, m = _split_batch(global_batch, s)
    M = s.mb
    e = ctx.elem_bytes
    p = mp_partition(ctx, K)
    hg = p.hypergraph
    seg = segments(p)
    lt, ev = ctx.times(m)
    u_f = hg.layer_values(lt.fwd)
    u_b = hg.layer_values(lt.bwd)
    u_params = hg.layer_values(ctx.cc.params)
    u_saved = hg.layer_values(ev["saved_elems"] * e + ev["saved_extra_bytes"])
    seg_f = np.array([u_f[u].sum() for u in seg.units])
    seg_b = np.array([u_b[u].sum() for u in seg.units])
    g = hw.gpus_per_node
    msg_bytes = m * seg.msg_elems * e
    msg_s = np.array(
        [
            point_to_point(float(b), hw, (int(x) // g) != (int(y) // g))
            for b, x, y in zip(msg_bytes, seg.msg_src, seg.msg_dst, strict=True)
        ]
    )
    sched = simulate(seg, seg_f, seg_b, msg_s, M, s.recompute)
    t_body = sched.total_s
    crit = int(np.argmax(sched.compute_s + sched.recompute_s + sched.send_s))
    breakdown: dict[str, float] = {
        "compute": float(sched.compute_s[crit]),
        "recompute": float(sched.recompute_s[crit]),
        "pipeline_p2p": float(sched.send_s[crit]),
    }
    breakdown["pipeline_bubble"] = max(0.0, t_body - sum(breakdown.values()))
    if not s.recompute:
        del breakdown["recompute"]

    a = np.asarray(p.assignment)
    part_units = [np.flatnonzero(a == d) for d in range(K)]
    part_params = np.array([u_params[u].sum() for u in part_units])
    # gradient exchange of each part over the dp replicas, overlapped with its last backward pass
    exposed = 0.0
    details: dict[str, Any] = {"micro_batch": m, "samples_per_replica": per_replica}
    if s.dp > 1:
        # replica r's part d is rank r * K + d: a part's dp group has ranks K apart, as the
        # replicas of a K-stage pipeline
        group = weight_group(Strategy(dp=s.dp, pp=K), g)
        comm = s.comm

        def reduce(nbytes: float) -> float:
            return allreduce(nbytes, group, hw, comm)

        ready = gradient_ready_s(seg, sched, u_b)
        end_max, total_comm = 0.0, 0.0
        for d in range(K):
            units = part_units[d][::-1]  # DDP fills buckets last layer first
            # a bucket is reduced once all its gradients are ready and the previous bucket is
            # done: the ready times as increments of their running maximum
            steps = np.diff(np.maximum.accumulate(ready[units]), prepend=0.0)
            grads = (u_params[units] * GRAD_BYTES_PER_PARAM).tolist()
            end, tot = overlapped_exchange(steps.tolist(), grads, reduce, 0.0)
            end_max = max(end_max, end)
            total_comm += tot
        exposed = max(0.0, end_max - t_body)
        details["gradient_allreduce_s"] = total_comm
        details["gradient_group"] = {"gpus": s.dp, "per_node": group.per_node, "algorithm": comm}
    breakdown["gradient_exchange_exposed"] = float(exposed)
    params_gpu = float(part_params.max())
    mem_bw = hw.device.memory_bandwidth_bytes_per_s * hw.compute[ctx.precision].memory
    t_opt = (
        params_gpu * optimizer_traffic_bytes_per_param(ctx.optimizer) / mem_bw
        + OPTIMIZER_LAUNCHES * hw.kernel_launch_s + hw.kernels.step_overhead_s
    )
    breakdown["optimizer_step"] = t_opt
    total = t_body + exposed + t_opt
    parts_sum = sum(breakdown.values())
    if abs(parts_sum - total) > 1e-9 * max(total, 1e-12):
        breakdown["compute"] += total - parts_sum

    # memory of the GPU that needs most: all micro-batches' activations (GPipe) and the
    # tensors it received from other parts, kept for the backward pass
    received = np.zeros(K)
    fwd_msgs = ~seg.msg_bwd
    np.add.at(received, seg.msg_dst[fwd_msgs], msg_bytes[fwd_msgs])
    saved = np.array([u_saved[u].sum() for u in part_units])
    # with recomputation only the received tensors of every micro-batch stay, plus one
    # micro-batch's activations while it is recomputed
    acts = M * received + saved if s.recompute else M * (saved + received)
    transient = _transient_bytes(ctx, m, (1, 1, 1))
    # a part with a layer reading the network input holds its replica's whole batch (GPipe cuts
    # the micro-batches there), as a pipeline's first stage does
    reads_input = np.zeros(K, dtype=bool)
    for u in range(hg.num_units):
        if "input" in net.layers[int(hg.unit_layer[u])].inputs:
            reads_input[a[u]] = True
    per_gpu = []
    for d in range(K):
        pd = float(part_params[d])
        per_gpu.append(
            {
                "weights": pd * weight_bytes_per_param(ctx.precision),
                "gradients": pd * GRAD_BYTES_PER_PARAM,
                "optimizer_state": pd * optimizer_bytes_per_param(ctx.optimizer),
                "gradient_buckets": pd * GRAD_BYTES_PER_PARAM if s.dp > 1 else 0.0,
                "input_batch": input_batch_bytes(net.input_shape, per_replica) if reads_input[d] else 0.0,
                "activations": float(acts[d]),
                "workspace": transient + hw.framework_reserve_bytes,
            }
        )
    busiest = max(range(K), key=lambda d: sum(per_gpu[d].values()))
    memory = per_gpu[busiest]
    details["busiest_part"] = busiest

    edges = quotient_edges(hg, p.assignment)
    details.update(
        parts=[
            {
                "layers": [net.layers[int(hg.unit_layer[u])].name for u in part_units[d]],
                "forward_s": float(u_f[part_units[d]].sum()),
                "backward_s": float(u_b[part_units[d]].sum()),
                "params": int(round(part_params[d])),
                "sent_bytes_per_micro_batch": float(msg_bytes[seg.msg_src == d].sum()),
            }
            for d in range(K)
        ],
        partitioner=f"KaHyPar km1, {GRANULARITY} granularity, epsilon {DEFAULT_EPSILON}, seed {DEFAULT_SEED}, "
        f"layers weighted on the reference profile {REFERENCE_PROFILE} (the same parts on every profile)",
        partition_imbalance=imbalance(np.array([u_f[u].sum() + u_b[u].sum() for u in part_units])),
        partition_volume_bytes_per_sample=p.volume_bytes_per_sample,
        quotient_edges=[list(x) for x in edges],
        quotient_acyclic=is_acyclic(K, edges),
        segments=seg.count,
        messages_per_micro_batch=len(msg_s),
        schedule="gpipe (simulated: each GPU in the greedy order of the reference profile's run, "
        "forward work before backward work)",
        critical_gpu=crit,
        bucket_bytes=BUCKET_BYTES,
    )
    return _Priced(total, breakdown, memory, details)

"""The simulated GPipe schedule of a hypergraph partition's segments (``mp=K``).

See :mod:`perfmodel.strategies.model_parallel` for the model: segments, messages, the
fixed per-GPU task order taken on the reference profile, and why that keeps the schedule
monotone in device and link speed.
"""

from __future__ import annotations

import heapq
import weakref
from dataclasses import dataclass

import numpy as np

from ..errors import StrategyError
from .mp_segments import Segments

__all__ = [
    "Schedule",
    "simulate",
    "greedy_schedule",
    "replay",
    "schedule_order",
    "gradient_ready_s",
]

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


class _Greedy:
    """The state of :func:`greedy_schedule`'s event simulation (see there)."""

    def __init__(self, seg: Segments, g: _TaskGraph, f_c: list[float], b_c: list[float], m: int, recompute: bool):
        S, K = seg.count, seg.parts
        self.S, self.M, self.K, self.g, self.f_c, self.b_c, self.recompute = S, m, K, g, f_c, b_c, recompute
        self.part = seg.part.tolist()
        self.remaining = [g.f_deps * m, g.b_deps * m]
        self.ready_at = [[0.0] * (S * m), [0.0] * (S * m)]
        self.heaps: list[list[list[tuple[int, int, int]]]] = [[[] for _ in range(K)], [[] for _ in range(K)]]
        self.fwd_left = [0] * K
        for s in range(S):
            self.fwd_left[self.part[s]] += m
        self.busy_until = [0.0] * K
        self.compute, self.recomp, self.send = np.zeros(K), np.zeros(K), np.zeros(K)
        self.last_bwd, self.bwd_start = np.zeros(K), np.zeros(S)
        self.end = 0.0
        self.order: list[int] = []
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind 0 arrive / 1 free, phase, task or part)
        for k in range(m):
            for s in range(S):
                if g.f_deps[s] == 0:
                    heapq.heappush(self.heaps[0][self.part[s]], (k, s, k * S + s))

    def dispatch(self, d: int, now: float) -> None:
        """Start GPU ``d``'s ready task of highest priority if it is free."""
        if self.busy_until[d] > now:
            return
        S, M, g = self.S, self.M, self.g
        if self.heaps[0][d]:
            k, s, t = heapq.heappop(self.heaps[0][d])
            phase = 0
        elif self.fwd_left[d] == 0 and self.heaps[1][d]:
            k, _, t = heapq.heappop(self.heaps[1][d])
            s, phase = t % S, 1
        else:
            return
        start = max(now, self.ready_at[phase][t])
        if phase == 0:
            self.fwd_left[d] -= 1
            c = self.f_c[s]
            self.compute[d] += c
            self.send[d] += g.fwd_send[s]
            dur, outs = c + g.fwd_send[s], g.f_out[s]
        else:
            r = self.f_c[s] if (self.recompute and k < M - 1) else 0.0
            c = self.b_c[s] + r
            self.compute[d] += self.b_c[s]
            self.recomp[d] += r
            self.send[d] += g.bwd_send[s]
            dur, outs = c + g.bwd_send[s], g.b_out[s]
            self.last_bwd[d] = max(self.last_bwd[d], start + dur)
            self.bwd_start[s] = max(self.bwd_start[s], start + r)
        self.order.append(phase * S * M + t)
        self.busy_until[d] = start + dur
        self.end = max(self.end, start + dur)
        heapq.heappush(self.events, (start + dur, 1, 0, d))
        for y, lag, ph in outs:
            heapq.heappush(self.events, (start + c + lag, 0, ph, k * S + y))

    def run(self) -> None:
        """Process arrivals and free GPUs in time order until no event is left."""
        for d in range(self.K):
            self.dispatch(d, 0.0)
        events = self.events
        while events:
            now = events[0][0]
            touched: set[int] = set()
            while events and events[0][0] <= now:
                _, kind, ph, x = heapq.heappop(events)
                if kind == 1:
                    touched.add(x)
                    continue
                self.remaining[ph][x] -= 1
                if self.remaining[ph][x] == 0:
                    self.ready_at[ph][x] = now
                    k, s = divmod(x, self.S)
                    d = self.part[s]
                    heapq.heappush(self.heaps[ph][d], (k, s if ph == 0 else -s, x))
                    touched.add(d)
            for d in sorted(touched):
                self.dispatch(d, now)


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
    run = _Greedy(seg, _task_graph(seg, msg_s), seg_fwd_s.tolist(), seg_bwd_s.tolist(), micro_batches, recompute)
    run.run()
    if any(run.fwd_left) or any(h for h in run.heaps[1]):
        raise StrategyError("model-parallel schedule did not finish (a dependency cycle in the partition)")
    S, M = seg.count, micro_batches
    sched = Schedule(float(run.end), run.compute, run.recomp, run.send, run.last_bwd, 2 * S * M, run.bwd_start)
    return sched, tuple(run.order)


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

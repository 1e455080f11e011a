"""The per-micro-batch task graph of a hypergraph partition (``mp=K``): segments and messages."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ..cost.collectives import point_to_point
from ..partition.hypergraph import Hypergraph, reference_hardware
from ..partition.plan import Partition

__all__ = ["Segments", "segments"]

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
    the hypergraph's :attr:`~perfmodel.partition.hypergraph.Hypergraph.batch` samples (the
    micro-batch it was weighted at) on its weights and the reference profile's intra-node link:
    the durations the schedule's order is taken from.
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


def _cut(hg: Hypergraph, a: np.ndarray) -> np.ndarray:
    """Per unit, its segment: a new one starts where the part changes, before a unit that reads
    a tensor from another part, and after one whose tensor another part reads."""
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
    return np.cumsum(start) - 1


class _Messages:
    """The edges between segments and the messages between parts, as the nets are walked."""

    def __init__(self) -> None:
        self.fwd: dict[tuple[int, int], int] = {}
        self.bwd: dict[tuple[int, int], int] = {}
        self.msgs: list[tuple[int, int, int, float, bool]] = []
        self.msg_of: dict[tuple[bool, int, int], int] = {}  # (backward, segment, receiving part) -> message

    def add(self, seg: int, frm: int, to: int, backward: bool, n_elems: float) -> int:
        """The message segment ``seg`` sends from part ``frm`` to part ``to``, grown by ``n_elems``."""
        key = (backward, seg, to)
        m = self.msg_of.get(key)
        if m is None:
            m = self.msg_of[key] = len(self.msgs)
            self.msgs.append((seg, frm, to, 0.0, backward))
        s0, s1, s2, e0, b0 = self.msgs[m]
        self.msgs[m] = (s0, s1, s2, e0 + n_elems, b0)
        return m

    def net(self, ps: int, src: int, elems: float, readers: dict[int, list[int]]) -> None:
        """A tensor of producer segment ``ps`` on part ``src`` read by segments ``readers[part]``."""
        for dst, segs in readers.items():
            segs = sorted(set(segs))
            if dst == src:
                for rs in segs:
                    self.fwd.setdefault((ps, rs), -1)
                    self.bwd.setdefault((rs, ps), -1)
                continue
            # forward: the producer segment sends the activation once to part ``dst``
            m = self.add(ps, src, dst, False, elems)
            for rs in segs:
                self.fwd[(ps, rs)] = m
            # backward: the earliest reading segment sends the summed gradient back; the
            # later reading segments of that part feed it first
            first = segs[0]
            for rs in segs[1:]:
                self.bwd.setdefault((rs, first), -1)
            self.bwd[(first, ps)] = self.add(first, dst, src, True, elems)


def segments(p: Partition) -> Segments:
    """Cut every part's units into segments and derive the messages between them (cached)."""
    hit = _SEGMENTS.get(p)
    if hit is not None:
        return hit
    hg: Hypergraph = p.hypergraph
    a = np.asarray(p.assignment, dtype=np.int64)
    seg_of = _cut(hg, a)
    bounds = np.flatnonzero(np.concatenate([[True], seg_of[1:] != seg_of[:-1], [True]]))
    units = tuple(np.arange(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1))
    walk = _Messages()
    for i in range(hg.num_nets):
        pins = hg.net_pins(i)
        ps = int(seg_of[pins[0]])
        readers: dict[int, list[int]] = {}
        for r in pins[1:]:
            rs = int(seg_of[r])
            if rs != ps:
                readers.setdefault(int(a[r]), []).append(rs)
        walk.net(ps, int(a[pins[0]]), float(hg.net_elems[i]), readers)
    arr = np.array([m[:4] for m in walk.msgs], dtype=float).reshape(-1, 4)
    # reference durations (profile-independent when the hypergraph is weighted on the reference
    # profile); hand-made hypergraphs without a forward share take a third of each unit's time
    u_fwd = hg.unit_fwd_seconds if hg.unit_fwd_seconds is not None else hg.unit_seconds / 3
    u_bwd = hg.unit_seconds - u_fwd
    ref_bytes = arr[:, 3] * hg.elem_bytes * hg.batch
    ref = reference_hardware()
    out = Segments(
        parts=p.parts,
        part=a[bounds[:-1]],
        units=units,
        fwd_edges=tuple((x, y, m) for (x, y), m in sorted(walk.fwd.items())),
        bwd_edges=tuple((x, y, m) for (x, y), m in sorted(walk.bwd.items())),
        msg_seg=arr[:, 0].astype(np.int64),
        msg_src=arr[:, 1].astype(np.int64),
        msg_dst=arr[:, 2].astype(np.int64),
        msg_elems=arr[:, 3],
        msg_bwd=np.array([m[4] for m in walk.msgs], dtype=bool),
        ref_fwd_s=np.array([u_fwd[u].sum() for u in units]) * hg.batch,
        ref_bwd_s=np.array([u_bwd[u].sum() for u in units]) * hg.batch,
        ref_msg_s=np.array([point_to_point(float(b), ref, False) for b in ref_bytes]),
    )
    _SEGMENTS[p] = out
    return out

"""The partitions an ``mp=K`` plan is priced on, and the words for the one its step chose.

KaHyPar balances the parts' compute under a volume objective; it knows nothing of the
schedule. Its balanced parts may read each other's tensors in both directions (the quotient
graph of the parts has a cycle), and then a GPU stops mid-pass to wait for another one: the
balanced partition can price slower than a less balanced one (inception_v3 ``mp=4,mb=4`` at
global batch 256 on a100-80gb-dgx, amp: 114.44 ms against 98.30 ms for the partition weighted
at 32 samples, ``python benchmarks/mp_candidates.py``). So a plan prices a few partitions and
keeps the fastest that fits (:func:`mp_candidates`, :func:`choose`):

* ``balanced``: KaHyPar's, its layers weighted at the plan's micro-batch (the batch every part
  runs);
* ``weighted_at_32``: KaHyPar's, its layers weighted at 32 samples
  (:data:`~perfmodel.partition.hypergraph.WEIGHT_BATCH`; the rule before the micro-batch);
  one more KaHyPar run per (network, K, precision, cuDNN, memory format) whatever the
  micro-batch, none where the micro-batch is 32;
* ``contiguous``: the chain of links cut into K runs minimising the slowest run's compute at the
  micro-batch (:func:`~perfmodel.partition.plan.contiguous_partition`, a pipeline's cut): no
  cycle, one segment per part; no KaHyPar run.

Every candidate is weighted on the reference profile, so the set does not depend on the
profile priced. Each candidate's step is a maximum of sums of compute, message and collective
times (:mod:`.model_parallel`), none of which grows on faster hardware, and so is the smallest
of them: a faster device or link still never makes an ``mp`` plan slower.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import StrategyError, UsageError
from ..network import Network
from ..partition.hypergraph import WEIGHT_BATCH
from ..partition.plan import DEFAULT_EPSILON, DEFAULT_SEED, Partition, contiguous_partition, network_partition
from .context import Context
from .mp_segments import Segments

__all__ = [
    "GRANULARITY", "CANDIDATE_WORDS", "CandidatePrice", "mp_partition", "mp_candidates", "mid_pass_waits", "choose",
    "why_chosen", "short_why",
]

#: The hypergraph granularity ``mp=K`` plans are partitioned at (one vertex per layer).
GRANULARITY = "layer"

#: Each candidate partition, in words.
CANDIDATE_WORDS = {
    "balanced": "KaHyPar's parts balanced at the micro-batch",
    "weighted_at_32": f"KaHyPar's parts balanced at {WEIGHT_BATCH} samples",
    "contiguous": "the contiguous cut of the layer chain (a pipeline's stages)",
}

_PartKey = tuple[int, int, str, int, str]  # parts, batch, precision, cuDNN major, memory format
_PARTITIONS: weakref.WeakKeyDictionary[Network, dict[_PartKey, Partition]] = weakref.WeakKeyDictionary()
_CANDIDATES: weakref.WeakKeyDictionary[Network, dict[_PartKey, dict[str, Partition]]] = weakref.WeakKeyDictionary()


def mp_partition(ctx: Context, parts: int, micro_batch: int) -> Partition:
    """KaHyPar's ``parts``-way layer partition of the context's network, its layers weighted by
    their times for ``micro_batch`` samples (what every part runs at once, so the parts are
    balanced at the batch they run) on the reference profile
    (:data:`~perfmodel.hardware.REFERENCE_PROFILE`), not the context's profile: one partition
    per (network, parts, micro-batch, precision, cuDNN, memory format), cached, so a faster
    device or link prices the same parts and never a worse cut of them. The weights take the
    context's cuDNN (grouped convolutions, :mod:`perfmodel.cost.grouped`) and memory format
    (transposes around tensor-core convolutions, :mod:`perfmodel.cost.layout`): the software
    the parts run with, unlike the device, changes which layers are heavy."""
    per_net = _PARTITIONS.setdefault(ctx.net, {})
    key = (parts, micro_batch, ctx.precision, ctx.cudnn_major, ctx.memory_format)
    hit = per_net.get(key)
    if hit is None:
        try:
            hit = network_partition(
                ctx.net, None, ctx.precision, parts, GRANULARITY, DEFAULT_EPSILON, DEFAULT_SEED, ctx.cudnn_major,
                ctx.memory_format, micro_batch,
            )
        except UsageError as exc:
            raise StrategyError(f"mp={parts}: {exc}") from None
        per_net[key] = hit
    return hit


def mp_candidates(ctx: Context, parts: int, micro_batch: int) -> dict[str, Partition]:
    """The distinct candidate partitions of an ``mp=parts`` plan at ``micro_batch`` samples per
    part, by name (see the module docstring; a candidate with the same parts as an earlier one
    is left out), cached per (network, parts, micro-batch, precision, cuDNN, memory format)."""
    per_net = _CANDIDATES.setdefault(ctx.net, {})
    key = (parts, micro_batch, ctx.precision, ctx.cudnn_major, ctx.memory_format)
    hit = per_net.get(key)
    if hit is not None:
        return hit
    balanced = mp_partition(ctx, parts, micro_batch)
    found = [("balanced", balanced)]
    if micro_batch != WEIGHT_BATCH:
        found.append(("weighted_at_32", mp_partition(ctx, parts, WEIGHT_BATCH)))
    contiguous = contiguous_partition(ctx.net, balanced.hypergraph, parts)
    if contiguous is not None:
        found.append(("contiguous", contiguous))
    out: dict[str, Partition] = {}
    for name, p in found:
        if not any(np.array_equal(p.assignment, q.assignment) for q in out.values()):
            out[name] = p
    per_net[key] = out
    return out


def mid_pass_waits(seg: Segments) -> int:
    """How many segments, other than a part's first, read a tensor their part has not received
    yet from another part: the times a GPU's forward pass of a micro-batch stops to wait for
    another GPU (0 for a contiguous cut, where a later segment only re-reads a tensor its part's
    first segment received, as a residual add does)."""
    reads: dict[int, set[int]] = {}
    for _, y, m in seg.fwd_edges:
        if m >= 0:
            reads.setdefault(y, set()).add(m)
    received: dict[int, set[int]] = {}
    waits = 0
    for i, part in enumerate(seg.part.tolist()):
        new = reads.get(i, set())
        if part in received and not new <= received[part]:
            waits += 1
        received.setdefault(part, set()).update(new)
    return waits


@dataclass(frozen=True)
class CandidatePrice:
    """One candidate partition priced: its step (seconds), whether its busiest GPU fits in
    memory, its quotient graph's acyclicity, segments, mid-pass waits
    (:func:`mid_pass_waits`) and messages per micro-batch, and its step's terms (seconds)."""

    step_s: float
    fits: bool
    acyclic: bool
    segments: int
    waits: int
    messages: int
    terms: Mapping[str, float]


def choose(prices: Mapping[str, CandidatePrice]) -> str:
    """The fastest candidate that fits in memory (the fastest of all if none fits); of equal
    steps the first (``balanced`` before the others)."""
    pool = [n for n, c in prices.items() if c.fits] or list(prices)
    return min(pool, key=lambda n: prices[n].step_s)


def why_chosen(chosen: str, prices: Mapping[str, CandidatePrice], parts: int) -> str:
    """Which candidate the plan runs and why, in one line with the numbers."""
    c = prices[chosen]
    others = ", ".join(f"{n} {1e3 * p.step_s:.2f} ms" for n, p in prices.items() if n != chosen)
    head = f"parts: {chosen} ({1e3 * c.step_s:.2f} ms" + (f"; {others})" if others else ", the only candidate)")
    if chosen == "balanced" or "balanced" not in prices:
        return head
    b = prices["balanced"]
    if not b.fits and c.fits:
        return head + ": the balanced parts do not fit in memory"
    diff = {k: b.terms.get(k, 0.0) - v for k, v in c.terms.items()}
    term = max(diff, key=lambda k: diff[k])
    shape = (f"{'a cycle between parts, ' if not b.acyclic else ''}{b.waits} mid-pass waits against {c.waits}, "
             f"{b.messages} messages per micro-batch against {c.messages}")
    return (f"{head}: the balanced parts' {term.replace('_', ' ')} is {1e3 * b.terms.get(term, 0.0):.2f} ms "
            f"against {1e3 * c.terms[term]:.2f} ms ({shape})")


def short_why(chosen: str, prices: Mapping[str, CandidatePrice]) -> str:
    """:func:`why_chosen` in a few words, for a table's column."""
    if chosen == "balanced" or "balanced" not in prices:
        return f"parts: {chosen}, fastest of {len(prices)} candidate{'s' * (len(prices) > 1)}"
    b, c = prices["balanced"], prices[chosen]
    if not b.fits and c.fits:
        return f"parts: {chosen}, the balanced parts do not fit"
    cycle = " (which have a cycle)" if not b.acyclic else ""
    return f"parts: {chosen}, {1e3 * (b.step_s - c.step_s):.2f} ms faster than the balanced parts{cycle}"

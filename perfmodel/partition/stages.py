"""Contiguous stage partitions of a chain: min-max (optimal) and with cut costs.

Used by pipeline plans (``strategies``) and by the contiguous baseline of the hypergraph
partitioner (:mod:`perfmodel.partition.plan`); it uses nothing of either.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import combinations

import numpy as np

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = ["partition_min_max", "partition_with_cut_costs", "brute_force_partition"]


def _greedy(costs: list[float], bound: float, parts: int) -> list[int] | None:
    """Cut points of the greedy fill under ``bound`` (None if it needs more than ``parts`` stages)."""
    cuts: list[int] = []
    acc = 0.0
    for i, c in enumerate(costs):
        if c > bound:
            return None
        if acc + c > bound:
            cuts.append(i)
            acc = c
            if len(cuts) >= parts:
                return None
        else:
            acc += c
    return cuts


#: From this many links :func:`_greedy_long` is faster than :func:`_greedy` (2.2x at 1,000 links
#: and 8 stages; 1.8x slower at 100 links, 5x at 20: numpy's per-call overhead).
LONG_CHAIN = 256


def _greedy_long(costs: np.ndarray, bound: float, parts: int) -> list[int] | None:
    """:func:`_greedy`, the same cuts, in numpy: each stage takes links while their running sum
    stays within ``bound``, one ``cumsum`` from its first link (numpy accumulates left to right,
    so the sums are those of adding the links one by one) and a ``searchsorted`` for the first
    link past the bound."""
    if len(costs) and float(costs.max()) > bound:
        return None
    cuts: list[int] = []
    a, n = 0, len(costs)
    while True:
        k = int(np.searchsorted(np.cumsum(costs[a:]), bound, side="right"))
        if a + k >= n:
            return cuts
        a += k
        cuts.append(a)
        if len(cuts) >= parts:
            return None


def partition_min_max(costs: FloatSeq, parts: int) -> tuple[int, ...]:
    """Split ``costs`` into ``parts`` non-empty contiguous runs minimising the largest run sum.

    Returns the run lengths. Bisection on the bottleneck with the greedy feasibility test
    (O(L log(1/eps)), linear in the chain length; in numpy from :data:`LONG_CHAIN` links), then
    the greedy split at the found bound;
    the result's bottleneck is a real run sum, so it is the optimum up to ``eps``-ties.
    (The "linear partitioning" problem; Olstad & Manne, "Efficient partitioning of sequences",
    IEEE Trans. Computers 44(11), 1995.)
    """
    c = np.asarray(costs, dtype=float)
    n = len(c)
    if parts > n:
        raise ValueError(f"sequence is shorter than intended partitions ({n} < {parts})")
    # the upper bound must pass the greedy test, which adds left to right: c.sum() adds
    # pairwise and can come out an ulp below the greedy's running total
    lo, hi = float(c.max()), float(np.cumsum(c)[-1])
    floats = c.tolist()  # the greedy runs ~56k times per search: Python floats, not numpy scalars

    def fill(bound: float) -> list[int] | None:
        return _greedy_long(c, bound, parts) if n >= LONG_CHAIN else _greedy(floats, bound, parts)

    for _ in range(200):
        if hi - lo <= 1e-12 * max(hi, 1e-300):
            break
        mid = 0.5 * (lo + hi)
        if fill(mid) is not None:
            hi = mid
        else:
            lo = mid
    cuts = fill(hi)
    assert cuts is not None
    # the greedy may use fewer stages: split the longest runs until there are ``parts``
    bounds = [0, *cuts, n]
    while len(bounds) - 1 < parts:
        lengths = [bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)]
        j = max(range(len(lengths)), key=lambda k: lengths[k])
        bounds.insert(j + 1, bounds[j] + 1)
    return tuple(bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1))


def _greedy_cuts(prefix: list[float], leave: list[float], bound: float, parts: int) -> list[int] | None:
    """Cut points of the greedy fill under ``bound`` where a stage ``[a, b)`` costs its links plus
    the cut before it (``leave[a]``) and the cut after it (``leave[b]``); each stage ends at its
    furthest end within ``bound``."""
    n = len(prefix) - 1
    cuts: list[int] = []
    a = 0
    while a < n:
        room = bound + prefix[a] - leave[a]  # stage [a, b) fits when prefix[b] + leave[b] <= room
        b = bisect_right(prefix, room, a) - 1  # the furthest end the links alone allow
        while b > a and prefix[b] + leave[b] > room:
            b -= 1
        if b <= a:
            return None
        a = b
        if a < n:
            cuts.append(a)
            if len(cuts) >= parts:
                return None
    return cuts


def partition_with_cut_costs(costs: FloatSeq, cut_costs: FloatSeq, parts: int) -> tuple[int, ...]:
    """Like :func:`partition_min_max`, but cutting after link ``k`` costs ``cut_costs[k]`` to both
    stages beside the cut (the activation sent forward, its gradient sent back), so the split
    avoids cutting where a large tensor crosses.

    Bisection on the bottleneck with a greedy fill (each stage ends at its furthest end within
    the bound): linear in the chain per test, as :func:`partition_min_max`. The greedy is not
    exact once cuts have costs (a shorter stage can end at a cheaper cut): on 3,000 random
    chains of up to 10 links its bottleneck was at most 1.48x the brute-force optimum, and
    optimal in about 98% of them. It is a candidate the caller prices, not a proven optimum.
    """
    c = np.asarray(costs, dtype=float)
    k = np.asarray(cut_costs, dtype=float)
    n = len(c)
    if parts > n:
        raise ValueError(f"sequence is shorter than intended partitions ({n} < {parts})")
    if len(k) < n - 1:
        raise ValueError(f"cut costs cover {len(k)} cuts, the chain has {n - 1}")
    prefix_a = np.concatenate([[0.0], np.cumsum(c)])
    leave_a = np.concatenate([[0.0], k[: n - 1], [0.0]])  # leave[b]: the cut after link b - 1 (none at 0, n)
    prefix, leave = prefix_a.tolist(), leave_a.tolist()
    # one stage holding every link passes at ``hi``
    lo, hi = float(c.max()), float(prefix[-1] + 2 * (k[: n - 1].max() if n > 1 else 0.0)) * (1 + 1e-12)
    for _ in range(200):
        if hi - lo <= 1e-12 * max(hi, 1e-300):
            break
        mid = 0.5 * (lo + hi)
        if _greedy_cuts(prefix, leave, mid, parts) is not None:
            hi = mid
        else:
            lo = mid
    cuts = _greedy_cuts(prefix, leave, hi, parts)
    assert cuts is not None
    bounds = [0, *cuts, n]
    while len(bounds) - 1 < parts:  # fewer stages than asked: add the cut that costs least
        best: tuple[float, int, int] | None = None
        for j in range(len(bounds) - 1):
            a, b = bounds[j], bounds[j + 1]
            if b - a < 2:
                continue
            q = np.arange(a + 1, b)
            worst = np.maximum(
                prefix_a[q] - prefix_a[a] + leave_a[a] + leave_a[q], prefix_a[b] - prefix_a[q] + leave_a[q] + leave_a[b]
            )
            i = int(np.argmin(worst))
            if best is None or worst[i] < best[0]:
                best = (float(worst[i]), j, int(q[i]))
        assert best is not None  # parts <= n, so some stage has two links
        bounds.insert(best[1] + 1, best[2])
    return tuple(bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1))


def brute_force_partition(costs: FloatSeq, parts: int) -> float:
    """The optimal bottleneck by exhaustive search (for tests and benchmarks; exponential)."""
    n = len(costs)
    prefix = np.concatenate([[0.0], np.cumsum(costs)])
    best = float("inf")
    for cuts in combinations(range(1, n), parts - 1):
        b = [0, *cuts, n]
        best = min(best, max(prefix[b[i + 1]] - prefix[b[i]] for i in range(parts)))
    return best

"""The min-max stage partition of a long chain (numpy greedy, from ``LONG_CHAIN`` links) is optimal.

Oracle: the textbook O(K L^2) dynamic program of linear partitioning, written here.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.partition.stages import LONG_CHAIN, partition_min_max


def _dp_min_max(costs: np.ndarray, parts: int) -> float:
    """The smallest largest run sum over every split of ``costs`` into ``parts`` runs."""
    n = len(costs)
    prefix = np.concatenate([[0.0], np.cumsum(costs)])
    best = prefix[1:].copy()  # best[i]: one run over costs[:i + 1]
    for k in range(2, parts + 1):
        nxt = np.full(n, np.inf)
        for i in range(k - 1, n):
            j = np.arange(k - 2, i)  # the previous run ends at j
            nxt[i] = np.min(np.maximum(best[j], prefix[i + 1] - prefix[j + 1]))
        best = nxt
    return float(best[-1])


@settings(max_examples=15, deadline=None)
@given(st.integers(LONG_CHAIN, LONG_CHAIN + 200), st.integers(2, 6), st.sampled_from(["uniform", "heavy", "steps"]),
       st.integers(0, 2**31 - 1))
def test_long_chain_split_is_the_dp_optimum(n: int, parts: int, kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    costs = {"uniform": rng.random(n), "heavy": rng.pareto(1.5, n),
             "steps": rng.integers(0, 4, n).astype(float)}[kind]
    runs = partition_min_max(costs, parts)
    assert len(runs) == parts and min(runs) >= 1 and sum(runs) == n
    bounds = np.concatenate([[0], np.cumsum(runs)])
    worst = max(float(costs[bounds[i] : bounds[i + 1]].sum()) for i in range(parts))
    assert worst <= _dp_min_max(costs, parts) * (1 + 1e-9)

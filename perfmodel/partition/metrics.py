"""Quality of a partition: connectivity, (lambda - 1) volume, part loads and imbalance."""

from __future__ import annotations

import numpy as np

from .hypergraph import Hypergraph

__all__ = [
    "connectivity",
    "km1_volume",
    "part_loads",
    "imbalance",
    "max_allowed_weight",
    "quotient_edges",
    "is_acyclic",
]


def connectivity(hg: Hypergraph, assignment: np.ndarray, parts: int) -> np.ndarray:
    """lambda of every net: the number of distinct parts its pins lie in."""
    a = np.asarray(assignment, dtype=np.int64)
    keys = np.unique(hg.pin_net * parts + a[hg.pins])
    return np.bincount(keys // parts, minlength=hg.num_nets)


def km1_volume(
    hg: Hypergraph, assignment: np.ndarray, parts: int, weights: np.ndarray | None = None
) -> float:
    """The connectivity-minus-one metric: sum over nets of ``weight x (lambda - 1)``.

    With the default weights (``net_bytes``) this is the bytes one sample sends between
    parts in a training step: each net's producer part sends the activation once to every
    other part that reads it, and every such part sends one gradient (a partial sum) back.
    """
    w = hg.net_bytes if weights is None else np.asarray(weights, dtype=float)
    lam = connectivity(hg, assignment, parts)
    return float((w * (lam - 1)).sum())


def part_loads(values: np.ndarray, assignment: np.ndarray, parts: int) -> np.ndarray:
    """Sum of ``values`` (per unit) in each part."""
    return np.bincount(
        np.asarray(assignment, dtype=np.int64),
        weights=np.asarray(values, dtype=float),
        minlength=parts,
    )


def imbalance(loads: np.ndarray) -> float:
    """``max part load / mean part load - 1`` (0 is perfect balance)."""
    loads = np.asarray(loads, dtype=float)
    mean = float(loads.mean())
    return float(loads.max() / mean - 1.0) if mean > 0 else 0.0


def max_allowed_weight(total_weight: int, parts: int, epsilon: float) -> float:
    """KaHyPar's balance bound on a part's weight: ``(1 + epsilon) x ceil(total / parts)``."""
    return (1.0 + epsilon) * -(-int(total_weight) // parts)


def quotient_edges(hg: Hypergraph, assignment: np.ndarray) -> tuple[tuple[int, int], ...]:
    """Directed edges (producer part, reading part) of the parts' quotient graph, sorted."""
    a = np.asarray(assignment, dtype=np.int64)
    src = a[hg.pins[hg.offsets[:-1]]]
    pairs = np.stack([src[hg.pin_net], a[hg.pins]], axis=1)
    pairs = np.unique(pairs[pairs[:, 0] != pairs[:, 1]], axis=0)
    return tuple((int(x), int(y)) for x, y in pairs)


def is_acyclic(parts: int, edges: tuple[tuple[int, int], ...]) -> bool:
    """Whether the directed graph on ``parts`` vertices with ``edges`` has no cycle."""
    indeg = [0] * parts
    out: list[list[int]] = [[] for _ in range(parts)]
    for x, y in edges:
        out[x].append(y)
        indeg[y] += 1
    todo = [v for v in range(parts) if indeg[v] == 0]
    seen = 0
    while todo:
        v = todo.pop()
        seen += 1
        for w in out[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                todo.append(w)
    return seen == parts

"""Spatial (domain) decomposition: halo volumes per layer, and the per-link spatial-or-sample choice."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..network.graph import Network
from ..network.layers import Layer

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = ["halo_widths", "halo_elems", "spatial_ok", "network_halos", "choose_decomposition"]


def halo_widths(kernel: int, stride: int, padding: int, dilation: int) -> tuple[int, int]:
    """Rows a tile needs from its lower and upper neighbour along one dimension.

    An output row ``o`` reads input rows ``o*stride - padding`` to
    ``o*stride - padding + dilation*(kernel - 1)``; a tile owning input rows
    ``[a*stride, (a+n)*stride)`` misses ``padding`` rows below and
    ``dilation*(kernel - 1) - padding - (stride - 1)`` above (Dryden et al., IPDPS 2019,
    section III-B).
    """
    lower = max(0, padding)
    upper = max(0, dilation * (kernel - 1) - padding - (stride - 1))
    return lower, upper


def halo_elems(layer: Layer, grid: tuple[int, int, int]) -> float:
    """Elements per sample the busiest tile receives for ``layer`` on ``grid`` (forward).

    Along a split dimension a tile with neighbours on both sides (grid extent >= 3) needs
    both halos; with an extent of 2 each tile has one neighbour, and the larger halo counts.
    The tile extended by its halo widths ``w_i`` holds ``prod(t_i + w_i)`` elements per
    channel, of which it owns ``prod(t_i)``; the difference is the faces, edges and corners it
    receives (the edges and corners travel with the second and third dimension's exchange,
    Dryden et al., IPDPS 2019, section III-B). The backward pass sends the same volume of
    input-gradient halos back.
    """
    if layer.kind not in ("conv", "maxpool", "avgpool") or layer.spatial_dims < 2:
        return 0.0
    ins = layer.in_shape
    nd = layer.spatial_dims
    splits = grid[3 - nd:]
    extents = ins[1:]
    tile = [e / s for e, s in zip(extents, splits, strict=True)]
    widths = []
    for i in range(nd):
        s = splits[i]
        if s <= 1:
            widths.append(0)
            continue
        lo, up = halo_widths(layer.kernel[i], layer.stride[i], layer.padding[i], layer.dilation[i])
        widths.append((lo + up) if s >= 3 else max(lo, up))
    extended = float(np.prod([t + w for t, w in zip(tile, widths, strict=True)]))
    return ins[0] * (extended - float(np.prod(tile)))


def spatial_ok(layer: Layer, grid: tuple[int, int, int]) -> bool:
    """Whether every spatial extent of the layer's input and output holds at least one row per tile."""
    nd = layer.spatial_dims
    if nd < 2 or len(layer.in_shape) - 1 != nd:
        return layer.kind in ("act", "batchnorm", "add", "mul", "dropout", "concat") and nd >= 2
    splits = grid[3 - nd:]
    return all(o >= s for o, s in zip(layer.out_shape[1:], splits, strict=True)) and all(
        i >= s for i, s in zip(layer.in_shape[1:], splits, strict=True)
    )


@lru_cache(maxsize=512)
def network_halos(net: Network, grid: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per layer of ``net`` on ``grid``: :func:`halo_elems` and :func:`spatial_ok` (cached: the
    search prices many plans on the same grid)."""
    halos = np.array([halo_elems(layer, grid) for layer in net.layers], dtype=float)
    ok = np.array([spatial_ok(layer, grid) for layer in net.layers], dtype=bool)
    halos.setflags(write=False)
    ok.setflags(write=False)
    return halos, ok


def choose_decomposition(
    net: Network,
    spatial_cost: FloatSeq,
    sample_cost: FloatSeq,
    allowed: Sequence[bool],
    switch_cost: FloatSeq,
) -> tuple[list[bool], float]:
    """Per link, spatial (True) or sample (False) decomposition, minimising the total cost.

    Dynamic programming over the chain of cut points: the state is a link's configuration,
    a link costs ``spatial_cost[i]`` or ``sample_cost[i]``, and changing configuration
    between links ``i-1`` and ``i`` costs ``switch_cost[i]`` (redistributing the tensor
    that crosses the cut). O(L * K^2) with K = 2 configurations (Dryden et al., IPDPS
    2019, section IV; HSM2DL's linear-time search).
    """
    n = len(net.links)
    inf = float("inf")
    # best[c] = least cost of links [0, i] with link i in configuration c (0 sample, 1 spatial)
    best = [sample_cost[0], spatial_cost[0] if allowed[0] else inf]
    back: list[tuple[int, int]] = [(0, 0)]
    for i in range(1, n):
        new = [inf, inf]
        arg = (0, 0)
        choices = []
        for c in (0, 1):
            if c == 1 and not allowed[i]:
                choices.append(0)
                continue
            own = spatial_cost[i] if c else sample_cost[i]
            stay = best[c]
            move = best[1 - c] + switch_cost[i]
            if stay <= move:
                new[c], prev = stay + own, c
            else:
                new[c], prev = move + own, 1 - c
            choices.append(prev)
        arg = (choices[0], choices[1])
        best = new
        back.append(arg)
    c = 0 if best[0] <= best[1] else 1
    total = best[c]
    out = [False] * n
    for i in range(n - 1, -1, -1):
        out[i] = bool(c)
        c = back[i][c]
    return out, total

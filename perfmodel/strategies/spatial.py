"""Spatial (domain) decomposition: halo volumes per layer, the per-link spatial-or-sample choice,
and the per-layer seconds of a spatial group's micro-batch (halo exchanges and redistributions)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..cost.collectives import LinkParams, link_params
from ..cost.formulas import Num, ceil, is_symbolic
from ..errors import StrategyError
from ..network.graph import Network
from ..network.layers import Layer
from .context import Context
from .spec import Strategy

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = [
    "halo_widths",
    "halo_elems",
    "spatial_ok",
    "network_halos",
    "choose_decomposition",
    "halo_exchange_s",
    "redistribution_s",
    "spatial_tier",
    "ChainLayers",
    "SpatialExchanges",
    "spatial_exchanges",
    "layer_exchange_s",
    "halo_supersteps",
    "tiled_dims",
    "held_samples",
    "sample_layers",
    "spatial_layers",
]


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


# -- seconds of a spatial group's exchanges (numbers or symbols) --------------------------
def halo_exchange_s(elems: Num, supersteps: Num, batch: Num, elem_bytes: Num, bw: Num, alpha: Num) -> Num:
    """Seconds of halo exchanges of ``elems`` elements per sample in all, forward and
    backward, over ``supersteps`` point-to-point steps (one per tiled dimension and pass):
    ``supersteps*alpha + 2*batch*elems*e/bw``. One layer: ``2*p2p(b*h*e) + 2*(dims - 1)*alpha``."""
    return supersteps * alpha + 2 * batch * elems * elem_bytes / bw


def redistribution_s(elems: Num, count: Num, p: Num, batch: Num, elem_bytes: Num, bw: Num, alpha: Num) -> Num:
    """Seconds of ``count`` switches between spatial and sample decomposition of tensors of
    ``elems`` elements per sample in all, forward and backward: every GPU sends ``(p - 1)/p``
    of its ``1/p`` share, ``2*count*alpha + 2*(p - 1)/p**2 * batch*elems*e/bw``."""
    return 2 * count * alpha + 2 * (p - 1) * batch * elems * elem_bytes / (p * p * bw)


def spatial_tier(p: int, gpus_per_node: int, lp: LinkParams) -> tuple[Any, Any, bool]:
    """(bandwidth, latency, in one node) a spatial group of ``p`` GPUs exchanges over."""
    if p <= gpus_per_node:
        return lp.bw_intra, lp.alpha_intra, True
    return lp.bw_net_per_gpu, lp.alpha_net, False


@dataclass(frozen=True)
class ChainLayers:
    """Per layer, one micro-batch of ``m`` samples on one GPU of a group of ``p`` (1: no
    spatial split): forward and backward seconds, each with half of the layer's halo exchange
    and redistribution, which ``halo`` and ``redist`` give whole (both passes); saved bytes;
    per link whether it is tiled (else sample-decomposed); whether the group is in one node;
    the compute alone (``compute_fwd``, ``compute_bwd``) and the exchanges' volumes
    (``exchanges``; ``None`` without a spatial split)."""

    m: float
    p: int
    fwd: np.ndarray
    bwd: np.ndarray
    saved: np.ndarray
    halo: np.ndarray
    redist: np.ndarray
    spatial_links: list[bool]
    in_node: bool
    compute_fwd: np.ndarray
    compute_bwd: np.ndarray
    exchanges: SpatialExchanges | None

    def held(self, link: int) -> float:
        """Samples' worth of link ``link``'s tensors one GPU holds (:func:`held_samples`)."""
        return float(held_samples(self.m, self.p, self.spatial_links[link]))


def held_samples(batch: Num, p: int, tiled: bool) -> Num:
    """Samples' worth of a tensor one GPU of a spatial group of ``p`` holds: a tile of each of
    the ``batch`` samples (``tiled``), or ``ceil(batch / p)`` whole samples (sample
    decomposition); numbers or symbols."""
    if p == 1:
        return batch
    return batch / p if tiled else ceil(batch / p)


def sample_layers(ctx: Context, m: float) -> ChainLayers:
    """A micro-batch of ``m`` whole samples on one GPU."""
    lt, ev = ctx.times(m)
    saved = ev["saved_elems"] * ctx.elem_bytes + ev["saved_extra_bytes"]
    zeros = np.zeros_like(lt.fwd)
    return ChainLayers(m, 1, lt.fwd, lt.bwd, saved, zeros, zeros, [False] * len(ctx.net.links), True, lt.fwd, lt.bwd,
                       None)


def _check_grid(net: Network, grid: tuple[int, int, int]) -> None:
    nd = len(net.input_shape) - 1
    if nd < 2:
        raise StrategyError(f"{net.name} has no spatial input to decompose (sp needs images or volumes)")
    if nd == 2 and grid[0] > 1:
        raise StrategyError(f"sp={'x'.join(map(str, grid))} has a depth split but {net.name} is 2-D (use sp=HxW)")
    ext = net.input_shape[1:]
    if any(x < sp_ for x, sp_ in zip(ext, grid[3 - nd :], strict=True)):
        raise StrategyError(
            f"spatial grid {'x'.join(map(str, grid[3 - nd :]))} is larger than the input {'x'.join(map(str, ext))} "
            f"(valid: each grid extent at most the input's on its axis, e.g. sp={'x'.join(map(str, ext))} at most)"
        )


def tiled_dims(layer: Layer, grid: tuple[int, int, int]) -> int:
    """How many of the layer's spatial dimensions the grid splits (supersteps of one halo pass)."""
    return sum(1 for x in grid[3 - layer.spatial_dims :] if x > 1)


@lru_cache(maxsize=512)
def halo_supersteps(net: Network, grid: tuple[int, int, int]) -> np.ndarray:
    """Per layer, the point-to-point supersteps of its halo exchange on ``grid``, forward and
    backward: one per tiled dimension and pass (cached like :func:`network_halos`)."""
    steps = np.array([2 * tiled_dims(layer, grid) for layer in net.layers], dtype=float)
    steps.setflags(write=False)
    return steps


@dataclass(frozen=True)
class SpatialExchanges:
    """Per layer of a spatial plan whose links are ``tiled`` or not: the halo elements per
    sample it receives (0 off the tiled links), the supersteps of that exchange, and the
    elements per sample redistributed at its start (where the decomposition switches)."""

    halo_elems: np.ndarray
    supersteps: np.ndarray
    switch_elems: np.ndarray


def spatial_exchanges(ctx: Context, s: Strategy, tiled: Sequence[bool]) -> SpatialExchanges:
    """The halo exchanges and redistributions of plan ``s`` with links ``tiled``."""
    net = ctx.net
    halos, _ = network_halos(net, s.sp)
    layer_tiled = np.repeat(np.asarray(tiled, dtype=bool), [lk.stop - lk.start for lk in net.links])
    switch = np.zeros(len(net.layers))
    for i in range(1, len(net.links)):
        if tiled[i] != tiled[i - 1]:
            switch[net.links[i].start] += ctx.cut_elems[i - 1]
    return SpatialExchanges(np.where(layer_tiled, halos, 0.0), halo_supersteps(net, s.sp), switch)


def layer_exchange_s(x: SpatialExchanges, p: int, batch: Num, e: Num, bw: Num, alpha: Num) -> tuple[Any, Any]:
    """Per layer, the seconds of its halo exchange and of the redistribution at its start (both
    passes, 0 where there is none): arrays on numbers, lists of expressions on symbols."""
    if not is_symbolic(batch, e, bw, alpha):
        halo = np.where(x.halo_elems > 0, halo_exchange_s(x.halo_elems, x.supersteps, batch, e, bw, alpha), 0.0)
        redist = np.where(x.switch_elems > 0, redistribution_s(x.switch_elems, 1, p, batch, e, bw, alpha), 0.0)
        return halo, redist
    halo_l = [halo_exchange_s(float(h), int(n), batch, e, bw, alpha) if h > 0 else 0
              for h, n in zip(x.halo_elems, x.supersteps, strict=True)]
    redist_l = [redistribution_s(float(c), 1, p, batch, e, bw, alpha) if c > 0 else 0 for c in x.switch_elems]
    return halo_l, redist_l


def spatial_layers(ctx: Context, s: Strategy, m: float) -> ChainLayers:
    """A spatial group's micro-batch: each link tiled or sample-decomposed (every link that can
    be tiled, or by :func:`choose_decomposition` with ``decomp=auto``), with halo exchanges on
    tiled layers and a redistribution where the decomposition switches at a cut."""
    net, e, grid, p = ctx.net, ctx.elem_bytes, s.sp, s.sp_degree
    _check_grid(net, grid)
    bw, alpha, in_node = spatial_tier(p, ctx.hw.gpus_per_node, link_params(ctx.hw))
    lt_sp, ev_sp = ctx.times(m, grid)
    lt_sa, ev_sa = ctx.times(max(1, math.ceil(m / p)))
    halos, ok = network_halos(net, grid)
    allowed = [bool(ok[lk.start : lk.stop].all()) for lk in net.links]
    if s.decomp == "auto":
        # every layer's halo, and every cut's redistribution, should it switch
        halo_all = np.where(halos > 0, halo_exchange_s(halos, halo_supersteps(net, grid), m, e, bw, alpha), 0.0)
        cut = ctx.cut_elems[:-1]
        switch = np.concatenate([[0.0], np.where(cut > 0, redistribution_s(cut, 1, p, m, e, bw, alpha), 0.0)])
        sp_cost = ctx.link_sum(lt_sp.fwd + lt_sp.bwd + halo_all)
        choice, _ = choose_decomposition(net, sp_cost, ctx.link_sum(lt_sa.fwd + lt_sa.bwd), allowed, switch)
    else:  # tile every link whose layers can be tiled
        choice = list(allowed)
    x = spatial_exchanges(ctx, s, choice)
    halo, redist = layer_exchange_s(x, p, m, e, bw, alpha)
    tiled = np.repeat(choice, [lk.stop - lk.start for lk in net.links])
    compute_fwd, compute_bwd = np.where(tiled, lt_sp.fwd, lt_sa.fwd), np.where(tiled, lt_sp.bwd, lt_sa.bwd)
    fwd = compute_fwd + (halo + redist) / 2
    bwd = compute_bwd + (halo + redist) / 2
    saved_sp = ev_sp["saved_elems"] * e + ev_sp["saved_extra_bytes"]
    saved = np.where(tiled, saved_sp, ev_sa["saved_elems"] * e + ev_sa["saved_extra_bytes"])
    return ChainLayers(m, p, fwd, bwd, saved, halo, redist, list(choice), in_node, compute_fwd, compute_bwd, x)

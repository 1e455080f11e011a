"""The fastest stage split of a pipeline: every contiguous split, priced in full in order of a lower bound.

A split's step is its fill-drain time (:func:`.pipeline.pipeline_step`), the optimizer and amp
steps of its stage holding the most parameters, and terms that are never negative (NCCL
contention, bucket copies, the exposed gradient exchange). The first two, a lower bound of the
step, come for every split from prefix sums in one numpy pass (the tail once per such stage);
the splits are then priced in full from the smallest bound up, until the bound reaches the
fastest split that fits in memory: no split left can be faster, so the choice is the exact
optimum of the full price over the pool (branch and bound). Past :data:`PRICING_BUDGET` full
prices the search stops and reports how far above the optimum its choice may be. The pool is every contiguous split
while there are at most :data:`EXHAUSTIVE_SPLITS`; above that (``pp`` large on a long chain) it
is the reference candidates and every split one cut of them moves by up to
:data:`LOCAL_MOVE_LINKS` links, the exact optimum of that pool only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from ..cost.collectives import link_params, p2p_expr
from .amp_step import stage_amp_step
from .context import Context
from .dimension import optimizer_step_s, step_tail_terms
from .pipeline import cut_across_nodes, stage_ranges
from .spatial import ChainLayers
from .spec import Strategy

__all__ = [
    "EXHAUSTIVE_SPLITS", "LOCAL_MOVE_LINKS", "PRICING_BUDGET",
    "split_pool", "fill_drain_s", "tail_s", "cheapest_split",
]

#: At most this many contiguous splits are all searched (``C(links - 1, pp - 1)``): every
#: ``pp=2`` split, ``pp=3`` up to 65 links, ``pp=4`` up to 25, ``pp=8`` up to 14.
EXHAUSTIVE_SPLITS = 2048
#: Above it, each cut of a reference candidate moves by up to this many links, one at a time.
LOCAL_MOVE_LINKS = 2
#: At most this many splits are priced in full; past it the choice is the best of those and
#: ``details["balance_search"]["gap_bound_s"]`` says how far above the optimum it may be.
PRICING_BUDGET = 512
_ALL: dict[tuple[int, int], np.ndarray] = {}


def split_pool(n_links: int, stages: int, reference: Sequence[tuple[int, ...]]) -> np.ndarray:
    """Stage bounds (one row per split, ``stages + 1`` columns, links) of the splits searched."""
    if math.comb(n_links - 1, stages - 1) <= EXHAUSTIVE_SPLITS:
        key = (n_links, stages)
        if key not in _ALL:
            cuts = np.array(list(itertools.combinations(range(1, n_links), stages - 1)), dtype=int)
            cuts = cuts.reshape(-1, stages - 1)
            ends = np.full((len(cuts), 1), n_links)
            _ALL[key] = np.hstack([np.zeros((len(cuts), 1), dtype=int), cuts, ends])
        return _ALL[key]
    rows: dict[tuple[int, ...], None] = {}
    for bal in reference:
        bounds = tuple(int(x) for x in np.concatenate([[0], np.cumsum(bal)]))
        rows[bounds] = None
        for i, d in itertools.product(range(1, stages), range(-LOCAL_MOVE_LINKS, LOCAL_MOVE_LINKS + 1)):
            moved = bounds[:i] + (bounds[i] + d,) + bounds[i + 1 :]
            if d and moved[i - 1] < moved[i] < moved[i + 1]:
                rows[moved] = None
    return np.array(list(rows), dtype=int)


def fill_drain_s(ctx: Context, s: Strategy, layers: ChainLayers, bounds: np.ndarray) -> np.ndarray:
    """Each split's fill-drain step (:func:`.pipeline.pipeline_timing`'s ``total_s``), vectorized."""
    n = len(ctx.net.links)
    cf = np.concatenate([[0.0], np.cumsum(ctx.link_sum(layers.fwd))])
    cb = np.concatenate([[0.0], np.cumsum(ctx.link_sum(layers.bwd))])
    st_f = cf[bounds[:, 1:]] - cf[bounds[:, :-1]]
    st_b = cb[bounds[:, 1:]] - cb[bounds[:, :-1]]
    lp, g = link_params(ctx.hw), ctx.hw.gpus_per_node
    held = np.array([layers.held(k) for k in range(n - 1)])
    n_bytes = held * np.asarray(ctx.cut_elems[: n - 1], dtype=float) * ctx.elem_bytes
    send = {across: np.where(n_bytes > 0, p2p_expr(n_bytes, lp, across), 0.0)
            for across in {cut_across_nodes(i, s, g) for i in range(s.pp - 1)}}
    send_f, send_b = np.zeros_like(st_f), np.zeros_like(st_b)
    for i in range(s.pp - 1):
        cut = send[cut_across_nodes(i, s, g)][bounds[:, i + 1] - 1]
        send_f[:, i] = cut
        send_b[:, i + 1] = cut
    f, b = st_f + send_f, st_b + send_b
    rb = b + st_f if s.recompute else b
    m = s.mb
    total: np.ndarray = f.sum(axis=1) + (m - 1) * f.max(axis=1) + b.sum(axis=1) + (m - 1) * rb.max(axis=1)
    return total


def tail_s(ctx: Context, s: Strategy, bounds: np.ndarray) -> tuple[np.ndarray, Callable[[int], float]]:
    """Each split's ``amp_casts`` and ``optimizer_step`` terms, those of its stage holding the
    most parameters (the first of equals): (a lower bound for every split at once, the optimizer's
    update without mixed precision's share, never negative; split ``j``'s exact terms, one
    :func:`.dimension.step_tail_terms` per such stage)."""
    link_p = ctx.link_sum(ctx.cc.params)
    cp = np.concatenate([[0.0], np.cumsum(link_p)])
    stage_p = cp[bounds[:, 1:]] - cp[bounds[:, :-1]]
    heavy = np.argmax(stage_p, axis=1)
    rows = np.arange(len(bounds))
    starts, stops = bounds[rows, heavy], bounds[rows, heavy + 1]
    base: np.ndarray = optimizer_step_s(stage_p.max(axis=1), ctx.optimizer, ctx.values, None, s.mb, ctx.param_bytes)
    seen: dict[tuple[int, int], float] = {}

    def exact(j: int) -> float:
        a, b = int(starts[j]), int(stops[j])
        if (a, b) not in seen:
            amp = stage_amp_step(ctx, stage_ranges(ctx, [a, b]))
            seen[(a, b)] = float(sum(step_tail_terms(float(link_p[a:b].sum()), ctx.optimizer, ctx.values, amp, s.mb,
                                                     ctx.param_bytes).values()))
        return seen[(a, b)]

    return base, exact


def cheapest_split(
    lower_s: np.ndarray, fits: np.ndarray, step_s: Callable[[int], float], budget: int = PRICING_BUDGET,
    tighter_s: Callable[[int], float] | None = None,
) -> tuple[int, int, float]:
    """(row, splits priced in full, seconds the optimum may be below the row's step) of the
    fastest split that fits (the fastest of all if none does), each split's step at least
    ``lower_s`` and at least ``tighter_s(row)``, itself at least ``lower_s``: the rows are taken
    from the smallest bound up, priced where the tighter bound is below the best step found,
    until the bound passes that step (the optimum: 0 s) or ``budget`` rows are priced (then the
    best step less the smallest bound left over)."""
    order = np.argsort(lower_s, kind="stable")
    if fits.any():
        order = order[fits[order]]
    slack = 1.0 + 1e-12  # the bound's float sums against the full pricing's
    best, best_s, priced = -1, math.inf, 0
    for j in order.tolist():
        if lower_s[j] > best_s * slack:
            return best, priced, 0.0
        if tighter_s is not None and tighter_s(j) > best_s * slack:
            continue
        if priced == budget:
            return best, priced, float(best_s - lower_s[j])
        priced += 1
        t = step_s(j)
        if t < best_s:
            best, best_s = j, t
    return best, priced, 0.0

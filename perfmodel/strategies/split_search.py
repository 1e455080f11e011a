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
from .context import Context, weight_group
from .data import BUCKET_BYTES, bucket_reducer, buckets, copies_s, param_tensors
from .dimension import optimizer_step_s, step_tail_terms
from .pipeline import cut_across_nodes, stage_ranges
from .spatial import ChainLayers
from .spec import Strategy

__all__ = [
    "EXHAUSTIVE_SPLITS", "LOCAL_MOVE_LINKS", "PRICING_BUDGET",
    "split_pool", "fill_drain_s", "tail_s", "last_bucket_bytes", "exchange_floor_s",
    "cheapest_split",
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


def last_bucket_bytes(grad_bytes: np.ndarray, stops: np.ndarray, bucket_bytes: float = BUCKET_BYTES) -> np.ndarray:
    """The bytes of the last bucket DDP fills (:func:`.data.buckets`, last layer first) from the
    gradients of layers ``[0, stop)``, for every ``stop`` at once (0: no gradient).

    A bucket closes at the first layer, walking down, whose gradient brings it to
    ``bucket_bytes``: from ``hi`` it holds ``[k, hi)`` for the largest ``k`` with
    ``prefix[hi] - prefix[k] >= bucket_bytes``, one ``searchsorted`` per bucket for all stops;
    what is left below the last full one is the last bucket. The gradient bytes must be
    integers below 2**53 (then every sum is exact, and the same as the walk's running sum);
    the caller checks."""
    prefix = np.concatenate([[0.0], np.cumsum(grad_bytes)])
    hi = np.asarray(stops, dtype=np.int64).copy()
    last = np.zeros(len(hi))
    active = prefix[hi] >= bucket_bytes
    while active.any():
        k = np.maximum(np.searchsorted(prefix, prefix[hi] - bucket_bytes, side="right") - 1, 0)
        last = np.where(active, prefix[hi] - prefix[k], last)
        hi = np.where(active, k, hi)
        active = active & (prefix[hi] >= bucket_bytes)
    rest = prefix[hi]
    out: np.ndarray = np.where(rest > 0, rest, last)
    return out


def exchange_floor_s(ctx: Context, s: Strategy, bounds: np.ndarray) -> Callable[[int], float]:
    """A lower bound of split ``j``'s gradient exchange terms (``nccl_contention``,
    ``gradient_bucket_copies``, ``gradient_exchange_exposed``, :func:`.data.gradient_exchange`)
    from its stage 0 alone: 0 without DDP's exchange.

    Stage 0 ends the closed form's step (its last backward ends at the fill-drain ``total``).
    Its last bucket, the rest of its first layers' gradients (:func:`last_bucket_bytes`), is
    ready no earlier, so its exchange ends at least that allreduce (``c_last``) later; its copy
    in delays its backward and its copy back follows: the exposed term reaches ``total +
    c_last + 2 copy_0`` over the other terms, while the copies alone are at least ``2 copy_0``
    (stage 0's in, counted up to the drain's bottleneck, and back). The bucket sizes come for
    every stage-0 end at once; the allreduce is priced, on the function the exchange calls, for
    the splits the search visits only (memoised per stage-0 end)."""
    if s.dp * s.sp_degree == 1 or s.is_ps or s.comm == "dataparallel":
        return lambda j: 0.0
    reduce, _ = bucket_reducer(ctx.hw, weight_group(s, ctx.hw.gpus_per_node), s.comm)
    grad = ctx.cc.params * ctx.param_bytes
    tensors, links = param_tensors(ctx.net), ctx.net.links
    stops = np.array([lk.stop for lk in links], dtype=np.int64)  # stage 0 of end e: layers [0, stops[e - 1])
    exact = bool(np.all(grad == np.round(grad))) and float(grad.sum()) < 2.0**53 and links[0].start == 0
    sizes = last_bucket_bytes(grad, stops) if exact else None
    ct, cp = np.concatenate([[0.0], np.cumsum(tensors)]), np.concatenate([[0.0], np.cumsum(ctx.cc.params)])
    seen: dict[int, float] = {}

    def floor(j: int) -> float:
        end = int(bounds[j, 1])
        if end not in seen:
            a, b = int(links[0].start), int(stops[end - 1])
            if sizes is not None:
                size = float(sizes[end - 1])
            else:  # the walk itself
                filled = buckets(grad[a:b][::-1])
                size = filled[-1][1] if filled else 0.0
            copy0 = float(copies_s(float(ct[b] - ct[a]), float(cp[b] - cp[a]), ctx.values, ctx.param_bytes)) / 2
            seen[end] = (float(reduce(size)) if size > 0 else 0.0) + 2 * copy0
        return seen[end]

    return floor


def cheapest_split(
    lower_s: np.ndarray, fits: np.ndarray, step_s: Callable[[int], float], budget: int = PRICING_BUDGET,
    tighter_s: Sequence[Callable[[int], float]] = (),
) -> tuple[int, int, float]:
    """(row, splits priced in full, seconds the optimum may be below the row's step) of the
    fastest split that fits (the fastest of all if none does), each split's step at least
    ``lower_s`` and at least each ``tighter_s[k](row)``, themselves at least ``lower_s`` (cheapest
    first): the rows are taken from the smallest bound up, priced where no tighter bound is above
    the best step found (each computed only while the ones before it are not), until the bound
    passes that step (the optimum: 0 s) or ``budget`` rows are priced (then the best step less
    the smallest bound left over)."""
    order = np.argsort(lower_s, kind="stable")
    if fits.any():
        order = order[fits[order]]
    slack = 1.0 + 1e-12  # the bound's float sums against the full pricing's
    best, best_s, priced = -1, math.inf, 0
    for j in order.tolist():
        if lower_s[j] > best_s * slack:
            return best, priced, 0.0
        if any(bound(j) > best_s * slack for bound in tighter_s):
            continue
        if priced == budget:
            return best, priced, float(best_s - lower_s[j])
        priced += 1
        t = step_s(j)
        if t < best_s:
            best, best_s = j, t
    return best, priced, 0.0

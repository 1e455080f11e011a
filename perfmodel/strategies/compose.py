"""A plan's dimensions composed into the step's named terms (:func:`price`).

A plan is priced by the module of its outermost kind: hypergraph model parallelism
(:mod:`.model_parallel`), filter/channel splits (:mod:`.channels`, with data parallelism
across replicas), or a plan over the layer chain (:func:`price_chain`), where the dimensions
compose as follows: the spatial dimension (:mod:`.spatial`) gives each
layer's seconds and saved bytes on one GPU of a spatial group (or of whole samples); the
pipeline dimension (:mod:`.pipeline`) cuts the chain into stages and times the micro-batches
through them; the data dimension (:mod:`.data`) adds the gradient exchange among the GPUs
sharing each weight (or :mod:`.parameter_server`'s); every plan ends with the optimizer step.
The terms are built by :func:`.chain_terms.chain_terms`, on numbers here and on symbols in
``explain``. Each term of the breakdown is computed once; the step is their sum (:class:`.Priced`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import numpy as np

from ..cost.collectives import link_params
from ..errors import BatchSplitError, DataError, StrategyError
from ..limits import MAX_BATCH, shown
from .amp_step import stage_amp_step
from .chain_terms import ChainStep, chain_terms
from .channels import price_channel_split
from .context import Context, split_batch, transient_bytes
from .data import BUCKET_BYTES, Drain, drain_stage, gradient_exchange, stage_backward_s
from .dataparallel import check_dataparallel
from .dimension import Valuation, memory_parts, step_tail_terms
from .model_parallel import price_model_parallel
from .parameter_server import parameter_server_exchange
from .pipeline import StageSplit, stage_candidates, stage_split
from .priced import Priced
from .spatial import ChainLayers, sample_layers, spatial_layers
from .spec import Strategy
from .split_search import EXHAUSTIVE_SPLITS, cheapest_split, exchange_floor_s, fill_drain_s, split_pool, tail_s

__all__ = ["price", "price_chain", "tiles_and_fits", "chain_memory", "split_memory_bytes", "memory_ceiling_bytes",
           "numeric_step"]

T = TypeVar("T")


def price(ctx: Context, s: Strategy, global_batch: int) -> Priced:
    """Step terms, memory and details of plan ``s`` at ``global_batch`` (no 1-GPU baseline),
    memoised per context (:attr:`~.context.Context.priced`, at most :data:`PRICED_MEMO` plans)."""
    return _memoised(ctx.priced, (s, int(global_batch)), lambda: _price(ctx, s, global_batch))


def _memoised(memo: dict[Any, T], key: Any, compute: Callable[[], T]) -> T:
    """``memo[key]``, computed once (a full memo is emptied first: at most :data:`PRICED_MEMO` entries)."""
    hit = memo.get(key)
    if hit is None:
        hit = compute()
        if len(memo) >= PRICED_MEMO:
            memo.clear()
        memo[key] = hit
    return hit


#: Plans one context keeps priced (:func:`price`): a scale sweep to 1024 GPUs prices about 3,000.
PRICED_MEMO = 8192


def _price(ctx: Context, s: Strategy, global_batch: int) -> Priced:
    """:func:`price` without the memo."""
    _check_plan(ctx, s, global_batch)
    if s.mp > 1:
        return _finite(ctx, s, price_model_parallel(ctx, s, global_batch))
    if s.filter > 1 or s.channel > 1:
        return _finite(ctx, s, price_channel_split(ctx, s, global_batch))
    return _finite(ctx, s, price_chain(ctx, s, global_batch))


def _check_plan(ctx: Context, s: Strategy, global_batch: int) -> None:
    """Raise the error that keeps ``s`` off ``ctx``'s network and hardware at ``global_batch``."""
    net, hw = ctx.net, ctx.hw
    n_links = len(net.links)
    if global_batch > MAX_BATCH:
        raise BatchSplitError(
            f"global batch {shown(global_batch)} is too large (valid: 1 to {MAX_BATCH:,} samples per step)"
        )
    if s.gpus > hw.max_gpus:
        raise StrategyError(
            f"{s.gpus} GPUs exceed {hw.name}'s {hw.max_gpus} ({hw.gpus_per_node} per node x {hw.max_nodes} nodes)"
        )
    if s.pp > n_links:
        raise StrategyError(f"pp={s.pp} stages but {net.name} has only {n_links} chain links (valid: pp <= {n_links})")
    if s.comm == "dataparallel":
        check_dataparallel(s, hw.gpus_per_node)


def _finite(ctx: Context, s: Strategy, priced: Priced) -> Priced:
    """``priced`` if its step and memory are finite numbers; else an error naming the cause, never a result."""
    bad = [f"{k} {v!r}" for k, v in {**priced.breakdown, **priced.memory}.items() if not math.isfinite(v)]
    if bad or not math.isfinite(priced.time_s):
        raise DataError(
            f"{s.spec()} on {ctx.hw.name}: the step time ({priced.time_s!r} s) or memory is not a finite "
            f"number ({', '.join(bad[:4]) or 'the total'}); a profile value outside the ranges of "
            "hardware_profiles/template.toml?"
        )
    return priced


class _ChainSetup(NamedTuple):
    """A chain plan's batch and layers: samples per replica, the largest micro-batch, the layers
    at the mean micro-batch (time) and at the largest (memory), the transient bytes."""

    per_replica: int
    m: int
    layers: ChainLayers
    mem_layers: ChainLayers
    workspace: float


def _chain_setup(ctx: Context, s: Strategy, global_batch: int) -> _ChainSetup:
    """:class:`_ChainSetup` of chain plan ``s`` at ``global_batch``."""
    if s.is_ps and (s.pp > 1 or s.sp_degree > 1):
        raise StrategyError("parameter servers (comm=ps-*) are modelled for data parallelism only (use dp=N)")
    per_replica, m = split_batch(global_batch, s)
    # micro-batches of floor or ceil(per_replica / mb) samples: time at their mean (exactly
    # per_replica samples per step), memory at the largest
    m_t = per_replica / s.mb
    if s.sp_degree > 1:
        layers = spatial_layers(ctx, s, m_t)
        mem_layers = layers if m_t == m else spatial_layers(ctx, s, m)
    else:
        layers = sample_layers(ctx, m_t)
        mem_layers = layers if m_t == m else sample_layers(ctx, m)
    workspace = transient_bytes(ctx, m, s.sp if s.sp_degree > 1 else (1, 1, 1)) + ctx.hw.framework_reserve_bytes
    return _ChainSetup(per_replica, m, layers, mem_layers, workspace)


def price_chain(ctx: Context, s: Strategy, global_batch: int) -> Priced:
    """Step terms, memory and details of a chain plan ``s`` at ``global_batch``."""
    net = ctx.net
    c = _chain_setup(ctx, s, global_batch)
    layers = c.layers
    details: dict[str, Any] = {"micro_batch": c.m, "samples_per_replica": c.per_replica}
    if s.sp_degree > 1:
        details["spatial_links"] = [lk.name for lk, t in zip(net.links, layers.spatial_links, strict=True) if t]
        details["sample_links"] = [lk.name for lk, t in zip(net.links, layers.spatial_links, strict=True) if not t]
    if s.pp > 1:
        split = _best_split(ctx, s, c, details)
        bounds, crit = split.bounds, split.timing.critical_stage
        details["critical_stage"] = crit
    else:
        bounds, crit = np.array([0, len(net.links)]), None
    step = chain_terms(ctx, s, numeric_step(ctx, s, layers), bounds, crit)
    if s.is_ps:
        body_s, exposed_s = float(step.body_s), float(step.terms["gradient_exchange_exposed"])
        rest_s = sum(float(v) for v in step.terms.values()) - body_s - exposed_s
        details["parameter_server"] = parameter_server_exchange(ctx, s, body_s, rest_s)
    details.update(step.details)
    details["bucket_bytes"] = BUCKET_BYTES
    details["sp_group_in_node"] = layers.in_node
    memory = chain_memory(ctx, s, c.mem_layers, bounds, c.per_replica, c.workspace)
    return Priced.of(step.terms, memory, details)


def tiles_and_fits(ctx: Context, s: Strategy, global_batch: int) -> tuple[bool, bool]:
    """(whether chain plan ``s`` tiles any link, whether it fits in a GPU's memory) as
    :func:`price` would report them (``spatial_links`` not empty; the memory within the
    device's), without a pipeline's split search: the search takes a split that fits where one
    does, so the plan fits if any split of its pool does. Raises what :func:`price` raises for
    the plan's shape and batch. Memoised per context like :func:`price`."""
    return _memoised(ctx.tiled, (s, int(global_batch)), lambda: _tiles_and_fits(ctx, s, global_batch))


def _tiles_and_fits(ctx: Context, s: Strategy, global_batch: int) -> tuple[bool, bool]:
    """:func:`tiles_and_fits` without the memo."""
    _check_plan(ctx, s, global_batch)
    c = _chain_setup(ctx, s, global_batch)
    cap = ctx.hw.device.memory_bytes
    if s.pp > 1:
        _check_balance(ctx, s)
        # every split fits under the ceiling (with room for the sums' rounding): no pool needed
        fits = memory_ceiling_bytes(ctx, s, c.mem_layers, c.per_replica, c.workspace) * (1 + 1e-9) <= cap
        if not fits:
            pool = _split_pool(ctx, s, c)[0]
            fits = bool((split_memory_bytes(ctx, s, c.mem_layers, pool, c.per_replica, c.workspace) <= cap).any())
    else:
        whole = np.array([0, len(ctx.net.links)])
        fits = sum(chain_memory(ctx, s, c.mem_layers, whole, c.per_replica, c.workspace).values()) <= cap
    return any(c.layers.spatial_links), fits


def numeric_step(ctx: Context, s: Strategy, layers: ChainLayers) -> ChainStep:
    """A micro-batch of ``layers`` at the profile's numbers (:func:`.chain_terms.chain_terms`'s input)."""
    val = Valuation(ctx.values, link_params(ctx.hw), layers.m, s.mb)
    return ChainStep(layers.compute_fwd, layers.compute_bwd, layers.fwd, layers.bwd, layers.exchanges,
                     layers.spatial_links, layers.p, val)


def _largest_stage_params(ctx: Context, bounds: np.ndarray) -> float:
    link_params = ctx.link_sum(ctx.cc.params)
    return max(float(link_params[bounds[i] : bounds[i + 1]].sum()) for i in range(len(bounds) - 1))


def _split_pool(ctx: Context, s: Strategy, c: _ChainSetup) -> tuple[np.ndarray, list[tuple[int, ...]], bool]:
    """(the stage bounds searched, one row per split; the reference splits seeding a pool that is
    not every split; whether it is every split): ``balance=``'s one split where it pins it."""
    _check_balance(ctx, s)
    n_links = len(ctx.net.links)
    if s.balance:
        return np.concatenate([[0], np.cumsum(s.balance)])[None, :], [], True
    exhaustive = math.comb(n_links - 1, s.pp - 1) <= EXHAUSTIVE_SPLITS
    candidates = [] if exhaustive else stage_candidates(ctx, s, c.layers)
    return split_pool(n_links, s.pp, candidates), candidates, exhaustive


def _check_balance(ctx: Context, s: Strategy) -> None:
    """Raise if ``balance=`` does not cover the chain's links."""
    n_links = len(ctx.net.links)
    if s.balance and sum(s.balance) != n_links:
        k = len(s.balance)
        even = ":".join(str(n_links // k + (i < n_links % k)) for i in range(k))
        raise StrategyError(f"balance {':'.join(map(str, s.balance))} covers {sum(s.balance)} links, not {n_links} "
                            f"(valid: {k} positive counts summing to {n_links}, e.g. balance={even})")


def _best_split(ctx: Context, s: Strategy, c: _ChainSetup, details: dict[str, Any]) -> StageSplit:
    """The fastest split that fits in memory (the fastest if none fits; :mod:`.split_search`);
    ``balance=`` pins it."""
    layers = c.layers
    pool, candidates, exhaustive = _split_pool(ctx, s, c)
    if s.balance:
        best = stage_split(ctx, s, layers, s.balance)
    else:
        splits: dict[int, StageSplit] = {}

        def split(j: int) -> StageSplit:
            if j not in splits:
                splits[j] = stage_split(ctx, s, layers, tuple(int(x) for x in np.diff(pool[j])))
            return splits[j]

        fits = split_memory_bytes(ctx, s, c.mem_layers, pool, c.per_replica, c.workspace) <= ctx.hw.device.memory_bytes
        body = fill_drain_s(ctx, s, layers, pool)
        tail_base, tail = tail_s(ctx, s, pool)
        floor = exchange_floor_s(ctx, s, pool)
        memo: dict[tuple[int, int], Any] = {}  # the stages' exchanges, shared by the splits
        row, priced, gap = cheapest_split(body + tail_base, fits, lambda j: _split_step(ctx, s, layers, split(j), memo),
                                          tighter_s=(lambda j: float(body[j] + tail_base[j]) + floor(j),
                                                     lambda j: float(body[j]) + tail(j) + floor(j)))
        best = split(row)
        if not exhaustive:  # the pool's seeds
            details["balance_candidates"] = [list(b) for b in candidates]
        details["balance_search"] = {"splits": len(pool), "priced_in_full": priced, "exhaustive": exhaustive,
                                     "gap_bound_s": gap}
    link_params = ctx.link_sum(ctx.cc.params)
    details.update(
        stages=[
            {
                "links": [ctx.net.links[j].name for j in range(best.bounds[i], best.bounds[i + 1])],
                "forward_s": float(best.fwd_s[i]),
                "backward_s": float(best.bwd_s[i]),
                "send_forward_s": float(best.send_fwd_s[i]),
                "send_backward_s": float(best.send_bwd_s[i]),
                "params": int(link_params[best.bounds[i] : best.bounds[i + 1]].sum()),
            }
            for i in range(s.pp)
        ],
        balance=list(best.balance),
        schedule=s.schedule,
    )
    return best


def _split_step(ctx: Context, s: Strategy, layers: ChainLayers, split: StageSplit,
                memo: dict[tuple[int, int], Any] | None = None) -> float:
    """Step seconds of ``split``: its fill-drain time, the gradient exchange's terms (each stage's
    exchange kept in ``memo`` for the other splits of the search), the tail steps."""
    t = split.timing
    rb = stage_backward_s(split.fwd_s.tolist(), split.bwd_s.tolist(), split.send_fwd_s.tolist(),
                          split.send_bwd_s.tolist(), s.recompute)
    x = gradient_exchange(ctx, s, layers.bwd, split.layer_ranges(ctx), t.last_bwd_end_s, t.total_s,
                          Drain(rb, s.mb, drain_stage(rb, s.mb)), memo=memo)
    params = _largest_stage_params(ctx, split.bounds)
    tail = step_tail_terms(params, ctx.optimizer, ctx.values, stage_amp_step(ctx, split.layer_ranges(ctx)), s.mb,
                           ctx.param_bytes)
    return float(t.total_s + x.contention + x.copies + x.exposed + sum(tail.values()))


def chain_memory(
    ctx: Context, s: Strategy, layers: ChainLayers, bounds: np.ndarray, per_replica: int, workspace: float
) -> dict[str, float]:
    """Memory of the busiest GPU: every stage's parts added up, the largest stage's returned
    (the input batch sits on the first stage's GPUs only)."""
    net, e = ctx.net, ctx.elem_bytes
    link_saved = ctx.link_sum(layers.saved)
    link_params = ctx.link_sum(ctx.cc.params)
    n_links = len(net.links)
    link_in = np.array([ctx.cut_elems[i - 1] if i > 0 else float(np.prod(net.input_shape)) for i in range(n_links)])
    if s.pp > 1 and s.schedule == "gpipe":
        inputs_held = layers.held(0) * per_replica / layers.m  # the replica's batch, cut into micro-batches there
    elif s.pp > 1:
        inputs_held = layers.held(0) * min(s.pp, s.mb)  # 1F1B: the first stage's micro-batches in flight
    else:
        inputs_held = layers.held(0)  # one micro-batch at a time
    exchanged = s.dp * s.sp_degree > 1 and s.comm in ("ring", "tree", "hierarchical")
    stages = []
    for i in range(len(bounds) - 1):
        a, b = int(bounds[i]), int(bounds[i + 1])
        stage_saved = float(link_saved[a:b].sum())
        # a stage's input under recomputation (the first stage's is the input batch, counted below)
        stage_in = layers.held(a) * link_in[a] * e if a > 0 else 0.0
        in_flight = s.mb if (s.pp > 1 and s.schedule == "gpipe") else (min(s.pp - i, s.mb) if s.pp > 1 else 1)
        if s.recompute:
            acts = in_flight * stage_in + (float(link_saved[a:b].max()) if s.pp == 1 else stage_saved)
        else:
            acts = in_flight * stage_saved
        inputs = ctx.input_bytes(inputs_held) if i == 0 else 0.0
        stages.append(memory_parts(float(link_params[a:b].sum()), ctx.precision, ctx.optimizer, exchanged, inputs,
                                   acts, workspace, ctx.amp_runtime))
    return max(stages, key=lambda d: sum(d.values()))


def split_memory_bytes(
    ctx: Context, s: Strategy, layers: ChainLayers, bounds: np.ndarray, per_replica: int, workspace: float
) -> np.ndarray:
    """:func:`chain_memory`'s total for each split (rows of stage ``bounds``, links) at once: its
    busiest stage's bytes, the parts being linear in the stage's weights and activations."""
    per_param, cs, cp, link_in, in_flight, first0 = _stage_memory_parts(ctx, s, layers, per_replica)
    lo, hi = bounds[:, :-1], bounds[:, 1:]
    saved = cs[hi] - cs[lo]
    acts = in_flight * link_in[lo] + saved if s.recompute else in_flight * saved
    first = np.zeros(s.pp)
    first[0] = first0
    total = (cp[hi] - cp[lo]) * per_param + first + acts + workspace
    out: np.ndarray = total.max(axis=1)
    return out


def memory_ceiling_bytes(ctx: Context, s: Strategy, layers: ChainLayers, per_replica: int, workspace: float) -> float:
    """Bytes no stage of any split of ``s`` exceeds (:func:`split_memory_bytes`): every link's
    weights and activations on one stage that also holds the first stage's input batch and
    micro-batches in flight (no stage holds more in flight than the first) and, under
    recomputation, the largest link input."""
    per_param, cs, cp, link_in, in_flight, first0 = _stage_memory_parts(ctx, s, layers, per_replica)
    acts = in_flight[0] * link_in.max() + cs[-1] if s.recompute else in_flight[0] * cs[-1]
    return float(cp[-1] * per_param + first0 + acts + workspace)


def _stage_memory_parts(
    ctx: Context, s: Strategy, layers: ChainLayers, per_replica: int
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """A stage's memory parts for :func:`split_memory_bytes`: (bytes per parameter; saved bytes
    and parameters summed over the links before each bound; each link's input bytes one GPU
    holds; micro-batches in flight per stage; the input batch's bytes on the first stage)."""
    e, net = ctx.elem_bytes, ctx.net
    exchanged = s.dp * s.sp_degree > 1 and s.comm in ("ring", "tree", "hierarchical")
    per_param = sum(memory_parts(1.0, ctx.precision, ctx.optimizer, exchanged, 0.0, 0.0, 0.0, ctx.amp_runtime).values())
    cs = np.concatenate([[0.0], np.cumsum(ctx.link_sum(layers.saved))])
    cp = np.concatenate([[0.0], np.cumsum(ctx.link_sum(ctx.cc.params))])
    link_in = np.array([layers.held(a) * ctx.cut_elems[a - 1] * e if a > 0 else 0.0 for a in range(len(net.links))])
    stage = np.arange(s.pp)
    in_flight = np.full(s.pp, s.mb) if s.schedule == "gpipe" else np.minimum(s.pp - stage, s.mb)
    inputs_held = layers.held(0) * (per_replica / layers.m if s.schedule == "gpipe" else min(s.pp, s.mb))
    return per_param, cs, cp, link_in, in_flight, ctx.input_bytes(inputs_held)

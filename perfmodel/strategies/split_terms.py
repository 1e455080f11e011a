"""A filter/channel split's step as named terms, built once on numbers (``predict``) or symbols (``explain``).

:func:`split_terms` prices the busiest GPU of a split group (its per-layer compute given),
the group's ring collectives (each pass's exchanges summed per collective, one latency per
tensor), the replicas' gradient allreduce overlapped with the last backward pass, and the
optimizer step; on a numeric :class:`~.dimension.Valuation` it gives
:func:`~.channels.price_channel_split`'s breakdown, on a symbolic one ``explain``'s formula.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..cost.collectives import Group, LinkParams, collective_expr
from ..cost.compute import ComputeValues
from ..cost.formulas import Num, smax, ssum
from .amp_step import amp_step
from .chain_terms import bucket_segments
from .context import Context, weight_group
from .data import bucket_reducer, shard_copies_s, stage_exchange
from .dimension import Valuation, step_tail_terms
from .spatial import halo_exchange_s, spatial_tier
from .spec import Strategy

__all__ = ["BREAKDOWN_KEYS", "OPS", "Exchange", "exchange_s", "replica_exchange", "split_terms"]

#: Breakdown keys of the layer-parallel exchanges, per split kind: (forward, backward).
BREAKDOWN_KEYS = {
    "filter": ("filter_allgather", "filter_reduce_scatter"),
    "channel": ("channel_allreduce", "channel_allgather"),
}

#: Short names of the split collectives in count names, and their words.
OPS = {
    "allgather": ("ag", "all-gather", "all-gathered"),
    "reduce_scatter": ("rs", "reduce-scatter", "reduce-scattered"),
    "allreduce": ("ar", "allreduce", "all-reduced"),
}


@dataclass(frozen=True)
class Exchange:
    """One collective inside the split group, per micro-batch.

    ``layer`` is the index of the layer it is charged to (its time joins that layer's forward
    or backward), ``op`` one of ``allgather``, ``reduce_scatter``, ``allreduce``, and
    ``elems_per_sample`` the size of the whole (gathered / reduced) tensor per sample; or ``op``
    ``halo``: the busiest GPU receives ``elems_per_sample`` from its neighbours, point to point.
    """

    layer: int
    phase: str
    op: str
    tensor: str
    elems_per_sample: int


def exchange_s(op: str, n_bytes: Num, group: Group, lp: LinkParams) -> Num:
    """Seconds of one ring collective ``op`` of ``n_bytes`` (the gathered or reduced size) over
    the split ``group``, NCCL's base and per-hop latencies included
    (:func:`~perfmodel.cost.collectives.collective_expr`); numbers or symbols (``explain``)."""
    return collective_expr(op, n_bytes, group, lp)


def replica_exchange(
    ctx: Context,
    s: Strategy,
    n: int,
    params: np.ndarray,
    bwd: Sequence[Num] | np.ndarray,
    body: Num,
    lp: LinkParams | None = None,
    v: ComputeValues | None = None,
) -> tuple[Num, Num, Group, Num]:
    """(exposed seconds, total allreduce seconds, the replicas' group, contention seconds) of
    each shard's gradient allreduce across the dp replicas, bucketed and overlapped with the
    last micro-batch's backward (``bwd`` per layer, exchanges included; slowed by NCCL as
    :func:`.data.slowed_backward_s` says); the replicas are ``n`` ranks apart, as those of an
    ``n``-stage pipeline. On the profile's links and values, or on ``lp``'s and ``v``'s symbols."""
    dp_group = weight_group(Strategy(dp=s.dp, pp=n), ctx.hw.gpus_per_node)
    if s.dp <= 1:
        return 0.0, 0.0, dp_group, 0.0

    reduce, links = bucket_reducer(ctx.hw, dp_group, s.comm, lp)
    grad_bytes = params * ctx.param_bytes
    eta_mem = (ctx.values if v is None else v).eta_memory
    end, total_comm, slowed = stage_exchange(bwd, grad_bytes, reduce, body, s.overlap, dp_group, links, s.comm, eta_mem)
    return smax(0, end - body - slowed), total_comm, dp_group, slowed


def _plus(per_layer: Sequence[Num] | np.ndarray, extra: list[Num]) -> Sequence[Num] | np.ndarray:
    if isinstance(per_layer, np.ndarray):
        return np.asarray(per_layer + np.asarray(extra, dtype=float))
    return [x + y for x, y in zip(per_layer, extra, strict=True)]


def _collectives(
    exchanges: Sequence[Exchange], mode: str, n: int, group: Group, val: Valuation, n_layers: int
) -> tuple[dict[str, Num], list[Num]]:
    """(each pass's exchange seconds by breakdown key, per layer backward exchange seconds):
    the ``k`` tensors of one collective in one pass are one ring collective of their summed
    elements ``N`` plus ``k - 1`` more latencies (each NCCL's base latency and the ring's hops)."""
    terms: dict[str, Num] = {}
    layer_b: list[Num] = [0.0] * n_layers
    for x in exchanges:
        if x.phase == "bwd" and x.op in OPS:
            layer_b[x.layer] = layer_b[x.layer] + exchange_s(x.op, val.b * x.elems_per_sample * val.e, group, val.lp)
    for phase, key in zip(("fwd", "bwd"), BREAKDOWN_KEYS[mode], strict=True):
        parts: list[Num] = []
        for op, (short, _, done) in OPS.items():
            xs = [x for x in exchanges if x.phase == phase and x.op == op]
            if not xs:
                continue
            k = len(xs)
            pass_name = "forward" if phase == "fwd" else "backward"
            elems = val.count(f"N_{short}_{phase}", float(sum(x.elems_per_sample for x in xs)),
                              f"elements per sample of the {k} tensor{'s' * (k > 1)} {done} in the {pass_name} pass")
            parts.append(exchange_s(op, val.b * elems * val.e, group, val.lp)
                         + (k - 1) * exchange_s(op, 0, group, val.lp))
        terms[key] = val.M * ssum(parts) if parts else 0.0
    return terms, layer_b


def _halos(exchanges: Sequence[Exchange], n: int, gpus_per_node: int, val: Valuation,
           layer_b: list[Num]) -> Num | None:
    """Seconds of the halo exchanges (cross-channel windows at the GPUs' channel boundaries), both
    passes, priced as a spatial split's halos (:func:`~.spatial.halo_exchange_s`: one latency per
    exchange, each pass's elements over the group's link); each backward one added to its layer in
    ``layer_b``. None without halos."""
    xs = [x for x in exchanges if x.op == "halo"]
    if not xs:
        return None
    bw, alpha, _ = spatial_tier(n, gpus_per_node, val.lp)
    for x in xs:
        if x.phase == "bwd":
            layer_b[x.layer] = layer_b[x.layer] + alpha + val.b * x.elems_per_sample * val.e / bw
    fwd = [x for x in xs if x.phase == "fwd"]
    elems = val.count("N_halo", float(sum(x.elems_per_sample for x in fwd)),
                      f"channel halo elements per sample the busiest GPU receives for the {len(fwd)} "
                      "cross-channel window layer(s), each pass")
    return val.M * halo_exchange_s(elems, len(xs), val.b, val.e, bw, alpha)


def split_terms(
    ctx: Context, s: Strategy, mode: str, n: int, exchanges: Sequence[Exchange],
    fwd: Sequence[Num] | np.ndarray, bwd: Sequence[Num] | np.ndarray, params: np.ndarray, val: Valuation,
) -> tuple[dict[str, Num], Num, Group]:
    """(terms, total gradient allreduce seconds, the replicas' group) of a ``mode=n`` split
    whose busiest GPU computes ``fwd``/``bwd`` per layer and holds ``params`` per layer.

    The ``n`` GPUs of a split group are consecutive ranks (placed as ``weight_group`` places
    ``n`` replicas of a one-GPU plan); the exchanges are on the critical path, and the
    replicas' gradient exchange overlaps the last backward pass, exchanges included.
    """
    group = weight_group(Strategy(dp=n), ctx.hw.gpus_per_node)
    comm, layer_b = _collectives(exchanges, mode, n, group, val, len(params))
    terms: dict[str, Num] = {"compute": val.M * (ssum(fwd) + ssum(bwd)), **comm}
    halo = _halos(exchanges, n, ctx.hw.gpus_per_node, val, layer_b)
    if halo is not None:
        terms["halo_exchange"] = halo
    body = ssum(list(terms.values()))
    grads = _plus(bwd, layer_b)
    if s.dp > 1 and val.symbolic:  # name the parts the exchange's terms share (explain)
        body = val.define("E_body", body, "when the step's body ends: the terms above the gradient exchange's, s")
        grads = bucket_segments(grads, params * ctx.param_bytes, [(0, len(params))], val)
    exposed, total_comm, dp_group, slowed = replica_exchange(
        ctx, s, n, params, grads, body, val.lp if val.symbolic else None, val.v
    )
    if s.dp > 1:
        terms["gradient_bucket_copies"] = shard_copies_s(ctx.net, params, val.v, ctx.param_bytes)
        terms["nccl_contention"] = slowed
    terms["gradient_exchange_exposed"] = exposed
    terms.update(step_tail_terms(float(params.sum()), ctx.optimizer, val.v,
                                 amp_step(ctx.net, ctx.precision, params, ctx.amp_runtime), val.M, ctx.param_bytes))
    return terms, total_comm, dp_group

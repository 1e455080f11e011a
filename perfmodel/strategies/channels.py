"""Filter and channel parallelism, with data parallelism across replicas: time and memory."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..cost.collectives import link_params
from ..cost.compute import OUT_SHARE, layer_times
from ..cost.shares import TensorShares
from ..errors import StrategyError
from ..network.channel_split import LayerSplit, channel_split, halo_reads
from ..network.counts import CompiledCounts, saved_storages
from ..network.graph import Network
from ..network.layers import MATMUL_KINDS, Layer, numel
from .context import Context, split_batch, weight_group
from .data import BUCKET_BYTES
from .dimension import Valuation, memory_parts
from .priced import Priced
from .spec import Strategy
from .split_terms import BREAKDOWN_KEYS, Exchange, exchange_s, replica_exchange, split_terms

__all__ = [
    "Exchange",
    "SplitPlan",
    "split_plan",
    "split_counts",
    "price_channel_split",
    "exchange_s",
    "replica_exchange",
    "BREAKDOWN_KEYS",
]

@dataclass
class SplitPlan:
    """How each layer runs under a filter or channel split of degree ``n``.

    Per layer, the fraction of its input the busiest GPU reads (``f_in``), of its output it
    writes (``f_out``), of its FLOPs it does (``f_work``) and of its parameters it holds
    (``f_par``); which tensors are split (each GPU holds a contiguous block of
    ``ceil(C/n)`` of their ``C`` channels) and the fraction held of every tensor; the
    exchanges; the layers that run replicated on every GPU of the group; and ``shares``, the
    channels of every layer each GPU computes (:func:`~perfmodel.network.channel_split.channel_split`).
    """

    mode: str
    n: int
    f_in: np.ndarray
    f_out: np.ndarray
    f_work: np.ndarray
    f_par: np.ndarray
    held: dict[str, float]
    gathered: dict[str, int] = field(default_factory=dict)
    exchanges: list[Exchange] = field(default_factory=list)
    replicated: list[str] = field(default_factory=list)
    shares: tuple[LayerSplit, ...] = ()

    @property
    def tensor_shares(self) -> TensorShares:
        """Each layer's input and output shares on the busiest GPU (:mod:`perfmodel.cost.shares`)."""
        return TensorShares(self.f_in, self.f_out)


def _part(c: int, n: int) -> float:
    """The fraction of ``c`` channels the busiest of ``n`` GPUs holds: ``ceil(c/n)/c``."""
    return math.ceil(c / n) / c


def split_plan(net: Network, mode: str, n: int) -> SplitPlan:
    """Walk the layers in order, tracking which tensors are split, and list the exchanges.

    Which layers are split and the channels each GPU holds are
    :func:`~perfmodel.network.channel_split.channel_split`'s (the hypergraph partitioner's
    channel units are the same shares). Filter (ParaDL's filter parallelism): a convolution
    or linear layer needs its whole input; if the input is split it is all-gathered first
    (once per tensor, shared by all its readers) and the gradient of the gathered copy is
    reduce-scattered back in the backward pass. It computes ``ceil(F/n)`` of its ``F`` output
    channels, so its output is split. Channel: a convolution or linear layer reads its block
    of input channels (a free local slice of a replicated tensor) and produces a partial sum
    of its whole output, all-reduced to every GPU; in the backward pass each GPU computes the
    input gradient of its own channels, all-gathered where the tensor is replicated upstream.
    Other layers (batch norm, activations, pooling, add, concat, ...) act per channel: they
    run on the split tensor if any input is split (a replicated operand is sliced), else
    replicated; a grouped convolution whose groups split evenly over the GPUs (depthwise)
    runs on the split tensor too. A cross-channel LRN on a split tensor also exchanges the
    channels of its window that its neighbours hold, each pass (``halo`` exchanges); a
    classifier's softmax needs its whole row and is split like a convolution (gathered input).
    """
    if mode not in BREAKDOWN_KEYS:
        raise StrategyError(f"unknown layer split '{mode}' (valid: {', '.join(BREAKDOWN_KEYS)})")
    layers = net.layers
    ones = np.ones(len(layers))
    shares = channel_split(net, n, split_matmul=mode == "filter")
    plan = SplitPlan(mode, n, ones.copy(), ones.copy(), ones.copy(), ones.copy(), {"input": 1.0}, shares=shares)
    if n == 1:  # no split: plain data parallelism
        plan.held.update((layer.name, 1.0) for layer in layers)
        return plan
    walk = _Walk(net, plan)
    for i, (layer, share) in enumerate(zip(layers, shares, strict=True)):
        if share.role == "own":  # filter: ceil(F/n) output channels from the whole input
            walk.own(i, layer, share)
        elif layer.kind in MATMUL_KINDS and not share.split:  # channel: split by input channels
            walk.by_input(i, layer)
        else:
            walk.per_channel(i, layer, share)
    return plan


class _Walk:
    """:func:`split_plan`'s walk: which tensors are split so far, and the plan it fills."""

    def __init__(self, net: Network, plan: SplitPlan) -> None:
        self.net, self.plan, self.n = net, plan, plan.n
        self.split: dict[str, bool] = {"input": False}
        self.sliced_full: set[str] = set()  # replicated tensors whose gradient comes back split

    def _set(self, i: int, name: str, f_in: float, f_out: float, f: float, split: bool, held: float) -> None:
        p = self.plan
        p.f_in[i], p.f_out[i], p.f_work[i], p.f_par[i] = f_in, f_out, f, f
        self.split[name] = split
        p.held[name] = held

    def slice_back(self, t: str, i: int) -> None:
        """A layer read only its block of replicated tensor ``t``: its input gradient is split,
        and the replicated producers upstream need it whole (the network input needs none)."""
        if t != "input" and not self.split[t] and t not in self.sliced_full:
            self.sliced_full.add(t)
            self.plan.exchanges.append(Exchange(i, "bwd", "allgather", t, numel(self.net.shape_of(t))))

    def own(self, i: int, layer: Layer, share: LayerSplit) -> None:
        """Filter: the layer computes ``ceil(F/n)`` output channels from its whole input."""
        c_out, n, plan = layer.out_shape[0], self.n, self.plan
        if c_out < n:
            raise StrategyError(
                f"filter={n} exceeds the {c_out} output channels of {layer.name} "
                + (f"(valid: filter <= {c_out})" if c_out > 1 else f"(one channel: {self.net.name} cannot take a "
                                                                   "filter split; try channel= or another kind)")
            )
        f = share.largest_fraction
        for t in layer.inputs:
            if self.split[t] and t not in plan.gathered:
                plan.gathered[t] = i
                elems = numel(self.net.shape_of(t))
                plan.exchanges.append(Exchange(i, "fwd", "allgather", t, elems))
                plan.exchanges.append(Exchange(i, "bwd", "reduce_scatter", t, elems))
            elif not self.split[t] and t != "input" and t not in self.sliced_full:
                # a replicated input: every GPU adds a partial input gradient
                self.sliced_full.add(t)
                plan.exchanges.append(Exchange(i, "bwd", "allreduce", t, numel(self.net.shape_of(t))))
        self._set(i, layer.name, 1.0, f, f, True, f)

    def by_input(self, i: int, layer: Layer) -> None:
        """Channel: the layer reads its block of input channels and all-reduces its partial output."""
        c_in, n = layer.in_shape[0], self.n
        if c_in < n:
            if all(t == "input" for t in layer.inputs):
                # too few input channels to split (an RGB image over 4 GPUs): run it whole
                self.plan.replicated.append(layer.name)
                self.split[layer.name] = False
                self.plan.held[layer.name] = 1.0
                return
            raise StrategyError(
                f"channel={n} exceeds the {c_in} input channels of {layer.name} (valid: channel <= {c_in})"
            )
        f = _part(c_in, n)
        self.plan.exchanges.append(Exchange(i, "fwd", "allreduce", layer.name, numel(layer.out_shape)))
        for t in layer.inputs:
            self.slice_back(t, i)
        self._set(i, layer.name, f, 1.0, f, False, 1.0)

    def per_channel(self, i: int, layer: Layer, share: LayerSplit) -> None:
        """A layer acting per channel: on the split tensor if any input is split (or an evenly
        grouped convolution), else replicated."""
        if share.split:
            f = share.largest_fraction
            for t in layer.inputs:
                self.slice_back(t, i)
            if share.halo != (0, 0):  # a cross-channel window: its neighbours' edge channels
                self.halo(i, layer, share)
        else:
            f = 1.0
            self.plan.replicated.append(layer.name)
        self._set(i, layer.name, f, f, f, share.split, f)


    def halo(self, i: int, layer: Layer, share: LayerSplit) -> None:
        """A layer whose window spans neighbouring channels (LRN) on a split tensor: before its
        forward each GPU receives the channels of its window its neighbours hold, and before its
        backward the same channels of the gradient terms (a point-to-point halo exchange each
        pass, as a spatial split's; the busiest GPU's, the one receiving the most channels)."""
        per_channel = numel(layer.in_shape) // layer.in_shape[0]
        most = max(sum(hi - lo for lo, hi in halo_reads(share, j)) for j in range(len(share.parts)))
        if most:
            t = layer.inputs[0]
            self.plan.exchanges.append(Exchange(i, "fwd", "halo", t, most * per_channel))
            self.plan.exchanges.append(Exchange(i, "bwd", "halo", t, most * per_channel))


def _check(s: Strategy) -> tuple[str, int]:
    if s.filter > 1 and s.channel > 1:
        raise StrategyError(f"combine filter={s.filter} and channel={s.channel}: choose one")
    if s.sp_degree > 1 or s.pp > 1 or s.mp > 1:
        raise StrategyError(
            f"filter/channel splits combine only with dp (got {s.spec()}); "
            f"e.g. filter={s.filter * s.channel},dp={s.gpus // (s.filter * s.channel)}"
        )
    if s.is_ps:
        raise StrategyError(
            f"comm={s.comm}: filter/channel splits exchange gradients by allreduce "
            "(valid: ring, tree, hierarchical)"
        )
    if s.recompute:
        raise StrategyError("recompute=true is not modelled with filter/channel splits")
    return ("channel", s.channel) if s.channel > 1 else ("filter", s.filter)


def split_counts(cc: CompiledCounts, plan: SplitPlan, batch: float) -> dict[str, np.ndarray]:
    """Counts of the busiest GPU of a split for ``batch`` samples: each layer scaled by the
    fractions of it that GPU does (FLOPs) and keeps (outputs); the bytes its kernels move are
    priced per tensor from :attr:`SplitPlan.tensor_shares` (:mod:`perfmodel.cost.shares`), and
    saved activations, which depend on what every tensor's readers hold, are left to
    :func:`price_channel_split`."""
    ev = cc.evaluate(batch)
    scaled = {k: ev[k] * plan.f_work for k in ("fwd_flops", "fwd_matmul_flops", "bwd_input_flops", "bwd_weight_flops")}
    out = ev["out_elems"]
    scaled["out_elems"] = out * plan.f_out
    scaled["saved_extra_bytes"] = ev["saved_extra_bytes"] * plan.f_out
    scaled[OUT_SHARE] = plan.f_out  # what layer_times checks its shares against
    return scaled


def price_channel_split(ctx: Context, s: Strategy, global_batch: int) -> Priced:
    """Step time, breakdown and memory of a filter- or channel-split plan (``filter=N,dp=D``).

    The ``N`` GPUs of a split group are consecutive ranks (inside a node when ``N`` fits one)
    and all process their replica's whole micro-batch; the ``D`` replicas hold the same
    shards and all-reduce their gradients (ranks ``N`` apart). Per micro-batch of ``B``
    samples, with ``|y|`` a tensor's elements per sample and ``delta`` bytes per element,
    ParaDL's terms (Kahira et al., "An Oracle for Guiding Large-Scale Model/Hybrid Parallel
    Training of Convolutional Neural Networks", HPDC 2021; filter and channel terms of its
    oracle, paraDL-analysis ``core_analysis_filter`` / ``core_analysis_channel``):

    * filter, forward: all-gather of each split tensor a convolution or linear layer reads,
      ``(N-1)*(alpha + B*|y|*delta*beta/N)`` (ring); backward: the gradient of the gathered
      copy, a sum of the ``N`` GPUs' partial input gradients of which each needs its own
      channels: a reduce-scatter of the same cost. ParaDL prices a full allreduce here
      (twice the volume); the reduce-scatter is all the next layer back needs.
    * channel, forward: allreduce of each split layer's partial output,
      ``2*(N-1)*(alpha + B*|y|*delta*beta/N)``; backward: all-gather of its input gradient,
      ``(N-1)*(alpha + B*|x|*delta*beta/N)`` (ParaDL's ``3*(p-1)*(...)`` in total).
    * compute: each layer's counts scaled by the fraction of work the busiest GPU does
      (``ceil(F/N)/F`` of a filter-split layer, ``ceil(C/N)/C`` of a channel-split one, the
      held fraction for per-channel layers on split tensors, whole for replicated layers),
      priced by the roofline of :func:`perfmodel.cost.compute.layer_times` with each tensor's
      bytes at its own share (:attr:`SplitPlan.tensor_shares`, :mod:`perfmodel.cost.shares`).
    * memory: weights, gradients and optimizer state of the shard (ParaDL's ``W/p``);
      activations at the size held (split tensors ``ceil(C/N)/C``, replicated ones whole),
      plus in filter mode the gathered copy of every all-gathered tensor, which its readers
      keep for their weight gradient.

    The exchanges sit on the critical path (no overlap with compute); the gradient
    allreduce across replicas overlaps the last micro-batch's backward as in DDP.
    """
    mode, n = _check(s)
    per_replica, m = split_batch(global_batch, s)
    plan = split_plan(ctx.net, mode, n)
    scaled = _gpu_counts(ctx, plan, m)
    params = ctx.cc.params * plan.f_par
    m_t = per_replica / s.mb  # time at the mean micro-batch (memory at the largest, ``scaled``)
    lt = ctx.scaled(layer_times(replace(ctx.cc, params=params), ctx.hw, ctx.precision, m_t,
                                counts=scaled if m_t == m else _gpu_counts(ctx, plan, m_t),
                                cudnn_major=ctx.cudnn_major, memory_format=ctx.memory_format,
                                shares=plan.tensor_shares, fusion=ctx.fusion, autocast=ctx.autocast))
    val = Valuation(ctx.values, link_params(ctx.hw), m_t, s.mb)
    terms, total_comm, dp_group = split_terms(ctx, s, mode, n, plan.exchanges, lt.fwd, lt.bwd, params, val)
    split_group = weight_group(Strategy(dp=n), ctx.hw.gpus_per_node)
    e = ctx.elem_bytes
    details: dict[str, Any] = {
        "micro_batch": m,
        "samples_per_replica": per_replica,
        "layer_split": {"kind": mode, "gpus": n, "per_node": split_group.per_node, "nodes": split_group.nodes},
        "exchanged_tensors": len({x.tensor for x in plan.exchanges}),
        "exchange_bytes_per_step": float(s.mb * m * e * sum(x.elems_per_sample for x in plan.exchanges)),
        "replicated_layers": list(plan.replicated),
    }
    if s.dp > 1:
        details["gradient_allreduce_s"] = total_comm
        details["gradient_group"] = {"gpus": s.dp, "per_node": dp_group.per_node, "algorithm": s.comm}
    params_gpu = float(params.sum())
    # memory of the busiest GPU; the gradients of the largest layer's output and input live
    # during its backward, as in the chain pricing
    acts = float((scaled["saved_elems"] * e + scaled["saved_extra_bytes"]).sum())
    transient = float(2 * scaled["out_elems"].max() * e)
    # every GPU of a split group reads the replica's whole micro-batch
    memory = memory_parts(
        params_gpu, ctx.precision, ctx.optimizer, s.dp > 1, ctx.input_bytes(m), acts,
        transient + ctx.hw.framework_reserve_bytes, ctx.amp_runtime,
    )
    details["bucket_bytes"] = BUCKET_BYTES
    details["params_per_gpu"] = params_gpu
    return Priced.of(terms, memory, details)


def _gpu_counts(ctx: Context, plan: SplitPlan, m: float) -> dict[str, np.ndarray]:
    """The busiest GPU's counts for ``m`` samples, with the activations it saves: its share of
    every saved tensor, plus in filter mode the gathered copies their readers keep."""
    net = ctx.net
    scaled = split_counts(ctx.cc, plan, m)
    saved = np.zeros(len(net.layers))
    for i, mine in enumerate(saved_storages(net)):
        saved[i] = sum(elems * plan.held[t] for t, elems in mine.items())
    for t, i in plan.gathered.items():
        saved[i] += numel(net.shape_of(t))  # the gathered copy its readers keep
    scaled["saved_elems"] = m * saved
    return scaled

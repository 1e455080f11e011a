"""Filter and channel parallelism, with data parallelism across replicas: time and memory."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cost.collectives import allgather, allreduce, reduce_scatter
from ..cost.compute import GRAD_BYTES_PER_PARAM, layer_times
from ..errors import StrategyError
from ..network.channel_split import LayerSplit, channel_split
from ..network.counts import CompiledCounts, _saved_storages
from ..network.graph import Network
from ..network.layers import MATMUL_KINDS, numel
from .data import BUCKET_BYTES, overlapped_exchange
from .memory import (
    input_batch_bytes,
    optimizer_bytes_per_param,
    optimizer_traffic_bytes_per_param,
    weight_bytes_per_param,
)
from .spec import Strategy

if TYPE_CHECKING:
    from .predict import Context, _Priced

__all__ = ["Exchange", "SplitPlan", "split_plan", "split_counts", "price_channel_split", "BREAKDOWN_KEYS"]

#: Breakdown keys of the layer-parallel exchanges, per split kind: (forward, backward).
BREAKDOWN_KEYS = {
    "filter": ("filter_allgather", "filter_reduce_scatter"),
    "channel": ("channel_allreduce", "channel_allgather"),
}


@dataclass(frozen=True)
class Exchange:
    """One collective inside the split group, per micro-batch.

    ``layer`` is the index of the layer it is charged to (its time joins that layer's forward
    or backward), ``op`` one of ``allgather``, ``reduce_scatter``, ``allreduce``, and
    ``elems_per_sample`` the size of the whole (gathered / reduced) tensor per sample.
    """

    layer: int
    phase: str
    op: str
    tensor: str
    elems_per_sample: int


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
    runs on the split tensor too.
    """
    if mode not in BREAKDOWN_KEYS:
        raise StrategyError(f"unknown layer split '{mode}' (valid: {', '.join(BREAKDOWN_KEYS)})")
    layers = net.layers
    n_layers = len(layers)
    ones = np.ones(n_layers)
    shares = channel_split(net, n, split_matmul=mode == "filter")
    plan = SplitPlan(mode, n, ones.copy(), ones.copy(), ones.copy(), ones.copy(), {"input": 1.0}, shares=shares)
    if n == 1:  # no split: plain data parallelism
        plan.held.update((layer.name, 1.0) for layer in layers)
        return plan
    split: dict[str, bool] = {"input": False}
    sliced_full: set[str] = set()  # replicated tensors whose gradient comes back split

    def slice_back(t: str, i: int) -> None:
        # a layer read only its block of replicated tensor t: its input gradient is split,
        # and the replicated producers upstream need it whole (the network input needs none)
        if t != "input" and not split[t] and t not in sliced_full:
            sliced_full.add(t)
            plan.exchanges.append(Exchange(i, "bwd", "allgather", t, numel(net.shape_of(t))))

    for i, (layer, share) in enumerate(zip(layers, shares, strict=True)):
        c_out = layer.out_shape[0]
        if share.role == "own":  # filter: ceil(F/n) output channels from the whole input
            if c_out < n:
                raise StrategyError(
                    f"filter={n} exceeds the {c_out} output channels of {layer.name} "
                    f"(valid: filter <= {c_out})"
                )
            f = share.largest_fraction
            plan.f_in[i], plan.f_out[i], plan.f_work[i], plan.f_par[i] = 1.0, f, f, f
            for t in layer.inputs:
                if split[t] and t not in plan.gathered:
                    plan.gathered[t] = i
                    elems = numel(net.shape_of(t))
                    plan.exchanges.append(Exchange(i, "fwd", "allgather", t, elems))
                    plan.exchanges.append(Exchange(i, "bwd", "reduce_scatter", t, elems))
                elif not split[t] and t != "input" and t not in sliced_full:
                    # a replicated input: every GPU adds a partial input gradient
                    sliced_full.add(t)
                    elems = numel(net.shape_of(t))
                    plan.exchanges.append(Exchange(i, "bwd", "allreduce", t, elems))
            split[layer.name] = True
            plan.held[layer.name] = f
            continue
        if layer.kind in MATMUL_KINDS and not share.split:  # channel: split by input channels
            c_in = layer.in_shape[0]
            if c_in < n:
                if all(t == "input" for t in layer.inputs):
                    # too few input channels to split (an RGB image over 4 GPUs): run it whole
                    plan.replicated.append(layer.name)
                    split[layer.name] = False
                    plan.held[layer.name] = 1.0
                    continue
                raise StrategyError(
                    f"channel={n} exceeds the {c_in} input channels of {layer.name} "
                    f"(valid: channel <= {c_in})"
                )
            f = _part(c_in, n)
            plan.f_in[i], plan.f_out[i], plan.f_work[i], plan.f_par[i] = f, 1.0, f, f
            elems = numel(layer.out_shape)
            plan.exchanges.append(Exchange(i, "fwd", "allreduce", layer.name, elems))
            for t in layer.inputs:
                slice_back(t, i)
            split[layer.name] = False
            plan.held[layer.name] = 1.0
            continue
        if share.split:  # per channel on the split tensor (or an evenly grouped convolution)
            f = share.largest_fraction
            for t in layer.inputs:
                slice_back(t, i)
        else:
            f = 1.0
            plan.replicated.append(layer.name)
        plan.f_in[i] = plan.f_out[i] = plan.f_work[i] = plan.f_par[i] = f
        split[layer.name] = share.split
        plan.held[layer.name] = f
    return plan


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
    fractions of it that GPU does (FLOPs), reads and writes (activation traffic) and keeps
    (outputs); saved activations, which depend on what every tensor's readers hold, are left
    to :func:`price_channel_split`."""
    ev = cc.evaluate(batch)
    mm = np.array([k in MATMUL_KINDS for k in cc.kinds])
    scaled = {k: ev[k] * plan.f_work for k in ("fwd_flops", "fwd_matmul_flops", "bwd_input_flops", "bwd_weight_flops")}
    out = ev["out_elems"]
    fwd_mem = ev["fwd_mem_elems"]
    mm_fwd = (fwd_mem - out) * plan.f_in + out * plan.f_out  # input read + output written
    ratio = np.divide(ev["bwd_mem_elems"], fwd_mem, out=np.zeros_like(fwd_mem), where=fwd_mem > 0)
    scaled["fwd_mem_elems"] = np.where(mm, mm_fwd, fwd_mem * plan.f_work)
    scaled["bwd_mem_elems"] = np.where(mm, mm_fwd * ratio, ev["bwd_mem_elems"] * plan.f_work)
    scaled["out_elems"] = out * plan.f_out
    scaled["saved_extra_bytes"] = ev["saved_extra_bytes"] * plan.f_out
    return scaled


def price_channel_split(ctx: Context, s: Strategy, global_batch: int) -> _Priced:
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
      priced by the roofline of :func:`perfmodel.cost.compute.layer_times`.
    * memory: weights, gradients and optimizer state of the shard (ParaDL's ``W/p``);
      activations at the size held (split tensors ``ceil(C/N)/C``, replicated ones whole),
      plus in filter mode the gathered copy of every all-gathered tensor, which its readers
      keep for their weight gradient.

    The exchanges sit on the critical path (no overlap with compute); the gradient
    allreduce across replicas overlaps the last micro-batch's backward as in DDP.
    """
    from .predict import OPTIMIZER_LAUNCHES, _Priced, _split_batch, weight_group

    mode, n = _check(s)
    net, hw, cc = ctx.net, ctx.hw, ctx.cc
    per_replica, m = _split_batch(global_batch, s)
    e = ctx.elem_bytes
    plan = split_plan(net, mode, n)

    scaled = split_counts(cc, plan, m)
    saved = np.zeros(len(net.layers))
    for i, mine in enumerate(_saved_storages(net)):
        saved[i] = sum(elems * plan.held[t] for t, elems in mine.items())
    for t, i in plan.gathered.items():
        saved[i] += numel(net.shape_of(t))  # the gathered copy its readers keep
    scaled["saved_elems"] = m * saved
    cc_gpu = replace(cc, params=cc.params * plan.f_par)
    m_t = per_replica / s.mb  # time at the mean micro-batch (memory above at the largest)
    lt = layer_times(cc_gpu, hw, ctx.precision, m_t, counts=scaled if m_t == m else split_counts(cc, plan, m_t))

    # exchanges inside the split group: n consecutive ranks, placed as weight_group places n
    # replicas of a one-GPU plan
    split_group = weight_group(Strategy(dp=n), hw.gpus_per_node)
    fwd_comm = np.zeros(len(net.layers))
    bwd_comm = np.zeros(len(net.layers))
    for x in plan.exchanges:
        nbytes = m_t * x.elems_per_sample * e
        if x.op == "allgather":
            secs = allgather(nbytes, split_group, hw)
        elif x.op == "reduce_scatter":
            secs = reduce_scatter(nbytes, split_group, hw)
        else:
            secs = allreduce(nbytes, split_group, hw, "ring")
        (fwd_comm if x.phase == "fwd" else bwd_comm)[x.layer] += secs
    fwd = lt.fwd + fwd_comm
    bwd = lt.bwd + bwd_comm
    per_mb = float(fwd.sum() + bwd.sum())
    t_body = s.mb * per_mb
    key_f, key_b = BREAKDOWN_KEYS[mode]
    breakdown: dict[str, float] = {
        "compute": s.mb * float(lt.fwd.sum() + lt.bwd.sum()),
        key_f: s.mb * float(fwd_comm.sum()),
        key_b: s.mb * float(bwd_comm.sum()),
    }

    # gradient allreduce of each shard across the dp replicas, bucketed and overlapped with the
    # last micro-batch's backward; the replicas are n ranks apart, as those of an n-stage pipeline
    grad_bytes = cc.params * plan.f_par * GRAD_BYTES_PER_PARAM
    dp_group = weight_group(Strategy(dp=s.dp, pp=n), hw.gpus_per_node)
    details: dict[str, Any] = {
        "micro_batch": m,
        "samples_per_replica": per_replica,
        "layer_split": {"kind": mode, "gpus": n, "per_node": split_group.per_node,
                        "nodes": split_group.nodes},
        "exchanged_tensors": len({x.tensor for x in plan.exchanges}),
        "exchange_bytes_per_step": float(
            s.mb * m * e * sum(x.elems_per_sample for x in plan.exchanges)),
        "replicated_layers": list(plan.replicated),
    }
    exposed = 0.0
    if s.dp > 1:
        comm = s.comm

        def reduce(nbytes: float) -> float:
            return allreduce(nbytes, dp_group, hw, comm)

        start = t_body - float(bwd.sum())
        last_bwd = bwd[::-1]
        if s.overlap == "none":  # the exchange starts when the backward pass has ended
            start, last_bwd = t_body, np.zeros_like(last_bwd)
        end, total_comm = overlapped_exchange(
            last_bwd.tolist(), grad_bytes[::-1].tolist(), reduce, start)
        exposed = max(0.0, end - t_body)
        details["gradient_allreduce_s"] = total_comm
        details["gradient_group"] = {"gpus": s.dp, "per_node": dp_group.per_node, "algorithm": comm}
    breakdown["gradient_exchange_exposed"] = float(exposed)

    params_gpu = float((cc.params * plan.f_par).sum())
    mem_bw = hw.device.memory_bandwidth_bytes_per_s * hw.compute[ctx.precision].memory
    t_opt = (params_gpu * optimizer_traffic_bytes_per_param(ctx.optimizer) / mem_bw
             + OPTIMIZER_LAUNCHES * hw.kernel_launch_s)
    breakdown["optimizer_step"] = t_opt
    total = t_body + exposed + t_opt
    parts = sum(breakdown.values())
    if abs(parts - total) > 1e-9 * max(total, 1e-12):
        breakdown["compute"] += total - parts

    # memory of the busiest GPU; the gradients of the largest layer's output and input live
    # during its backward, as in price()
    acts = float((scaled["saved_elems"] * e + scaled["saved_extra_bytes"]).sum())
    transient = float(2 * scaled["out_elems"].max() * e)
    memory = {
        "weights": params_gpu * weight_bytes_per_param(ctx.precision),
        "gradients": params_gpu * GRAD_BYTES_PER_PARAM,
        "optimizer_state": params_gpu * optimizer_bytes_per_param(ctx.optimizer),
        "gradient_buckets": params_gpu * GRAD_BYTES_PER_PARAM if s.dp > 1 else 0.0,
        # every GPU of a split group reads the replica's whole micro-batch
        "input_batch": input_batch_bytes(net.input_shape, m),
        "activations": acts,
        "workspace": transient + hw.framework_reserve_bytes,
    }
    details["bucket_bytes"] = BUCKET_BYTES
    details["params_per_gpu"] = params_gpu
    return _Priced(total, breakdown, memory, details)

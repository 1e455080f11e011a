"""The computation hypergraph of a network: units weighted by compute time, tensors as nets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ..cost.compute import OUT_SHARE, LayerTimes, layer_times
from ..cost.grouped import DEFAULT_CUDNN_MAJOR, check_cudnn_major
from ..cost.layout import DEFAULT_MEMORY_FORMAT, check_memory_format
from ..cost.shares import TensorShares
from ..errors import UsageError
from ..hardware import REFERENCE_PROFILE, Hardware, check_precision, load_hardware
from ..network import Network, compile_counts
from ..network.channel_split import LayerSplit, Share, channel_split, halo_reads
from ..units import BYTES_PER_ELEMENT

__all__ = [
    "GRANULARITIES",
    "REFERENCE_PROFILE",
    "reference_hardware",
    "reference_layer_times",
    "WEIGHT_BATCH",
    "WEIGHT_SCALE",
    "Hypergraph",
    "build_hypergraph",
    "channel_groups_for",
    "unit_times",
]

#: ``layer``: one vertex per layer; ``channel``: every layer that filter parallelism over
#: ``groups`` GPUs splits is cut into those GPUs' shares of its output channels.
GRANULARITIES = ("layer", "channel")

#: Samples at which unit compute times are taken (then divided by it: seconds per sample) when
#: no batch is given. Callers that know the batch the parts run pass it (``mp=K`` plans their
#: micro-batch, the partition report its global batch): a layer's time is not linear in the
#: batch, so parts balanced at 32 samples are not balanced at another batch.
WEIGHT_BATCH = 32

#: Integer vertex weights for the partitioner sum to about this (KaHyPar takes integers).
WEIGHT_SCALE = 1_000_000




def reference_hardware() -> Hardware:
    """The :data:`REFERENCE_PROFILE` (loaded once; the loader caches it)."""
    return load_hardware(REFERENCE_PROFILE)


def reference_layer_times(net: Network, precision: str, cudnn_major: int = DEFAULT_CUDNN_MAJOR,
                          memory_format: str = DEFAULT_MEMORY_FORMAT, hw: Hardware | None = None,
                          batch: int = WEIGHT_BATCH) -> LayerTimes:
    """Forward and backward seconds per sample of every layer on ``hw`` (None: the reference
    profile), taken at ``batch`` samples (:func:`~perfmodel.cost.compute.layer_times`),
    grouped convolutions as cuDNN ``cudnn_major`` runs them (:mod:`perfmodel.cost.grouped`),
    activations in ``memory_format`` (:mod:`perfmodel.cost.layout`)."""
    lt = layer_times(compile_counts(net), hw or reference_hardware(), precision, batch,
                     cudnn_major=cudnn_major, memory_format=memory_format)
    return LayerTimes(fwd=lt.fwd / batch, bwd=lt.bwd / batch)


def channel_groups_for(parts: int) -> int:
    """Channel groups per layer at ``channel`` granularity for ``parts`` parts (2 per part): the
    shares of filter parallelism over twice as many GPUs, so KaHyPar can balance a layer."""
    return 2 * parts


@dataclass(frozen=True, eq=False)
class Hypergraph:
    """Units of computation (vertices) and the tensors between them (nets).

    Net ``i`` has pins ``pins[offsets[i]:offsets[i + 1]]``; its first pin is the unit
    that produces the tensor, the others read it. A net carries ``net_bytes[i]`` bytes per
    sample between the parts it spans: the activation forward and its gradient backward,
    ``2 x elements x bytes per element``. ``unit_channels`` are the output channels a unit
    computes (its :data:`~perfmodel.network.channel_split.Share`) and ``unit_share`` their
    fraction of its layer's (1 at layer granularity). Tensors read by no other unit (the
    network's output) and the network input (each part reads it from the host) are not nets.
    ``unit_seconds`` are forward plus backward seconds per sample, ``unit_fwd_seconds`` (when
    known) their forward part, priced with the grouped convolutions of cuDNN ``cudnn_major`` and
    the activations in ``memory_format``: a split layer's unit as the smaller layer its GPU runs
    (:func:`unit_times`), not its share of the layer's time; ``layer_seconds`` (when known) every
    whole layer's; all taken at ``batch`` samples. The partitioner's integer ``unit_weights`` are
    each unit's channel share of its layer's time (scaled to :data:`WEIGHT_SCALE`): a part runs the
    units of one layer it holds as one block (:mod:`perfmodel.partition.loads`), whose time grows
    about linearly with its channels, so a unit's own time (which pays a whole kernel's fixed
    costs) would count those costs once per unit instead of once per block.
    """

    model: str
    granularity: str
    groups: int
    elem_bytes: int
    unit_names: tuple[str, ...]
    unit_layer: np.ndarray
    unit_share: np.ndarray
    unit_seconds: np.ndarray
    unit_weights: np.ndarray
    net_names: tuple[str, ...]
    offsets: np.ndarray
    pins: np.ndarray
    net_elems: np.ndarray
    net_bytes: np.ndarray
    unit_channels: tuple[Share, ...] = ()
    unit_fwd_seconds: np.ndarray | None = None
    cudnn_major: int = DEFAULT_CUDNN_MAJOR
    memory_format: str = DEFAULT_MEMORY_FORMAT
    batch: int = WEIGHT_BATCH
    layer_seconds: np.ndarray | None = None

    @property
    def num_units(self) -> int:
        return len(self.unit_names)

    @property
    def num_nets(self) -> int:
        return len(self.net_names)

    def layer_values(self, per_layer: np.ndarray) -> np.ndarray:
        """A per-layer quantity (parameters, bytes; seconds at layer granularity) spread over units
        by channel share (linear: a split layer's units' own times are :attr:`unit_seconds`)."""
        values: np.ndarray = np.asarray(per_layer, dtype=float)[self.unit_layer] * self.unit_share
        return values

    @cached_property
    def weight_seconds(self) -> np.ndarray:
        """Seconds per sample the partitioner balances (``unit_weights`` before scaling): each unit's
        share of its whole layer's time (:attr:`unit_seconds` where the layers' are not known)."""
        return self.unit_seconds if self.layer_seconds is None else self.layer_values(self.layer_seconds)

    def net_pins(self, i: int) -> np.ndarray:
        return self.pins[self.offsets[i] : self.offsets[i + 1]]

    def producer(self, i: int) -> int:
        return int(self.pins[self.offsets[i]])

    @cached_property
    def pin_net(self) -> np.ndarray:
        """The net of every pin (same length as ``pins``)."""
        return np.repeat(np.arange(self.num_nets), np.diff(self.offsets))


def build_hypergraph(
    net: Network,
    hw: Hardware | None,
    precision: str,
    granularity: str = "layer",
    groups: int = 1,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    batch: int = WEIGHT_BATCH,
) -> Hypergraph:
    """The hypergraph of ``net`` at ``granularity`` with compute times on ``hw`` at ``precision``
    for ``batch`` samples (``hw=None``: on the :data:`REFERENCE_PROFILE`, the same whatever profile prices it), grouped
    convolutions priced as cuDNN ``cudnn_major`` runs them (:mod:`perfmodel.cost.grouped`), the
    activations in ``memory_format`` (:mod:`perfmodel.cost.layout`).

    At ``channel`` granularity the units of a layer are filter parallelism's per-GPU shares of
    its output channels over ``groups`` GPUs, :func:`~perfmodel.network.channel_split.channel_split`
    (empty shares dropped): convolution and linear layers in ``ceil(F/groups)`` channel blocks,
    layers acting per channel (batch norm, activation, pooling, add, ...) and evenly grouped
    (depthwise) convolutions in the shares of their input, part ``j`` reading only part ``j``
    of it (a cross-channel LRN also the edge channels of its neighbours' units: a net of those
    channels per neighbour); a layer that mixes channels reads every unit of its inputs. A unit's time is that of
    the smaller layer one GPU of filter parallelism runs for it (:func:`unit_times`), so a layer's
    units together take at least its time where their blocks are small (launches, tile and
    tensor-core padding of few channels), and ``perfmodel predict --strategy filter=N`` prices its
    busiest GPU's layers as these units.
    """
    if granularity not in GRANULARITIES:
        raise UsageError(f"unknown granularity '{granularity}' (valid: {', '.join(GRANULARITIES)})")
    check_precision(precision)
    g = groups if granularity == "channel" else 1
    if g < 1:
        raise UsageError(f"channel groups must be >= 1, got {groups}")
    major, fmt = check_cudnn_major(cudnn_major), check_memory_format(memory_format)
    lt = reference_layer_times(net, precision, major, fmt, hw, batch)
    per_sample = lt.fwd + lt.bwd
    e = BYTES_PER_ELEMENT[precision]
    splits = channel_split(net, g)

    names, unit_layer, share, channels, unit_of = _units(net, splits)
    net_names, offsets, pins, elems = _nets(net, splits, names, unit_of)

    layer_of = np.asarray(unit_layer, dtype=int)
    share_arr = np.asarray(share, dtype=float)
    if g == 1:
        sec, fwd_sec = per_sample[layer_of], lt.fwd[layer_of]
    else:
        ut = unit_times(net, splits, layer_of, share_arr, precision, major, fmt, hw, whole=lt, batch=batch)
        sec, fwd_sec = ut.fwd + ut.bwd, ut.fwd
    linear = per_sample[layer_of] * share_arr  # weight_seconds: the partitioner's additive proxy
    weights = np.maximum(1, np.rint(linear / float(linear.sum()) * WEIGHT_SCALE)).astype(np.int64)
    net_elems = np.asarray(elems, dtype=np.int64)
    return Hypergraph(
        model=net.name,
        granularity=granularity,
        groups=g,
        elem_bytes=e,
        unit_names=tuple(names),
        unit_layer=layer_of,
        unit_share=share_arr,
        unit_seconds=sec,
        unit_weights=weights,
        net_names=tuple(net_names),
        offsets=np.asarray(offsets, dtype=np.int64),
        pins=np.asarray(pins, dtype=np.int64),
        net_elems=net_elems,
        net_bytes=(2 * net_elems * e).astype(float),
        unit_channels=tuple(channels),
        unit_fwd_seconds=fwd_sec,
        cudnn_major=major,
        memory_format=fmt,
        batch=batch,
        layer_seconds=per_sample,
    )


def unit_times(net: Network, splits: Sequence[LayerSplit], unit_layer: np.ndarray, unit_share: np.ndarray,
               precision: str, cudnn_major: int = DEFAULT_CUDNN_MAJOR, memory_format: str = DEFAULT_MEMORY_FORMAT,
               hw: Hardware | None = None, whole: LayerTimes | None = None, batch: int = WEIGHT_BATCH) -> LayerTimes:
    """Forward and backward seconds per sample of every unit at ``batch`` samples (as
    :func:`reference_layer_times`):
    the smaller layer one GPU of a filter split computes it as (:mod:`perfmodel.cost.shares`),
    ``ceil(F/n)``-sized filter blocks from the whole input for a layer that owns its channels,
    its share of the channels of both tensors for one that follows its input (per-channel
    layers, evenly grouped convolutions run as that many whole groups), its parameters at its
    share. The units whose layer is whole take ``whole`` (the unsplit layer times; computed when
    None). A layer's units take at most a few distinct sizes (the blocks and a shorter last one):
    the network is priced once per size rank, each pass vectorised over the layers."""
    own = np.array([ls.role == "own" for ls in splits])
    x = np.where(own[unit_layer], 1.0, unit_share)  # an owning layer reads its whole input
    sizes: list[dict[tuple[float, float], int]] = [{} for _ in splits]
    rank = np.array([sizes[i].setdefault((float(a), float(b)), len(sizes[i]))
                     for i, a, b in zip(unit_layer.tolist(), x, unit_share, strict=True)], dtype=np.int64)
    whole = whole or reference_layer_times(net, precision, cudnn_major, memory_format, hw, batch)
    split = (unit_share < 1.0) | (x < 1.0)
    fwd, bwd = whole.fwd[unit_layer].copy(), whole.bwd[unit_layer].copy()
    cc = compile_counts(net)
    ev = cc.evaluate(batch)
    for k in range(int(rank[split].max(initial=-1)) + 1):
        pick = [list(d)[min(k, len(d) - 1)] if d else (1.0, 1.0) for d in sizes]
        sx, sy = (np.array(v, dtype=float) for v in zip(*pick, strict=True))
        counts = {f: ev[f] * sy for f in ("fwd_flops", "fwd_matmul_flops", "bwd_input_flops", "bwd_weight_flops",
                                           "out_elems", "saved_extra_bytes")}
        counts[OUT_SHARE] = sy  # the split GPU's counts (as split_counts gives predict's filter plans)
        lt = layer_times(replace(cc, params=cc.params * sy), hw or reference_hardware(), precision, batch,
                         counts=counts, cudnn_major=cudnn_major, memory_format=memory_format,
                         shares=TensorShares(sx, sy))
        mine = split & (rank == k)
        fwd[mine], bwd[mine] = lt.fwd[unit_layer[mine]] / batch, lt.bwd[unit_layer[mine]] / batch
    return LayerTimes(fwd=fwd, bwd=bwd)


_Units = tuple[list[str], list[int], list[float], list[Share], list[dict[int, int]]]


def _units(net: Network, splits: Sequence[LayerSplit]) -> _Units:
    """The units of each layer, its non-empty parts: names, layer, share of the layer's output
    channels, the channels, and per layer its part index -> unit."""
    names: list[str] = []
    unit_layer: list[int] = []
    share: list[float] = []
    channels: list[Share] = []
    unit_of: list[dict[int, int]] = []
    for i, (layer, ls) in enumerate(zip(net.layers, splits, strict=True)):
        mine: dict[int, int] = {}
        live = [j for j in range(len(ls.parts)) if ls.parts[j]]
        for j in live:
            mine[j] = len(names)
            label = ",".join(f"{lo}:{hi}" for lo, hi in ls.parts[j])
            names.append(layer.name if len(live) == 1 else f"{layer.name}[{label}]")
            unit_layer.append(i)
            share.append(ls.size(j) / ls.channels)
            channels.append(ls.parts[j])
        unit_of.append(mine)
    return names, unit_layer, share, channels, unit_of


def _nets(
    net: Network, splits: Sequence[LayerSplit], names: list[str], unit_of: list[dict[int, int]]
) -> tuple[list[str], list[int], list[int], list[int]]:
    """One net per unit whose tensor is read: (names, offsets, pins, elements per sample). A
    reader whose part j reads only part j of the tensor joins that unit's net, others every one."""

    def aligned(reader: int, tensor: str) -> bool:
        """Whether part j of layer ``reader`` reads only part j of ``tensor`` (every time it reads it)."""
        layer = net.layers[reader]
        flags = [a for t, a in zip(layer.inputs, splits[reader].aligned, strict=True) if t == tensor]
        return all(flags)

    net_names: list[str] = []
    offsets = [0]
    pins: list[int] = []
    elems: list[int] = []
    consumers = net.consumers
    for i, layer in enumerate(net.layers):
        readers = sorted(set(consumers[layer.name]))
        if not readers:
            continue
        per_channel = layer.out_elems // layer.out_shape[0]
        for j, u in unit_of[i].items():
            members = [u]
            for k in readers:
                if aligned(k, layer.name):
                    members.append(unit_of[k][j])
                else:
                    members.extend(unit_of[k].values())
            net_names.append(names[u])
            pins.extend(members)
            offsets.append(len(pins))
            elems.append(per_channel * splits[i].size(j))
            for r, channels in _halo_readers(splits, unit_of, readers, splits[i].parts[j]):
                net_names.append(f"{names[u]}>{names[r]}")  # its edge channels a neighbour's window reads
                pins.extend((u, r))
                offsets.append(len(pins))
                elems.append(per_channel * channels)
    return net_names, offsets, pins, elems


def _halo_readers(splits: Sequence[LayerSplit], unit_of: list[dict[int, int]], readers: list[int],
                  share: Share) -> list[tuple[int, int]]:
    """(unit, channels) of every reader unit with a halo (:func:`~perfmodel.network.channel_split.halo_reads`:
    a cross-channel window) that reads channels of ``share`` beyond its own: a net of its own, of those
    channels only, so a cut between neighbours costs the halo, not the whole share."""
    out: list[tuple[int, int]] = []
    for k in readers:
        if splits[k].halo == (0, 0) or not splits[k].split:
            continue
        for jr, r in unit_of[k].items():
            got = sum(max(0, min(hi, b) - max(lo, a)) for lo, hi in halo_reads(splits[k], jr) for a, b in share)
            if got:
                out.append((r, got))
    return out

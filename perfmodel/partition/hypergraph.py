"""The computation hypergraph of a network: units weighted by compute time, tensors as nets."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..cost.compute import layer_times
from ..errors import UsageError
from ..hardware import Hardware
from ..network import Network, compile_counts
from ..network.layers import MATMUL_KINDS, Layer
from ..units import BYTES_PER_ELEMENT

__all__ = [
    "GRANULARITIES",
    "WEIGHT_BATCH",
    "WEIGHT_SCALE",
    "Hypergraph",
    "build_hypergraph",
    "channel_groups_for",
]

#: ``layer``: one vertex per layer; ``channel``: convolution and linear layers (and the
#: channel-wise layers that follow them) cut into groups of output channels.
GRANULARITIES = ("layer", "channel")

#: Samples at which unit compute times are taken (then divided by it: seconds per sample).
#: A fixed reference keeps a partition independent of the step's batch, so one partition
#: serves every batch size the search tries.
WEIGHT_BATCH = 32

#: Integer vertex weights for the partitioner sum to about this (KaHyPar takes integers).
WEIGHT_SCALE = 1_000_000

#: Layer kinds that act on each channel separately: a channel group of them needs only the
#: same channel group of its inputs.
_CHANNELWISE = frozenset(
    {
        "batchnorm",
        "act",
        "dropout",
        "maxpool",
        "avgpool",
        "adaptive_avgpool",
        "add",
        "mul",
        "upsample",
    }
)


def channel_groups_for(parts: int) -> int:
    """Channel groups per layer at ``channel`` granularity for ``parts`` parts (2 per part)."""
    return 2 * parts


@dataclass(frozen=True, eq=False)
class Hypergraph:
    """Units of computation (vertices) and the tensors between them (nets).

    Net ``i`` has pins ``pins[offsets[i]:offsets[i + 1]]``; its first pin is the unit
    that produces the tensor, the others read it. A net carries ``net_bytes[i]`` bytes per
    sample between the parts it spans: the activation forward and its gradient backward,
    ``2 x elements x bytes per element``. ``unit_share`` is the fraction of its layer's
    output channels a unit computes (1 at layer granularity). Tensors read by no other unit
    (the network's output) and the network input (each part reads it from the host) are not
    nets.
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

    @property
    def num_units(self) -> int:
        return len(self.unit_names)

    @property
    def num_nets(self) -> int:
        return len(self.net_names)

    def layer_values(self, per_layer: np.ndarray) -> np.ndarray:
        """A per-layer quantity (seconds, parameters, bytes) spread over units by channel share."""
        values: np.ndarray = np.asarray(per_layer, dtype=float)[self.unit_layer] * self.unit_share
        return values

    def net_pins(self, i: int) -> np.ndarray:
        return self.pins[self.offsets[i] : self.offsets[i + 1]]

    def producer(self, i: int) -> int:
        return int(self.pins[self.offsets[i]])

    @cached_property
    def pin_net(self) -> np.ndarray:
        """The net of every pin (same length as ``pins``)."""
        return np.repeat(np.arange(self.num_nets), np.diff(self.offsets))

    @property
    def total_seconds(self) -> float:
        return float(self.unit_seconds.sum())


def _ranges(channels: int, groups: int) -> tuple[tuple[int, int], ...]:
    """``groups`` contiguous channel ranges as equal as ``channels`` allows."""
    g = max(1, min(groups, channels))
    edges = [channels * i // g for i in range(g + 1)]
    return tuple((edges[i], edges[i + 1]) for i in range(g))


def _is_depthwise(layer: Layer) -> bool:
    return (
        layer.kind == "conv"
        and layer.groups > 1
        and layer.groups == layer.in_shape[0] == layer.out_shape[0]
    )


def build_hypergraph(
    net: Network,
    hw: Hardware,
    precision: str,
    granularity: str = "layer",
    groups: int = 1,
) -> Hypergraph:
    """The hypergraph of ``net`` at ``granularity`` with compute times on ``hw`` at ``precision``.

    At ``channel`` granularity every convolution and linear layer is cut into up to
    ``groups`` groups of output channels; a channel-wise layer (batch-norm, activation,
    pooling, add, ...) takes the groups of its first input, and its group ``j`` reads only
    group ``j`` of each input split the same way. A layer that mixes channels (convolution,
    linear, concat, flatten) reads every group of its inputs. A unit's time is its layer's
    time times its share of the output channels.
    """
    if granularity not in GRANULARITIES:
        raise UsageError(f"unknown granularity '{granularity}' (valid: {', '.join(GRANULARITIES)})")
    if precision not in BYTES_PER_ELEMENT:
        raise UsageError(f"unknown precision '{precision}' (valid: {', '.join(BYTES_PER_ELEMENT)})")
    g = groups if granularity == "channel" else 1
    if g < 1:
        raise UsageError(f"channel groups must be >= 1, got {groups}")
    cc = compile_counts(net)
    lt = layer_times(cc, hw, precision, WEIGHT_BATCH)
    per_sample = (lt.fwd + lt.bwd) / WEIGHT_BATCH
    e = BYTES_PER_ELEMENT[precision]

    # channel ranges per layer, and the first unit of each layer
    ranges: list[tuple[tuple[int, int], ...]] = []
    by_name: dict[str, int] = {}
    for i, layer in enumerate(net.layers):
        c = layer.out_shape[0]
        if g == 1:
            r: tuple[tuple[int, int], ...] = ((0, c),)
        elif layer.kind in MATMUL_KINDS and not _is_depthwise(layer):
            r = _ranges(c, g)
        elif (layer.kind in _CHANNELWISE or _is_depthwise(layer)) and layer.inputs[0] != "input":
            src = ranges[by_name[layer.inputs[0]]]
            r = src if src[-1][1] == c else ((0, c),)
        else:
            r = ((0, c),)
        ranges.append(r)
        by_name[layer.name] = i
    first = np.concatenate([[0], np.cumsum([len(r) for r in ranges])]).astype(int)

    names: list[str] = []
    unit_layer: list[int] = []
    share: list[float] = []
    for i, layer in enumerate(net.layers):
        c = layer.out_shape[0]
        for lo, hi in ranges[i]:
            names.append(layer.name if len(ranges[i]) == 1 else f"{layer.name}[{lo}:{hi}]")
            unit_layer.append(i)
            share.append((hi - lo) / c)

    def aligned(consumer: int, producer: int) -> bool:
        layer = net.layers[consumer]
        channelwise = layer.kind in _CHANNELWISE or _is_depthwise(layer)
        return channelwise and len(ranges[consumer]) > 1 and ranges[consumer] == ranges[producer]

    net_names: list[str] = []
    offsets = [0]
    pins: list[int] = []
    elems: list[int] = []
    consumers = net.consumers
    for i, layer in enumerate(net.layers):
        readers = sorted(set(consumers[layer.name]))
        if not readers:
            continue
        c = layer.out_shape[0]
        per_channel = layer.out_elems // c
        for j, (lo, hi) in enumerate(ranges[i]):
            members = [int(first[i] + j)]
            for k in readers:
                if aligned(k, i):
                    members.append(int(first[k] + j))
                else:
                    members.extend(range(int(first[k]), int(first[k + 1])))
            net_names.append(names[first[i] + j])
            pins.extend(members)
            offsets.append(len(pins))
            elems.append(per_channel * (hi - lo))

    layer_of = np.asarray(unit_layer, dtype=int)
    share_arr = np.asarray(share, dtype=float)
    sec = per_sample[layer_of] * share_arr
    total = float(sec.sum())
    weights = np.maximum(1, np.rint(sec / total * WEIGHT_SCALE)).astype(np.int64)
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
    )

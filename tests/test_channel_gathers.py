"""The copies that pack a channel partition's blocks into contiguous buffers, against brute force.

Oracle: for small networks with concatenations, residual adds, depthwise convolutions, a
cross-channel LRN and a classifier, every channel is walked one at a time. What each reading unit
needs is taken from the hypergraph's nets (which units' tensors it is a pin of), not from the
channel split's alignment flags, and an LRN unit's window from its size; each part's buffer of a
tensor is a torch tensor of its channel ids (batch 2, so a slice of channels is not contiguous),
and each gather or pack is performed with ``torch.cat`` of ``narrow`` slices, checked to yield the
needed channels in order. The slices and elements counted there must be
:func:`~perfmodel.partition.gathers.channel_copies`'.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.hardware import REFERENCE_PROFILE, load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.graph import Network
from perfmodel.network.layers import numel
from perfmodel.partition import partition_report
from perfmodel.partition.gathers import CAT_INPUTS_PER_LAUNCH, channel_copies, copy_launches, copy_seconds
from perfmodel.partition.hypergraph import Hypergraph, build_hypergraph
from perfmodel.partition.loads import part_seconds
from perfmodel.units import BYTES_PER_ELEMENT


def _inception_like() -> Network:
    """Two branches concatenated (a part's share of the concatenation is two channel ranges), a
    convolution reading all of it, batch norm, a residual add, and a classifier."""
    b = NetBuilder("cat", (8, 6, 6))
    x = b.act(b.conv("input", 16, 3, padding=1, bias=False, name="stem"), "relu", name="r0")
    y = b.concat([b.conv(x, 12, 1, bias=False, name="b1"), b.conv(x, 20, 3, padding=1, bias=False, name="b2")],
                 name="cat")
    z = b.act(b.bn(b.conv(y, 16, 1, bias=False, name="mix"), name="bn"), "relu", name="r1")
    z = b.add(z, x, name="res")
    b.linear(b.flatten(b.adaptive_avgpool(z, 1, name="gap"), name="flat"), 10, name="fc")
    return b.build()


def _depthwise() -> Network:
    """A depthwise convolution (follows its input's channels) between pointwise ones."""
    b = NetBuilder("dw", (8, 6, 6))
    x = b.act(b.conv("input", 24, 1, bias=False, name="pw1"), "relu", name="r")
    y = b.conv(x, 24, 3, padding=1, groups=24, bias=False, name="dw")
    b.conv(b.add(y, x, name="res"), 8, 1, bias=False, name="pw2")
    return b.build()


def _lrn() -> Network:
    """A cross-channel LRN of 5 channels (AlexNet's): each output channel reads 2 channels below
    and 2 above its own."""
    b = NetBuilder("lrn", (8, 6, 6))
    x = b.act(b.conv("input", 12, 3, padding=1, bias=False, name="c1"), "relu", name="r")
    b.conv(b.lrn(x, 5, name="norm"), 8, 1, bias=False, name="c2")
    return b.build()


NETS = {"cat": _inception_like(), "dw": _depthwise(), "lrn": _lrn()}
GROUPS = 4
HGS = {name: build_hypergraph(net, None, "amp", "channel", GROUPS) for name, net in NETS.items()}


def _channels(share: tuple[tuple[int, int], ...]) -> list[int]:
    return [c for lo, hi in share for c in range(lo, hi)]


def _assemble(buffers: dict[int, torch.Tensor], order: list[tuple[int, int]]) -> tuple[torch.Tensor, int]:
    """torch.cat of the slices of ``order`` ((source buffer, position) per channel, in order): a
    new slice where the source changes or the position is not the next one."""
    pieces: list[torch.Tensor] = []
    start = 0
    for i in range(1, len(order) + 1):
        if i == len(order) or order[i][0] != order[i - 1][0] or order[i][1] != order[i - 1][1] + 1:
            src, pos = order[start]
            piece = buffers[src].narrow(1, pos, i - start)
            assert not piece.is_contiguous() or piece.shape[1] == buffers[src].shape[1]
            pieces.append(piece)
            start = i
    return torch.cat(pieces, dim=1), len(pieces)


def _brute_force(net: Network, hg: Hypergraph, a: np.ndarray) -> Counter[tuple[int, str, str, int, int]]:
    """(part, tensor, kind, slices, elements per sample) of every copy, one channel at a time."""
    owner: dict[tuple[int, int], int] = {}  # (layer, channel) -> part
    for u in range(hg.num_units):
        for c in _channels(hg.unit_channels[u]):
            owner[(int(hg.unit_layer[u]), c)] = int(a[u])
    reads: dict[tuple[int, int, int], set[int]] = {}  # (reading part, reading layer, producer layer) -> channels
    for i in range(hg.num_nets):
        if ">" in hg.net_names[i]:
            continue  # a halo net: its channels are the LRN's window, below
        pins = hg.net_pins(i)
        u, producer = int(pins[0]), int(hg.unit_layer[pins[0]])
        for r in pins[1:]:
            key = (int(a[r]), int(hg.unit_layer[r]), producer)
            reads.setdefault(key, set()).update(_channels(hg.unit_channels[u]))
    for r in range(hg.num_units):  # an LRN unit also reads its window's channels beyond its own
        layer = net.layers[int(hg.unit_layer[r])]
        if layer.kind == "lrn":
            size, producer = int(layer.attr("size")), net.index[layer.inputs[0]]
            window = {w for c in _channels(hg.unit_channels[r]) for w in range(c - size // 2, c + (size - 1) // 2 + 1)}
            key = (int(a[r]), int(hg.unit_layer[r]), producer)
            reads[key].update(w for w in window if 0 <= w < layer.out_shape[0])
    out: Counter[tuple[int, str, str, int, int]] = Counter()
    gathered, packed = set(), set()
    for (p, _, producer), need in reads.items():
        layer = net.layers[producer]
        per_channel = numel(layer.out_shape) // layer.out_shape[0]
        held = {q: sorted(c for (lay, c), o in owner.items() if lay == producer and o == q) for q in set(a.tolist())}
        buffers = {q: torch.tensor(ch, dtype=torch.float32).reshape(1, -1, 1, 1).repeat(2, 1, 1, 1)
                   for q, ch in held.items() if ch}
        want = sorted(need)
        sources = {owner[(producer, c)] for c in want}
        if (len(sources) > 1 or sources == {p} and want != held[p]) and (p, producer, tuple(want)) not in gathered:
            gathered.add((p, producer, tuple(want)))
            received = {q: torch.tensor([c for c in want if owner[(producer, c)] == q], dtype=torch.float32)
                        .reshape(1, -1, 1, 1).repeat(2, 1, 1, 1) for q in sources if q != p}
            local = {**received, p: buffers.get(p, torch.zeros(2, 0, 1, 1))}
            order = []
            for c in want:
                q = owner[(producer, c)]
                pos = held[p].index(c) if q == p else [x for x in want if owner[(producer, x)] == q].index(c)
                order.append((q, pos))
            got, slices = _assemble(local, order)
            assert got[1, :, 0, 0].tolist() == want
            out[(p, layer.name, "gather", slices, len(want) * per_channel)] += 1
        for q in sources - {p}:
            sent = [c for c in want if owner[(producer, c)] == q]
            if sent == held[q] or (q, p, producer, tuple(sent)) in packed:
                continue
            packed.add((q, p, producer, tuple(sent)))
            got, slices = _assemble(buffers, [(q, held[q].index(c)) for c in sent])
            assert got[0, :, 0, 0].tolist() == sent
            out[(q, layer.name, "pack", slices, len(sent) * per_channel)] += 1
    return out


def _counted(net: Network, hg: Hypergraph, a: np.ndarray) -> Counter[tuple[int, str, str, int, int]]:
    c = channel_copies(net, hg, a)
    return Counter((int(c.part[i]), c.tensor[i], c.kind[i], int(c.runs[i]), int(c.elems[i])) for i in range(c.count))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(NETS)), parts=st.integers(2, 4))
def test_copies_match_brute_force(data: st.DataObject, name: str, parts: int) -> None:
    net, hg = NETS[name], HGS[name]
    a = np.array(data.draw(st.lists(st.integers(0, parts - 1), min_size=hg.num_units, max_size=hg.num_units)))
    assert _counted(net, hg, a) == _brute_force(net, hg, a)


def test_one_part_or_layer_granularity_copies_nothing() -> None:
    for name, net in NETS.items():
        hg = HGS[name]
        assert channel_copies(net, hg, np.zeros(hg.num_units, dtype=np.int64)).count == 0
        layer = build_hypergraph(net, None, "amp", "layer")
        assert channel_copies(net, layer, np.arange(layer.num_units) % 3).count == 0


def test_filter_layout_gathers_the_concatenation_from_every_part() -> None:
    """Unit j of every layer on part j: the concatenation's part j holds two ranges (its blocks of
    b1 and of b2, channels 3j:3j+3 and 12+5j:17+5j); the 1x1 convolution reading all 32 channels on
    each part gathers them in order: 4 blocks of b1 then 4 of b2, each from its own buffer (the
    other parts' arrive whole, holding their b1 and b2 blocks: two slices each), 8 slices. No part
    packs anything: each sends its whole buffer."""
    net, hg = NETS["cat"], HGS["cat"]
    a = np.zeros(hg.num_units, dtype=np.int64)
    for layer in range(len(net.layers)):
        units = np.flatnonzero(hg.unit_layer == layer)
        a[units] = np.arange(len(units))
    c = channel_copies(net, hg, a)
    cat = [i for i in range(c.count) if c.tensor[i] == "cat"]
    assert sorted((c.kind[i], int(c.runs[i]), int(c.elems[i])) for i in cat) == [("gather", 8, 32 * 36)] * GROUPS
    assert not [i for i in range(c.count) if c.kind[i] == "pack"]  # a part sends its whole buffer


def test_launches_follow_torch_cat_batching() -> None:
    """aten/src/ATen/native/cuda/Shape.cu: up to 64 non-contiguous inputs per launch for tensors of
    up to 4 dimensions, one copy per input beyond."""
    assert [copy_launches(r, 4) for r in (1, CAT_INPUTS_PER_LAUNCH, CAT_INPUTS_PER_LAUNCH + 1)] == [1, 1, 2]
    assert copy_launches(7, 5) == 7


def test_copy_seconds_price_each_copy_at_its_bytes_or_the_host() -> None:
    net, hg = NETS["cat"], HGS["cat"]
    a = np.arange(hg.num_units) % 3
    c = channel_copies(net, hg, a)
    hw, batch = load_hardware(REFERENCE_PROFILE), 512
    amp = hw.compute["amp"]
    bw = hw.device.memory_bandwidth_bytes_per_s * amp.memory
    each = [max(hw.kernels.host_op_s, c.launches[i] * hw.kernel_launch_s
                + 2 * c.elems[i] * batch * BYTES_PER_ELEMENT["amp"] / bw) for i in range(c.count)]
    expect = np.bincount(c.part, weights=2 * np.array(each), minlength=3)
    np.testing.assert_allclose(copy_seconds(c, 3, None, "amp", batch), expect, rtol=1e-12)


def test_report_loads_include_the_copies() -> None:
    """googlenet at channel granularity: its concatenations make parts gather and pack; the
    report's loads are the kernels plus these copies."""
    r = partition_report("googlenet", 4, "channel", global_batch=64)
    net = get_model("googlenet")
    hg = build_hypergraph(net, load_hardware("a100-80gb-dgx"), "amp", "channel", 8, batch=64)
    a = np.array([r.assignment[n] for n in hg.unit_names])
    c = channel_copies(net, hg, a)
    assert c.count > 0 and "gather" in c.kind
    kernels = part_seconds(net, hg, a, 4, load_hardware("a100-80gb-dgx"), "amp", 64)
    extra = copy_seconds(c, 4, load_hardware("a100-80gb-dgx"), "amp", 64)
    np.testing.assert_allclose(r.hypergraph.part_loads_s, kernels + extra, rtol=1e-9)
    assert float(extra.sum()) > 0

"""A channel unit of the partitioner's hypergraph costs what the smaller layer its GPU runs costs.

At ``channel`` granularity a layer that owns its output channels (convolution, linear) is cut
into blocks of ``ceil(F/g)`` filters, each computed from the whole input; a layer that follows a
split tensor (batch norm, activation, an evenly grouped convolution) into its input's blocks.
Oracle: the layer built with the builder at the unit's size (``F_j`` filters, or ``C_j`` channels
for a layer that follows) and priced alone by :func:`~perfmodel.cost.compute.layer_times` at the
hypergraph's reference batch. The largest unit of every layer is also what ``predict --strategy
filter=g`` prices its busiest GPU at, and where blocks are small a layer's units together take
longer than the layer (each pays its launches, host dispatch and tile padding).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from split_layers import conv_layer, linear_layer

from perfmodel.cost.compute import layer_times
from perfmodel.hardware import REFERENCE_PROFILE, load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.counts import compile_counts
from perfmodel.network.graph import Network
from perfmodel.partition.hypergraph import WEIGHT_BATCH, Hypergraph, build_hypergraph
from perfmodel.strategies.channels import split_counts, split_plan

SETUPS = [(None, "amp"), ("v100-16gb-dgx1", "fp32"), ("p100-16gb-nvlink", "fp32")]


def _seconds(net: Network, name: str, hw: str | None, precision: str) -> tuple[float, float]:
    """Forward and backward seconds per sample of layer ``name`` of ``net`` priced alone, unsplit."""
    lt = layer_times(compile_counts(net), load_hardware(hw or REFERENCE_PROFILE), precision, WEIGHT_BATCH)
    i = [layer.name for layer in net.layers].index(name)
    return float(lt.fwd[i]) / WEIGHT_BATCH, float(lt.bwd[i]) / WEIGHT_BATCH


def _hypergraph(net: Network, hw: str | None, precision: str, groups: int) -> Hypergraph:
    return build_hypergraph(net, None if hw is None else load_hardware(hw), precision, "channel", groups)


def _units(hg: Hypergraph, net: Network, name: str) -> list[tuple[int, int]]:
    """(unit, channels) of every unit of layer ``name``."""
    i = [layer.name for layer in net.layers].index(name)
    return [(u, sum(hi - lo for lo, hi in hg.unit_channels[u])) for u in np.flatnonzero(hg.unit_layer == i)]


LAYERS = {  # name: (builder of a C -> F layer after a ReLU, C, F)
    "linear 4096->1000": (linear_layer, 4096, 1000),
    "conv3x3 64->64 56^2": (conv_layer(3, 56), 64, 64),
    "conv1x1 256->72 28^2": (conv_layer(1, 28), 256, 72),
}


@pytest.mark.parametrize(("hw", "precision"), SETUPS)
@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("groups", [2, 3, 16])
def test_a_filter_unit_is_the_layer_with_its_filters(layer: str, hw: str | None, precision: str,
                                                      groups: int) -> None:
    """3 groups leave a shorter last block (1000 = 334 + 334 + 332; 64 = 22 + 22 + 20); 16 groups of
    64 filters are 4 each, of 72 fourteen units of 5 and one of 2 (padded to 8 on tensor cores)."""
    build, c, f = LAYERS[layer]
    net = build(c, f)
    hg = _hypergraph(net, hw, precision, groups)
    units = _units(hg, net, "L")
    block = -(-f // groups)  # ceil(F/g) filters, the last block shorter (or none: 72/16 = 14 x 5 + 2)
    assert sorted(size for _, size in units)[1:] == [block] * (len(units) - 1) and sum(s for _, s in units) == f
    for u, size in units:
        fwd, bwd = _seconds(build(c, size), "L", hw, precision)
        assert hg.unit_fwd_seconds is not None
        assert float(hg.unit_fwd_seconds[u]) == pytest.approx(fwd, rel=1e-9)
        assert float(hg.unit_seconds[u]) == pytest.approx(fwd + bwd, rel=1e-9)


def _block(c: int, depthwise_stride: int = 1) -> Network:
    """A 1x1 convolution that owns its channels, then layers that follow them: batch norm, ReLU,
    a depthwise 3x3 convolution (evenly grouped where ``g`` divides ``c``: it follows too)."""
    b = NetBuilder("blk", (c, 28, 28))
    x = b.conv(b.act("input", "relu", name="r"), c, 1, bias=False, name="a")
    x = b.act(b.bn(x, name="bn"), "relu", name="act")
    b.conv(x, c, 3, stride=depthwise_stride, padding=1, groups=c, bias=False, name="dw")
    return b.build()


def _follower(c: int, name: str, depthwise_stride: int = 1) -> Network:
    """Layer ``name`` of :func:`_block` built alone at ``c`` channels (after a ReLU of the input)."""
    b = NetBuilder("alone", (c, 28, 28))
    x = b.act("input", "relu", name="r")
    if name == "bn":
        b.bn(x, name="bn")
    elif name == "act":
        b.act(x, "relu", name="act")
    else:
        b.conv(x, c, 3, stride=depthwise_stride, padding=1, groups=c, bias=False, name="dw")
    return b.build()


@pytest.mark.parametrize(("hw", "precision"), SETUPS)
@pytest.mark.parametrize(("c", "groups"), [(64, 4), (64, 16), (60, 8)])
def test_a_following_unit_is_the_layer_at_its_channels(hw: str | None, precision: str, c: int, groups: int) -> None:
    """64 channels over 4 or 16 groups: the depthwise layer follows its input's blocks; 60 over 8
    (blocks of 8 and a last one of 4): it does not divide, so the depthwise layer computes its own
    blocks from the whole input, each still the depthwise layer of that many channels."""
    net = _block(c)
    hg = _hypergraph(net, hw, precision, groups)
    for name in ("bn", "act", "dw"):
        units = _units(hg, net, name)
        assert sum(size for _, size in units) == c and len(units) == groups, name
        for u, size in units:
            fwd, bwd = _seconds(_follower(size, name), name, hw, precision)
            assert float(hg.unit_seconds[u]) == pytest.approx(fwd + bwd, rel=1e-9), (name, size)


@pytest.mark.parametrize("model", ["resnet50", "mobilenet_v2", "googlenet"])
@pytest.mark.parametrize(("hw", "precision"), SETUPS[:2])
def test_the_largest_unit_is_what_a_filter_plan_prices_its_busiest_gpu_at(model: str, hw: str | None,
                                                                          precision: str) -> None:
    """``partition --granularity channel`` and ``predict --strategy filter=g`` price the same
    per-GPU layers: every layer's largest unit is the filter plan's busiest GPU's layer."""
    net, g = get_model(model), 4
    hg = _hypergraph(net, hw, precision, g)
    cc, plan = compile_counts(net), split_plan(net, "filter", g)
    lt = layer_times(replace(cc, params=cc.params * plan.f_par), load_hardware(hw or REFERENCE_PROFILE), precision,
                     WEIGHT_BATCH, counts=split_counts(cc, plan, WEIGHT_BATCH), shares=plan.tensor_shares)
    largest = np.zeros(len(net.layers))
    np.maximum.at(largest, hg.unit_layer, hg.unit_share)
    biggest = hg.unit_share == largest[hg.unit_layer]
    np.testing.assert_allclose(hg.unit_seconds[biggest], ((lt.fwd + lt.bwd) / WEIGHT_BATCH)[hg.unit_layer[biggest]],
                               rtol=1e-9)


@pytest.mark.parametrize("model", ["resnet50", "vgg16", "mobilenet_v2"])
@pytest.mark.parametrize(("hw", "precision"), SETUPS)
def test_small_blocks_take_longer_together_than_the_layer(model: str, hw: str | None, precision: str) -> None:
    """16 channel groups: each split layer's units sum to at least its own time (each pays its
    launches and host dispatch; few channels fill GEMM tiles and tensor cores worse), the
    network's several times its share-weighted (linear) time."""
    net = get_model(model)
    whole = build_hypergraph(net, None if hw is None else load_hardware(hw), precision, "layer")
    hg = _hypergraph(net, hw, precision, 16)
    per_layer = np.bincount(hg.unit_layer, weights=hg.unit_seconds, minlength=len(net.layers))
    split = np.bincount(hg.unit_layer, minlength=len(net.layers)) > 1
    assert split.sum() > len(net.layers) // 2
    assert np.all(per_layer[split] >= whole.unit_seconds[split])
    np.testing.assert_allclose(per_layer[~split], whole.unit_seconds[~split], rtol=1e-12)
    assert hg.unit_seconds.sum() > 1.5 * whole.unit_seconds.sum()

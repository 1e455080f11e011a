"""A split depthwise (or grouped) layer whose groups do not divide over the GPUs moves only its groups' channels.

Where a depthwise layer's ``C`` groups do not split evenly over ``n`` GPUs it does not follow its
input's split (:func:`~perfmodel.network.channel_split.aligned_groups`): a filter split computes
``ceil(C/n)`` of its outputs from the whole (gathered) input, a channel split reads ``ceil(C/n)``
input channels and writes the whole (all-reduced) output. Either way the GPU runs the depthwise
layer of ``ceil(C/n)`` channels: its kernels read and write only those channels, the data
gradient writing ``ceil(C/n)`` channels of ``dx``, not the whole input gradient. Oracle: that
smaller depthwise layer built with the builder and priced alone (forward and backward seconds).
Before, each kernel's memory floor (and the NCHW transposes around it) moved the whole
gathered input or the whole output: 60 depthwise channels over 8 GPUs on a V100 in fp32 came
out 1.16x forward, 1.07x backward of the 8-channel layer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from split_layers import BATCH, busiest_gpu_times

from perfmodel.cost.kernels import network_kernels
from perfmodel.cost.shares import TensorShares, operand_elems
from perfmodel.network.builder import NetBuilder
from perfmodel.network.graph import Network
from perfmodel.strategies.channels import split_plan

SETUPS = [("v100-16gb-dgx1", "fp32"), ("a100-80gb-dgx", "amp")]


def _depthwise(c: int, k: int, stride: int, hw: int = 28) -> Network:
    b = NetBuilder("dw", (c, hw, hw))
    b.conv(b.act("input", "relu", name="r"), c, k, stride=stride, padding=k // 2, groups=c, bias=False, name="L")
    return b.build()


def _grouped(c: int, groups: int, hw: int = 28) -> Network:
    b = NetBuilder("g", (c, hw, hw))
    b.conv(b.act("input", "relu", name="r"), c, 3, padding=1, groups=groups, bias=False, name="L")
    return b.build()


DEPTHWISE = [(60, 3, 1, 8), (60, 3, 1, 7), (90, 5, 2, 4), (36, 3, 2, 5)]  # C, window, stride, GPUs: C % n != 0


@pytest.mark.parametrize(("hw", "precision"), SETUPS)
@pytest.mark.parametrize("mode", ["filter", "channel"])
@pytest.mark.parametrize(("c", "k", "stride", "n"), DEPTHWISE)
def test_an_unevenly_split_depthwise_layer_is_the_smaller_depthwise_layer(
        hw: str, precision: str, mode: str, c: int, k: int, stride: int, n: int) -> None:
    net = _depthwise(c, k, stride)
    i = [layer.name for layer in net.layers].index("L")
    plan = split_plan(net, mode, n)
    assert c % n and min(plan.f_in[i], plan.f_out[i]) < 1.0 < max(plan.f_in[i], plan.f_out[i]) + 1e-12
    split = busiest_gpu_times(net, hw, precision, mode, n)
    direct = busiest_gpu_times(_depthwise(math.ceil(c / n), k, stride), hw, precision, None, 1)
    assert split == pytest.approx(direct, rel=1e-9)


@pytest.mark.parametrize(("hw", "precision"), SETUPS)
@pytest.mark.parametrize("major", [7, 8])
@pytest.mark.parametrize("mode", ["filter", "channel"])
@pytest.mark.parametrize(("c", "groups", "n"), [(14, 7, 4), (10, 5, 3)])
def test_an_unevenly_split_grouped_layer_on_whole_groups_is_the_smaller_grouped_layer(
        hw: str, precision: str, major: int, mode: str, c: int, groups: int, n: int) -> None:
    """2 channels per group, ``ceil(C/n)`` a whole number of groups though ``n`` does not divide
    them (14 channels over 4 GPUs: 4 channels, 2 groups): the 2-group layer (on tensor cores, its
    NCHW transposes at its own channels too)."""
    per = math.ceil(c / n)
    split = busiest_gpu_times(_grouped(c, groups), hw, precision, mode, n, major)
    direct = busiest_gpu_times(_grouped(per, per // (c // groups)), hw, precision, None, 1, major)
    assert split == pytest.approx(direct, rel=1e-9)


def test_a_share_that_already_is_the_groups_channels_is_unchanged() -> None:
    """An evenly split depthwise layer (its 64 channels over 4 GPUs) and an ungrouped 1x1
    convolution move each tensor at its share, as before."""
    b = NetBuilder("mix", (64, 28, 28))
    x = b.conv(b.act("input", "relu", name="r"), 64, 3, padding=1, groups=64, bias=False, name="dw")
    b.conv(x, 64, 1, bias=False, name="pw")
    net = b.build()
    lk = network_kernels(net)
    scale = np.full(len(net.layers), BATCH)
    dw = np.array([layer.name == "dw" for layer in net.layers])
    for x_share, y_share in ((1.0, 0.25), (0.25, 1.0), (0.25, 0.25)):
        # the depthwise layer follows its split input (a quarter of both tensors), the 1x1 takes the split's shares
        sx, sy = np.where(dw, 0.25, x_share), np.where(dw, 0.25, y_share)
        got = operand_elems(lk, scale, TensorShares(sx, sy))
        np.testing.assert_allclose(got, (lk.x_elems * sx + lk.y_elems * sy) * scale, rtol=1e-12)

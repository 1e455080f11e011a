"""Filter and channel splits price each tensor at its own share: a hand count of one convolution's
operand and transpose bytes on one GPU of a 2- and 4-way split, in both memory formats.

Oracle: the layer's shapes written out by hand (c1: 18 x 56 x 56 in, 30 x 56 x 56 out) and the
split's rule (perfmodel.strategies.channels.split_plan): a filter split reads the whole input
(all-gathered) and writes ``ceil(30/n)/30`` of the output; a channel split reads ``ceil(18/n)/18``
of the input and writes a partial sum of the whole output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfmodel.cost.compute import layer_times
from perfmodel.cost.kernels import network_kernels
from perfmodel.cost.work import kernel_work
from perfmodel.hardware import load_hardware
from perfmodel.network.builder import NetBuilder
from perfmodel.network.counts import compile_counts
from perfmodel.network.graph import Network
from perfmodel.strategies.channels import split_counts, split_plan

HW, PRECISION, BATCH = "a100-80gb-dgx", "amp", 256.0
E = 2.0  # fp16 activations under amp
X0, Y0 = 16 * 56 * 56, 18 * 56 * 56  # c0's input (the network input) and output per sample
X1, Y1 = 18 * 56 * 56, 30 * 56 * 56  # c1's input and output per sample


def _net() -> Network:
    b = NetBuilder("split_pair", (16, 56, 56))
    x = b.conv("input", 18, 3, padding=1, bias=False, name="c0")
    x = b.act(x, "relu", name="r0")
    b.conv(x, 30, 3, padding=1, bias=False, name="c1")
    return b.build()


def _hand_shares(mode: str, n: int) -> dict[str, tuple[float, float]]:
    """(input share, output share) of c0 and c1 on the busiest GPU, counted by hand."""
    if mode == "filter":  # whole inputs, ceil(F/n) of the F output channels
        return {"c0": (1.0, math.ceil(18 / n) / 18), "c1": (1.0, math.ceil(30 / n) / 30)}
    return {"c0": (math.ceil(16 / n) / 16, 1.0), "c1": (math.ceil(18 / n) / 18, 1.0)}


CASES = [(mode, n) for mode in ("filter", "channel") for n in (2, 4)]


@pytest.mark.parametrize(("mode", "n"), CASES)
def test_gemm_operands_take_each_tensors_share(mode: str, n: int) -> None:
    """Every GEMM kernel of c1 moves x at the input's share and y (dy) at the output's: forward
    x in / y out, data gradient dy in / dx out, weight gradient x and dy in (any format)."""
    net = _net()
    plan = split_plan(net, mode, n)
    lk = network_kernels(net)
    w = kernel_work(lk, load_hardware(HW).kernels, np.full(len(net.layers), BATCH), True, True,
                    shares=plan.tensor_shares)
    hand = _hand_shares(mode, n)
    sx, sy = hand["c1"]
    for slot in ("fwd", "dgrad", "wgrad"):
        assert w.mm_elems[slot][2] == pytest.approx(BATCH * (X1 * sx + Y1 * sy), rel=1e-12)
    sx0, sy0 = hand["c0"]
    assert w.mm_elems["fwd"][0] == pytest.approx(BATCH * (X0 * sx0 + Y0 * sy0), rel=1e-12)
    assert w.mm_elems["dgrad"][0] == 0.0  # the first layer computes no data gradient
    # the unsplit kernel moves both tensors whole: a filter split saves only on y, a channel split only on x
    whole = kernel_work(lk, load_hardware(HW).kernels, np.full(len(net.layers), BATCH), True, True)
    assert whole.mm_elems["fwd"][2] == BATCH * (X1 + Y1)


def _split_times(net: Network, mode: str, n: int, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """The busiest GPU's forward and backward seconds per layer, as price_channel_split takes them."""
    plan = split_plan(net, mode, n)
    cc = compile_counts(net)
    lt = layer_times(cc, load_hardware(HW), PRECISION, BATCH, counts=split_counts(cc, plan, BATCH),
                     memory_format=fmt, shares=plan.tensor_shares)
    return lt.fwd, lt.bwd


@pytest.mark.parametrize(("mode", "n"), CASES)
def test_nchw_transposes_each_tensor_at_its_share(mode: str, n: int) -> None:
    """NCHW minus NHWC on one GPU of the split: c1's forward transposes x and y, its backward dy and
    dx (data gradient) and x and dy (weight gradient, fp16), each read and written once at its
    share, one launch per tensor; c0 (first layer) the forward and its weight gradient only."""
    net, prof = _net(), load_hardware(HW)
    f_nchw, b_nchw = _split_times(net, mode, n, "nchw")
    f_nhwc, b_nhwc = _split_times(net, mode, n, "nhwc")
    rw = 2 * BATCH * E / (prof.device.memory_bandwidth_bytes_per_s * prof.compute[PRECISION].memory)
    tau = prof.kernel_launch_s
    hand = _hand_shares(mode, n)
    c0 = X0 * hand["c0"][0] + Y0 * hand["c0"][1]
    c1 = X1 * hand["c1"][0] + Y1 * hand["c1"][1]
    assert f_nchw[2] - f_nhwc[2] == pytest.approx(c1 * rw + 2 * tau, rel=1e-9)
    assert b_nchw[2] - b_nhwc[2] == pytest.approx(2 * c1 * rw + 4 * tau, rel=1e-9)
    assert f_nchw[0] - f_nhwc[0] == pytest.approx(c0 * rw + 2 * tau, rel=1e-9)
    assert b_nchw[0] - b_nhwc[0] == pytest.approx(c0 * rw + 2 * tau, rel=1e-9)
    assert f_nchw[1] == f_nhwc[1] and b_nchw[1] == b_nhwc[1]  # the ReLU transposes nothing

"""Depthwise convolutions priced per output element: against torch's counts, PipeDream's V100 rows, and its laws."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from perfmodel.cost.depthwise import depthwise_flops
from perfmodel.cost.kernel_model import ComputeValues, mm_time
from perfmodel.cost.kernels import layer_kernels
from perfmodel.cost.work import kernel_work
from perfmodel.hardware import load_hardware
from perfmodel.hardware.profile import KernelParams
from perfmodel.network.layers import Layer
from perfmodel.validation.kernel_rows import conv_layer

KP = KernelParams()


def _dw(c: int, hw: int, k: int, stride: int = 1, mult: int = 1) -> Layer:
    return conv_layer(c, hw, hw, c * mult, k, k, (stride, stride), (k // 2, k // 2), groups=c)


def _work(layer: Layer, batch: float = 1.0, kp: KernelParams = KP, first: bool = False) -> dict[str, float]:
    lk = layer_kernels([layer], [first])
    assert lk.depthwise[0]
    return {s: float(x[0]) for s, x in depthwise_flops(lk, kp, np.array([batch])).items()}


def test_counts_match_torch() -> None:
    # independent oracle: with no per-thread work and the tap loop at the peak, the forward is
    # torch's FLOP count, and each fixed term counts torch's output (forward) / input (data
    # gradient) elements
    layer = _dw(12, 17, 5, stride=2, mult=2)
    conv = torch.nn.Conv2d(12, 24, 5, stride=2, padding=2, groups=12, bias=False)
    x = torch.zeros(3, 12, 17, 17)
    with FlopCounterMode(display=False) as counter:
        y = conv(x)
    peak = dataclasses.replace(KP, depthwise_efficiency=1.0, depthwise_output_flops=0.0)
    assert _work(layer, 3, peak)["fwd"] == pytest.approx(counter.get_total_flops())
    one = dataclasses.replace(KP, depthwise_efficiency=1.0, depthwise_output_flops=1.0)
    assert _work(layer, 3, one)["fwd"] - _work(layer, 3, peak)["fwd"] == pytest.approx(y.numel())
    # data gradient: every input element visits multiplier x taps taps
    assert _work(layer, 3, one)["dgrad"] == pytest.approx(x.numel() * (1 + 2 * 2 * 25))


def test_cost_is_a_fixed_part_per_output_plus_one_per_tap() -> None:
    w3, w5, w7 = (_work(_dw(32, 28, k), 8)["fwd"] for k in (3, 5, 7))
    outputs = 8 * 32 * 28 * 28
    per_tap = 2 / KP.depthwise_efficiency
    assert w5 - w3 == pytest.approx(outputs * 16 * per_tap)
    assert w7 - w5 == pytest.approx(outputs * 24 * per_tap)
    assert w3 == pytest.approx(outputs * (KP.depthwise_output_flops + 9 * per_tap))


@settings(max_examples=60, deadline=None)
@given(c=st.integers(2, 512), hw=st.integers(4, 112), stride=st.sampled_from([1, 2]),
       mult=st.sampled_from([1, 2, 6]), batch=st.integers(1, 256))
def test_cost_per_flop_falls_as_the_window_grows(c: int, hw: int, stride: int, mult: int, batch: int) -> None:
    per_flop = []
    for k in (1, 3, 5, 7):
        layer = _dw(c, hw, k, stride, mult)
        direct = 2 * batch * layer.out_elems * k * k
        work = _work(layer, batch)
        per_flop.append(work["fwd"] / direct)
        assert work["fwd"] > 0 and work["dgrad"] > 0 and work["wgrad"] > 0
    assert all(a > b for a, b in zip(per_flop, per_flop[1:], strict=False))


def test_data_gradient_runs_one_thread_per_input_over_every_tap() -> None:
    s1, s2 = _work(_dw(64, 56, 5, stride=1), 4), _work(_dw(64, 56, 5, stride=2), 4)
    # a stride-2 forward has a quarter of the outputs, its data gradient as many threads as inputs
    assert s2["fwd"] == pytest.approx(s1["fwd"] / 4)
    assert s2["dgrad"] == pytest.approx(s1["dgrad"])
    # a channel multiplier: each input thread walks every output channel's window
    m2 = _work(_dw(64, 56, 5, mult=2), 4)
    per_tap = 2 / KP.depthwise_efficiency
    assert m2["dgrad"] - s1["dgrad"] == pytest.approx(4 * 64 * 56 * 56 * 25 * per_tap)
    # the first layer computes no data gradient
    lk = layer_kernels([_dw(64, 56, 5)], [True])
    w = kernel_work(lk, KP, np.array([4.0]), False)
    assert w.cc_flops["dgrad"][0] == 0 and w.cc_flops["fwd"][0] > 0


def test_weight_gradient_pays_for_idle_lanes_of_each_image() -> None:
    # one warp strides over an image's P*Q outputs: a 7x7 plane takes two 32-lane passes (64 slots)
    per_elem = {hw: _work(_dw(16, hw, 3), 2)["wgrad"] / (2 * 16 * hw * hw) for hw in (7, 8)}
    assert per_elem[7] / per_elem[8] == pytest.approx(64 / 49)
    assert per_elem[8] == pytest.approx(9 * KP.depthwise_wgrad_flops)


def test_memory_traffic_bounds_it_below() -> None:
    # on a GPU whose memory is 1,000x slower, a depthwise layer takes its bytes' time: input read
    # once, output written, the weights read
    hw = load_hardware("v100-16gb-dgx1")
    slow = dataclasses.replace(hw.device, memory_bandwidth_bytes_per_s=hw.device.memory_bandwidth_bytes_per_s / 1e3)
    v = ComputeValues.of(dataclasses.replace(hw, device=slow), "fp32")
    layer = _dw(96, 56, 3)
    lk = layer_kernels([layer], [False])
    w = kernel_work(lk, hw.kernels, np.array([32.0]), False)
    t = mm_time(w, "fwd", np.array([float(layer.params)]), v, v.eta_conv)
    bytes_moved = 4 * 32 * (96 * 56 * 56 + layer.out_elems) + 4 * layer.params
    assert float(t[0]) == pytest.approx(bytes_moved / (v.memory_bandwidth_bytes_per_s * v.eta_memory))

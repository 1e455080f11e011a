"""From cuDNN 8 a grouped layer is priced as the faster of cuDNN's one kernel and a loop of per-group calls."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.compute import HALF_PRECISIONS, kind_masks, layer_times
from perfmodel.cost.grouped import CUDNN_MAJORS, cudnn_assumption, loop_candidates, may_loop
from perfmodel.cost.kernel_model import ComputeValues, phase_times, tensor_cores
from perfmodel.cost.kernels import network_kernels
from perfmodel.cost.layout import with_transposes
from perfmodel.cost.work import kernel_work
from perfmodel.hardware import load_hardware
from perfmodel.network import Network, compile_counts, get_model
from perfmodel.network.builder import NetBuilder

PROFILES = ("v100-16gb-dgx1", "a100-80gb-dgx", "p100-16gb-nvlink")


def _net(c: int, k: int, side: int, g: int, r: int) -> Network:
    b = NetBuilder("grouped", (c, side, side), source="test")
    y = b.conv(b.conv("input", c, 1, name="pre"), k, r, padding=r // 2, groups=g, name="grouped")
    b.linear(b.flatten(b.adaptive_avgpool(y, 1)), 10)
    return b.build()


def _oracle(net: Network, hw: str, precision: str, batch: int, major: int, loop: bool) -> np.ndarray:
    """Each layer's forward + backward seconds with every grouped layer as cuDNN's call of
    ``major`` (``loop`` False) or as the loop of per-group calls, priced from the kernel work
    (as :func:`~perfmodel.cost.compute.layer_seconds` prices it, eager, NCHW)."""
    h = load_hardware(hw)
    cc = compile_counts(net)
    ev = cc.evaluate(float(batch))
    v = ComputeValues.of(h, precision)
    tc = tensor_cores(h, precision)
    lk = network_kernels(net)
    scale = np.full(len(net.layers), float(batch))
    w = kernel_work(lk, h.kernels, scale, tc, precision in HALF_PRECISIONS, major, None, loop)
    w = with_transposes(w, lk, scale, tc, "nchw", precision in HALF_PRECISIONS)
    conv, lin, _ = kind_masks(cc)
    eta = np.where(conv, v.eta_conv, v.eta_linear)
    ew_f = ev["fwd_flops"] - ev["fwd_matmul_flops"]
    ew_b = np.where(conv | lin, ev["bwd_input_flops"] - np.minimum(ev["bwd_input_flops"], ev["fwd_matmul_flops"]),
                    ev["bwd_input_flops"])
    f, b = phase_times(w, cc.params, v, eta, ew_f, ew_b)
    return np.asarray(f + b)


def test_only_grouped_layers_from_cudnn_8_may_loop() -> None:
    assert [m for m in CUDNN_MAJORS if may_loop(m)] == [8, 9]
    groups, dw = np.array([1.0, 2.0, 32.0, 64.0]), np.array([False, False, False, True])
    assert loop_candidates(groups, dw, 9).tolist() == [False, True, True, False]
    assert not loop_candidates(groups, dw, 7).any()  # cuDNN's own call is the loop there
    assert "one ordinary call per group where that is faster" in cudnn_assumption(9)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([2, 4, 32]), st.sampled_from([4, 16, 48]), st.sampled_from([4, 32, 128]),
       st.sampled_from([7, 13, 27]), st.sampled_from([1, 3, 5]), st.sampled_from([1, 16, 64]),
       st.sampled_from(PROFILES), st.sampled_from(["fp32", "amp"]))
def test_grouped_layer_is_the_faster_of_one_kernel_and_the_loop(g: int, cpg: int, kpg: int, side: int, r: int,
                                                                  batch: int, hw: str, precision: str) -> None:
    """Oracle: the grouped layer's seconds at cuDNN 8/9 are the smaller of its one-kernel price
    and its loop's price (the cuDNN 7 price), each from the kernel work; every other layer is unmoved."""
    net = _net(g * cpg, g * kpg, side, g, r)
    i = [ly.name for ly in net.layers].index("grouped")
    cc = compile_counts(net)
    for major in (8, 9):
        t = layer_times(cc, load_hardware(hw), precision, batch, cudnn_major=major)
        one = _oracle(net, hw, precision, batch, major, False)
        loop = _oracle(net, hw, precision, batch, major, True)
        total = t.fwd + t.bwd
        assert total[i] == pytest.approx(min(one[i], loop[i]), rel=1e-12)
        others = np.arange(len(total)) != i
        assert total[others] == pytest.approx(one[others], rel=1e-12)
        old = layer_times(cc, load_hardware(hw), precision, batch, cudnn_major=7)
        assert total[i] <= (old.fwd + old.bwd)[i] * (1 + 1e-12)  # never dearer than cuDNN 7's loop


def test_alexnet_grouped_layers_run_the_loop_in_fp32_and_one_kernel_in_amp() -> None:
    """BVLC AlexNet's conv2/4/5 (2 groups) at fp32 on the V100: each group's ordinary call takes
    Winograd, so the loop is faster than cuDNN 8's one kernel; on the A100's tensor cores (amp) no
    Winograd runs and the one kernel covering both groups is at least as fast."""
    net = get_model("alexnet_bvlc")
    cc = compile_counts(net)
    grouped = np.array([ly.kind == "conv" and ly.groups > 1 for ly in net.layers])
    v100 = load_hardware("v100-16gb-dgx1")
    t9, t7 = (layer_times(cc, v100, "fp32", 64, cudnn_major=m) for m in (9, 7))
    assert np.array_equal((t9.fwd + t9.bwd)[grouped], (t7.fwd + t7.bwd)[grouped])
    a100 = load_hardware("a100-80gb-dgx")
    one = _oracle(net, "a100-80gb-dgx", "amp", 64, 9, False)
    t = layer_times(cc, a100, "amp", 64, cudnn_major=9)
    assert (t.fwd + t.bwd)[grouped] == pytest.approx(one[grouped], rel=1e-12)

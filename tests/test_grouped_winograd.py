"""A grouped convolution run as one cuDNN call per group is that many ordinary convolutions (Winograd included)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.grouped import CUDNN_MAJORS, loops_groups
from perfmodel.cost.kernels import MM_SLOTS, layer_kernels
from perfmodel.cost.work import KernelWork, kernel_work
from perfmodel.hardware import load_hardware
from perfmodel.network.layers import Layer
from perfmodel.strategies import predict
from perfmodel.validation.kernel_rows import conv_layer

V100 = load_hardware("v100-16gb-dgx1")
LOOPED = tuple(m for m in CUDNN_MAJORS if loops_groups(m))
ONE_KERNEL = tuple(m for m in CUDNN_MAJORS if not loops_groups(m))


def _conv(c: int, k: int, hw: int, g: int, r: int, stride: int = 1) -> Layer:
    return conv_layer(c, hw, hw, k, r, r, (stride, stride), (r // 2, r // 2), groups=g)


def _work(layer: Layer, batch: int, major: int, first: bool) -> KernelWork:
    return kernel_work(layer_kernels([layer], [first]), V100.kernels, np.array([float(batch)]), False, False, major)


def test_the_eras_that_loop_are_before_cudnn_8() -> None:
    assert LOOPED == (5, 6, 7) and ONE_KERNEL == (8, 9)


@settings(max_examples=120, deadline=None)
@given(st.sampled_from([2, 4, 8, 32]), st.sampled_from([4, 16, 48, 128]), st.sampled_from([4, 16, 64, 128]),
       st.sampled_from([7, 13, 27, 56]), st.sampled_from([1, 3, 5]), st.sampled_from([1, 2]),
       st.sampled_from([1, 16, 64, 256]), st.booleans(), st.sampled_from(LOOPED))
def test_looped_layer_is_groups_times_its_one_group_layer(g: int, cpg: int, kpg: int, hw: int, r: int, stride: int,
                                                          batch: int, first: bool, major: int) -> None:
    """Oracle: the ordinary ``C/g -> K/g`` convolution priced alone, once per group (cudnn.torch's
    loop of ungrouped calls): every GEMM slot's effective FLOPs (Winograd where that layer takes
    it) and bytes; the launches are one per group for each GEMM kernel."""
    grouped = _work(_conv(g * cpg, g * kpg, hw, g, r, stride), batch, major, first)
    one = _work(_conv(cpg, kpg, hw, 1, r, stride), batch, major, first)
    for s in MM_SLOTS:
        assert grouped.flops[s][0] == pytest.approx(g * one.flops[s][0], rel=1e-9, abs=1e-6), s
        assert grouped.mm_elems[s][0] == pytest.approx(g * one.mm_elems[s][0], rel=1e-9), s
    gemm_fwd = 1.0
    assert grouped.launches_fwd[0] - one.launches_fwd[0] == (g - 1) * gemm_fwd


def test_alexnet_grouped_layers_may_use_winograd_per_group() -> None:
    """BVLC AlexNet's conv2 (96 -> 256, 5x5, 2 groups) at batch 64: no dearer than its dense
    counterpart under a looped cuDNN, and dearer than two groups only under the one-kernel rule."""
    def t(c: int, k: int, g: int, major: int) -> float:
        w = _work(_conv(c, k, 27, g, 5), 64, major, False)
        return sum(float(w.flops[s][0]) for s in MM_SLOTS)
    dense = t(96, 256, 1, 7)
    for major in LOOPED:
        assert t(96, 256, 2, major) == pytest.approx(2 * t(48, 128, 1, major), rel=1e-9)
        assert t(96, 256, 2, major) < dense
    for major in ONE_KERNEL:  # one implicit-GEMM kernel for both groups: no Winograd
        assert t(96, 256, 2, major) > 2 * t(48, 128, 1, major)


@pytest.mark.parametrize(("hw", "major"), [("v100-16gb-dgx1", 7), ("p100-16gb-nvlink", 6), ("p100-16gb-nvlink", 5)])
def test_alexnet_filter_split_is_not_superlinear_when_groups_loop(hw: str, major: int) -> None:
    """Each GPU of filter=2 runs one of conv2/4/5's two groups, an ordinary convolution; one GPU
    runs both as two such calls under these eras, so two GPUs cannot be more than twice as fast."""
    p = predict("alexnet_bvlc", 2, "filter=2", hardware=hw, precision="fp32", global_batch=64, cudnn_major=major)
    assert p.speedup_vs_1gpu is not None and 1.0 < p.speedup_vs_1gpu <= 2.0, p.speedup_vs_1gpu

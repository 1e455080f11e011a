"""Invariants of the memory format: NCHW never makes a layer faster than NHWC, and it changes
nothing where no convolution runs on tensor cores (CUDA-core fp32, depthwise and non-conv layers)."""

from __future__ import annotations

from functools import cache

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.compute import layer_times
from perfmodel.cost.kernel_model import tensor_cores
from perfmodel.cost.kernels import network_kernels
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.counts import CompiledCounts, compile_counts

MODELS = ("resnet50", "mobilenet_v2", "resnext50_32x4d", "inception_v3", "vgg16", "unet")
HARDWARE = ("v100-16gb-dgx1", "a100-80gb-dgx", "h100-80gb-dgx", "p100-16gb-nvlink")


@cache
def _counts(model: str) -> CompiledCounts:
    return compile_counts(get_model(model))


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(MODELS), hw=st.sampled_from(HARDWARE),
       precision=st.sampled_from(("fp32", "tf32", "amp", "bf16")), batch=st.integers(1, 256),
       cudnn=st.sampled_from((7, 9)))
def test_nchw_is_never_faster_and_equal_without_tensor_core_convolutions(model: str, hw: str, precision: str,
                                                                         batch: int, cudnn: int) -> None:
    cc, prof = _counts(model), load_hardware(hw)
    nchw = layer_times(cc, prof, precision, float(batch), cudnn_major=cudnn, memory_format="nchw")
    nhwc = layer_times(cc, prof, precision, float(batch), cudnn_major=cudnn, memory_format="nhwc")
    assert np.all(nchw.fwd >= nhwc.fwd) and np.all(nchw.bwd >= nhwc.bwd)
    lk = network_kernels(cc.network)
    untouched = ~(lk.conv & ~lk.depthwise) if tensor_cores(prof, precision) else np.ones(len(lk.conv), bool)
    assert np.array_equal(nchw.fwd[untouched], nhwc.fwd[untouched])
    assert np.array_equal(nchw.bwd[untouched], nhwc.bwd[untouched])
    if not untouched.all():  # some convolution runs on tensor cores: its transposes cost time
        assert nchw.fwd.sum() + nchw.bwd.sum() > nhwc.fwd.sum() + nhwc.bwd.sum()

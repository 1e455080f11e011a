"""Tensor-core channel padding: a convolution's C and K padded to 8 on every GEMM side they enter.

Oracles: hand-counted padded GEMM views, the padded problem itself (a 3-channel convolution on
tensor cores costs what the 8-channel one does: DeepBench's fp16 benchmark times that padded
problem, cuDNN pads to it), and DeepBench's V100 fp16 first layers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.kernels import MM_SLOTS, layer_kernels
from perfmodel.cost.tensor_core import channel_pads, pad_slot, pad_sum_view
from perfmodel.cost.work import kernel_work
from perfmodel.hardware import load_hardware
from perfmodel.hardware.profile import KernelParams
from perfmodel.network.layers import Layer
from perfmodel.validation.kernel_rows import conv_layer, linear_layer, load_rows
from perfmodel.validation.kernels import price_rows


def _views(layer: Layer, tensor_cores: bool) -> dict[str, tuple[float, float, float]]:
    lk = layer_kernels([layer], [False])
    pads = channel_pads(lk, tensor_cores)
    out = {}
    for s in MM_SLOTS:  # a transposed layer's forward runs its convolution's data gradient, and back
        role = np.where(lk.transposed, {"fwd": "dgrad", "dgrad": "fwd"}.get(s, s), s)
        m, n, k = pad_slot(lk, pads, s, role, (lk.m[s], lk.n[s], lk.k[s]))
        out[s] = (float(m[0]), float(n[0]), float(k[0]))
    return out


def test_first_layer_pads_c_in_the_forward_reduction_and_weight_gradient_columns() -> None:
    # C = 3 -> 8, K = 64 (aligned): forward k = 8*7*7, weight-gradient n = 8*7*7, data-gradient n = 8
    v = _views(conv_layer(3, 224, 224, 64, 7, 7, (2, 2), (3, 3)), True)
    assert v["fwd"] == pytest.approx((112 * 112, 64, 8 * 49))
    assert v["wgrad"] == pytest.approx((64, 8 * 49, 112 * 112))
    assert v["dgrad"][1] == pytest.approx(8)
    # K = 20 -> 24: the data gradient's reduction K*R*S*stride and the weight gradient's rows
    v = _views(conv_layer(32, 28, 28, 20, 3, 3, (2, 2), (1, 1)), True)
    assert v["dgrad"][2] == pytest.approx(24 * 9 * 4)
    assert v["wgrad"][0] == pytest.approx(24)
    assert v["fwd"][1] == pytest.approx(24)


def test_off_tensor_cores_nothing_is_padded() -> None:
    layer = conv_layer(3, 224, 224, 20, 7, 7, (2, 2), (3, 3))
    lk = layer_kernels([layer], [False])
    assert _views(layer, False) == {s: (float(lk.m[s][0]), float(lk.n[s][0]), float(lk.k[s][0])) for s in MM_SLOTS}


def test_linear_layers_pad_only_their_columns() -> None:
    # cuBLAS GEMMs keep their reduction and rows (the forward's 1001, the weight gradient's 1003);
    # only the columns keep the alignment rule (forward 1003 -> 1008, weight gradient 1001 -> 1008)
    v = _views(linear_layer(1001, 1003), True)
    assert v["fwd"] == pytest.approx((1, 1008, 1001))
    assert v["wgrad"] == pytest.approx((1003, 1008, 1))


def test_transposed_layer_pads_its_underlying_convolution() -> None:
    # the underlying convolution of a 3 -> 20 transposed layer reads 20 channels and writes 3
    t = Layer(name="up", kind="conv_transpose", inputs=("x",), in_shapes=((3, 14, 14),), out_shape=(20, 28, 28),
              kernel=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), groups=1, bias=False, params=3 * 20 * 4)
    lk = layer_kernels([t], [False])
    pads = channel_pads(lk, True)
    assert float(pads.c[0]) == pytest.approx(24 / 20) and float(pads.k[0]) == pytest.approx(8 / 3)
    n, k = pad_sum_view(lk, pads)
    assert (float(n[0]), float(k[0])) == pytest.approx((24 * 4, 8))


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 70), k=st.integers(1, 70), rs=st.sampled_from([(1, 1), (3, 3), (5, 5)]),
       stride=st.sampled_from([1, 2]))
def test_padded_problem_costs_what_the_aligned_one_does(c: int, k: int, rs: tuple[int, int], stride: int) -> None:
    # the padded problem is what runs: C and K rounded up to 8 give the same effective FLOPs per slot
    def flops(cc: int, kk: int) -> dict[str, float]:
        layer = conv_layer(cc, 28, 28, kk, *rs, (stride, stride), (rs[0] // 2, rs[1] // 2))
        w = kernel_work(layer_kernels([layer], [False]), KernelParams(), np.array([16.0]), True, True)
        return {s: float(w.flops[s][0]) for s in MM_SLOTS}

    up = (math.ceil(c / 8) * 8, math.ceil(k / 8) * 8)
    assert flops(c, k) == pytest.approx(flops(*up), rel=1e-9)
    views = _views(conv_layer(c, 28, 28, k, *rs, (stride, stride), (rs[0] // 2, rs[1] // 2)), True)
    plain = _views(conv_layer(c, 28, 28, k, *rs, (stride, stride), (rs[0] // 2, rs[1] // 2)), False)
    for s in MM_SLOTS:  # padding only ever adds work, on at most the two channel sides
        assert all(a >= b * (1 - 1e-12) for a, b in zip(views[s], plain[s], strict=True))


def test_deepbench_first_layers_take_at_least_the_padded_flops_at_peak() -> None:
    # DeepBench V100 fp16 first layers (1 and 3 channels, padded to 8 by the benchmark): no price may
    # beat the padded problem's FLOPs at the tensor-core peak (the 1-channel 5x20 layers did, 3.7x,
    # with C*R*S unpadded); cuDNN 7's 32-channel K-tiles price them above it: tests/test_ktile.py
    rows = [r for r in load_rows(("deepbench",)) if r.precision == "amp" and r.what == "fwd" and r.op != "gemm"
            and r.layer.in_shapes[0][0] < 8]
    assert len(rows) >= 8
    pred, _ = price_rows(rows, before=False)
    hw = load_hardware(rows[0].profile)
    for r, p in zip(rows, pred, strict=True):
        k, pp, qq = r.layer.out_shape
        padded = 2 * r.batch * pp * qq * math.ceil(k / 8) * 8 * 8 * math.prod(r.layer.kernel)
        assert p >= padded / hw.device.peak("amp")

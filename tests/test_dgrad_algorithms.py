"""The data gradient's two cuDNN algorithms: implicit GEMM over the zero-inserted output gradient
(ALGO_1) and the sum of products with atomic adds (ALGO_0), against DeepBench and as invariants."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.efficiency import zero_insert_factor
from perfmodel.cost.kernels import layer_kernels
from perfmodel.cost.work import kernel_work
from perfmodel.hardware import load_hardware
from perfmodel.hardware.profile import KernelParams
from perfmodel.validation.kernel_rows import conv_layer, load_rows
from perfmodel.validation.kernels import price_rows


def _dgrad_flops(c: int, hw: int, k: int, r: int, s: int, stride: int, kp: KernelParams, batch: float = 16) -> float:
    layer = conv_layer(c, hw, hw, k, r, s, (stride, stride), ((r - 1) // 2, (s - 1) // 2))
    lk = layer_kernels([layer], [False])
    return float(kernel_work(lk, kp, np.array([batch]), False).flops["dgrad"][0])


def test_zero_inserted_view_does_prod_stride_times_the_forward_work() -> None:
    # Dumoulin & Visin 2016: s - 1 zeros between the output gradient's elements per axis
    layer = conv_layer(64, 56, 56, 256, 1, 1, (2, 2), (0, 0))
    lk = layer_kernels([layer], [False])
    fwd = lk.m["fwd"][0] * lk.n["fwd"][0] * lk.k["fwd"][0]
    dgrad = lk.m["dgrad"][0] * lk.n["dgrad"][0] * lk.k["dgrad"][0]
    assert dgrad == pytest.approx(4 * fwd)
    assert zero_insert_factor((1, 1)) == 1 and zero_insert_factor((2, 3)) == 6


@settings(max_examples=30, deadline=None)
@given(c=st.sampled_from([1, 3, 32, 128, 512]), k=st.sampled_from([16, 32, 256, 1024]),
       rs=st.sampled_from([(1, 1), (3, 3), (5, 10)]), stride=st.sampled_from([1, 2]),
       a=st.floats(0.0, 500.0), more=st.floats(0.0, 500.0))
def test_dearer_atomics_never_make_a_data_gradient_cheaper(c, k, rs, stride, a, more) -> None:
    kp = KernelParams()
    lo = _dgrad_flops(c, 28, k, *rs, stride, dataclasses.replace(kp, dgrad_atomic_flops=a))
    hi = _dgrad_flops(c, 28, k, *rs, stride, dataclasses.replace(kp, dgrad_atomic_flops=a + more))
    assert hi >= lo * (1 - 1e-12)
    # and never dearer than the implicit GEMM over the zero-inserted gradient (cuDNN keeps the faster)
    ceiling = _dgrad_flops(c, 28, k, *rs, stride, dataclasses.replace(kp, dgrad_atomic_flops=1e6))
    assert hi <= ceiling * (1 + 1e-12)


def test_atomics_bind_products_over_few_filters() -> None:
    # per FLOP an atomic costs dgrad_atomic_flops / (2 K): it moves a 32-filter layer, barely a 1024-filter one
    kp0, kp1 = KernelParams(dgrad_atomic_flops=0.0), KernelParams(dgrad_atomic_flops=100.0)
    few = _dgrad_flops(32, 56, 32, 5, 10, 2, kp1) / _dgrad_flops(32, 56, 32, 5, 10, 2, kp0)
    many = _dgrad_flops(512, 28, 1024, 1, 1, 2, kp1) / _dgrad_flops(512, 28, 1024, 1, 1, 2, kp0)
    assert few > 1.5 and many < 1.1


def test_deepspeech_strided_data_gradients_cost_several_forwards() -> None:
    # DeepBench P100 fp32, DeepSpeech's 5x10 stride-2 layer, C = K = 32 (same GEMM shape both ways):
    # the data gradient takes 3.5-4.1x the forward's time; perfmodel before the zero-inserted view
    # priced it at ~1.0x (log ratio -1.2 on all four batches)
    rows = [r for r in load_rows(("deepbench",)) if r.gpu == "P100" and r.precision == "fp32" and r.op != "gemm"
            and r.layer.kernel == (5, 10)]
    pred, _ = price_rows(rows, {"p100-16gb-nvlink": load_hardware("p100-16gb-nvlink")}, before=False)
    by = {(r.batch, r.what): (p, r.measured_s) for r, p in zip(rows, pred, strict=True)}
    batches = sorted({b for b, _ in by})
    assert len(batches) == 4
    for b in batches:
        (pd_, md), (pf, mf) = by[(b, "dgrad")], by[(b, "fwd")]
        assert md / mf > 3  # the measured fact the rule stands on
        assert pd_ / pf > 2
        assert abs(math.log(pd_ / md)) < 0.6

"""Tensor-core weight gradients are deterministic ALGO_1: an unsplit output tile is stored once.

Oracles: DeepBench's V100 fp16 weight gradients (cuDNN 7.6.2, ALGO_1 forced), in particular the
1x1 layers on 7x7 outputs whose tiles fill the GPU unsplit; and the fitted per-tile passes kept
where the rule does not apply (CUDA cores, split tiles), checked against the model without it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel.cost.work as work
from perfmodel.cost.kernels import layer_kernels
from perfmodel.cost.tensor_core_tiles import wgrad_store_passes
from perfmodel.hardware import load_hardware
from perfmodel.validation.kernel_row import KernelRow
from perfmodel.validation.kernel_rows import conv_layer, load_rows
from perfmodel.validation.kernels import price_rows

V100 = "v100-16gb-dgx1"


def _amp_wgrad_rows() -> list[KernelRow]:
    return [r for r in load_rows(("deepbench",)) if r.precision == "amp" and r.what == "wgrad" and r.op != "gemm"]


def test_one_store_pass_on_tensor_cores_only() -> None:
    passes = np.array([26.6, 1.0])  # a convolution's fitted passes, a linear layer's one
    np.testing.assert_array_equal(wgrad_store_passes(passes, True), [1.0, 1.0])
    np.testing.assert_array_equal(wgrad_store_passes(passes, False), passes)


def test_unsplit_1x1_weight_gradients_on_7x7_outputs_match() -> None:
    # C2048 -> K512 and C512 -> K2048 1x1 on 7x7 at N 8 and 16: 64 tiles of 128x128 or more, no
    # split; priced 1.6-1.8x their measured time with every tile paying the fitted passes, within
    # 1.3x with one store per tile
    rows = [r for r in _amp_wgrad_rows() if r.layer.kernel == (1, 1) and r.layer.out_shape[1:] == (7, 7)
            and r.layer.stride == (1, 1) and max(r.layer.in_shapes[0][0], r.layer.out_shape[0]) == 2048]
    assert len(rows) == 4
    pred, _ = price_rows(rows, before=False)
    for r, p in zip(rows, pred, strict=True):
        assert abs(math.log(p / r.measured_s)) < math.log(1.3), r.layer


def test_deepbench_v100_tensor_core_weight_gradients_improve() -> None:
    rows = _amp_wgrad_rows()
    assert len(rows) == 94
    pred, _ = price_rows(rows, before=False)
    meas = np.array([r.measured_s for r in rows])
    assert 100 * np.mean(np.abs(pred / meas - 1)) < 34.0  # 38.35% with the passes on every tile


@settings(max_examples=30, deadline=None)
@given(c=st.sampled_from([16, 64, 256, 1024]), k=st.sampled_from([32, 128, 512]), hw_=st.sampled_from([7, 14, 56]),
       rs=st.sampled_from([1, 3]), batch=st.sampled_from([1.0, 8.0, 64.0]))
def test_only_tensor_core_weight_gradients_get_cheaper(c: int, k: int, hw_: int, rs: int, batch: float) -> None:
    lk = layer_kernels([conv_layer(c, hw_, hw_, k, rs, rs, (1, 1), (rs // 2, rs // 2))], [False])
    kp = load_hardware(V100).kernels

    def wgrad(tensor_cores: bool) -> float:
        return float(work.kernel_work(lk, kp, np.array([batch]), tensor_cores, tensor_cores, 7).flops["wgrad"][0])

    rule = wgrad(True), wgrad(False)
    with pytest.MonkeyPatch.context() as m:  # the fitted passes on every tile, as before the rule
        m.setattr(work, "wgrad_store_passes", lambda passes, tc: np.asarray(passes, dtype=float))
        before = wgrad(True), wgrad(False)
    assert rule[0] <= before[0] * (1 + 1e-12)
    assert rule[1] == before[1]

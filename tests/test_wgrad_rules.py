"""The lowered-operand loads and the weight-gradient split-K rules (issue 14), against hand
derivations, their monotonicity, and DeepBench's measured weight gradients."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.efficiency import TILES, gemm_shape_efficiency, im2col_loads
from perfmodel.validation.kernel_rows import KernelRow, load_rows
from perfmodel.validation.kernels import price_rows


def _one(x: float) -> np.ndarray:
    return np.array([float(x)])


def test_im2col_loads_by_hand() -> None:
    # stride 1: each input element serves all R*S taps; the output gradient likewise
    assert im2col_loads((1, 1), (1, 1)) == (1.0, 1.0)
    assert im2col_loads((3, 3), (1, 1)) == pytest.approx((1 / 9, 1 / 9))
    # 1x1 stride 2: every other row skipped, the skipped columns loaded with their sector
    assert im2col_loads((1, 1), (2, 2)) == pytest.approx((2.0, 1.0))
    # 3x3 stride 2: 2 of 3 rows and 2 of 3 columns new to the next window
    assert im2col_loads((3, 3), (2, 2)) == pytest.approx((4 / 9, 1 / 9))
    assert im2col_loads((5, 10), (2, 2)) == pytest.approx((2 / 5 * 2 / 10, 1 / 50))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 1 << 16), n=st.integers(1, 4096), k=st.integers(1, 1 << 18),
       loads=st.floats(0.01, 1.0), passes=st.floats(1.0, 64.0), cap=st.integers(1, 64))
def test_shape_rules_are_monotone(m: int, n: int, k: int, loads: float, passes: float, cap: int) -> None:
    base = gemm_shape_efficiency(_one(m), _one(n), _one(k), _one(1), 80, 13.0)
    # loading fewer operand elements per element never slows a tile
    fewer = gemm_shape_efficiency(_one(m), _one(n), _one(k), _one(1), 80, 13.0, m_loads=loads, n_loads=loads)
    assert fewer[0] >= base[0] - 1e-12
    # more passes over the output tile never speed it up
    slow = gemm_shape_efficiency(_one(m), _one(n), _one(k), _one(1), 80, 13.0, store_passes=passes,
                                 split_passes=max(passes, 2.0))
    assert slow[0] <= base[0] + 1e-12
    # spreading a partial wave over the SMs never slows a kernel
    capped = gemm_shape_efficiency(_one(m), _one(n), _one(k), _one(1), 80, 13.0, max_split=cap)
    spread = gemm_shape_efficiency(_one(m), _one(n), _one(k), _one(1), 80, 13.0, max_split=cap, spread=True)
    assert capped[0] - 1e-12 <= spread[0] <= 1.0


def test_split_cap_and_spread_by_hand() -> None:
    # one 64x64 output over a long reduction on 80 SMs, its split capped at 4 slices (the
    # library takes the best tile: at least the 64x64 tile's figure)
    m = n = 64.0
    k = 1 << 16
    eff = gemm_shape_efficiency(_one(m), _one(n), _one(k), _one(1), 80, 13.0, max_split=4, spread=True,
                                split_passes=2.0)
    # by hand for the 64x64 tile (4 resident per SM: 320 slots): 4 blocks of k/4, spread one per
    # SM, the last wave costing 1/4 of a full one
    kb = k / 4
    intensity = 64 * 64 * kb / (128 * kb + 2 * 64 * 64)
    rate = intensity / (intensity + 13.0)
    useful = m * n * k
    executed = (1 / 4) * 320 * 64 * 64 * kb
    assert (64, 64) in TILES
    assert eff[0] >= useful / executed * rate - 1e-12
    # without spreading, the same cap leaves 316 of 320 slots idle for a whole wave
    whole = gemm_shape_efficiency(_one(m), _one(n), _one(k), _one(1), 80, 13.0, max_split=4, split_passes=2.0)
    assert whole[0] < eff[0]


@pytest.fixture(scope="module")
def wgrad_rows() -> tuple[list[KernelRow], np.ndarray]:
    rows = [r for r in load_rows(("deepbench",)) if r.op != "gemm" and r.what == "wgrad" and r.precision == "fp32"]
    pred, _ = price_rows(rows, before=False)
    return rows, pred


def test_large_strided_filters_weight_gradients(wgrad_rows) -> None:
    # 5x5 and 5x10 stride-2 weight gradients (DeepSpeech, OCR): their lowered input is loaded once
    # per ~6-12 replicas, and they reach 0.8-0.9 of the V100 fp32 peak; priced as plain GEMM tiles
    # they were 2-3x too slow (perfmodel at 457510f: 77% MAPE over these 16 rows, P100 and V100)
    rows, pred = wgrad_rows
    err = [abs(p / r.measured_s - 1) for r, p in zip(rows, pred, strict=True)
           if r.layer.kernel in ((5, 5), (5, 10)) and r.layer.stride == (2, 2)]
    assert len(err) == 16 and 100 * np.mean(err) < 40

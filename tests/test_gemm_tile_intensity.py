"""cuBLAS GEMMs take their own tile intensity I_1/2 on CUDA cores (perfmodel/cost/tile_intensity.py)."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import numpy as np
import pytest
from cli_helpers import load_file

from perfmodel.cost.kernels import layer_kernels
from perfmodel.cost.tile_intensity import layer_half_intensity
from perfmodel.cost.work import kernel_work
from perfmodel.hardware import Hardware, load_hardware
from perfmodel.validation.kernel_rows import conv_layer, linear_layer, load_rows
from perfmodel.validation.kernels import price_rows

P100 = "p100-16gb-nvlink"


def _with_gemm(hw: Hardware, value: float | None) -> Hardware:
    return dataclasses.replace(hw, kernels=dataclasses.replace(hw.kernels, tile_half_intensity_gemm=value))


def _flops(hw: Hardware, tensor_cores: bool = False) -> dict[str, np.ndarray]:
    layers = [linear_layer(4096, 4096), conv_layer(256, 28, 28, 256, 3, 3, (1, 1), (1, 1))]
    lk = layer_kernels(layers, [False, False])
    return kernel_work(lk, hw.kernels, np.array([64.0, 64.0]), tensor_cores).flops


def test_absent_value_is_the_convolutions_one() -> None:
    hw = load_hardware(P100)
    kp = _with_gemm(hw, None).kernels
    half = layer_half_intensity(kp, np.array([True, False]), tensor_cores=False)
    assert half.tolist() == [kp.tile_half_intensity, kp.tile_half_intensity]
    same = _with_gemm(hw, hw.kernels.tile_half_intensity)
    a, b = _flops(_with_gemm(hw, None)), _flops(same)
    for s in a:
        np.testing.assert_array_equal(a[s], b[s])


def test_only_linear_layers_on_cuda_cores_move() -> None:
    hw = load_hardware(P100)
    low, high = _flops(_with_gemm(hw, 4.0)), _flops(_with_gemm(hw, 40.0))
    for s in ("fwd", "dgrad", "wgrad"):
        assert low[s][0] < high[s][0]  # the linear layer: a smaller I_1/2 is a faster tile
        assert low[s][1] == high[s][1]  # the convolution keeps its own I_1/2
    # tensor cores keep the one I_1/2 their efficiencies were fitted with
    tc_low, tc_high = _flops(_with_gemm(hw, 4.0), True), _flops(_with_gemm(hw, 40.0), True)
    for s in tc_low:
        np.testing.assert_array_equal(tc_low[s], tc_high[s])


def test_shipped_value_fits_measured_p100_gemms_better_than_the_convolutions() -> None:
    # in sample: the value was fitted on these measured cuBLAS times (DeepBench P100, perfmodel/data/
    # KERNELS.md), so this guards the shipped number against drifting off its fit, it does not
    # show that it generalises (README's split-half table does: GEMM 19.6 -> 18.2% held out)
    rows = [r for r in load_rows(("deepbench",)) if r.op == "gemm" and r.gpu == "P100" and r.precision == "fp32"]
    meas = np.array([r.measured_s for r in rows])
    hw = load_hardware(P100)
    shipped = hw.kernels.tile_half_intensity_gemm
    assert shipped is not None and shipped <= hw.kernels.tile_half_intensity
    own, _ = price_rows(rows, {P100: hw}, before=False)
    conv_like, _ = price_rows(rows, {P100: _with_gemm(hw, hw.kernels.tile_half_intensity)}, before=False)

    def mape(p: np.ndarray) -> float:
        return float(np.mean(np.abs(p / meas - 1)))

    assert mape(own) < mape(conv_like)
    # the long-reduction GEMMs (>= 1e11 FLOPs) were priced ~11% slow at the convolutions' I_1/2
    big = np.array([2 * r.batch * r.layer.in_shape[0] * r.layer.out_shape[0] >= 1e11 for r in rows])
    assert big.sum() > 50
    assert abs(np.median(own[big] / meas[big]) - 1) < abs(np.median(conv_like[big] / meas[big]) - 1)


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_file("scripts/fit_kernel_params.py", "fit_kernel_params_gemm")


def test_volta_write_leaves_later_generations_their_own_intensity(fit: ModuleType) -> None:
    assert "tile_half_intensity_gemm" in {p[0] for p in fit.PARAMS}
    # Ampere/Hopper fit tile_half_intensity on NeuSight's linear rows themselves: Volta's GEMM
    # value must not override it there, but goes into Volta's own profiles
    for prof in ("a100-80gb-pcie", "h100-80gb-dgx"):
        assert fit._owned_elsewhere("volta-fp32", prof, "tile_half_intensity_gemm")
        assert load_hardware(prof).kernels.tile_half_intensity_gemm is None
    assert not fit._owned_elsewhere("volta-fp32", "v100-16gb-dgx1", "tile_half_intensity_gemm")


def test_gemm_residual_tool_scores_what_validate_scores() -> None:
    tool = load_file("tools/gemm_residuals.py", "gemm_residuals_tool")
    df = tool.frame()
    rows = [r for r in load_rows(("deepbench",)) if r.op == "gemm"]
    assert len(df) == len(rows) == 480  # P100 fp32, V100 fp32 and fp16 tensor cores, 160 each
    d = df[(df.gpu == "P100") & (df.prec == "fp32")]
    assert set(d.tt) == {"NN", "NT", "TN"} and len(d) == 160
    # the TFLOP/s columns are the FLOPs over the times: no row beats the P100's 10.6 TFLOP/s datasheet peak
    assert (d.meas_tflops < 10.6).all() and (d.pred_tflops < 10.6).all()

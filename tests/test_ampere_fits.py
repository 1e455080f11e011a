"""Ampere/Hopper kernel fits: NeuSight element-wise rows, held-out fits' neutral start, what --write owns."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import numpy as np
import pytest
from cli_helpers import load_file

from perfmodel.hardware import load_hardware
from perfmodel.validation.kernel_rows import NEUSIGHT_ELEMENTWISE_MIN_S, load_rows
from perfmodel.validation.kernels import price_rows


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_file("scripts/fit_kernel_params.py", "fit_kernel_params_ampere")


def test_elementwise_rows_are_memory_bound_and_above_the_floor() -> None:
    rows = [r for r in load_rows(("neusight",)) if r.op in ("relu fwd", "add fwd", "mul fwd")]
    assert rows and all("A100" in r.gpu and r.measured_s >= NEUSIGHT_ELEMENTWISE_MIN_S for r in rows)
    # independent oracle: bytes moved / measured time never beats the card's datasheet bandwidth
    # (relu reads and writes n fp32 elements, add/mul read two and write one)
    pred, _ = price_rows(rows, before=False)
    for r, p in zip(rows, pred, strict=True):
        n = r.layer.out_shape[0]
        moved = (2 if r.op == "relu fwd" else 3) * 4 * n
        bw = 1.555e12 if "40GB" in r.gpu else 1.935e12
        assert moved / r.measured_s < bw
        assert p > 0 and np.isfinite(p)


def test_neutral_start_owes_nothing_to_the_shipped_fit(fit: ModuleType) -> None:
    free = fit.free_params("volta-fp32") + fit.LATENCY_PARAMS
    x0 = fit.neutral_start("fp32", free)
    shipped = load_hardware("v100-16gb-dgx1")
    for (name, lo, hi), x in zip(free, x0, strict=True):
        v = x * fit.UNIT.get(name, 1.0)
        assert lo <= v <= hi, name
        ref = getattr(shipped.compute["fp32"], name) if name in fit.COMPUTE else getattr(shipped.kernels, name)
        if name not in fit.COMPUTE:
            assert v != pytest.approx(ref, rel=1e-3), name  # the middle of the bounds, not the fit
    # the compute efficiencies are the template's analytical defaults (fp32: CUDA cores; else tensor cores)
    assert fit.neutral_start("fp32", (("conv", 0.3, 1.0),)) == [0.75]
    assert fit.neutral_start("amp", (("conv", 0.2, 1.0),)) == [0.5]


def test_volta_write_leaves_the_numbers_ampere_and_hopper_fit(fit: ModuleType) -> None:
    assert fit._owned_elsewhere("volta-fp32", "a100-80gb-dgx", "tile_half_intensity")
    assert fit._owned_elsewhere("volta-fp32", "h100-80gb-dgx", "tile_half_intensity")
    # gradient numbers no forward kernel informs stay Volta's; Hopper has no Winograd rows
    assert not fit._owned_elsewhere("volta-fp32", "a100-80gb-dgx", "wgrad_tile_passes")
    assert not fit._owned_elsewhere("volta-fp32", "h200-141gb-dgx", "winograd_gain")
    assert not fit._owned_elsewhere("ampere-fp32", "a100-40gb-pcie", "winograd_gain")
    assert not fit._owned_elsewhere("volta-fp32", "v100-16gb-dgx1", "tile_half_intensity")


def test_tensor_core_half_intensity_moves_only_tensor_core_kernels() -> None:
    rows = [r for r in load_rows(("neusight",)) if r.op == "linear fwd" and "80GB" in r.gpu][:40]
    prof = rows[0].profile
    base = load_hardware(prof)
    kernels = dataclasses.replace(base.kernels, tile_half_intensity_tensor_cores=60.0)
    steeper = dataclasses.replace(base, kernels=kernels)
    fp32 = [dataclasses.replace(r, precision="fp32") for r in rows]
    tf32 = [dataclasses.replace(r, precision="tf32") for r in rows]
    # CUDA-core (fp32) kernels ignore it; tensor-core (tf32) kernels get slower with a larger I_1/2
    a, _ = price_rows(fp32, {prof: base}, before=False)
    b, _ = price_rows(fp32, {prof: steeper}, before=False)
    assert np.array_equal(a, b)
    c, _ = price_rows(tf32, {prof: base}, before=False)
    d, _ = price_rows(tf32, {prof: steeper}, before=False)
    assert np.all(d >= c) and np.any(d > c)
    assert kernels.half_intensity(True) == 60.0 and kernels.half_intensity(False) == base.kernels.tile_half_intensity
    assert load_hardware("v100-16gb-dgx1").kernels.half_intensity(True) == load_hardware(
        "v100-16gb-dgx1").kernels.tile_half_intensity

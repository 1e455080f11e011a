"""One compute formula for numbers and symbols: layer_seconds on ComputeValues."""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from perfmodel.cost.compute import ComputeValues, ShapeRules, layer_seconds, layer_times
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts, get_model


@pytest.mark.parametrize(("model", "hw", "precision"), [("resnet18", "a100-80gb-dgx", "amp"),
                                                         ("mobilenet_v2", "v100-16gb-dgx1", "fp32")])
def test_symbolic_layer_seconds_equal_layer_times(model: str, hw: str, precision: str) -> None:
    cc = compile_counts(get_model(model))
    prof = load_hardware(hw)
    lt = layer_times(cc, prof, precision, 24)
    sym = ComputeValues.symbols()
    b = sp.Symbol("b", positive=True)
    fwd, bwd = layer_seconds(cc, cc.evaluate(1.0), cc.params, sym, b, ShapeRules.of(prof, precision, 24.0))
    assert len(fwd) == len(bwd) == len(cc.params)
    values = dict(zip(sym.as_tuple(), ComputeValues.of(prof, precision).as_tuple(), strict=True))
    values[b] = 24.0
    got_f = np.array([float(x.xreplace(values)) for x in fwd])
    got_b = np.array([float(x.xreplace(values)) for x in bwd])
    np.testing.assert_allclose(got_f, lt.fwd, rtol=1e-12)
    np.testing.assert_allclose(got_b, lt.bwd, rtol=1e-12)


def test_values_named_as_explain_prints_them() -> None:
    names = [str(s) for s in ComputeValues.symbols().as_tuple()]
    assert names == ["R", "R_fp32", "eta_conv", "eta_linear", "eta_mem", "beta_mem", "tau", "e", "h", "t_step", "L_mem"]
    v = ComputeValues.of(load_hardware("a100-80gb-dgx"), "amp")
    assert v.elem_bytes == 2 and v.peak_flops_per_s > v.fp32_peak_flops_per_s


def test_batch_factor_equals_counts_of_the_batch() -> None:
    cc = compile_counts(get_model("resnet18"))
    hw = load_hardware("a100-80gb-dgx")
    v, rules = ComputeValues.of(hw, "amp"), ShapeRules.of(hw, "amp")
    f1, b1 = layer_seconds(cc, cc.evaluate(16.0), cc.params, v, 1.0, rules)
    f2, b2 = layer_seconds(cc, cc.evaluate(1.0), cc.params, v, 16.0, rules)
    np.testing.assert_allclose(f1, f2, rtol=1e-12)
    np.testing.assert_allclose(b1, b2, rtol=1e-12)

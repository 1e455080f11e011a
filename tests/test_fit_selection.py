"""scripts/fit_kernel_params.py picks each set's fitted numbers by name, not by position in PARAMS."""

from __future__ import annotations

from types import ModuleType

import pytest
from cli_helpers import load_file


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_file("scripts/fit_kernel_params.py", "fit_kernel_params_sel")


def _names(fit: ModuleType, name: str) -> set[str]:
    return {p[0] for p in fit.free_params(name)}


def test_selections_by_name(fit: ModuleType) -> None:
    every = {p[0] for p in fit.PARAMS}
    # PipeDream's rows inform every number, including memory and depthwise convolutions
    assert _names(fit, "volta-fp32") == every
    # DeepBench alone has no memory-bound kernel and no depthwise convolution
    assert _names(fit, "pascal-fp32") == every - {"memory", "depthwise_efficiency", "depthwise_output_flops",
                                                  "depthwise_wgrad_flops"}
    assert {"conv", "linear", "tile_half_intensity", "winograd_gain"} <= _names(fit, "pascal-fp32")
    # NeuSight's forward kernels: A100 convolutions, linear layers and element-wise kernels inform
    # the forward shape numbers and memory; H100 has linear layers only
    assert _names(fit, "ampere-fp32") == {"conv", "linear", "memory", "tile_half_intensity", "winograd_gain",
                                          "winograd_transform_flops"}
    assert _names(fit, "hopper-fp32") == {"linear", "tile_half_intensity"}
    assert _names(fit, "volta-amp") == {p[0] for p in fit.TC_PARAMS}


def test_appended_number_is_selected_without_shifting(fit: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    # a helper appends a number at the end of PARAMS: the fp32 DeepBench set fits it, the
    # PipeDream-only numbers stay out, and the forward-only sets are unchanged
    before = {s: _names(fit, s) for s in fit.SETS}
    monkeypatch.setattr(fit, "PARAMS", (*fit.PARAMS, ("new_number", 0.0, 1.0)))
    assert _names(fit, "pascal-fp32") == before["pascal-fp32"] | {"new_number"}
    assert _names(fit, "volta-fp32") == before["volta-fp32"] | {"new_number"}
    assert _names(fit, "ampere-fp32") == before["ampere-fp32"]
    assert _names(fit, "volta-amp") == before["volta-amp"]


def test_lomo_needs_a_set_with_pipedream_rows(fit: ModuleType) -> None:
    with pytest.raises(SystemExit, match="volta-fp32"):
        fit.lomo_check("pascal-fp32")

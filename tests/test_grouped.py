"""Grouped convolutions priced as each cuDNN era runs them: laws, the default, and PipeDream's rows."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from cli_helpers import run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.compute import layer_times
from perfmodel.cost.grouped import (
    CUDNN_MAJORS,
    DEFAULT_CUDNN_MAJOR,
    check_cudnn_major,
    extra_launches,
    kernel_groups,
)
from perfmodel.cost.kernel_model import ComputeValues, phase_times
from perfmodel.cost.kernels import layer_kernels
from perfmodel.cost.work import kernel_work
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts, get_model, model_names
from perfmodel.network.layers import Layer
from perfmodel.strategies import predict
from perfmodel.validation.kernel_rows import conv_layer, load_rows
from perfmodel.validation.kernels import price_rows
from perfmodel.validation.pipedream_lomo import derive, with_numbers

V100 = load_hardware("v100-16gb-dgx1")
OLD, NEW = 7, 8


def _grouped(c: int, k: int, hw: int, g: int, r: int = 3, stride: int = 1) -> Layer:
    return conv_layer(c, hw, hw, k, r, r, (stride, stride), (r // 2, r // 2), groups=g)


def _times(layer: Layer, batch: float, major: int, first: bool = False) -> tuple[float, float, float, float]:
    """(forward s, backward s, forward launches, backward launches) of one layer on the V100, fp32."""
    lk = layer_kernels([layer], [first])
    w = kernel_work(lk, V100.kernels, np.array([batch]), False, False, major)
    v = ComputeValues.of(V100, "fp32")
    f, b = phase_times(w, np.array([float(layer.params)]), v, np.array([v.eta_conv]), 0.0, 0.0, host=False)
    return float(f[0]), float(b[0]), float(w.launches_fwd[0]), float(w.launches_bwd[0])


shapes = st.tuples(
    st.sampled_from([2, 4, 8, 16, 32, 64]),  # groups
    st.sampled_from([1, 2, 4, 8, 16, 32]),  # input channels per group (>1: not depthwise)
    st.sampled_from([1, 2, 4, 8, 16]),  # output channels per group
    st.sampled_from([7, 14, 28, 56]),  # output side
    st.sampled_from([1, 3, 5]),  # filter side
    st.sampled_from([1, 8, 64, 256]),  # batch
)


@settings(max_examples=150, deadline=None)
@given(shapes, st.booleans())
def test_old_era_runs_a_kernel_per_group(shape: tuple[int, ...], first: bool) -> None:
    g, cpg, kpg, hw, r, batch = shape
    cpg = max(cpg, 2)
    layer = _grouped(g * cpg, g * kpg, hw, g, r)
    f7, b7, lf7, lb7 = _times(layer, batch, OLD, first)
    f8, b8, lf8, lb8 = _times(layer, batch, NEW, first)
    assert lf7 >= g and lf7 - lf8 == g - 1  # one forward kernel per group
    kernels_bwd = 1 if first else 2  # weight gradient, and the data gradient unless the input is the image
    assert lb7 >= kernels_bwd * g and lb7 - lb8 == kernels_bwd * (g - 1)
    # what each group costs: tests/test_grouped_winograd.py (its one-group layer, Winograd included)
    assert f7 > 0 and b7 > 0 and f8 > 0 and b8 > 0


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([3, 16, 64, 256]), st.sampled_from([16, 64, 512]), st.sampled_from([7, 28, 56]),
       st.sampled_from([1, 3, 7]), st.sampled_from([1, 2]), st.sampled_from([1, 32, 128]), st.booleans())
def test_ungrouped_layers_price_the_same_in_every_era(c: int, k: int, hw: int, r: int, stride: int, batch: int,
                                                       first: bool) -> None:
    layer = _grouped(c, k, hw, 1, r, stride)
    prices = {m: _times(layer, batch, m, first) for m in CUDNN_MAJORS}
    assert len(set(prices.values())) == 1


def test_depthwise_layers_keep_their_own_kernels_in_every_era() -> None:
    layer = _grouped(96, 96, 28, 96)
    assert len({_times(layer, 32, m) for m in CUDNN_MAJORS}) == 1


def test_default_is_the_modern_single_kernel_rule() -> None:
    assert DEFAULT_CUDNN_MAJOR >= NEW
    groups, dw = np.array([1.0, 32.0, 64.0]), np.array([False, False, True])
    for m in CUDNN_MAJORS:
        if m >= NEW:  # the shape rule sees every layer's own groups and no launch is added
            assert np.array_equal(kernel_groups(groups, dw, m), groups)
            assert not extra_launches(groups, dw, m, np.ones(3)).any()
        else:
            assert kernel_groups(groups, dw, m).tolist() == [1.0, 1.0, 64.0]


@pytest.mark.parametrize("model", ["resnet50", "vgg16", "inception_v3", "efficientnet_b0", "mobilenet_v2",
                                   "resnext50_32x4d"])
def test_the_era_moves_only_grouped_layers(model: str) -> None:
    if model not in model_names():
        pytest.skip(f"{model} not in the zoo")
    net = get_model(model)
    cc = compile_counts(net)
    grouped = np.array([ly.kind == "conv" and ly.groups > 1 and ly.in_shape[0] // ly.groups > 1
                        for ly in net.layers])
    base = layer_times(cc, V100, "fp32", 32)
    for m in CUDNN_MAJORS:
        t = layer_times(cc, V100, "fp32", 32, cudnn_major=m)
        for a, b in ((t.fwd, base.fwd), (t.bwd, base.bwd)):
            assert np.array_equal(a[~grouped], b[~grouped])  # every non-grouped layer at today's price
            if m >= NEW:
                assert np.array_equal(a, b)
            elif grouped.any():
                assert (a[grouped] > b[grouped]).all()


def test_era_is_a_stated_assumption_and_a_usage_error_when_unknown() -> None:
    old = predict("resnext50_32x4d", 1, "dp=1", "v100-16gb-dgx1", "fp32", 32, cudnn_major=7)
    new = predict("resnext50_32x4d", 1, "dp=1", "v100-16gb-dgx1", "fp32", 32)
    assert old.iteration_time_s > new.iteration_time_s
    assert old.assumptions["cudnn"].startswith("cuDNN 7.x") and "one kernel per group" in old.assumptions["cudnn"]
    assert new.assumptions["cudnn"].startswith(f"cuDNN {DEFAULT_CUDNN_MAJOR}.x")
    for bad in (4, 10, "8", True, 7.5):
        with pytest.raises(UsageError, match="valid: 5, 6, 7, 8, 9"):
            check_cudnn_major(bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="cuDNN major version 4"):
        predict("resnet50", 1, "dp=1", batch_per_gpu=8, cudnn_major=4)


def test_rows_carry_the_cudnn_they_were_measured_with() -> None:
    rows = load_rows()
    seen = {(r.source, r.gpu if r.source == "deepbench" else ""): r.cudnn_major for r in rows}
    assert seen[("deepbench", "P100")] == 6 and seen[("deepbench", "V100-SXM2 (DGX-1)")] == 7
    assert seen[("pipedream", "")] == 7 and seen[("neusight", "")] == 8
    # no DeepBench or NeuSight convolution is grouped: their scores cannot move with the era
    assert not any(r.layer.groups > 1 for r in rows if r.source != "pipedream")


def test_pipedream_resnext_rows_held_out() -> None:
    """Independent oracle: PipeDream's measured ResNeXt grouped layers (PyTorch 1.x, cuDNN 7),
    each model priced with the PipeDream-only numbers derived from the other models' rows.
    The single-kernel rule prices them ~3x too fast; a kernel per group must do much better."""
    pipe = load_rows(("pipedream",))
    out: dict[int, dict[str, float]] = {OLD: {}, NEW: {}}
    for model in ("resnext50", "resnext101"):
        n = derive([r for r in pipe if r.model != model], V100)
        rows = [r for r in pipe if r.model == model and r.op.startswith("conv grouped")]
        assert rows and all(r.cudnn_major == OLD for r in rows)
        priced, hw = with_numbers(rows, V100, n)
        meas = np.array([r.measured_s for r in rows])
        for major in (OLD, NEW):
            p, _ = price_rows([dataclasses.replace(r, cudnn_major=major) for r in priced], {hw.name: hw}, before=False)
            for phase in ("fwd", "bwd"):
                ix = np.array([r.what == f"layer_{phase}" for r in rows])
                out[major][f"{model} {phase}"] = float(np.mean(np.abs(p[ix] - meas[ix]) / meas[ix]))
                if major == OLD:
                    assert 0.5 < float(np.median(p[ix] / meas[ix])) < 1.5, (model, phase)
    for key, err in out[OLD].items():
        assert err < 0.7 * out[NEW][key], (key, err, out[NEW][key])
        assert err < 0.45, key


def test_explain_states_the_era_and_matches_predict(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["resnext50_32x4d", "-n", "2", "-s", "pp=2,mb=4", "-H", "v100-16gb-dgx1", "--precision", "fp32"]
    code, out, err = run_main(["explain", *args, "--cudnn", "7"], capsys)
    assert code == 0, err
    assert "cuDNN 7.x: grouped convolutions (1 < groups < channels) run one kernel per group" in out
    line = next(x for x in out.splitlines() if x.startswith("T_step = ") and "predict:" in x)
    step_ms = float(line.split()[2])
    assert line.endswith(f"(predict: {step_ms:.4f} ms)")
    old = predict("resnext50_32x4d", 2, "pp=2,mb=4", "v100-16gb-dgx1", "fp32", 32, cudnn_major=7)
    new = predict("resnext50_32x4d", 2, "pp=2,mb=4", "v100-16gb-dgx1", "fp32", 32)
    assert step_ms == pytest.approx(old.iteration_time_s * 1e3, abs=1e-4)
    assert old.iteration_time_s > new.iteration_time_s

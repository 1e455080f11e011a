"""Every command and API function that prices a plan takes the cuDNN era and states it.

Oracle: the single-plan ``predict(..., cudnn_major=m)`` of the ``grouped`` feature. Each
surface below must reproduce its figure at ``m`` (so the era reaches the pricing, not only the
text), differ between cuDNN 7 and the default on a ResNeXt (grouped 3x3 convolutions), agree
on a ResNet-50 (no grouped layer), and name the version in what it prints.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import run_main

from perfmodel import plan, predict
from perfmodel.api import plan_frame, predict_frame, scale, sweep
from perfmodel.commands.compare import compare
from perfmodel.cost.grouped import DEFAULT_CUDNN_MAJOR
from perfmodel.errors import UsageError

GROUPED, PLAIN = "resnext50_32x4d", "resnet50"
OLD = 7  # one kernel per group
HW = "v100-16gb-dgx1"  # Volta: cuDNN 7 (grouped loops) and 9 both ran on it
assert DEFAULT_CUDNN_MAJOR >= 8, "the default must run grouped convolutions as one kernel"


def _oracle(model: str, major: int) -> float:
    """Step seconds of dp=8 at 32 per GPU, straight from predict()."""
    return predict(model, 8, "dp=8", HW, "amp", 32, cudnn_major=major).iteration_time_s


@pytest.fixture(scope="module")
def oracle() -> dict[tuple[str, int], float]:
    return {(m, c): _oracle(m, c) for m in (GROUPED, PLAIN) for c in (OLD, DEFAULT_CUDNN_MAJOR)}


def test_the_oracle_separates_the_eras_only_for_grouped_layers(oracle: dict[tuple[str, int], float]) -> None:
    assert oracle[GROUPED, OLD] > 1.05 * oracle[GROUPED, DEFAULT_CUDNN_MAJOR]
    # a plain network differs only by its 3-channel first layer's forward (cuDNN 7's 32-channel
    # tensor-core K-tiles, or its CUDA-core kernel: perfmodel/cost/ktile.py), well under 1% of a step
    assert oracle[PLAIN, DEFAULT_CUDNN_MAJOR] < oracle[PLAIN, OLD] < 1.01 * oracle[PLAIN, DEFAULT_CUDNN_MAJOR]


def _scale_step(model: str, major: int | None) -> pd.DataFrame:
    kw = {} if major is None else {"cudnn_major": major}
    return scale(model, [1, 8], HW, "amp", batch_per_gpu=32, strategies="dp", **kw)


@pytest.mark.parametrize("model", [GROUPED, PLAIN])
def test_api_scale(model: str, oracle: dict[tuple[str, int], float]) -> None:
    old, new = _scale_step(model, OLD), _scale_step(model, None)
    at8 = lambda df: float(df.loc[df["gpus"] == 8, "step_s"].iloc[0])  # noqa: E731
    assert at8(old) == pytest.approx(oracle[model, OLD], rel=1e-9)
    assert at8(new) == pytest.approx(oracle[model, DEFAULT_CUDNN_MAJOR], rel=1e-9)
    assert old.attrs["cudnn_major"] == OLD and old.attrs["cudnn"].startswith(f"cuDNN {OLD}.x")
    assert new.attrs["cudnn"].startswith(f"cuDNN {DEFAULT_CUDNN_MAJOR}.x")
    # the one-GPU baseline is priced in the same era as the plans
    assert old.attrs["baseline_step_s"] == pytest.approx(_oracle_one(model, OLD), rel=1e-9)


def _oracle_one(model: str, major: int) -> float:
    return predict(model, 1, "dp=1", HW, "amp", 32, cudnn_major=major).iteration_time_s


@pytest.mark.parametrize("model", [GROUPED, PLAIN])
def test_api_sweep_and_predict_frame(model: str, oracle: dict[tuple[str, int], float]) -> None:
    for major in (OLD, DEFAULT_CUDNN_MAJOR):
        df = sweep(model, [8], "dp=8", HW, "amp", batch_per_gpu=32, cudnn_major=major)
        assert float(df["step_s"].iloc[0]) == pytest.approx(oracle[model, major], rel=1e-9)
        assert df.attrs["cudnn"].startswith(f"cuDNN {major}.x")
        pf = predict_frame(model, 8, "dp=8", HW, "amp", 32, cudnn_major=major)
        assert float(pf["step_s"].iloc[0]) == pytest.approx(oracle[model, major], rel=1e-9)
    default = sweep(model, 8, "dp=8", HW, "amp", batch_per_gpu=32)
    assert float(default["step_s"].iloc[0]) == pytest.approx(oracle[model, DEFAULT_CUDNN_MAJOR], rel=1e-9)


def test_api_searches_take_the_era() -> None:
    """sweep without a plan and plan_frame search in the era asked: their best plan is the one
    the plan search finds at that cuDNN."""
    for major in (OLD, DEFAULT_CUDNN_MAJOR):
        best = plan(GROUPED, 8, HW, "amp", 256, top=1, cudnn_major=major).plans[0]
        s = sweep(GROUPED, 8, None, HW, "amp", batch_per_gpu=32, kinds="dp", cudnn_major=major)
        assert float(s["step_s"].iloc[0]) == pytest.approx(
            plan(GROUPED, 8, HW, "amp", 256, top=1, kinds=("dp",), cudnn_major=major).plans[0].iteration_time_s,
            rel=1e-9)
        pf = plan_frame(GROUPED, 8, HW, "amp", 256, top=1, cudnn_major=major)
        assert pf["plan"].iloc[0] == best.strategy.spec()
        assert float(pf["step_s"].iloc[0]) == pytest.approx(best.iteration_time_s, rel=1e-9)
        assert pf.attrs["cudnn"].startswith(f"cuDNN {major}.x")


@pytest.mark.parametrize("strategy", ["dp=8", "best"])
def test_api_compare(strategy: str, oracle: dict[tuple[str, int], float]) -> None:
    for model in (GROUPED, PLAIN):
        old = compare(model, 8, [HW], ["amp"], strategy, 32, cudnn_major=OLD).predictions[0]
        new = compare(model, 8, [HW], ["amp"], strategy, 32).predictions[0]
        assert old.assumptions["cudnn"].startswith(f"cuDNN {OLD}.x")
        assert new.assumptions["cudnn"].startswith(f"cuDNN {DEFAULT_CUDNN_MAJOR}.x")
        if strategy == "dp=8":
            assert old.iteration_time_s == pytest.approx(oracle[model, OLD], rel=1e-9)
            assert new.iteration_time_s == pytest.approx(oracle[model, DEFAULT_CUDNN_MAJOR], rel=1e-9)
        elif model == PLAIN:  # its first layer only (test_the_oracle_separates_the_eras_only_for_grouped_layers)
            assert old.iteration_time_s == pytest.approx(new.iteration_time_s, rel=0.01)
        else:
            assert old.iteration_time_s > new.iteration_time_s


@pytest.mark.parametrize("call", [
    lambda m: scale(GROUPED, [1], cudnn_major=m),
    lambda m: sweep(GROUPED, 1, "dp=1", cudnn_major=m),
    lambda m: predict_frame(GROUPED, 1, "dp=1", cudnn_major=m),
    lambda m: plan_frame(GROUPED, 1, cudnn_major=m),
    lambda m: compare(GROUPED, 1, [HW], ["amp"], "dp=1", cudnn_major=m),
], ids=["scale", "sweep", "predict_frame", "plan_frame", "compare"])
@pytest.mark.parametrize("bad", [4, 10, "7", 7.0, True])
def test_api_refuses_unknown_eras(call: object, bad: object) -> None:
    with pytest.raises(UsageError, match=r"valid: 5, 6, 7, 8, 9"):
        call(bad)  # type: ignore[operator]


# -- the commands ------------------------------------------------------------------------------
def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = run_main([*argv, "--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert isinstance(d, dict)
    return d


def _cli(command: str, model: str, extra: list[str], tmp: Path) -> list[str]:
    args = {
        "scale": ["scale", model, "--gpus", "8", "-H", HW, "--strategies", "dp", "--batch-per-gpu", "32"],
        "compare": ["compare", model, "-n", "8", "-H", HW, "-s", "dp=8", "-b", "32"],
        "export": ["export", model, "-n", "8", "-s", "dp=8", "-H", HW, "-b", "32", "-o", str(tmp / "p.py")],
    }[command]
    return args + extra


def _step_s(command: str, d: dict[str, object]) -> float:
    if command == "scale":
        rows = d["rows"]
        assert isinstance(rows, list)
        return float(rows[0]["step_s"])
    if command == "compare":
        rows = d["rows"]
        assert isinstance(rows, list)
        return float(rows[0]["iteration_time_s"])
    p = d["plan"]
    assert isinstance(p, dict)
    return float(p["predicted_step_time_s"])


def _cudnn_text(command: str, d: dict[str, object]) -> str:
    if command == "scale":
        setting = d["setting"]
        assert isinstance(setting, dict)
        return str(setting["cudnn"])
    if command == "compare":
        rows = d["rows"]
        assert isinstance(rows, list)
        return str(rows[0]["assumptions"]["cudnn"])
    a = d["assumptions"]
    assert isinstance(a, dict)
    return str(a["cudnn"])


@pytest.mark.parametrize("command", ["scale", "compare", "export"])
@pytest.mark.parametrize("model", [GROUPED, PLAIN])
def test_commands_take_cudnn(command: str, model: str, oracle: dict[tuple[str, int], float], tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    old = _json(_cli(command, model, ["--cudnn", str(OLD)], tmp_path), capsys)
    new = _json(_cli(command, model, [], tmp_path), capsys)
    assert _step_s(command, old) == pytest.approx(oracle[model, OLD], rel=1e-9)
    assert _step_s(command, new) == pytest.approx(oracle[model, DEFAULT_CUDNN_MAJOR], rel=1e-9)
    assert _cudnn_text(command, old).startswith(f"cuDNN {OLD}.x")
    assert _cudnn_text(command, new).startswith(f"cuDNN {DEFAULT_CUDNN_MAJOR}.x")


@pytest.mark.parametrize("command", ["scale", "compare", "export"])
def test_tables_state_the_era(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(_cli(command, GROUPED, ["--cudnn", str(OLD)], tmp_path), capsys)
    assert code == 0, err
    line = [ln for ln in out.splitlines() if "cudnn: " in ln]
    assert len(line) == 1, out
    assert f"cuDNN {OLD}.x" in line[0] and "one kernel per group" in line[0]

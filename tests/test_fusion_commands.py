"""``--fusion`` on every pricing command and API function, and in what they output."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from cli_helpers import run_main

from perfmodel import predict
from perfmodel.api import plan_frame, predict_frame, scale, sweep
from perfmodel.commands.compare import compare
from perfmodel.cost.fusion import FUSIONS
from perfmodel.errors import UsageError
from perfmodel.search import plan

# the MXNet fusion's kernels run fp16 NHWC only: every fusion is valid at amp in nhwc
_HW, _SETTING = "v100-16gb-dgx1", ["-H", "v100-16gb-dgx1", "--precision", "amp", "--memory-format", "nhwc"]
_KW = dict(precision="amp", memory_format="nhwc")


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    code, out, err = run_main([*argv, *_SETTING, "--format", "json"], capsys)
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _step(fusion: str, spec: str = "dp=8", gpus: int = 8) -> float:
    return predict("resnet50", gpus, spec, _HW, batch_per_gpu=64, fusion=fusion, **_KW).iteration_time_s


def test_fusions_price_differently() -> None:
    # otherwise the checks below could pass with the option ignored
    steps = {f: _step(f) for f in FUSIONS}
    assert len(set(steps.values())) == len(FUSIONS)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_explain_equals_predict_and_json_carries_the_fusion(fusion: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["resnet50", "-n", "8", "-s", "dp=8", "-b", "64", "--fusion", fusion]
    p = _json(["predict", *args], capsys)
    e = _json(["explain", *args], capsys)
    assert p["fusion"] == fusion
    assert e["fusion"].startswith(f"fusion {fusion}:")
    assert math.isclose(e["iteration_time_s"], p["iteration_time_s"], rel_tol=1e-9)
    assert math.isclose(p["iteration_time_s"], _step(fusion), rel_tol=1e-12)


@pytest.mark.parametrize("fusion", ["xla", "mxnet-bn-add-relu"])
def test_plan_ranks_with_the_fusions_prices(fusion: str, capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(["plan", "resnet50", "-n", "8", "-B", "512", "--top", "3", "--fusion", fusion], capsys)
    assert "fusion" in d["assumptions"] and fusion in d["assumptions"]["fusion"]
    thr = [row["throughput_samples_per_s"] for row in d["plans"]]
    assert thr == sorted(thr, reverse=True)
    for row in d["plans"]:
        assert row["fusion"] == fusion
        assert math.isclose(row["iteration_time_s"], _step(fusion, row["strategy"]), rel_tol=1e-9)
    eager = plan("resnet50", 8, _HW, global_batch=512, top=1, **_KW).plans[0]
    assert eager.fusion == "eager" and d["plans"][0]["iteration_time_s"] < eager.iteration_time_s


def test_plan_csv_states_the_fusion(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["plan", "resnet50", "-n", "8", "-B", "512", "--top", "2", *_SETTING,
                               "--fusion", "xla", "--format", "csv"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2 and {r["fusion"] for r in rows} == {"xla"}


def test_compare_and_scale_take_the_fusion(capsys: pytest.CaptureFixture[str]) -> None:
    c = _json(["compare", "resnet50", "-n", "8", "-s", "dp=8", "-b", "64", "--fusion", "xla"], capsys)
    (row,) = c["rows"]
    assert row["fusion"] == "xla" and math.isclose(row["iteration_time_s"], _step("xla"), rel_tol=1e-12)
    s = _json(["scale", "resnet50", "--gpus", "8", "--strategies", "dp", "-b", "64", "--fusion", "xla"], capsys)
    assert s["setting"]["fusion"] == "xla" and s["setting"]["fusion_assumption"].startswith("fusion xla:")
    (srow,) = s["rows"]
    assert math.isclose(srow["step_s"], _step("xla"), rel_tol=1e-12)
    assert compare("resnet50", 8, [_HW], ["amp"], "dp=8", 64, None, memory_format="nhwc",
                   fusion="mxnet-bn-add-relu").predictions[0].fusion == "mxnet-bn-add-relu"


def test_api_functions_take_the_fusion() -> None:
    pf = predict_frame("resnet50", 8, "dp=8", _HW, batch_per_gpu=64, fusion="xla", **_KW)
    assert pf.attrs["fusion"] == "xla" and math.isclose(pf["step_s"].iloc[0], _step("xla"), rel_tol=1e-12)
    best = plan_frame("resnet50", 8, _HW, global_batch=512, top=1, fusion="xla", **_KW)
    assert best.attrs["fusion"] == "xla"
    assert math.isclose(best["step_s"].iloc[0], _step("xla", best["plan"].iloc[0]), rel_tol=1e-9)
    sc = scale("resnet50", [8], _HW, batch_per_gpu=64, strategies="dp", fusion="mxnet-bn-add-relu", **_KW)
    assert sc.attrs["fusion"] == "mxnet-bn-add-relu"
    assert math.isclose(sc["step_s"].iloc[0], _step("mxnet-bn-add-relu"), rel_tol=1e-12)
    sw = sweep("resnet50", 8, "dp=8", _HW, batch_per_gpu=64, fusion="xla", **_KW)
    assert sw.attrs["fusion_assumption"].startswith("fusion xla:")


def test_sweep_refuses_a_precision_the_fusion_cannot_run_before_pricing() -> None:
    with pytest.raises(UsageError, match="not fp32 nhwc"):
        sweep("resnet50", 8, "dp=8", _HW, ["amp", "fp32"], memory_format="nhwc", fusion="mxnet-bn-add-relu")
    with pytest.raises(UsageError, match="unknown fusion"):
        plan_frame("resnet50", 8, _HW, fusion="tvm")

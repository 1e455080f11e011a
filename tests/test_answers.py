"""Answers users act on: memory verdict and largest batch, time to train and cost, the CLI contract."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from cli_helpers import run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.errors import ProfileError, UsageError
from perfmodel.hardware import load_hardware
from perfmodel.hardware.loader import load_profile
from perfmodel.network import get_model
from perfmodel.report import answers as answers_module
from perfmodel.report.answers import TrainingRequest, answers_for
from perfmodel.strategies import predict
from perfmodel.strategies.headroom import largest_batch_per_gpu, memory_verdict
from perfmodel.strategies.predict import context, price
from perfmodel.strategies.spec import parse_strategy
from perfmodel.strategies.train_cost import IMAGENET_1K_TRAIN_IMAGES, default_dataset_size, training_estimate
from perfmodel.units import GIB
from perfmodel.validation import profile_toml, shipped_path
from perfmodel.validation.intervals import GroupKey, interval_for

CONTRACT = (
    "throughput_interval_samples_per_s",
    "iteration_time_interval_s",
    "interval",
    "memory_headroom_bytes",
    "largest_batch_per_gpu_that_fits",
)


@pytest.mark.parametrize(
    ("model", "hw", "spec", "precision"),
    [
        ("resnet50", "v100-16gb-dgx1", "dp=8", "amp"),
        ("vgg16", "v100-16gb-dgx1", "pp=4,dp=2,mb=4", "fp32"),
        ("resnet50", "p100-16gb-nvlink", "sp=2x2,dp=2", "fp32"),
        ("unet", "p40-24gb-pcie", "pp=8,mb=4", "fp32"),
    ],
)
def test_largest_batch_is_the_fitting_boundary(model: str, hw: str, spec: str, precision: str) -> None:
    """Oracle: pricing the found batch fits and one more sample per GPU does not."""
    h = load_hardware(hw)
    ctx = context(get_model(model), h, precision, "sgd")
    s = parse_strategy(spec, 8)
    b = largest_batch_per_gpu(ctx, s)
    cap = h.device.memory_bytes
    assert b >= 1
    assert sum(price(ctx, s, b * 8).memory.values()) <= cap
    assert sum(price(ctx, s, (b + 1) * 8).memory.values()) > cap


def test_largest_batch_is_zero_when_one_sample_does_not_fit() -> None:
    ctx = context(get_model("cosmoflow"), load_hardware("p40-24gb-pcie"), "fp32", "sgd")
    assert largest_batch_per_gpu(ctx, parse_strategy("dp=1", 1)) == 0


def test_verdict_fits_and_does_not_fit() -> None:
    hw = load_hardware("v100-16gb-dgx1")
    ok = predict("resnet50", 8, "dp=8", hw, "amp", 128)
    over = predict("resnet50", 8, "dp=8", hw, "amp", 512)
    v_ok = memory_verdict(ok, 0.01, "test", 299)
    v_over = memory_verdict(over, 0.01, "test", 299)
    assert v_ok.fits and v_ok.headroom_bytes == pytest.approx(hw.device.memory_bytes - ok.memory_per_gpu_bytes)
    assert v_ok.text().startswith(f"fits: {ok.memory_per_gpu_bytes / GIB:.1f} of 16.0 GiB (")
    assert "% headroom" in v_ok.text()
    assert not v_over.fits and v_over.headroom_bytes < 0
    assert v_over.text().startswith(f"does not fit: needs {over.memory_per_gpu_bytes / GIB:.1f} GiB, ")
    assert "largest batch per GPU that fits: 299" in v_over.text()
    assert v_ok.margin_bytes == pytest.approx(0.01 * ok.memory["activations"])


def test_time_to_train_and_cost() -> None:
    p = predict("resnet50", 8, "dp=8", "a100-80gb-dgx", "amp", 256)
    size, note = default_dataset_size(get_model("resnet50")) or (0, "")
    assert size == IMAGENET_1K_TRAIN_IMAGES == 1_281_167 and "ImageNet" in note
    est = training_estimate(p, 90, size, note, (0.09, 0.16), 2.0)
    steps = math.ceil(90 * 1_281_167 / 2048)
    assert est.steps == steps
    assert est.time_s == pytest.approx(steps * p.iteration_time_s)
    assert est.cost == pytest.approx(est.time_s / 3600 * 8 * 2.0)
    assert est.time_interval_s == pytest.approx((steps * 0.09, steps * 0.16))
    assert default_dataset_size(get_model("unet")) is None
    with pytest.raises(UsageError, match="epochs"):
        training_estimate(p, -1, size)


def test_price_comes_from_the_profile_when_not_given() -> None:
    hw = load_hardware("a100-80gb-dgx")
    p = predict("resnet50", 8, "dp=8", hw, "amp", 256)
    a = answers_for(p, hw, TrainingRequest(epochs=1))
    assert a.training is not None and a.training.price_per_gpu_hour == hw.price_per_gpu_hour > 0
    assert "as of 20" in a.training.price_source
    b = answers_for(p, hw, TrainingRequest(epochs=1, price_per_gpu_hour=1.0, currency="EUR"))
    assert b.training is not None and b.training.currency == "EUR"
    assert b.training.cost == pytest.approx(a.training.cost / hw.price_per_gpu_hour)


def test_profile_price_round_trips_through_calibrate(tmp_path: Path) -> None:
    hw = load_hardware("h100-80gb-dgx")
    f = tmp_path / "x.toml"
    f.write_text(profile_toml(hw, "x", "copy", "test"), encoding="utf-8")
    again = load_profile(f)
    assert again.price_per_gpu_hour == hw.price_per_gpu_hour
    assert again.sources["price_date"] == hw.sources["price_date"]
    bad = f.read_text(encoding="utf-8").replace("per_gpu_hour", "per_gpu_hr")
    f.write_text(bad, encoding="utf-8")
    with pytest.raises(ProfileError, match="price.per_gpu_hr"):
        load_profile(f)


def test_predict_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["predict", "resnet50", "--gpus", "8", "-s", "dp=8", "-b", "256", "--epochs", "2",
                             "--price-per-gpu-hour", "3", "--format", "json"], capsys)
    d = json.loads(out)
    assert code == 0
    for k in (*CONTRACT, "time_to_train_s", "cost", "price_per_gpu_hour"):
        assert k in d, k
    lo, hi = d["throughput_interval_samples_per_s"]
    assert 0 < lo < hi
    assert d["interval"]["level"] == 0.8 and d["interval"]["runs"] >= 9 and d["interval"]["group"]
    assert d["memory_headroom_bytes"] == pytest.approx(d["memory_capacity_bytes"] - d["memory_per_gpu_bytes"])
    assert d["cost"] == pytest.approx(d["time_to_train_s"] / 3600 * 8 * 3)


def test_plan_rows_carry_the_contract_and_headroom_column(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["plan", "resnet50", "--gpus", "8", "--top", "3", "--format", "json"], capsys)
    d = json.loads(out)
    assert code == 0
    for row in d["plans"]:
        for k in CONTRACT:
            assert k in row, k
    code, out, _ = run_main(["plan", "resnet50", "--gpus", "8", "--top", "3"], capsys)
    assert code == 0 and "headroom_%" in out
    assert "rank 1" in out and "measured runs of family=resnet, generation=ampere" in out


def test_plan_rank_by_cost(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "resnet50", "--gpus", "8", "--top", "4", "-H", "h100-80gb-dgx", "--epochs", "1", "--format", "json"]
    code, out, _ = run_main([*args, "--rank-by", "cost"], capsys)
    costs = [row["cost"] for row in json.loads(out)["plans"]]
    assert code == 0 and costs == sorted(costs) and len(costs) == 4
    code, _, err = run_main(["plan", "resnet50", "--gpus", "8", "-H", "v100-16gb-dgx1", "--epochs", "1",
                             "--rank-by", "cost"], capsys)
    assert code == 2 and "needs a price" in err


def test_epochs_without_a_dataset_for_unet_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["predict", "unet", "--gpus", "1", "-s", "dp=1", "-b", "1", "--epochs", "1"], capsys)
    assert code == 2 and "--dataset-size" in err


def test_api_frames_carry_intervals_and_headroom() -> None:
    import perfmodel.api as api
    from perfmodel.report.answers import FRAME_COLUMNS

    df = api.predict_frame("resnet50", 8, ["dp=8", "pp=2,dp=4,mb=4"], batch_per_gpu=64)
    for c in FRAME_COLUMNS:
        assert c in df.columns, c
    assert (df["samples_per_s_low"] < df["samples_per_s_high"]).all()
    assert (df["memory_headroom_bytes"] == df["memory_capacity_bytes"] - df["memory_per_gpu_bytes"]).all()
    top = api.plan_frame("resnet50", 8, top=2)
    assert (top["largest_batch_per_gpu_that_fits"] >= 32).all()
    sc = api.scale("resnet50", "1,8", strategies=["dp"])
    assert sc["interval_runs"].min() >= 9


def test_scale_time_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = tmp_path / "cost.png"
    code, out, err = run_main(["scale", "resnet50", "--gpus", "1,2,4", "--strategies", "dp", "-H", "h100-80gb-dgx",
                               "--epochs", "2", "--cost-chart", str(chart), "--format", "json"], capsys)
    assert code == 0, err
    rows = json.loads(out)["rows"]
    for r in rows:
        steps = math.ceil(2 * IMAGENET_1K_TRAIN_IMAGES / r["global_batch"])
        assert r["time_to_train_s"] == pytest.approx(steps * r["step_s"])
        assert r["cost"] == pytest.approx(r["time_to_train_s"] / 3600 * r["gpus"] * 6.88)
    assert chart.stat().st_size > 10_000
    code, _, err = run_main(["scale", "resnet50", "--gpus", "1,2", "--cost-chart", str(chart)], capsys)
    assert code == 2 and "--epochs" in err


def test_calibrated_profile_gets_the_calibrated_narrower_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_toml = tmp_path / "cal.toml"
    code, _, err = run_main(["calibrate", str(shipped_path()), "-H", "v100-16gb-dgx1",
                             "-o", str(out_toml)], capsys)
    assert code == 0, err
    widths = {}
    for hw in ("v100-16gb-dgx1", str(out_toml)):
        code, out, _ = run_main(["predict", "resnet50", "--gpus", "8", "-s", "dp=8", "-b", "256", "-H", hw,
                                 "--format", "json"], capsys)
        d = json.loads(out)
        lo, hi = d["throughput_interval_samples_per_s"]
        widths[hw] = (hi - lo) / d["throughput_samples_per_s"]
        assert d["interval"]["group"].endswith("uncalibrated" if hw == "v100-16gb-dgx1" else ", calibrated")
    # each is its own group's conformal interval: throughput in [p exp(-r_high), p exp(-r_low)]
    for hw, calibrated in (("v100-16gb-dgx1", False), (str(out_toml), True)):
        iv = interval_for(GroupKey("resnet", "volta", "amp", "data", calibrated))
        assert widths[hw] == pytest.approx(math.exp(-iv.low_log_ratio) - math.exp(-iv.high_log_ratio), rel=1e-6)
    assert widths[str(out_toml)] != pytest.approx(widths["v100-16gb-dgx1"], rel=1e-3)


def test_explain_carries_the_interval(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["explain", "resnet50", "--gpus", "8", "-s", "dp=8", "--format", "json"], capsys)
    d = json.loads(out)
    lo, hi = d["iteration_time_interval_s"]
    assert code == 0 and lo < hi and d["interval"]["runs"] >= 9


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["resnet18", "vgg11", "mobilenet_v2", "googlenet"]),
    st.sampled_from(["v100-16gb-dgx1", "p100-16gb-nvlink", "a100-40gb-dgx", "p40-24gb-pcie"]),
    st.sampled_from(["fp32", "amp"]),
    st.sampled_from(["dp=4", "pp=2,dp=2,mb=2", "pp=4,mb=4", "sp=2x1,dp=2", "filter=2,dp=2"]),
)
def test_largest_batch_property(model: str, hw: str, precision: str, spec: str) -> None:
    """On random plans: the batch found fits and one more sample per GPU does not (or nothing fits)."""
    h = load_hardware(hw)
    ctx = context(get_model(model), h, precision, "sgd")
    s = parse_strategy(spec, 4)
    b = largest_batch_per_gpu(ctx, s)
    cap = h.device.memory_bytes
    if b == 0:
        first = max(1, math.ceil(s.mb * s.dp / 4))
        assert sum(price(ctx, s, first * 4).memory.values()) > cap
        return
    assert sum(price(ctx, s, b * 4).memory.values()) <= cap
    assert sum(price(ctx, s, (b + 1) * 4).memory.values()) > cap


def test_compare_rows_carry_the_contract_and_each_profiles_price(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["compare", "resnet50", "--gpus", "8", "-H", "a100-80gb-dgx,h100-80gb-dgx",
                               "--epochs", "1", "--format", "json"], capsys)
    assert code == 0, err
    rows = json.loads(out)["rows"]
    for row in rows:
        for k in (*CONTRACT, "time_to_train_s", "cost"):
            assert k in row, k
    prices = [r["price_per_gpu_hour"] for r in rows]
    assert prices == [load_hardware(h).price_per_gpu_hour for h in ("a100-80gb-dgx", "h100-80gb-dgx")]
    for r in rows:
        assert r["cost"] == pytest.approx(r["time_to_train_s"] / 3600 * 8 * r["price_per_gpu_hour"])


@pytest.mark.parametrize("command", [["plan", "resnet18", "--gpus", "2"],
                                     ["compare", "resnet18", "--gpus", "2", "-H", "a100-80gb-dgx"]])
def test_table_searches_no_largest_batch_and_json_does(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table never shows the largest batch, so it does not spend the prices that find it;
    JSON, which carries it, does."""
    found: list[int] = []
    real = answers_module.largest_batch_per_gpu

    def spy(*args: object, **kwargs: object) -> int:
        found.append(real(*args, **kwargs))  # type: ignore[arg-type]
        return found[-1]

    monkeypatch.setattr(answers_module, "largest_batch_per_gpu", spy)
    code, out, err = run_main(command, capsys)
    assert code == 0, err
    assert not found and "largest" not in out
    code, out, err = run_main([*command, "--format", "json"], capsys)
    assert code == 0, err
    rows = json.loads(out)["plans" if command[0] == "plan" else "rows"]
    assert found and [r["largest_batch_per_gpu_that_fits"] for r in rows] == found

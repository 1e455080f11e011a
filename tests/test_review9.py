"""Review 9: a user's-eye pass over the CLI's outputs (what each prints, and whether it agrees)."""

from __future__ import annotations

import csv
import io
import json
import math
import re

import pytest
from cli_helpers import run_main

from perfmodel.report import fmt_rate, render_frame
from perfmodel.search import plan


def test_rates_below_a_hundred_keep_three_digits() -> None:
    """A throughput of 1.66 samples/s printed as '2' made an 80% range read '2-2' (unet3d on a
    GTX 1080, fp32, global batch 64) and a 0.06 samples/s one read '0 - 0'."""
    assert fmt_rate(1.66) == "1.66"
    assert fmt_rate(0.0569) == "0.0569"
    assert fmt_rate(12.34) == "12.3"
    assert fmt_rate(10_044.2) == "10,044"
    assert fmt_rate(math.inf) == "-"


def test_tables_print_no_inf() -> None:
    assert "inf" not in render_frame([{"x_ms": math.inf, "y_ms": -math.inf, "z_ms": 1.0}])


def test_a_slow_plan_range_is_not_rounded_to_one_number(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["plan", "unet3d", "--gpus", "1", "--hardware", "gtx-1080", "--precision", "fp32",
                               "-B", "64"], capsys)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.strip().startswith("1 "))
    rng = next(w for w in row.split() if "-" in w and w[0].isdigit())
    lo, hi = (float(x) for x in rng.split("-"))
    assert 0 < lo < hi < 10, row
    assert "(1.69 samples/s, needs" in out  # the fastest plan that does not fit, not '(2 samples/s'


def test_compare_states_every_row_assumptions(capsys: pytest.CaptureFixture[str]) -> None:
    """compare printed the first row's assumptions less its profile, source and precision: an fp32 row
    read the amp row's mixed-precision line and the first profile's stage split."""
    code, out, err = run_main(["compare", "resnet50", "--gpus", "8", "-H", "a100-80gb-dgx,p100-16gb-pcie",
                               "--precision", "amp,fp32", "--strategy", "pp=2,dp=4", "-B", "256"], capsys)
    assert code == 0, err
    text = out.split("\nassumptions:\n", 1)[1]
    for key in ("hardware", "hardware_source", "precision", "memory_capacity", "stage_split"):
        assert f"\n  {key}:\n" in "\n" + text, key  # differs by row: one line per value
    assert "p100-16gb-pcie: 8x Tesla P100-PCIE-16GB" in text
    assert "p100-16gb-pcie fp32: fp32 everywhere" in text
    mixed = text.split("  mixed_precision:\n", 1)[1].split("\n  ", 1)[0]
    assert mixed.startswith("    a100-80gb-dgx amp, p100-16gb-pcie amp: torch.autocast") and "\n" not in mixed
    assert "\n  optimizer: SGD" in "\n" + text  # the same for every row: said once


def test_scale_states_the_profile_optimizer_and_exclusions(capsys: pytest.CaptureFixture[str]) -> None:
    """scale printed the software lines only: not where the profile's figures come from, the
    optimizer, the memory reserve or what the step excludes (every output states its assumptions)."""
    argv = ["scale", "resnet50", "--gpus", "1,2", "--strategies", "dp", "-H", "v100-16gb-dgx1", "--optimizer", "adam"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    lines = out.splitlines()
    for key in ("hardware: v100-16gb-dgx1: ", "hardware_source: ", "precision: mixed precision", "optimizer: Adam",
                "memory_capacity: 16.0 GiB", "excluded: data loading"):
        assert any(line.startswith(key) for line in lines), key
    code, out, err = run_main([*argv, "--format", "json"], capsys)
    said = json.loads(out)["setting"]["assumptions"]
    assert said["optimizer"].startswith("Adam") and said["excluded"].startswith("data loading")


def test_predict_says_when_it_chose_the_batch(capsys: pytest.CaptureFixture[str]) -> None:
    """predict without -b/-B priced 32 per GPU and said nothing of it beyond the header's number."""
    code, out, err = run_main(["predict", "resnet50", "--gpus", "8", "--strategy", "dp=8", "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["assumptions"]["global_batch"].startswith("256 samples per step (default: 32 per GPU")
    code, out, err = run_main(["predict", "resnet50", "--gpus", "8", "--strategy", "dp=8", "-B", "256",
                               "--format", "json"], capsys)
    assert "global_batch" not in json.loads(out)["assumptions"]  # given: not an assumption


def test_compare_takes_an_imported_model_input_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """review 8b #13: compare had no --input-shape, so an imported model could be compared only at
    3 x 224 x 224; its row now equals predict's at the shape given."""
    pytest.importorskip("torch")
    model, shape = "examples/mynet.py:MyNet", ["--input-shape", "3,64,64"]
    code, out, err = run_main(["compare", model, "--gpus", "2", "-H", "a100-80gb-dgx", "--strategy", "dp=2",
                               "-B", "64", *shape, "--format", "json"], capsys)
    assert code == 0, err
    row = json.loads(out)["rows"][0]
    code, out, err = run_main(["predict", model, "--gpus", "2", "--strategy", "dp=2", "-B", "64", *shape,
                               "--format", "json"], capsys)
    assert code == 0, err
    assert row["iteration_time_s"] == json.loads(out)["iteration_time_s"]


@pytest.mark.parametrize(("model", "gpus", "hardware", "precision"), [
    ("unet3d", 1031, "v100-32gb-dgx2", "fp32"), ("resnet50", 8, "a100-80gb-dgx", "amp"),
    ("vgg16", 6, "v100-16gb-dgx1", "fp32")])
def test_why_names_the_part_that_loses_most(model: str, gpus: int, hardware: str, precision: str) -> None:
    """plan's 'why' named the overhead that grew most even when compute grew more, unless compute
    grew by 5%: unet3d's dp=1031,mb=32 (compute x1.03, +243 ms) read 'gradient bucket copies 0% of step'."""
    r = plan(model, gpus, hardware, precision, top=8)
    best = r.plans[0]
    for p, why in zip(r.plans[1:], r.reasons[1:], strict=True):
        grew = {k: v - best.breakdown.get(k, 0.0) for k, v in p.breakdown.items()}
        named = "compute" if why.startswith("compute x") else next(
            (k for k in grew if why.startswith(k.replace("_", " ") + " ")), None)
        assert named is not None, why
        assert grew[named] == max(grew.values()), (p.strategy.spec(), why, grew)


def test_explain_states_the_profile_optimizer_and_exclusions(capsys: pytest.CaptureFixture[str]) -> None:
    """explain printed the software lines only: not the profile's source, optimizer, memory reserve,
    exclusions or a pipeline's stage split, which predict states for the same plan."""
    argv = ["explain", "resnet50", "--gpus", "8", "--strategy", "pp=2,dp=4", "-B", "256", "--optimizer", "adam"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    lines = out.splitlines()
    for key in ("hardware: a100-80gb-dgx: ", "hardware_source: ", "optimizer: Adam", "excluded: data loading",
                "stage_split: stage split balance="):
        assert any(line.startswith(key) for line in lines), key
    code, out, err = run_main([*argv, "--format", "json"], capsys)
    assert json.loads(out)["assumptions"]["excluded"].startswith("data loading")


def test_predict_says_a_split_of_one_splits_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """review 8b #13: 'mp=1' was priced and printed as dp=1 without a word."""
    code, out, err = run_main(["predict", "resnet50", "--gpus", "4", "--strategy", "mp=1", "-B", "32",
                               "--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["strategy"] == "dp=4" and d["assumptions"]["strategy"] == "mp=1 splits nothing: priced as dp=4"
    code, out, err = run_main(["predict", "resnet50", "--gpus", "4", "--strategy", "mp=2", "-B", "32",
                               "--format", "json"], capsys)
    assert "strategy" not in json.loads(out)["assumptions"]


def test_api_frames_carry_the_assumptions() -> None:
    """The notebook API's frames held the software in ``attrs`` but not the profile's source, the
    optimizer or what the step excludes, which the CLI's outputs state."""
    from perfmodel.api import plan_frame, sweep

    df = plan_frame("resnet50", 8)
    assert df.attrs["assumptions"]["hardware_source"] and df.attrs["assumptions"]["excluded"].startswith("data")
    sw = sweep("resnet50", 8, "dp=8", ["a100-80gb-dgx", "v100-16gb-dgx1"], precision=["amp", "fp32"])
    assert set(sw.attrs["assumptions"]) == {"a100-80gb-dgx amp", "a100-80gb-dgx fp32", "v100-16gb-dgx1 amp",
                                            "v100-16gb-dgx1 fp32"}
    assert sw.attrs["assumptions"]["v100-16gb-dgx1 fp32"]["precision"].startswith("fp32")


def test_baseline_batches_have_thousands_separators(capsys: pytest.CaptureFixture[str]) -> None:
    """'at the same global batch (32800 samples' beside '2,466.7 samples/s': every other count has them."""
    code, out, err = run_main(["plan", "vgg16", "--gpus", "1025", "--hardware", "h100-80gb-dgx"], capsys)
    assert code == 0, err
    # the count is the baseline's choice (tests/test_baseline_even_counts.py); the format is checked here
    assert re.search(r"at the same global batch \(32,800 samples, accumulating gradients over \d+ micro-batches\)", out)


def test_why_names_parts_as_words() -> None:
    """The best plan's reason read 'best: pipeline_bubble 75% of step' beside runners-up's 'pipeline bubble'."""
    r = plan("resnet50", 8, global_batch=1)
    assert r.plans[0].dominant == "pipeline_bubble"
    assert r.reasons[0].startswith("best: pipeline bubble ")


def test_a_plan_just_over_memory_says_by_how_much(capsys: pytest.CaptureFixture[str]) -> None:
    """One sample per GPU over the largest that fits read 'needs 80.0 GiB, 0.0 GiB over the 80.0 GiB'."""
    code, out, err = run_main(["predict", "resnet50", "--gpus", "8", "--strategy", "dp=8", "-b", "1763",
                               "--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    over_mib = (d["memory_per_gpu_bytes"] - d["memory_capacity_bytes"]) / 2**20
    assert 0 < over_mib < 100 and d["largest_batch_per_gpu_that_fits"] == 1762
    assert f", {over_mib:.0f} MiB over the 80.0 GiB" in d["memory_verdict"]


@pytest.mark.parametrize("argv", [["plan", "resnet50", "--gpus", "4"],
                                  ["compare", "resnet50", "--gpus", "4", "-H", "a100-80gb-dgx,v100-16gb-dgx1"]])
def test_csv_rows_stand_alone(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """plan's CSV rows named neither the model, the profile, the GPU count nor the batch (compare's
    neither model nor GPUs), and gave step and memory only in table units (ms, GiB)."""
    code, out, err = run_main([*argv, "--format", "csv"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    code, js, err = run_main([*argv, "--format", "json"], capsys)
    want = json.loads(js)["plans" if argv[0] == "plan" else "rows"]
    assert len(rows) == len(want)
    for row, w in zip(rows, want, strict=True):
        assert (row["model"], row["hardware"], row["gpus"], row["global_batch"]) == (
            "resnet50", w["hardware"], "4", str(w["global_batch"]))
        assert float(row["iteration_time_s"]) == w["iteration_time_s"]  # the JSON's value, in SI
        assert float(row["memory_per_gpu_bytes"]) == w["memory_per_gpu_bytes"]


def test_one_epoch_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["predict", "resnet50", "--gpus", "8", "--strategy", "dp=8", "--epochs", "1"], capsys)
    assert code == 0, err
    assert "time to train 1 epoch of 1,281,167 samples" in out


def test_cost_chart_of_only_gaps_says_no_plan(recwarn: pytest.WarningsRecorder) -> None:
    """scale's --cost-chart with no plan at any count (unet3d at 576 px on a GTX 1080) read 'no price:
    give --price-per-gpu-hour' although a price was given, titled '1 epochs', and matplotlib warned
    on stderr about an empty legend."""
    from perfmodel.api import load_hardware, load_model, scale
    from perfmodel.report.answers import TrainingRequest
    from perfmodel.report.charts_cost import add_training_columns, time_cost_chart

    df = scale("unet3d", [1, 2], "gtx-1080", "fp32", image_size=576, strategies="dp")
    assert df["step_s"].isna().all()
    df = add_training_columns(df, load_model("unet3d", 576), load_hardware("gtx-1080"),
                              TrainingRequest(1.0, 100, 1.0, None))
    fig = time_cost_chart(df)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert texts and all(t.startswith("no plan at any GPU count") for t in texts)
    title = fig.get_suptitle()
    assert "1 epoch of 100 samples; 1 USD per GPU-hour" in title
    assert not [w for w in recwarn if "legend" in str(w.message)]

"""``perfmodel compare``: one model on several profiles and precisions, with ratios to the first."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_main

from perfmodel.commands.compare import compare
from perfmodel.search import plan
from perfmodel.strategies import predict

HW = ["a100-80gb-dgx", "h100-80gb-dgx", "v100-16gb-dgx1"]


def test_a_strategy_is_priced_as_predict_prices_it_and_ratios_are_to_the_first():
    c = compare("resnet18", 4, HW, ["amp", "fp32"], "dp=4", batch_per_gpu=32)
    assert [(p.hardware, p.precision) for p in c.predictions] == [(h, q) for h in HW for q in ("amp", "fp32")]
    for p in c.predictions:
        q = predict("resnet18", 4, "dp=4", p.hardware, p.precision, batch_per_gpu=32)
        assert p.throughput_samples_per_s == pytest.approx(q.throughput_samples_per_s, rel=1e-12)
    r = c.ratios()
    assert r[0] == 1.0
    assert r[2] == pytest.approx(c.predictions[2].throughput_samples_per_s / c.predictions[0].throughput_samples_per_s)


def test_best_is_each_profiles_first_plan():
    c = compare("resnet18", 8, HW[:2], ["amp"])
    for p in c.predictions:
        assert p.strategy == plan("resnet18", 8, p.hardware, "amp").plans[0].strategy


def test_cli_table_json_csv_and_chart(capsys, tmp_path):
    args = ["compare", "resnet18", "--gpus", "4", "-H", "a100-80gb-dgx,h100-80gb-dgx", "-s", "dp=4", "-b", "16"]
    code, out, err = run_main(args + ["--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert [row["hardware"] for row in d["rows"]] == ["a100-80gb-dgx", "h100-80gb-dgx"]
    assert d["rows"][0]["ratio_to_first"] == 1.0 and d["rows"][1]["baseline"]["gpus"] == 1
    code, out, _ = run_main(args + ["--format", "csv"], capsys)
    assert code == 0 and out.splitlines()[0].startswith("hardware,precision,strategy")
    chart = tmp_path / "c.png"
    code, out, err = run_main(args + ["--chart", str(chart)], capsys)
    assert code == 0, err
    assert chart.stat().st_size > 1000 and "ratio_to_first" in out
    # -H repeated is the comma list (it kept the last profile only)
    repeated = ["compare", "resnet18", "--gpus", "4", "-H", "a100-80gb-dgx", "-H", "h100-80gb-dgx", "-s", "dp=4",
                "-b", "16", "--format", "json"]
    code, out, err = run_main(repeated, capsys)
    assert code == 0, err
    assert [row["hardware"] for row in json.loads(out)["rows"]] == ["a100-80gb-dgx", "h100-80gb-dgx"]


@pytest.mark.parametrize("extra,msg", [
    (["--precision", "fp8"], "unknown precision"),
    (["-H", "a100-80gb-dgx,nosuchgpu"], "nosuchgpu"),
])
def test_bad_input_is_one_line(extra, msg, capsys):
    args = ["compare", "resnet18", "--gpus", "4", "-H", "a100-80gb-dgx", "-s", "dp=4", *extra]
    code, out, err = run_main(args, capsys)
    assert code in (1, 2) and len(err.splitlines()) == 1 and msg in err

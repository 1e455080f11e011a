"""CSV outputs carry the software each price assumes (cuDNN major, memory format), as JSON does."""

from __future__ import annotations

import csv
import io

import pytest
from cli_helpers import run_main

V100 = "v100-16gb-dgx1"  # Volta: cuDNN 7 and 9 both ran on it (an A100 needs cuDNN >= 8)


@pytest.mark.parametrize("args", [
    ["predict", "resnext50_32x4d", "-n", "2", "-s", "dp=2", "-b", "16", "-H", V100],
    ["plan", "resnext50_32x4d", "-n", "2", "-B", "32", "-H", V100],
    ["scale", "resnext50_32x4d", "--gpus", "1,2", "-b", "16", "-H", V100],
])
@pytest.mark.parametrize(("cudnn", "fmt"), [("7", "nhwc"), ("9", "nchw")])
def test_every_csv_row_names_its_cudnn_and_memory_format(args: list[str], cudnn: str, fmt: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main([*args, "--cudnn", cudnn, "--memory-format", fmt, "--format", "csv"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and all(r["cudnn_major"] == cudnn and r["memory_format"] == fmt and r["precision"] == "amp"
                        for r in rows)


def test_the_csv_columns_follow_the_priced_steps(capsys: pytest.CaptureFixture[str]) -> None:
    # the columns are the pricing's, not labels: ResNeXt's grouped convolutions cost more under
    # cuDNN 7 (one kernel per group) and NCHW adds transposes, so the steps differ
    steps = {}
    for cudnn, fmt in (("7", "nchw"), ("9", "nhwc")):
        _, out, _ = run_main(["predict", "resnext50_32x4d", "-n", "1", "-s", "dp=1", "-b", "32", "--cudnn", cudnn,
                              "--memory-format", fmt, "--format", "csv", "-H", V100], capsys)
        steps[(cudnn, fmt)] = float(next(csv.DictReader(io.StringIO(out)))["iteration_time_s"])
    assert steps[("7", "nchw")] > steps[("9", "nhwc")]


@pytest.mark.parametrize("args", [
    ["predict", "resnet18", "-n", "2", "-s", "dp=2", "-b", "4"],
    ["plan", "resnet18", "-n", "2", "-B", "8", "--top", "2"],
    ["scale", "resnet18", "--gpus", "1,2", "-b", "4"],
    ["compare", "resnet18", "-n", "2", "-b", "4", "-H", f"{V100},a100-80gb-dgx"],
])
def test_every_csv_row_names_its_image_size(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # the image size changes every price (JSON had it; plan, scale and compare CSV rows did not)
    code, out, err = run_main([*args, "--image-size", "160", "--format", "csv"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and all(r["image_size"] == "160" for r in rows)

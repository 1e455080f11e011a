"""The GPU measurement campaign script: its plan's order and budget, and a run on the CPU."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from cli_helpers import load_file

campaign = load_file("scripts/measure_campaign.py", "measure_campaign")


@pytest.fixture(scope="module")
def plan() -> list[dict[str, object]]:
    return campaign.make_plan("h100-80gb-dgx", ["tiny_cnn", "resnet18", "cosmoflow"])


def test_plan_puts_per_layer_runs_first_and_has_no_duplicates(plan: list[dict[str, object]]) -> None:
    keys = [r["key"] for r in plan]
    assert len(keys) == len(set(keys))
    layers = [bool(r["layers"]) for r in plan]
    first_step = layers.index(False)
    assert all(layers[:first_step]) and not any(layers[first_step:])
    precisions = {r["precision"] for r in plan[:first_step] if r["memory_format"] == "nchw"}
    assert precisions == set(campaign.PRECISIONS)


def test_plan_covers_batches_1_to_256_and_shrinks_volumes(plan: list[dict[str, object]]) -> None:
    flat = {int(r["batch"]) for r in plan if r["model"] == "resnet18"}  # type: ignore[call-overload]
    assert flat == {1, 8, 32, 64, 128, 256}
    volume = {int(r["batch"]) for r in plan if r["model"] == "cosmoflow"}  # type: ignore[call-overload]
    assert max(volume) == 256 // campaign.VOLUME_BATCH_DIVISOR and min(volume) == 1


def test_estimate_grows_with_the_step_and_the_layers() -> None:
    assert campaign._estimate_s(0.1, 50, False, 10, 3) < campaign._estimate_s(0.2, 50, False, 10, 3)
    assert campaign._estimate_s(0.1, 50, False, 10, 3) < campaign._estimate_s(0.1, 50, True, 10, 3)


def test_run_on_the_cpu_writes_rows_and_keeps_to_its_budget(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    runs = [r for r in campaign.make_plan("h100-80gb-dgx", ["tiny_cnn"]) if r["precision"] == "fp32"][:3]
    too_long = dict(runs[0], key="tiny_cnn/too-long", estimate_s=1e9)
    campaign.run_plan([too_long, *runs], tmp_path, 600.0, {runs[2]["key"]}, "cpu")
    with (tmp_path / "steps.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["key"] for r in rows] == [runs[0]["key"], runs[1]["key"]]  # not the too long, not the done
    assert all(r["hardware"] == "unspecified" for r in rows)  # a CPU is not the profile's GPU
    assert all(float(r["step_time_s"]) > 0 for r in rows)
    with (tmp_path / "layers.csv").open() as fh:
        layer_keys = {r["key"] for r in csv.DictReader(fh)}
    assert layer_keys == {r["key"] for r in runs[:2] if r["layers"]}
    assert "torch" in json.loads((tmp_path / "environment.json").read_text())


def test_instance_norm_timings_on_the_cpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    assert campaign.run_norms(((2, 4), (4, 2)), (1, 2), tmp_path, "cpu") == 0
    with (tmp_path / "norms.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(int(r["n"]), int(r["c"]), int(r["edge"])) for r in rows] == [(1, 2, 4), (2, 2, 4), (1, 4, 2), (2, 4, 2)]
    assert all(float(r["forward_s"]) > 0 and float(r["backward_s"]) > 0 for r in rows)


def test_norm_levels_are_the_3d_unets() -> None:
    """The timed (channels, edge) pairs are the zoo's unet3d's instance-norm inputs, each level's."""
    from perfmodel.network import get_model

    net = get_model("unet3d", None)
    levels = {(la.out_shape[0], la.out_shape[1]) for la in net.layers if la.kind == "groupnorm"}
    assert set(campaign.NORM_LEVELS) == levels

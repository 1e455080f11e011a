"""Review 9, second pass: the open rows (compare's gaps, validate's roles, partition's and export's
assumptions, plan's duplicate shapes, scale charts' legends)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from cli_helpers import run_main

from perfmodel import api
from perfmodel.hardware import load_hardware
from perfmodel.report.charts import scale_chart
from perfmodel.search import plan
from perfmodel.strategies import predict
from perfmodel.strategies.wording import precision_assumption

#: unet3d at 256 px, one sample: the smallest plan needs 24.8 GiB, over a GTX 1080's 8 GiB, under an H200's
GAP = ["compare", "unet3d", "--image-size", "256", "-n", "1", "-B", "1", "-H", "gtx-1080,h200-141gb-dgx"]


def test_compare_keeps_the_profiles_that_fit(capsys: pytest.CaptureFixture[str]) -> None:
    """Review 9 #20: one profile with no plan aborted the whole comparison (exit 1, no row for the other)."""
    h200 = plan("unet3d", 1, "h200-141gb-dgx", "amp", 1, image_size=256, top=1).plans[0]
    code, out, err = run_main(GAP, capsys)
    assert code == 0, err
    rows = [line.split() for line in out.splitlines() if line.startswith(("gtx-1080 ", "h200-141gb-dgx "))]
    assert [r[0] for r in rows] == ["gtx-1080", "h200-141gb-dgx"]  # in the order asked
    assert rows[0][2:5] == ["no", "plan", "fits"]
    assert rows[0][-4] == "8.00"  # cap_GiB: the GTX 1080's memory beside the need it falls short of
    assert rows[1][2] == h200.strategy.spec()
    assert "ratio to h200-141gb-dgx amp" in out  # the first priced row
    assert "gtx-1080 amp: no plan of unet3d fits in 8.0 GiB per GPU" in out  # the search's reason
    code, out, err = run_main([*GAP, "--format", "json"], capsys)
    d = json.loads(out)
    assert [r["hardware"] for r in d["rows"]] == ["h200-141gb-dgx"]
    assert d["rows"][0]["iteration_time_s"] == pytest.approx(h200.iteration_time_s, rel=1e-9)
    (gap,) = d["no_plan"]
    assert gap["hardware"] == "gtx-1080" and gap["global_batch"] == 1
    assert gap["min_memory_bytes"] > 8 * 2**30
    assert gap["memory_capacity_bytes"] == load_hardware("gtx-1080").device.memory_bytes
    code, out, err = run_main([*GAP, "--format", "csv"], capsys)
    rows2 = list(csv.DictReader(io.StringIO(out)))
    assert [(r["hardware"], r["strategy"], r["global_batch"]) for r in rows2] == [
        ("gtx-1080", "no plan fits", "1"), ("h200-141gb-dgx", h200.strategy.spec(), "1")]
    assert float(rows2[0]["memory_per_gpu_bytes"]) == gap["min_memory_bytes"]
    assert float(rows2[0]["cap_GiB"]) == 8.0
    assert [r["image_size"] for r in rows2] == ["256", "256"]


def test_compare_with_no_plan_anywhere_still_fails_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main([*GAP[:-1], "gtx-1080,gtx-1080-ti"], capsys)
    assert code == 1 and "no plan of unet3d fits" in err and "gtx-1080" in err


def test_validate_rows_without_a_price_are_not_called_scored(capsys: pytest.CaptureFixture[str]) -> None:
    """Review 9 #21: the 18 shipped rows without a batch showed role 'scored' while the summary counted
    52 scored of 70 (18 without prediction)."""
    code, out, err = run_main(["validate", "--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    s = d["summary"]
    roles = [r["role"] for r in d["rows"]]
    assert roles.count("scored") == s["scored"] == s["predicted"]
    assert roles.count("not priced") == s["unpredictable"] > 0
    assert all(r["predicted_throughput"] is None for r in d["rows"] if r["role"] == "not priced")


def test_partition_states_the_profile_it_priced_the_weights_on(capsys: pytest.CaptureFixture[str]) -> None:
    """Review 9 #22: partition's weights are predicted seconds on a profile, but its assumptions named
    only cuDNN and the memory format (not the profile's source or what the precision means there)."""
    pytest.importorskip("kahypar")
    hw = load_hardware("v100-16gb-dgx1")
    args = ["partition", "alexnet", "-k", "2", "-H", "v100-16gb-dgx1", "--precision", "bf16"]
    code, out, err = run_main(args, capsys)
    assert code == 0, err
    text = out.split("assumptions:", 1)[1]
    assert f"hardware_source: {hw.sources['profile']}" in text
    assert "V100" in precision_assumption(hw, "bf16") and f"precision: {precision_assumption(hw, 'bf16')}" in text
    code, out, err = run_main([*args, "--format", "json"], capsys)
    a = json.loads(out)["assumptions"]
    assert a["hardware_source"].startswith(hw.sources["profile"]) and "has no BF16" in a["precision"]
    assert {"cudnn", "memory_format", "kernels"} <= set(a)


def test_plan_ranks_an_mp_plan_on_a_pipelines_stages_once() -> None:
    """Review 9 #24: examples/mynet.py on 3 GPUs ranked pp=3 and mp=3 (same micro-batches) as two rows at
    one price: the mp plan's parts were the pipeline's stages. Now one row, naming the other plan, whose
    own price (predict) is that row's."""
    r = plan("examples/mynet.py:MyNet", 3, "a100-80gb-dgx", "amp", None, top=50)
    rows = list(zip(r.plans, r.reasons, strict=True))
    for i, (p, _) in enumerate(rows):
        twins = [q.strategy.spec() for q in r.plans[i + 1:]
                 if abs(q.iteration_time_s - p.iteration_time_s) <= 1e-12 * p.iteration_time_s
                 and {q.strategy.mp, p.strategy.mp} == {1, 3} and q.strategy.dp == p.strategy.dp
                 and q.strategy.mb == p.strategy.mb]
        assert not twins, (p.strategy.spec(), twins)
    merged = [(p, why) for p, why in rows if "prices the same" in why]
    assert merged, [why for _, why in rows]
    for p, why in merged:
        other = why.split("; ")[-1].split(" prices the same")[0]
        q = predict("examples/mynet.py:MyNet", 3, other, "a100-80gb-dgx", "amp", None, r.global_batch)
        assert q.iteration_time_s == pytest.approx(p.iteration_time_s, rel=1e-12)
        assert {q.strategy.mp, p.strategy.mp} == {1, 3}
    five = plan("examples/mynet.py:MyNet", 3, "a100-80gb-dgx", "amp", None, top=5)  # merged rows refilled
    assert [p.strategy for p in five.plans] == [p.strategy for p in r.plans[:5]]


def test_scale_chart_legend_fits_when_every_strategy_has_gaps() -> None:
    """Review 9 #29: with '(no feasible plan)' on every strategy, the legend's 4 columns ran off both
    edges of the figure (unet3d at 576 px on one GTX 1080: no plan anywhere)."""
    df = api.scale("unet3d", [1], hardware="gtx-1080", image_size=576, strategies=("dp", "pp", "hybrid", "best"))
    fig = scale_chart(df)
    fig.draw_without_rendering()
    (legend,) = [lg for f in (fig, *fig.subfigs) for lg in f.legends]
    box, edge = legend.get_window_extent(), fig.bbox
    assert sum("(no feasible plan)" in t.get_text() for t in legend.texts) == 4
    assert edge.x0 <= box.x0 and box.x1 <= edge.x1, (box, edge)


def test_export_text_states_what_its_json_assumes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Review 9 #31: export's text said only 'assumes: cudnn ...' and the memory format, while its JSON
    carried the profile's source, the optimizer and the exclusions; the default batch went unsaid."""
    out_py = str(tmp_path / "prog.py")
    args = ["export", "resnet50", "--gpus", "2", "-s", "dp=2", "-o", out_py, "--optimizer", "adam"]
    code, out, err = run_main([*args, "--format", "json"], capsys)
    assert code == 0, err
    assumed = json.loads(out)["assumptions"]
    assert {"hardware_source", "optimizer", "excluded", "global_batch"} <= set(assumed)
    assert "default: 32 per GPU" in assumed["global_batch"]
    code, out, err = run_main(args, capsys)
    assert code == 0, err
    text = out.split("\nassumptions:\n", 1)[1]
    for k, v in assumed.items():
        assert f"  {k}: {v}" in text, k


def test_scale_chart_ticks_are_gpu_counts() -> None:
    """Found in review 9b: a scale chart over one count (or a few, on a linear axis) ticked fractions of
    a GPU (0.96, 0.98, 1, 1.02, 1.04)."""
    df = api.scale("unet3d", [1], hardware="gtx-1080", image_size=576, strategies=("dp",))
    fig = scale_chart(df)
    ax = next(a for a in fig.get_axes() if a.get_xlabel())
    assert list(ax.get_xticks()) == [1.0]
    df = api.scale("resnet50", [2, 3, 4], batch_per_gpu=16, strategies=("dp",))
    ax = next(a for a in scale_chart(df).get_axes() if a.get_xlabel())
    assert list(ax.get_xticks()) == [2.0, 3.0, 4.0]

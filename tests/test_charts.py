"""Charts say what they show (title, units, legend); CLI charts write files; schedules hold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_main as _run
from matplotlib.figure import Figure

from perfmodel import api
from perfmodel.errors import UsageError
from perfmodel.report.charts import pipeline_gantt, plan_chart, save_chart, scale_chart
from perfmodel.search import plan
from perfmodel.strategies import predict
from perfmodel.strategies.pipeline import pipeline_tasks, pipeline_timing

KINDS = ("dp", "ps", "pp", "hybrid")


def _texts(fig: Figure) -> tuple[str, list[str], list[str]]:
    title = fig.get_suptitle()
    xs = [ax.get_xlabel() for ax in fig.get_axes() if ax.get_xlabel()]
    ys = [ax.get_ylabel() for ax in fig.get_axes() if ax.get_ylabel()]
    return title, xs, ys


def _has_legend(fig: Figure) -> bool:
    figs = [fig, *fig.subfigs]
    return any(f.legends for f in figs) or any(ax.get_legend() for ax in fig.get_axes())


def _units(labels: list[str]) -> bool:
    return all("(" in s and ")" in s for s in labels)


@pytest.fixture(scope="module")
def scaled() -> object:
    return api.scale("resnet50", "1-16:log2", batch_per_gpu=16, strategies=("dp", "pp", "best"))


def test_scale_chart_says_what_it_shows(scaled: object) -> None:
    fig = api.scale_chart(scaled)  # type: ignore[arg-type]
    assert isinstance(fig, Figure)
    title, xs, ys = _texts(fig)
    assert "resnet50" in title and "a100-80gb-dgx" in title and "amp" in title
    assert "16 samples per GPU" in title
    assert _units(xs) and _units(ys) and len(ys) == 2  # speedup and efficiency axes
    assert any("GPUs" in x for x in xs) and any("%" in y for y in ys)
    assert _has_legend(fig)
    legends = [lg for f in (fig, *fig.subfigs) for lg in f.legends]
    legend = [t.get_text() for lg in legends for t in lg.texts]
    assert any("ideal" in t for t in legend)


def test_scale_chart_strong_scaling_and_gap_notes() -> None:
    df = api.scale("resnet50", [2, 4], global_batch=64, strategies=("pp", "hybrid"))
    fig = scale_chart(df)
    title, _, _ = _texts(fig)
    assert "global batch fixed at 64" in title
    notes = " ".join(t.get_text() for f in (fig, *fig.subfigs) for t in f.texts)
    assert "gaps in hybrid" in notes


def test_scale_chart_rejects_other_frames() -> None:
    import pandas as pd

    with pytest.raises(UsageError, match="perfmodel.api.scale"):
        scale_chart(pd.DataFrame({"x": [1]}))


@pytest.mark.parametrize("y", ["speedup_x", "efficiency_%", "samples_per_s", "step_s"])
def test_sweep_chart_says_what_it_shows(y: str) -> None:
    df = api.sweep("vgg16", [8, 16, 64], "dp", "v100-16gb-dgx1", what_if={"inter_bandwidth_scale": [0.5, 1]})
    fig = api.sweep_chart(df, y=y, by="inter_bandwidth_scale")
    title, xs, ys = _texts(fig)
    assert "vgg16" in title and "v100-16gb-dgx1" in title and "amp" in title
    assert "inter_bandwidth_scale varied" in title and "32 samples per GPU" in title
    assert _units(xs) and _units(ys) and _has_legend(fig)
    with pytest.raises(UsageError, match="no column"):
        api.sweep_chart(df, y="nope")


def test_plan_chart_says_what_it_shows() -> None:
    r = plan("resnet50", 8, "v100-16gb-dgx1", top=4, kinds=KINDS)
    fig = plan_chart(r)
    title, xs, _ = _texts(fig)
    assert "resnet50" in title and "v100-16gb-dgx1" in title and "global batch 256" in title
    assert "step time (ms)" in xs and "memory per GPU (GiB)" in xs
    assert _has_legend(fig)


def test_plan_chart_shows_the_fastest_plan_that_does_not_fit() -> None:
    r = plan("vgg16", 2, "v100-16gb-dgx1", global_batch=512, top=2, kinds=("dp", "pp"))
    fig = plan_chart(r)
    labels = [t.get_text() for ax in fig.get_axes() for t in ax.get_yticklabels()]
    if r.infeasible:
        assert any("does not fit" in s for s in labels)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_gantt_says_what_it_shows(schedule: str) -> None:
    p = predict("vgg16", 8, f"pp=4,dp=2,mb=8,schedule={schedule}", "a100-80gb-dgx", batch_per_gpu=16)
    fig = pipeline_gantt(p)
    title, xs, ys = _texts(fig)
    assert "vgg16" in title and "a100-80gb-dgx" in title and "global batch 128" in title
    assert ("1F1B" if schedule == "1f1b" else "GPipe") in title
    assert _units(xs) and "(ms)" in xs[0] and ys
    assert _has_legend(fig)
    ax = fig.get_axes()[0]
    assert len(ax.get_yticklabels()) == 4


def test_gantt_of_a_plan_without_pipeline_is_a_breakdown_bar() -> None:
    p = predict("resnet50", 8, "dp=8", "a100-80gb-dgx", batch_per_gpu=32)
    fig = pipeline_gantt(p)
    title, xs, _ = _texts(fig)
    assert "resnet50" in title and "a100-80gb-dgx" in title and "step time (ms)" in xs
    assert _has_legend(fig)


def _check_schedule(fwd: list[float], bwd: list[float], m: int, schedule: str, d: float) -> float:
    """Tasks with a send of ``d`` after every pass that crosses a cut (it occupies the sender)."""
    n = len(fwd)
    send_f = [d] * (n - 1) + [0.0]
    send_b = [0.0] + [d] * (n - 1)
    ops = pipeline_tasks(fwd, bwd, send_f, send_b, m, schedule)
    assert len(ops) == 2 * n * m
    end = {(o.stage, o.backward, o.micro_batch): o.end_s for o in ops}
    start = {(o.stage, o.backward, o.micro_batch): o.start_s for o in ops}
    for s in range(n):
        mine = sorted((o for o in ops if o.stage == s), key=lambda o: o.start_s)
        assert all(a.end_s <= b.start_s + 1e-15 for a, b in zip(mine, mine[1:], strict=False))
        for k in range(m):
            if s > 0:
                assert start[(s, False, k)] >= end[(s - 1, False, k)] - 1e-15
                assert end[(s - 1, False, k)] - start[(s - 1, False, k)] == pytest.approx(fwd[s - 1] + d)
            if s < n - 1:
                assert start[(s, True, k)] >= end[(s + 1, True, k)] - 1e-15
            assert start[(s, True, k)] >= end[(s, False, k)] - 1e-15
    return max(o.end_s for o in ops)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("n", "m"), [(2, 1), (4, 8), (8, 8), (3, 5)])
def test_balanced_pipeline_makespan_matches_the_fill_drain_formula(schedule: str, n: int, m: int) -> None:
    f, b = 1.0, 2.0
    t = _check_schedule([f] * n, [b] * n, m, schedule, 0.0)
    assert t == pytest.approx((n - 1 + m) * (f + b))


def test_unbalanced_pipeline_schedules_respect_dependencies() -> None:
    rng = np.random.default_rng(1)
    for _ in range(10):
        n, m = int(rng.integers(2, 7)), int(rng.integers(1, 10))
        fwd, bwd = list(rng.uniform(0.1, 1, n)), list(rng.uniform(0.1, 2, n))
        for schedule in ("gpipe", "1f1b"):
            t = _check_schedule(fwd, bwd, m, schedule, 0.05)
            assert t >= m * max(f + b for f, b in zip(fwd, bwd, strict=True))


def test_save_chart_by_extension(tmp_path: Path) -> None:
    fig = api.scale_chart(api.scale("resnet50", [1, 2], strategies=("dp",)))
    for ext in ("png", "svg", "pdf"):
        save_chart(fig, tmp_path / f"c.{ext}")
        assert (tmp_path / f"c.{ext}").stat().st_size > 1000
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (tmp_path / "c.svg").read_bytes()[:2000]
    with pytest.raises(UsageError, match="unknown extension"):
        save_chart(fig, tmp_path / "c.jpg")


@pytest.mark.parametrize("seed", range(6))
def test_gpipe_tasks_end_when_the_priced_pipeline_ends(seed: int) -> None:
    """The Gantt chart's schedule is the pricing's: same stage seconds and sends, same end."""
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 6)), int(rng.integers(1, 9))
    fwd, bwd = rng.uniform(0.1, 1, n), rng.uniform(0.1, 2, n)
    send = rng.uniform(0, 0.2, n - 1)
    send_f, send_b = np.append(send, 0.0), np.insert(send, 0, 0.0)
    tasks = pipeline_tasks(fwd, bwd, send_f, send_b, m, "gpipe")
    timing = pipeline_timing(fwd, bwd, send_f, send_b, m, recompute=False)
    assert max(t.end_s for t in tasks) == pytest.approx(timing.total_s, rel=1e-12)
    # the first stage ends the step; a later stage's last backward ends no later than the
    # pricing dates it (as late as the step's end allows) for its gradient exchange
    for s in range(n):
        last = max(t.end_s for t in tasks if t.stage == s and t.backward)
        assert last <= timing.last_bwd_end_s[s] * (1 + 1e-12)
    assert max(t.end_s for t in tasks if t.stage == 0) == pytest.approx(timing.last_bwd_end_s[0], rel=1e-12)


def test_gantt_draws_the_priced_sends() -> None:
    p = predict("vgg16", 8, "pp=4,dp=2,mb=8", "a100-80gb-dgx", batch_per_gpu=16)
    stages = p.details["stages"]
    assert all(st["send_forward_s"] > 0 for st in stages[:-1]) and stages[-1]["send_forward_s"] == 0
    sends = sum(st["send_forward_s"] + st["send_backward_s"] for st in stages)
    assert sends > 0
    title = pipeline_gantt(p).get_suptitle()
    assert "sends between stages" in title
    tasks = p.pipeline_schedule()
    assert len(tasks) == 2 * 4 * 8
    # the drawn pipeline ends where the priced one does (GPipe, no recomputation)
    tail = ("nccl_contention", "gradient_bucket_copies", "gradient_exchange_exposed", "amp_casts", "optimizer_step")
    pipeline = p.iteration_time_s - sum(p.breakdown.get(k, 0.0) for k in tail)
    assert max(t.end_s for t in tasks) == pytest.approx(pipeline, rel=1e-9)
    assert predict("resnet50", 8, "dp=8", "a100-80gb-dgx", batch_per_gpu=8).pipeline_schedule() == []


# -- the CLI -------------------------------------------------------------------------------




def test_cli_plan_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "plan.png"
    code, out, _ = _run(
        ["plan", "resnet50", "--gpus", "8", "--strategies", ",".join(KINDS), "--chart", str(f)],
        capsys,
    )
    assert code == 0 and f.stat().st_size > 10_000 and "resnet50" in out


def test_cli_predict_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "gantt.svg"
    code, _, _ = _run(["predict", "vgg16", "--gpus", "8", "-s", "pp=4,dp=2,mb=8", "--chart", str(f)], capsys)
    assert code == 0 and f.stat().st_size > 10_000 and b"<svg" in f.read_bytes()[:2000]


def test_cli_scale_chart_and_json_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "scale.png"
    code, out, err = _run(
        [
            "scale",
            "resnet50",
            "--gpus",
            "1-8:log2",
            "--strategies",
            "dp,pp",
            "--chart",
            str(f),
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0 and f.stat().st_size > 10_000
    data = json.loads(out)  # nothing but data on stdout
    assert data["setting"]["model"] == "resnet50"
    pp1 = [r for r in data["rows"] if r["strategy"] == "pp" and r["gpus"] == 1][0]
    assert pp1["speedup_x"] is None and pp1["reason"]
    assert err == ""  # no progress bar when stderr is not a terminal


def test_cli_scale_table_and_csv(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        ["scale", "resnet50", "--gpus", "1,2", "--strategies", "dp,pp", "--global-batch", "64"],
        capsys,
    )
    assert code == 0
    assert "speedup_x" in out and "efficiency_%" in out and "step_ms" in out and "strong scaling" in out
    row = [ln for ln in out.splitlines() if ln.startswith("pp") and " 1 " in ln][0]
    assert " - " in row
    code, out, _ = _run(["scale", "resnet50", "--gpus", "1,2", "--strategies", "dp", "--format", "csv"], capsys)
    assert code == 0 and out.splitlines()[0].startswith("strategy,gpus,plan")


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "resnet50", "--gpus", "8", "--strategies", "dp", "--chart", "x.txt"],
        ["predict", "resnet50", "--gpus", "8", "-s", "dp=8", "--chart", "x.jpg"],
        ["scale", "resnet50", "--gpus", "1,2", "--chart", "x.csv"],
        ["scale", "resnet50", "--gpus", "1,2", "--chart", "x"],
        ["scale", "resnet50", "--gpus", "1,2", "--strategies", "dp,warp"],
        ["scale", "resnet50", "--gpus", "1,2", "-b", "8", "-B", "64"],
    ],
)
def test_cli_bad_chart_or_options_exit_2(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(tmp_path / a) if a.startswith("x") else a for a in args]
    code, out, err = _run(args, capsys)
    assert code == 2 and out == "" and "Traceback" not in err and err.strip()
    assert not any(tmp_path.iterdir())

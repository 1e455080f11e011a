"""A row equal to an earlier one in every column is counted once by validate and calibrate.

Before, a file given twice (or a pasted block) weighed every run twice: in the MAPE, in the
speedup pairs and in the calibration fit. The oracle is the same file without the repeats.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_main

from perfmodel.validation import load_measurements, validate
from perfmodel.validation.measurements import shipped_path
from perfmodel.validation.repeats import REPEAT_ROLE, exact_repeats

HEADER = "model,hardware,gpus,precision,batch_per_gpu,global_batch,strategy,measured_throughput,notes"
RUNS = [
    "resnet50,a100-80gb-dgx,1,amp,256,,dp=1,2470.0,first",
    "resnet50,a100-80gb-dgx,8,amp,256,,dp=8,16621.0,first",
    "resnet18,v100-16gb-dgx1,1,fp32,128,,dp=1,1100.0,",
    "resnet18,v100-16gb-dgx1,4,fp32,128,,dp=4,4000.0,",
]


def _file(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join([HEADER, *lines]) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize("mode", ["none", "single-gpu", "single-gpu-per-group"])
def test_repeats_are_shown_not_scored(tmp_path: Path, mode: str) -> None:
    once = validate(load_measurements([_file(tmp_path, "once.csv", RUNS)]), mode)
    twice = validate(load_measurements([_file(tmp_path, "twice.csv", [*RUNS, *RUNS[:2]])]), mode)  # pasted again
    assert [r.role for r in twice.rows[4:]] == [REPEAT_ROLE, REPEAT_ROLE]
    assert "row 1" in twice.rows[4].reason and "row 2" in twice.rows[5].reason
    assert twice.summary.repeats == 2 and once.summary.repeats == 0
    assert twice.rows[4].speedup_error_pct is None and twice.rows[5].speedup_error_pct is None
    # fitted and scored: the file without the repeats
    for a, b in zip(once.rows, twice.rows, strict=False):
        assert b.predicted_throughput == pytest.approx(a.predicted_throughput, rel=1e-12)
        assert b.role == a.role
    for key in ("scored", "throughput_mape_pct", "speedup_mape_pct", "speedup_pairs", "fit_mape_pct"):
        want = getattr(once.summary, key)
        assert getattr(twice.summary, key) == (want if want is None else pytest.approx(want, rel=1e-12)), key


def test_a_second_measurement_of_a_run_is_kept(tmp_path: Path) -> None:
    again = [*RUNS, "resnet50,a100-80gb-dgx,1,amp,256,,dp=1,2400.0,first"]  # another measured value
    v = validate(load_measurements([_file(tmp_path, "again.csv", again)]), "single-gpu")
    assert v.rows[4].role == "calibration" and v.summary.repeats == 0


def test_the_same_file_twice_scores_as_once() -> None:
    path = shipped_path()
    once = validate(load_measurements([path]), "none")
    twice = validate(load_measurements([path, path]), "none")
    n = len(once.rows)
    assert set(exact_repeats(load_measurements([path, path]).rows)) == set(range(n, 2 * n))
    assert twice.summary.throughput_mape_pct == pytest.approx(once.summary.throughput_mape_pct, rel=1e-12)
    assert twice.summary.speedup_mape_pct == pytest.approx(once.summary.speedup_mape_pct, rel=1e-12)
    assert twice.summary.scored == once.summary.scored and twice.summary.repeats == n


def test_calibrate_fits_a_repeated_run_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outs = []
    for name, lines in (("once", RUNS), ("twice", [*RUNS, RUNS[0], RUNS[0], RUNS[2]])):
        (tmp_path / name).mkdir()
        out = tmp_path / name / "cal.toml"
        code, text, err = run_main(["calibrate", str(_file(tmp_path / name, "runs.csv", lines)), "-H",
                                    "a100-80gb-dgx", "-o", str(out)], capsys)
        assert code == 0, err
        outs.append((text.replace(name, "X"), out.read_text().replace(name, "X")))
    assert "on 2 run(s)" in outs[0][0]
    assert outs[0] == outs[1]


def test_the_table_says_how_many_repeats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["validate", str(_file(tmp_path, "t.csv", [*RUNS, RUNS[1]]))], capsys)
    assert code == 0, err
    assert "repeats 1 (equal to an earlier row in every column: not scored)" in out
    assert "repeats t.csv: row 2 in every column" in out.replace(str(tmp_path) + "/", "")

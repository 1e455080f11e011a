"""tools/speedup_losses.py: its step times reproduce every row's measured and predicted speedup."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from cli_helpers import load_file

from perfmodel.validation import load_measurements, validate

DATA = Path(str(resources.files("perfmodel.data")))


def _tool():  # type: ignore[no-untyped-def]
    return load_file("tools/speedup_losses.py", "speedup_losses")


@pytest.mark.parametrize("name", ["published_runs.csv", "families_runs.csv"])
def test_step_times_give_back_the_speedups(name: str) -> None:
    tool = _tool()
    v = validate(load_measurements([str(DATA / name)]), "none")
    by_row = {r.measurement.row: r for r in v.rows}
    pairs = [r for r in v.rows if r.speedup_error_pct is not None]
    assert pairs
    for r in pairs:
        assert r.speedup_baseline_row is not None
        t1m, t1p, tnm, tnp = tool.step_times(r, by_row[r.speedup_baseline_row])
        n = r.measurement.gpus
        assert n * t1m / tnm == pytest.approx(r.measured_speedup, rel=1e-9)
        assert n * t1p / tnp == pytest.approx(r.predicted_speedup, rel=1e-9)
    rows = tool.rows_of([str(DATA / name)])
    assert len(rows) == len(pairs) and all(len(row) == len(tool.HEAD) for row in rows)

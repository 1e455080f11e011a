"""The residual table behind the error bars: which measured sets it holds, and the intervals'
coverage of the family hold-out it leaves out."""

from __future__ import annotations

from perfmodel.validation.intervals import shipped_table
from perfmodel.validation.residuals import HOLDOUT_SET, RESIDUAL_SETS


def test_family_runs_are_in_the_table_and_their_hold_out_is_not() -> None:
    table = shipped_table()
    cols = table["columns"]
    rows = [dict(zip(cols, r, strict=True)) for r in table["rows"]]
    sets = {r["set"] for r in rows}
    assert sets == {name for name, _ in RESIDUAL_SETS}
    assert HOLDOUT_SET[0] not in sets
    families = {r["family"] for r in rows if r["set"] == "families"}
    assert {"vgg", "alexnet", "inception", "efficientnet"} <= families
    assert HOLDOUT_SET[1].name in table["inputs_sha256"]


def test_hold_out_coverage_is_recorded_per_level() -> None:
    cov = shipped_table()["holdout_coverage"]
    assert [c["level"] for c in cov] == [0.5, 0.8, 0.9]
    for c in cov:
        assert c["set"] == HOLDOUT_SET[1].name and 0 < c["tried"] <= 48
        assert c["coverage"] == c["covered"] / c["tried"]
    # wider intervals hold at least as many held-out runs
    assert cov[0]["covered"] <= cov[1]["covered"] <= cov[2]["covered"]

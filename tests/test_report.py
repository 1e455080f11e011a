"""Tests of perfmodel.report.render: tables and CSV from DataFrames and from rows (dicts)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from perfmodel.report import render_frame, to_json

ROWS = [
    {"rank": 1, "strategy": "dp=8", "step_ms": 15.512, "eff_%": None, "fits": True},
    {"rank": 12, "strategy": "pp=2,dp=4", "step_ms": 1234.5, "eff_%": 58.1, "fits": False},
]


def test_rows_and_frame_render_the_same_table() -> None:
    assert render_frame(ROWS) == render_frame(pd.DataFrame(ROWS))


def test_table_aligns_numbers_right_text_left_and_marks_missing() -> None:
    lines = render_frame(ROWS).splitlines()
    assert lines[0].split() == ["rank", "strategy", "step_ms", "eff_%", "fits"]
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].split() == ["1", "dp=8", "15.51", "-", "yes"]  # booleans right-aligned, as pandas types them
    assert lines[3].split() == ["12", "pp=2,dp=4", "1,234.50", "58.10", "no"]
    # right-aligned numbers end in the same column
    assert lines[2].index("15.51") + len("15.51") == lines[3].index("1,234.50") + len("1,234.50")
    # left-aligned text starts in the same column
    assert lines[2].index("dp=8") == lines[3].index("pp=2,dp=4")


def test_csv_of_rows_equals_csv_of_frame() -> None:
    assert render_frame(ROWS, "csv") == render_frame(pd.DataFrame(ROWS), "csv")
    assert render_frame(ROWS, "csv").splitlines()[0] == "rank,strategy,step_ms,eff_%,fits"


def test_numpy_numbers_render_like_python_numbers() -> None:
    import numpy as np

    rows = [{"n": np.int64(12345), "x": np.float64(1.5)}, {"n": 7, "x": 2.25}]
    lines = render_frame(rows).splitlines()
    assert lines[2].split() == ["12,345", "1.50"] and lines[3].split() == ["7", "2.25"]
    assert lines[2].index("12,345") + 6 == lines[3].index("7") + 1  # right-aligned


def test_empty_table_says_so() -> None:
    assert render_frame([]) == "(no rows)"
    assert render_frame(pd.DataFrame()) == "(no rows)"


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_json_never_carries_non_finite_numbers(bad: float) -> None:
    out = json.loads(to_json({"a": bad, "b": [1.0, bad], "c": {"d": bad}}))
    assert out == {"a": None, "b": [1.0, None], "c": {"d": None}}

"""Every CSV answer carries its assumptions in each row (``assumption_<key>`` columns).

The table and JSON forms said the profile and its source, the precision, the optimizer and what is
excluded; the CSV forms of ``predict``, ``plan``, ``compare`` and ``scale`` carried the setting but
none of those, so a saved row could not say what it assumed.
"""

from __future__ import annotations

import io

import pandas as pd
import pytest

from perfmodel.cli import main

NEEDED = ("assumption_hardware_source", "assumption_precision", "assumption_optimizer", "assumption_excluded")


@pytest.mark.parametrize("args", [
    ["predict", "resnet18", "--gpus", "4", "-s", "dp=4"],
    ["plan", "resnet18", "--gpus", "4"],
    ["compare", "resnet18", "--gpus", "4", "-s", "dp=4", "-H", "v100-16gb-dgx1,a100-80gb-dgx"],
    ["scale", "resnet18", "--gpus", "1,4", "--strategies", "dp,pp"],
])
def test_csv_rows_say_their_assumptions(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main([*args, "--format", "csv"])
    assert e.value.code == 0
    df = pd.read_csv(io.StringIO(capsys.readouterr().out))
    for column in NEEDED:
        assert column in df.columns, (args[0], column)
        assert df[column].astype(str).str.len().gt(3).all(), (args[0], column)
    assert df["assumption_excluded"].str.contains("data loading").all()
    if "hardware" in df.columns:  # each row's profile source is its own profile's
        for hw, source in zip(df["hardware"], df["assumption_hardware_source"], strict=True):
            assert hw in source or hw.split("-")[0].upper() in source.upper()

"""The held-out checks of scripts/fit_kernel_params.py fit from the neutral start with --starts."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from cli_helpers import load_file


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_file("scripts/fit_kernel_params.py", "fit_kernel_params_starts")


def _recording(fit: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the fit by one that records its keyword arguments and returns the profile's numbers."""
    calls: list[dict[str, Any]] = []
    hw = fit.load_hardware("p100-16gb-nvlink")

    def fake(name: str, rows: object = None, **kw: Any) -> dict[str, float]:
        calls.append({"name": name, "rows": rows, **kw})
        return {"conv": hw.compute["fp32"].conv, "linear": hw.compute["fp32"].linear}

    monkeypatch.setattr(fit, "fit", fake)
    monkeypatch.setattr(fit, "mape_by_kind", lambda rows, precision, v: {"x": (len(rows), 1.0)})
    return calls


@pytest.mark.parametrize("starts", [1, 5])
def test_split_fits_each_half_neutrally_with_the_starts(
    fit: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], starts: int,
) -> None:
    calls = _recording(fit, monkeypatch)
    fit.split_check("pascal-fp32", starts)
    assert [(c["neutral"], c["starts"]) for c in calls] == [(True, starts)] * 2
    # the two halves are disjoint and cover the set
    a, b = (c["rows"] for c in calls)
    assert not {id(r) for r in a} & {id(r) for r in b}
    assert len(a) + len(b) == len(fit.set_rows("pascal-fp32"))
    assert capsys.readouterr().out.count("scored on the others") == 2


def test_transfer_fits_the_source_neutrally_with_the_starts(
    fit: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    calls = _recording(fit, monkeypatch)
    fit.transfer_check("volta-amp", "pascal-fp32", 3)
    assert [(c["name"], c["neutral"], c["starts"]) for c in calls] == [("volta-amp", True, 3)]
    assert "volta-amp numbers on pascal-fp32" in capsys.readouterr().out


def test_a_start_stopped_at_the_iteration_cap_is_marked(
    fit: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # two iterations cannot reach an optimum from either start: both losses carry the mark
    monkeypatch.setattr(fit, "MAXITER", 2)
    fit.fit("volta-amp", only=("conv",), starts=2)
    out = capsys.readouterr().out
    assert "stopped at the 2-iteration cap" in out
    assert len([x for x in out.split("losses ")[1].split(";")[0].split() if x.endswith("*")]) == 2

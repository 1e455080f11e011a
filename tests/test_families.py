"""End-to-end runs of more CNN families (perfmodel/data/families_*.csv): sources, split, recorded MAPE."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from perfmodel.validation import load_measurements, validate

DATA = Path(str(resources.files("perfmodel.data")))
#: Uncalibrated throughput MAPE and speedup MAPE (%) measured when the kernel model was fitted
#: (README "How accurate it is"); a change that makes one worse by more than MARGIN fails.
RECORDED = {"families_runs.csv": (12.0, 6.9), "families_holdout_runs.csv": (10.3, 7.6)}
MARGIN = 2.0


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_family_runs_are_sourced_and_scored(name: str) -> None:
    ms = load_measurements([str(DATA / name)])
    assert ms.rows and all(m.source and m.columns.get("notes") for m in ms.rows)
    v = validate(ms, "none")
    assert v.summary.unpredictable == 0
    mape, speedup = RECORDED[name]
    assert v.summary.throughput_mape_pct <= mape + MARGIN
    assert v.summary.speedup_mape_pct is not None and v.summary.speedup_mape_pct <= speedup + MARGIN


def test_hold_out_is_disjoint_and_covers_the_families() -> None:
    tune = load_measurements([str(DATA / "families_runs.csv")]).rows
    hold = load_measurements([str(DATA / "families_holdout_runs.csv")]).rows

    def key(m):  # type: ignore[no-untyped-def]
        return m.model, m.hardware, m.gpus, m.precision, m.batch_per_gpu

    assert not {key(m) for m in tune} & {key(m) for m in hold}
    models = {m.model for m in tune} | {m.model for m in hold}
    assert {"vgg16", "alexnet", "inception_v3", "efficientnet_b0", "efficientnet_b4"} <= models

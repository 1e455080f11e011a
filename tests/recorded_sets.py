"""Hold-out sets' errors as their guard tests check them against recorded figures."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from perfmodel.validation import Measurement, load_measurements, validate

__all__ = ["HoldOutErrors", "hold_out_errors", "per_group_errors", "precision_pairs", "other_sets_rows",
           "assert_within_recorded", "assert_per_group_within", "assert_published_amp_speedups", "run_grid"]


@dataclass(frozen=True)
class HoldOutErrors:
    """A set's uncalibrated errors (%): MAPE over all rows, signed error per row, absolute error
    per (profile, precision) and the absolute speedup errors of the rows that have one."""

    mape_pct: float
    signed_pct: tuple[float, ...]
    by_profile_precision_pct: dict[tuple[str, str], list[float]]
    speedup_pct: tuple[float, ...]

    def mean(self, key: tuple[str, str]) -> float:
        """The mean absolute error of one (profile, precision) group."""
        return float(np.mean(self.by_profile_precision_pct[key]))


def hold_out_errors(file: Path) -> HoldOutErrors:
    """Validate ``file`` without calibration; every row must be priced."""
    v = validate(load_measurements([str(file)]), "none")
    assert v.summary.unpredictable == 0 and v.summary.throughput_mape_pct is not None
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    signed, speedups = [], []
    for r in v.rows:
        assert r.error_pct is not None
        signed.append(r.error_pct)
        by[(r.measurement.hardware, r.measurement.precision)].append(abs(r.error_pct))
        if r.speedup_error_pct is not None:
            speedups.append(abs(r.speedup_error_pct))
    return HoldOutErrors(v.summary.throughput_mape_pct, tuple(signed), dict(by), tuple(speedups))


def assert_within_recorded(e: HoldOutErrors, all_pct: float, by_key: dict[tuple[str, str], float],
                           speedup_pct: float, speedup_rows: int, margin: float) -> None:
    """No MAPE of ``e`` (all rows, each (profile, precision), the ``speedup_rows`` speedups) worse
    than its recorded figure by more than ``margin`` points."""
    assert e.mape_pct <= all_pct + margin
    for key, recorded in by_key.items():
        assert e.mean(key) <= recorded + margin, key
    assert len(e.speedup_pct) == speedup_rows and float(np.mean(e.speedup_pct)) <= speedup_pct + margin


def assert_per_group_within(file: Path, recorded_pct: float, scored_rows: int, margin: float) -> None:
    """The per-group calibrated MAPE of ``file``'s ``scored_rows`` rows no worse than recorded + margin."""
    scored = per_group_errors(file)
    assert len(scored) == scored_rows and float(np.mean(scored)) <= recorded_pct + margin


def assert_published_amp_speedups(rows: tuple[Measurement, ...], pairs_expected: int) -> None:
    """A README's 'Throughput speedup' column is the mixed-precision figure over the TF32/FP32 one of
    the same GPUs and batch, to two decimals: a check of the transcription."""
    pairs = precision_pairs(rows)
    assert len(pairs) == pairs_expected
    for amp, other in pairs:
        published = float(amp.columns["published_amp_speedup"])
        assert other.columns["published_amp_speedup"] == amp.columns["published_amp_speedup"]
        assert amp.measured_throughput / other.measured_throughput == pytest.approx(published, abs=0.006)


def run_grid(runs: dict[str, tuple[set[str], tuple[int, ...]]], gpus: tuple[int, ...] = (1, 8)) -> set[
        tuple[str, str, int, int]]:
    """(profile, precision, GPUs, batch per GPU) of every run a table publishes: ``runs`` maps each
    profile to its precisions and batches, each run at every count of ``gpus``."""
    return {(h, p, n, b) for h, (precisions, batches) in runs.items() for p in precisions for n in gpus
            for b in batches}


def per_group_errors(file: Path) -> list[float]:
    """Absolute errors (%) of the rows the per-group single-GPU calibration scores."""
    v = validate(load_measurements([str(file)]), "single-gpu-per-group")
    return [abs(r.error_pct) for r in v.rows if r.error_pct is not None and r.role != "calibration"]


def precision_pairs(rows: tuple[Measurement, ...]) -> list[tuple[Measurement, Measurement]]:
    """(mixed-precision row, its 32-bit twin) for each GPU count, profile and batch."""
    pairs: dict[tuple[str, int, int], dict[str, Measurement]] = defaultdict(dict)
    for m in rows:
        pairs[(m.hardware, m.gpus, m.batch_per_gpu)][m.precision] = m
    out = []
    for pair in pairs.values():
        amp = pair.pop("amp")
        (other,) = pair.values()
        out.append((amp, other))
    return out


def other_sets_rows(file: Path) -> tuple[Measurement, ...]:
    """The rows of every shipped measurement file beside ``file`` (a hold-out must not share them)."""
    others = sorted(p for p in file.parent.glob("*runs.csv") if p != file)
    return load_measurements([str(f) for f in others]).rows

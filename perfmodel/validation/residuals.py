"""Log-ratio residuals of the shipped measured runs, by group: the data behind the error bars.

One residual per predicted run: ``ln(predicted / measured throughput)`` (positive = the model
is optimistic). Uncalibrated residuals come from every predicted run of the shipped set, its
hold-out and the family set (VGG, AlexNet, Inception, EfficientNet, ResNet on other
frameworks) on the shipped profiles; calibrated ones from the multi-GPU runs under
single-GPU calibration (the 1-GPU runs are what the calibration fitted, so they would be
in-sample). The family hold-out (``families_holdout_runs.csv``) stays out of the table: the
intervals' coverage is checked on it (:func:`holdout_coverage`).
``scripts/make_residuals.py`` writes the table to ``perfmodel/data/residuals.json``; the CLI
only reads that file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import statistics
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import DataError
from ..hardware import load_hardware
from .compare import validate
from .intervals import FALLBACKS, METHOD, GroupKey, ResidualRow, family_of, generation_of, interval_for
from .measurements import MeasurementSet, holdout_path, load_measurements, shipped_path
from .memory_margin import activation_errors, reference_path

__all__ = [
    "Residual",
    "COLUMNS",
    "COVERAGE_LEVELS",
    "RESIDUAL_SETS",
    "HOLDOUT_SET",
    "compute_residuals",
    "coverage_report",
    "holdout_coverage",
    "residual_table",
    "as_interval_rows",
]

@dataclass(frozen=True)
class Residual:
    """One measured run, its group and the model's log-ratio error on it."""

    set: str
    row: int
    source: str
    model: str
    family: str
    hardware: str
    generation: str
    precision: str
    strategy_kind: str
    gpus: int
    calibrated: bool
    measured_throughput: float
    predicted_throughput: float

    @property
    def log_ratio(self) -> float:
        """``ln(predicted / measured)`` throughput (= ``ln(measured / predicted)`` step time)."""
        return math.log(self.predicted_throughput / self.measured_throughput)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["log_ratio"] = self.log_ratio
        return d


def _data(name: str) -> Path:
    return Path(str(resources.files("perfmodel.data").joinpath(name)))


#: The sets whose residuals make the table: (set name, file).
RESIDUAL_SETS: tuple[tuple[str, Path], ...] = (
    ("published", shipped_path()),
    ("holdout", holdout_path()),
    ("families", _data("families_runs.csv")),
)
#: The set kept out of the table, on which the intervals' coverage is checked.
HOLDOUT_SET: tuple[str, Path] = ("families_holdout", _data("families_holdout_runs.csv"))


def compute_residuals(sets: tuple[tuple[str, Path], ...] = RESIDUAL_SETS) -> list[Residual]:
    """Residuals of every predicted run of ``sets``, uncalibrated and calibrated."""
    out: list[Residual] = []
    for name, path in sets:
        ms = load_measurements([path])
        out += _residuals(name, ms, "none")
        out += _residuals(name, ms, "single-gpu")
    return out


def holdout_coverage(rows: tuple[ResidualRow, ...], held: tuple[ResidualRow, ...]) -> list[dict[str, Any]]:
    """Coverage of the ``held`` runs (never in ``rows``) by the intervals ``rows`` give, per level:
    how many held-out residuals fall inside their closest group's interval, and the median width."""
    out = []
    for level in COVERAGE_LEVELS:
        scored = []
        for r in held:
            try:
                iv = interval_for(r.key, level, rows)
            except DataError:
                continue
            inside = iv.low_log_ratio <= r.log_ratio <= iv.high_log_ratio
            scored.append((int(inside), math.exp(iv.high_log_ratio - iv.low_log_ratio)))
        covered = sum(c for c, _ in scored)
        out.append({"set": HOLDOUT_SET[1].name, "level": level, "covered": covered, "tried": len(scored),
                    "coverage": covered / len(scored) if scored else None,
                    "median_width_ratio": statistics.median(w for _, w in scored) if scored else None})
    return out


def _residuals(set_name: str, ms: MeasurementSet, mode: str) -> list[Residual]:
    v = validate(ms, mode)
    out = []
    for r in v.rows:
        if not r.scored or r.predicted_throughput is None:
            continue
        if mode != "none" and not r.calibrated:
            continue  # no 1-GPU run to calibrate on: the uncalibrated residual already counts
        m = r.measurement
        hw = load_hardware(m.hardware)
        out.append(
            Residual(
                set=set_name,
                row=m.row,
                source=m.source,
                model=m.model,
                family=family_of(m.model),
                hardware=hw.name,
                generation=generation_of(hw),
                precision=m.precision,
                strategy_kind=m.strategy_kind,
                gpus=m.gpus,
                calibrated=mode != "none",
                measured_throughput=float(m.measured_throughput),
                predicted_throughput=float(r.predicted_throughput),
            )
        )
    return out


#: Interval levels whose leave-one-out coverage the table records.
COVERAGE_LEVELS = (0.5, 0.8, 0.9)

#: Columns of the shipped table, in order.
COLUMNS = (
    "set", "row", "source", "model", "family", "hardware", "generation", "precision", "strategy_kind", "gpus",
    "calibrated", "measured_throughput", "predicted_throughput", "log_ratio",
)


def as_interval_rows(residuals: list[Residual]) -> tuple[ResidualRow, ...]:
    return tuple(
        ResidualRow(
            GroupKey(r.family, r.generation, r.precision, r.strategy_kind, r.calibrated),
            r.log_ratio,
            r.set,
            r.source,
            r.row,
        )
        for r in residuals
    )


def coverage_report(rows: tuple[ResidualRow, ...]) -> list[dict[str, Any]]:
    """Leave-one-out coverage and median width (high / low) per level, for all runs and by
    calibrated state, leaving out one run at a time and (harsher) every run of its source table;
    and, for comparison, one pooled group per calibrated state instead of the closest group."""
    pooled = tuple(dataclasses.replace(r, key=GroupKey("*", "*", "*", "*", r.key.calibrated)) for r in rows)
    out = []
    cases = [(by, level, subset, "closest") for by in ("run", "source") for level in COVERAGE_LEVELS
             for subset in ("all", "uncalibrated", "calibrated")]
    cases.append(("run", 0.8, "all", "pooled"))
    for by, level, subset, grouping in cases:
        table = rows if grouping == "closest" else pooled
        idx = [i for i, r in enumerate(table) if subset == "all" or r.key.calibrated == (subset == "calibrated")]
        hits = [_one_out(table, i, level, by) for i in idx]
        scored = [h for h in hits if h is not None]
        covered = sum(c for c, _ in scored)
        out.append(
            {"left_out": by, "level": level, "runs": subset, "grouping": grouping, "covered": covered,
             "tried": len(scored), "coverage": covered / len(scored) if scored else None,
             "median_width_ratio": statistics.median(w for _, w in scored) if scored else None}
        )
    return out


def _one_out(rows: tuple[ResidualRow, ...], i: int, level: float, by: str) -> tuple[int, float] | None:
    """(1 if run ``i`` falls in the interval of the others, the interval's high / low), None if none."""
    r = rows[i]
    same_table = (r.set, r.source)
    rest = rows[:i] + rows[i + 1 :] if by == "run" else tuple(x for x in rows if (x.set, x.source) != same_table)
    try:
        iv = interval_for(r.key, level, rest)
    except DataError:
        return None
    return int(iv.low_log_ratio <= r.log_ratio <= iv.high_log_ratio), math.exp(iv.high_log_ratio - iv.low_log_ratio)


def residual_table() -> dict[str, Any]:
    """The shipped table as written to ``perfmodel/data/residuals.json``: provenance, rows, coverage."""
    res = compute_residuals()
    rows = as_interval_rows(res)
    held = as_interval_rows(compute_residuals((HOLDOUT_SET,)))
    files = (*(p for _, p in RESIDUAL_SETS), HOLDOUT_SET[1], reference_path())
    inputs = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    return {
        "what": "ln(predicted / measured) throughput of every predicted run of the shipped set, its hold-out and "
        "the family set; calibrated rows: multi-GPU runs under single-GPU calibration (perfmodel validate "
        "--calibrate single-gpu); the family hold-out is left out and scores the intervals (holdout_coverage)",
        "made_by": "python scripts/make_residuals.py (perfmodel.validation.residuals.residual_table)",
        "perfmodel_version": __version__,
        "inputs_sha256": inputs,
        "method": METHOD,
        "fallbacks": [list(f) for f in FALLBACKS],
        "coverage": coverage_report(rows),
        "holdout_coverage": holdout_coverage(rows, held),
        "memory_model": {
            "what": "(modelled - autograd) / autograd saved activation elements per sample",
            "reference": "autograd_saved_activations.json",
            "activation_error": activation_errors(),
        },
        "columns": list(COLUMNS),
        "rows": [[r.to_dict()[c] for c in COLUMNS] for r in res],
    }

"""Single-GPU calibration per speedup group: a network's own 1-GPU run scales its compute.

The pooled single-GPU calibration (:func:`.calibrate.calibrate_single_gpu`) fits one set of
compute efficiencies per (profile, precision) to the 1-GPU runs of every network in a file,
so a network the pooled fit does not suit keeps its 1-GPU error in its multi-GPU rows. A user
who calibrates with the 1-GPU run of the network they are about to scale gets a fit of their
own: this module fits, per speedup group (:func:`speedup_key`: model, hardware, precision,
framework, source and per-GPU batch), one factor on that network's per-layer forward and
backward seconds to the group's 1-GPU rows
(:attr:`~perfmodel.strategies.context.Context.compute_scale` says what is scaled and why),
and prices the group's multi-GPU rows with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PerfmodelError
from .devices import ran_on_cpu
from .measurements import Measurement, resolve_hardware
from .pricing import price_row

__all__ = [
    "COMPUTE_SCALE_BOUNDS",
    "GroupFit",
    "GroupCalibration",
    "calibrate_per_group",
    "speedup_key",
    "row_id",
]

#: The fitted factor on a network's compute seconds stays in this range. Uncalibrated, the
#: model's 1-GPU step is within 0.6x to 1.5x of every 1-GPU run of the shipped and family
#: sets; a run that needs more than a factor 3 either way is not a compute-model error (a
#: wrong batch, an input-bound or host-bound run, another network), so the fit stops at the
#: bound and says so rather than absorb it.
COMPUTE_SCALE_BOUNDS = (1.0 / 3.0, 3.0)


def speedup_key(m: Measurement) -> tuple[str, ...]:
    """Rows sharing this key form one speedup group (see ``compare.DEFINITIONS``)."""
    batch = f"b={m.batch_per_gpu}" if m.batch_per_gpu is not None else "global"
    return (m.file, m.model, m.hardware, m.precision, m.framework, m.source, batch, m.step)


def row_id(m: Measurement) -> tuple[str, int]:
    """A row's identity across calls: (file, row number)."""
    return (m.file, m.row)


@dataclass(frozen=True)
class GroupFit:
    """The compute factor of one speedup group, fitted to its 1-GPU rows."""

    model: str
    hardware: str
    precision: str
    batch: str
    fitted_rows: tuple[int, ...]
    applied_rows: tuple[int, ...]
    compute_scale: float
    mape_before_pct: float
    mape_after_pct: float
    at_bound: bool

    def describe(self) -> str:
        bound = "; at bound (the fit does not reach its 1-GPU run)" if self.at_bound else ""
        return (
            f"{self.model} {self.hardware} {self.precision} {self.batch}: compute x{self.compute_scale:.3f} "
            f"from 1-GPU row(s) {', '.join(map(str, self.fitted_rows))} (error {self.mape_before_pct:.1f}% -> "
            f"{self.mape_after_pct:.1f}% MAPE), applied to {len(self.applied_rows)} row(s){bound}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class GroupCalibration:
    """Compute factors per row (by :func:`row_id`) and the fits behind them, for reports."""

    mode: str
    scales: Mapping[tuple[str, int], float]
    fits: tuple[GroupFit, ...]
    skipped: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [f.describe() for f in self.fits] + [f"not fitted: {s}" for s in self.skipped]

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "groups": [f.to_dict() for f in self.fits], "skipped": list(self.skipped)}


def _log_errors(rows: Sequence[Measurement], scale: float) -> np.ndarray:
    hw = resolve_hardware(rows[0])
    return np.array(
        [math.log(price_row(m, hw, scale).throughput_samples_per_s / m.measured_throughput) for m in rows]
    )


def _mape(res: np.ndarray) -> float:
    return float(np.mean(np.abs(np.expm1(res)))) * 100.0


def fit_scale(ones: Sequence[Measurement]) -> tuple[float, float, float, bool]:
    """(scale, MAPE before %, MAPE after %, at bound) of one group's 1-GPU rows.

    Minimises the squared log errors over ``log(scale)`` within :data:`COMPUTE_SCALE_BOUNDS`
    (one row: its error goes to zero unless the bound stops it).
    """
    from scipy.optimize import minimize_scalar

    lo, hi = (math.log(b) for b in COMPUTE_SCALE_BOUNDS)
    sol = minimize_scalar(
        lambda x: float(np.sum(_log_errors(ones, math.exp(x)) ** 2)),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-7},
    )
    x = float(sol.x)
    at_bound = min(x - lo, hi - x) < 1e-4
    scale = math.exp(x)
    return scale, _mape(_log_errors(ones, 1.0)), _mape(_log_errors(ones, scale)), at_bound


def _priceable(rows: Sequence[Measurement]) -> list[Measurement]:
    ok = []
    for m in rows:
        if not m.has_batch or ran_on_cpu(m):
            continue
        try:
            price_row(m, resolve_hardware(m))
        except PerfmodelError:
            continue
        ok.append(m)
    return ok


def calibrate_per_group(rows: Sequence[Measurement]) -> GroupCalibration:
    """Fit one compute factor per speedup group to its 1-GPU rows; multi-GPU rows are never
    looked at (they stay unseen data to score the fit on)."""
    groups: dict[tuple[str, ...], list[Measurement]] = {}
    for m in _priceable(rows):
        groups.setdefault(speedup_key(m), []).append(m)
    scales: dict[tuple[str, int], float] = {}
    fits: list[GroupFit] = []
    skipped: list[str] = []
    for key, members in groups.items():
        ones = [m for m in members if m.gpus == 1]
        if not ones:
            skipped.append(f"{' '.join(key[1:4])} {key[6]}: no 1-GPU run in its group; profile values kept")
            continue
        scale, before, after, at_bound = fit_scale(ones)
        for m in members:
            scales[row_id(m)] = scale
        fits.append(
            GroupFit(key[1], key[2], key[3], key[6], tuple(m.row for m in ones), tuple(m.row for m in members),
                     scale, before, after, at_bound)
        )
    return GroupCalibration("single-gpu-per-group", scales, tuple(fits), tuple(skipped))

"""Error bars: intervals for throughput and step time from the shipped runs' residuals by group.

Method (split-conformal prediction on log-ratio residuals; Vovk, Gammerman & Shafer,
*Algorithmic Learning in a Random World*, 2005; Lei et al., "Distribution-free predictive
inference for regression", JASA 2018): for the group of measured runs closest to a
prediction (model family, GPU generation, precision, strategy kind, calibrated or not), take
the ``n`` residuals ``r = ln(predicted / measured)`` throughput, sorted. The interval at level
``L`` runs from the ``floor((n + 1)(1 - L)/2)``-th to the ``ceil((n + 1)(1 + L)/2)``-th
smallest: if the run to predict is exchangeable with the group's, its residual falls inside
with probability at least ``L``. A group too small for both ranks (``n < 9`` at 80%) is
skipped for the next coarser one, and the answer says so; small groups that qualify get
wide intervals, since the ranks then reach the group's extremes. Throughput lies in
``[predicted exp(-r_high), predicted exp(-r_low)]``, step time in ``[t exp(r_low), t exp(r_high)]``
(the interval need not contain the point prediction when the group's runs are all slower).

The residual table is data (``perfmodel/data/residuals.json``, written by
``scripts/make_residuals.py``), read once per process.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import DataError, UsageError
from ..hardware import Hardware
from ..hardware.generation import generation
from ..network.zoo.registry import MODELS, model_names

__all__ = [
    "DEFAULT_LEVEL",
    "GROUP_FIELDS",
    "FALLBACKS",
    "METHOD",
    "GroupKey",
    "Interval",
    "ResidualRow",
    "family_of",
    "generation_of",
    "is_calibrated",
    "group_key",
    "interval_for",
    "residual_rows",
    "shipped_table",
    "residuals_path",
    "min_runs",
]

#: The level of every interval the CLI prints (the JSON contract's ``interval.level``).
DEFAULT_LEVEL = 0.8

#: The fields of a run's group, closest first.
GROUP_FIELDS = ("family", "generation", "precision", "strategy_kind", "calibrated")

#: The groups tried in turn, closest first: the fields each keeps (``calibrated`` always).
FALLBACKS: tuple[tuple[str, ...], ...] = (
    GROUP_FIELDS,
    ("generation", "precision", "strategy_kind", "calibrated"),
    ("generation", "precision", "calibrated"),
    ("strategy_kind", "calibrated"),
    ("calibrated",),
)

METHOD = (
    "split-conformal interval: equal-tail ranks floor((n+1)(1-L)/2) and ceil((n+1)(1+L)/2) of the n "
    "log-ratio residuals ln(predicted/measured throughput) of the closest group of shipped measured "
    "runs with n large enough (Vovk et al. 2005; Lei et al. 2018)"
)

def family_of(model: str) -> str:
    """A zoo model's family: the zoo module that builds it (resnet50 and resnext101 -> resnet)."""
    if model in model_names():
        return str(MODELS[model].build.__module__).rsplit(".", 1)[-1]
    return model


def generation_of(hw: Hardware) -> str:
    """The GPU architecture of a profile's device (:func:`~perfmodel.hardware.generation.generation`;
    'unknown' if none)."""
    return generation(hw.device.name) or "unknown"


def is_calibrated(hw: Hardware) -> bool:
    """Whether ``hw`` carries fitted efficiencies (in memory, or a profile ``calibrate`` wrote)."""
    if any(k.startswith("calibrated.") for k in hw.sources):
        return True
    return "calibrated by perfmodel calibrate" in hw.sources.get("profile", "")


@dataclass(frozen=True)
class GroupKey:
    """What a prediction (or a measured run) is grouped by."""

    family: str
    generation: str
    precision: str
    strategy_kind: str
    calibrated: bool

    def describe(self, fields: Sequence[str] = GROUP_FIELDS) -> str:
        parts = []
        for f in fields:
            v = getattr(self, f)
            parts.append(("calibrated" if v else "uncalibrated") if f == "calibrated" else f"{f}={v}")
        return ", ".join(parts)


def group_key(model: str, hw: Hardware, precision: str, strategy_kind: str) -> GroupKey:
    return GroupKey(family_of(model), generation_of(hw), precision, strategy_kind, is_calibrated(hw))


@dataclass(frozen=True)
class ResidualRow:
    """One row of the shipped residual table (what the intervals need of it)."""

    key: GroupKey
    log_ratio: float
    set: str
    source: str
    row: int


@dataclass(frozen=True)
class Interval:
    """Bounds of ``ln(predicted / measured)`` at ``level`` from the ``runs`` runs of ``group``."""

    level: float
    low_log_ratio: float
    high_log_ratio: float
    group: str
    runs: int
    fallback: int
    note: str
    method: str = METHOD

    def throughput(self, predicted: float) -> tuple[float, float]:
        """(low, high) samples/s for a predicted throughput."""
        return predicted * math.exp(-self.high_log_ratio), predicted * math.exp(-self.low_log_ratio)

    def step_time(self, predicted_s: float) -> tuple[float, float]:
        """(low, high) seconds for a predicted step time."""
        return predicted_s * math.exp(self.low_log_ratio), predicted_s * math.exp(self.high_log_ratio)

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "group": self.group, "runs": self.runs, "method": self.method,
                "fallback": self.fallback, "note": self.note}


def min_runs(level: float) -> int:
    """The fewest residuals whose conformal ranks both exist at ``level`` (9 at 0.8)."""
    _check_level(level)
    n = 1
    while not _ranks_ok(n, level):
        n += 1
    return n


def _check_level(level: float) -> None:
    if not (isinstance(level, float | int) and 0 < level < 1):
        raise UsageError(f"interval level must be a fraction in (0, 1), got {level!r}")


def _ranks(n: int, level: float) -> tuple[int, int]:
    eps = 1e-9  # (n + 1) * 0.9 must be 9.0, not 9.000000000000002
    lo = math.floor((n + 1) * (1 - level) / 2 + eps)
    hi = math.ceil((n + 1) * (1 + level) / 2 - eps)
    return lo, hi


def _ranks_ok(n: int, level: float) -> bool:
    lo, hi = _ranks(n, level)
    return lo >= 1 and hi <= n


def residuals_path() -> Path:
    """The shipped residual table (``scripts/make_residuals.py`` writes it)."""
    return Path(str(resources.files("perfmodel.data").joinpath("residuals.json")))


@lru_cache(maxsize=1)
def shipped_table() -> dict[str, Any]:
    """``perfmodel/data/residuals.json`` as parsed JSON, read once per process."""
    path = residuals_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: cannot read the residual table ({e}); rerun scripts/make_residuals.py") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object; rerun scripts/make_residuals.py")
    return data


@lru_cache(maxsize=1)
def residual_rows() -> tuple[ResidualRow, ...]:
    """The shipped residual table's rows, read once."""
    path = residuals_path()
    data = shipped_table()
    try:
        cols = data["columns"]
        out = []
        for values in data["rows"]:
            d = dict(zip(cols, values, strict=True))
            key = GroupKey(*(d[f] for f in GROUP_FIELDS))
            out.append(ResidualRow(key, float(d["log_ratio"]), d["set"], d["source"], int(d["row"])))
    except (ValueError, KeyError, TypeError) as e:
        raise DataError(f"{path}: cannot read the residual table ({e}); rerun scripts/make_residuals.py") from None
    return tuple(out)


def interval_for(key: GroupKey, level: float = DEFAULT_LEVEL, rows: Sequence[ResidualRow] | None = None) -> Interval:
    """The conformal interval of the closest group of ``rows`` (the shipped table) to ``key``."""
    _check_level(level)
    table = residual_rows() if rows is None else rows
    need = min_runs(level)
    closest = key.describe()
    for i, fields in enumerate(FALLBACKS):
        vals = sorted(
            r.log_ratio for r in table if all(getattr(r.key, f) == getattr(key, f) for f in fields)
        )
        if len(vals) < need:
            continue
        lo, hi = _ranks(len(vals), level)
        extremes = lo == 1 and hi == len(vals)
        if i == 0:
            note = f"closest group: {len(vals)} measured runs"
            if extremes:
                note += " (few: the interval spans all of them, from the lowest to the highest residual)"
        else:
            n0 = sum(all(getattr(r.key, f) == getattr(key, f) for f in GROUP_FIELDS) for r in table)
            note = (
                f"the closest group ({closest}) has {n0} measured run{'s' if n0 != 1 else ''}, fewer than the "
                f"{need} an {100 * level:.0f}% interval needs: coarser group used, so the interval is wider "
                f"and less specific"
            )
        return Interval(level, vals[lo - 1], vals[hi - 1], key.describe(fields), len(vals), i, note)
    raise DataError(f"the residual table has fewer than {need} runs for an {100 * level:.0f}% interval ({closest})")


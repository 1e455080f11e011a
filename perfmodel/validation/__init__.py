"""Validation: measured runs, predicted-against-measured comparison, calibration, measurement."""

from __future__ import annotations

from .calibrate import (
    Calibration,
    ComputeFit,
    LinkFit,
    calibrate_profile,
    calibrate_single_gpu,
    profile_toml,
)
from .compare import CALIBRATION_MODES, GroupSummary, RowResult, Summary, Validation, mape, validate
from .measurements import (
    Measurement,
    MeasurementSet,
    holdout_path,
    load_measurements,
    parse_measurements,
    shipped_path,
)

__all__ = [
    "CALIBRATION_MODES",
    "Calibration",
    "ComputeFit",
    "GroupSummary",
    "LinkFit",
    "Measurement",
    "MeasurementSet",
    "RowResult",
    "Summary",
    "Validation",
    "calibrate_profile",
    "calibrate_single_gpu",
    "holdout_path",
    "load_measurements",
    "mape",
    "parse_measurements",
    "profile_toml",
    "shipped_path",
    "validate",
]

"""Calibration: fit a profile's compute (and link) efficiencies to measured runs with scipy.

The steps live in their own modules (``calibrate_compute``, ``calibrate_link``, writing the
profile in ``calibrate_toml``); this module runs them in order and re-exports their names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..hardware import PRECISIONS, Hardware
from .calibrate_compute import EFFICIENCY_BOUNDS, HALF_WORK_DECADES, ComputeFit, fit_compute, with_compute
from .calibrate_errors import priceable
from .calibrate_link import LINK_EFFICIENCY_BOUNDS, LinkFit, fit_link
from .calibrate_toml import profile_toml
from .devices import ran_on_cpu
from .measurements import Measurement, resolve_hardware

__all__ = [
    "ComputeFit",
    "LinkFit",
    "Calibration",
    "calibrate_single_gpu",
    "calibrate_profile",
    "fit_compute",
    "fit_link",
    "profile_toml",
    "with_compute",
    "EFFICIENCY_BOUNDS",
    "HALF_WORK_DECADES",
    "LINK_EFFICIENCY_BOUNDS",
]


@dataclass(frozen=True)
class Calibration:
    """Calibrated copies of profiles (by the name rows use) and what was fitted, for reports."""

    mode: str
    profiles: Mapping[str, Hardware]
    compute: tuple[ComputeFit, ...]
    links: tuple[LinkFit, ...] = ()
    skipped: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        out = [f.describe() for f in self.compute] + [f.describe() for f in self.links]
        return out + [f"not fitted: {s}" for s in self.skipped]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "compute": [f.to_dict() for f in self.compute],
            "links": [f.to_dict() for f in self.links],
            "skipped": list(self.skipped),
        }


def _by_hardware(rows: Sequence[Measurement]) -> dict[str, list[Measurement]]:
    out: dict[str, list[Measurement]] = {}
    for m in rows:
        if not ran_on_cpu(m):  # a CPU run says nothing about the GPU profile it names
            out.setdefault(m.hardware, []).append(m)
    return out


def calibrate_single_gpu(rows: Sequence[Measurement]) -> Calibration:
    """Fit compute efficiencies per (hardware, precision) on the 1-GPU rows only.

    Multi-GPU rows are never looked at: they stay unseen data to score the fit on.
    """
    profiles: dict[str, Hardware] = {}
    fits: list[ComputeFit] = []
    skipped: list[str] = []
    for key, hw_rows in _by_hardware(rows).items():
        base = resolve_hardware(hw_rows[0])
        hw = base
        for precision in PRECISIONS:
            prec_rows = [m for m in hw_rows if m.precision == precision]
            if not prec_rows:
                continue
            ones = priceable([m for m in prec_rows if m.gpus == 1], base)
            if not ones:
                skipped.append(f"{key} {precision}: no 1-GPU run with a batch; profile values kept")
                continue
            fit, hw = fit_compute(ones, hw, precision)
            fits.append(fit)
        if hw is not base:
            profiles[key] = hw
    return Calibration("single-gpu", profiles, tuple(fits), (), tuple(skipped))


def calibrate_profile(rows: Sequence[Measurement], hw: Hardware, key: str) -> Calibration:
    """Fit ``hw`` to every row: compute per precision (1-GPU rows when there are any, else all
    its rows), then the link tiers on the multi-GPU rows, compute held at its fit."""
    fits: list[ComputeFit] = []
    links: list[LinkFit] = []
    skipped: list[str] = []
    usable = priceable(rows, hw)
    for precision in PRECISIONS:
        prec_rows = [m for m in usable if m.precision == precision]
        if not prec_rows:
            continue
        ones = [m for m in prec_rows if m.gpus == 1]
        fit, hw = fit_compute(ones or prec_rows, hw, precision)
        if not ones:
            why = "no 1-GPU run: fitted to multi-GPU runs, communication included"
            fit = dataclasses.replace(fit, note=f"{why}; {fit.note}" if fit.note else why)
        fits.append(fit)
    g = hw.gpus_per_node
    for tier in ("intra", "inter"):
        tier_rows = [m for m in usable if (1 < m.gpus <= g if tier == "intra" else m.gpus > g)]
        if not tier_rows:
            skipped.append(
                f"{key} {tier}-node link: no run of "
                f"{'2 to ' + str(g) if tier == 'intra' else 'more than ' + str(g)} GPUs"
            )
            continue
        lf, hw = fit_link(tier_rows, hw, tier)
        links.append(lf)
    if not usable:
        skipped.append(f"{key}: no row could be priced")
    return Calibration("all-rows", {key: hw}, tuple(fits), tuple(links), tuple(skipped))

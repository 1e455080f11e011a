"""Fitting step 1: a profile's compute efficiencies of one precision, fitted to measured runs."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PerfmodelError
from ..hardware import ComputeEfficiency, Hardware
from .calibrate_errors import efficiency_text, log_errors, mape_pct
from .measurements import Measurement

__all__ = ["EFFICIENCY_BOUNDS", "HALF_WORK_DECADES", "ComputeFit", "fit_compute", "with_compute"]

#: Every fitted efficiency stays a fraction of peak in this range.
EFFICIENCY_BOUNDS = (0.02, 1.0)
#: ``half_work_flops`` may move this many decades either way from the profile's value: the
#: profiles derive it from a ~10 us fixed cost per kernel, and 1 to 100 us spans the kernel
#: launch, tail and synchronisation overheads seen in practice.
HALF_WORK_DECADES = 1.0


@dataclass(frozen=True)
class ComputeFit:
    """Compute efficiencies of one (hardware, precision) fitted to measured rows."""

    hardware: str
    precision: str
    rows: tuple[int, ...]
    parameters: tuple[str, ...]
    before: ComputeEfficiency
    after: ComputeEfficiency
    mape_before_pct: float
    mape_after_pct: float
    at_bound: tuple[str, ...] = ()
    note: str = ""
    #: False where the fit would have raised these rows' MAPE, so the profile's values were kept
    fitted: bool = True

    def describe(self) -> str:
        if not self.fitted:
            kept = ", ".join(f"{p} {efficiency_text(getattr(self.before, p))}" for p in self.parameters)
            return f"not fitted: {self.hardware} {self.precision}: {kept} kept ({len(self.rows)} run(s)): {self.note}"
        changes = ", ".join(
            f"{p} {efficiency_text(getattr(self.before, p))} -> {efficiency_text(getattr(self.after, p))}"
            for p in self.parameters
        )
        if "conv" in self.parameters:
            lin = f"{efficiency_text(self.before.linear)} -> {efficiency_text(self.after.linear)}"
            changes += f" (linear scaled with conv: {lin})"
        bound = f"; at bound: {', '.join(self.at_bound)}" if self.at_bound else ""
        return (
            f"{self.hardware} {self.precision}: {changes} from {len(self.rows)} run(s); "
            f"their error {self.mape_before_pct:.1f}% -> {self.mape_after_pct:.1f}% MAPE{bound}"
            + (f"; {self.note}" if self.note else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware,
            "precision": self.precision,
            "rows": list(self.rows),
            "parameters": list(self.parameters),
            "before": dataclasses.asdict(self.before),
            "after": dataclasses.asdict(self.after),
            "mape_before_pct": self.mape_before_pct,
            "mape_after_pct": self.mape_after_pct,
            "at_bound": list(self.at_bound),
            "note": self.note,
            "fitted": self.fitted,
        }


def with_compute(hw: Hardware, precision: str, eff: ComputeEfficiency, note: str = "") -> Hardware:
    """A copy of ``hw`` whose ``precision`` efficiencies are ``eff`` (the source records it)."""
    compute = dict(hw.compute)
    compute[precision] = eff
    sources = dict(hw.sources)
    sources[f"calibrated.{precision}"] = note or "fitted"
    return dataclasses.replace(hw, compute=compute, sources=sources)


def fit_compute(
    rows: Sequence[Measurement], hw: Hardware, precision: str
) -> tuple[ComputeFit, Hardware]:
    """Fit ``precision``'s compute efficiencies of ``hw`` to ``rows`` (log least squares), kept
    only where they lower the rows' MAPE (the error ``validate`` reports): least squares in log
    space can trade a lower spread for a higher mean error, and a calibrated profile must not
    price its own runs worse than the shipped one did.

    The number of free parameters grows with the data, leaving at least one degree of
    freedom: 1 or 2 rows fit ``conv`` (``linear`` scales with it: CNN runs cannot tell
    them apart); 3 rows add ``memory`` (bandwidth-bound layers); 4 or more add
    ``half_work_flops`` (how fast small kernels fall off peak: grouped convolutions and
    small micro-batches), within :data:`HALF_WORK_DECADES` of its prior value.
    Efficiencies stay in :data:`EFFICIENCY_BOUNDS`.
    """
    from scipy.optimize import least_squares

    before = hw.compute[precision]
    n = len(rows)
    names: tuple[str, ...] = ("conv",) if n < 3 else ("conv", "memory")
    if n >= 4:
        names = (*names, "half_work_flops")
    h0 = before.half_work_flops if before.half_work_flops > 0 else 1e8
    lo_e, hi_e = EFFICIENCY_BOUNDS

    def build(x: np.ndarray) -> ComputeEfficiency:
        conv = float(x[0])
        linear = min(hi_e, before.linear * conv / before.conv)
        memory = float(x[1]) if len(x) > 1 else before.memory
        half = float(10 ** x[2]) if len(x) > 2 else before.half_work_flops
        return ComputeEfficiency(
            conv=conv, linear=max(lo_e, linear), memory=memory, half_work_flops=half
        )

    x0 = [min(hi_e, max(lo_e, before.conv)), min(hi_e, max(lo_e, before.memory)), math.log10(h0)][
        : len(names)
    ]
    lower = [lo_e, lo_e, math.log10(h0) - HALF_WORK_DECADES][: len(names)]
    upper = [hi_e, hi_e, math.log10(h0) + HALF_WORK_DECADES][: len(names)]

    def residuals(x: np.ndarray) -> np.ndarray:
        return log_errors(rows, with_compute(hw, precision, build(x)))

    r0 = log_errors(rows, hw)
    note = ""
    try:
        sol = least_squares(
            residuals, np.array(x0), bounds=(lower, upper), diff_step=1e-3, method="trf"
        )
        x = sol.x
    except (ValueError, PerfmodelError, FloatingPointError) as e:  # pragma: no cover - defensive
        x, note = np.array(x0), f"fit failed ({e}); profile values kept"
    after = build(x)
    r1 = log_errors(rows, with_compute(hw, precision, after))
    at_bound = tuple(
        nm
        for nm, v, lo, hi in zip(names, x, lower, upper, strict=True)
        if math.isclose(v, lo, rel_tol=1e-3) or math.isclose(v, hi, rel_tol=1e-3)
    )
    return _outcome(ComputeFit(hw.name, precision, tuple(m.row for m in rows), names, before, after,
                               mape_pct(r0), mape_pct(r1), at_bound, note), hw)


def _outcome(fit: ComputeFit, hw: Hardware) -> tuple[ComputeFit, Hardware]:
    """``fit`` and ``hw`` with its efficiencies where they lower the rows' MAPE; else the profile's
    values, kept, with the fit that was refused in the note (and in the profile's source)."""
    rows = ", ".join(str(r) for r in fit.rows)
    if fit.mape_after_pct > fit.mape_before_pct:
        tried = ", ".join(f"{nm} {efficiency_text(getattr(fit.after, nm))}" for nm in fit.parameters)
        note = (f"the least-squares fit ({tried}) would raise their error {fit.mape_before_pct:.1f}% -> "
                f"{fit.mape_after_pct:.1f}% MAPE")
        kept = dataclasses.replace(fit, after=fit.before, mape_after_pct=fit.mape_before_pct, at_bound=(),
                                   note=note, fitted=False)
        src = f"{', '.join(fit.parameters)} kept after fitting to {len(fit.rows)} measured run(s) (rows {rows}): {note}"
        return kept, with_compute(hw, fit.precision, fit.before, src)
    src = (f"{', '.join(fit.parameters)} fitted to {len(fit.rows)} measured run(s) (rows {rows}): "
           f"MAPE {fit.mape_before_pct:.1f}% -> {fit.mape_after_pct:.1f}%")
    return fit, with_compute(hw, fit.precision, fit.after, src)

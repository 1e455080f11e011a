"""Fitting step 2: the efficiency of one link tier, fitted to multi-GPU runs."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..hardware import Hardware
from .calibrate_errors import efficiency_text, log_errors, mape_pct
from .measurements import Measurement

__all__ = ["LINK_EFFICIENCY_BOUNDS", "LinkFit", "fit_link"]

#: A fitted link efficiency stays in this range; a fit that wants less than its lower end is
#: refused: no plausible link explains the loss (measured NCCL bus bandwidths are 60-90% of
#: line rate), which then lies elsewhere (input pipeline, synchronisation, stragglers).
LINK_EFFICIENCY_BOUNDS = (0.1, 1.0)


@dataclass(frozen=True)
class LinkFit:
    """Efficiency of one link tier (``intra`` or ``inter`` node) fitted to multi-GPU rows."""

    hardware: str
    tier: str
    rows: tuple[int, ...]
    before: float
    after: float
    mape_before_pct: float
    mape_after_pct: float
    fitted: bool
    note: str = ""

    def describe(self) -> str:
        if not self.fitted:
            kept = efficiency_text(self.before)
            return f"{self.hardware} {self.tier}-node link efficiency kept at {kept}: {self.note}"
        return (
            f"{self.hardware} {self.tier}-node link efficiency "
            f"{efficiency_text(self.before)} -> {efficiency_text(self.after)} "
            f"from {len(self.rows)} multi-GPU run(s); their error {self.mape_before_pct:.1f}% -> "
            f"{self.mape_after_pct:.1f}% MAPE" + (f"; {self.note}" if self.note else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, rows=list(self.rows))


def fit_link(rows: Sequence[Measurement], hw: Hardware, tier: str) -> tuple[LinkFit, Hardware]:
    """Fit the ``tier`` (``intra``/``inter``) link efficiency of ``hw`` to multi-GPU ``rows``.

    Left unchanged, with a note, when the rows' predicted times do not depend on it (the
    gradient exchange hides behind the backward pass), or when the fit runs into the lower
    end of :data:`LINK_EFFICIENCY_BOUNDS` (the runs lose time the link cannot explain).
    """
    from scipy.optimize import least_squares

    link = getattr(hw, tier)
    lo_e, hi_e = LINK_EFFICIENCY_BOUNDS
    row_ids = tuple(m.row for m in rows)

    def at(eff: float) -> Hardware:
        return dataclasses.replace(hw, **{tier: dataclasses.replace(link, efficiency=float(eff))})

    r0 = log_errors(rows, hw)
    kept = mape_pct(r0)
    spread = np.max(np.abs(log_errors(rows, at(hi_e)) - log_errors(rows, at(lo_e))))
    if spread < 1e-3:
        note = (
            "not identifiable: the predicted communication of these runs is hidden behind compute"
        )
        return LinkFit(
            hw.name, tier, row_ids, link.efficiency, link.efficiency, kept, kept, False, note
        ), hw

    def residuals(x: np.ndarray) -> np.ndarray:
        return log_errors(rows, at(float(x[0])))

    x0 = min(hi_e, max(lo_e, link.efficiency))
    sol = least_squares(residuals, np.array([x0]), bounds=([lo_e], [hi_e]), diff_step=1e-3)
    eff = float(sol.x[0])
    if math.isclose(eff, lo_e, rel_tol=1e-3):
        note = (
            f"the fit runs into the lower bound {lo_e:g}: these runs lose more time than any "
            "plausible link explains (input pipeline, synchronisation), so the link keeps its value"
        )
        return LinkFit(
            hw.name, tier, row_ids, link.efficiency, link.efficiency, kept, kept, False, note
        ), hw
    new = at(eff)
    r1 = log_errors(rows, new)
    note = "at upper bound" if math.isclose(eff, hi_e, rel_tol=1e-3) else ""
    return LinkFit(hw.name, tier, row_ids, link.efficiency, eff, kept, mape_pct(r1), True, note), new

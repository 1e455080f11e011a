"""What a calibration fit minimises: log errors of priced runs against measured ones, and MAPE."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import PerfmodelError
from ..hardware import Hardware
from .measurements import Measurement
from .pricing import price_row

__all__ = ["efficiency_text", "log_errors", "mape_pct", "priceable"]


def efficiency_text(x: float) -> str:
    """A fitted value as printed in fit descriptions (three significant digits)."""
    return f"{x:.3g}"


def log_errors(rows: Sequence[Measurement], hw: Hardware) -> np.ndarray:
    """``ln(predicted / measured)`` throughput of every row priced on ``hw``."""
    return np.array(
        [math.log(price_row(m, hw).throughput_samples_per_s / m.measured_throughput) for m in rows]
    )


def mape_pct(res: np.ndarray) -> float:
    """Mean absolute percentage error (%) of the log errors ``res``."""
    return float(np.mean(np.abs(np.expm1(res)))) * 100.0


def priceable(rows: Sequence[Measurement], hw: Hardware) -> list[Measurement]:
    """The rows with a batch that ``hw`` can price (the others cannot enter a fit)."""
    ok = []
    for m in rows:
        if not m.has_batch:
            continue
        try:
            price_row(m, hw)
        except PerfmodelError:
            continue
        ok.append(m)
    return ok

"""Several starting points for a bounded fit, and the best of their local optima.

A Nelder-Mead simplex stops at the local optimum nearest its start; the kernel fits have
several (``scripts/fit_kernel_params.py hopper-fp32 --starts 3``: losses 0.082, 0.082, 0.127).
:func:`start_points` gives the caller's start first and then seeded draws inside the bounds, so
one run with ``n`` starts is reproducible and its first optimum is the one-start fit's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["FitResult", "best_of", "start_points"]

#: bounds spanning more than this ratio are drawn log-uniformly (a latency, a slot count)
LOG_SPAN = 10.0


@dataclass(frozen=True)
class FitResult:
    """The best optimum found and the loss every start reached (in start order)."""

    x: np.ndarray
    loss: float
    start_losses: tuple[float, ...]

    @property
    def best_start(self) -> int:
        """Index (0 = the caller's start) of the start that reached :attr:`loss`."""
        return int(np.argmin(self.start_losses))


def start_points(
    x0: Sequence[float], bounds: Sequence[tuple[float, float]], n: int, seed: int = 0,
) -> list[np.ndarray]:
    """``x0`` followed by ``n - 1`` points drawn inside ``bounds`` (one (lower, upper) per
    coordinate, in the optimiser's units): uniform, or log-uniform where ``0 < lower`` and the
    bounds span more than :data:`LOG_SPAN`; the same ``seed`` gives the same points."""
    if n < 1:
        raise ValueError(f"start_points: need at least one start (n = {n})")
    if len(x0) != len(bounds):
        raise ValueError(f"start_points: {len(x0)} coordinates but {len(bounds)} bounds")
    rng = np.random.default_rng(seed)
    lo = np.array([b[0] for b in bounds], dtype=float)
    hi = np.array([b[1] for b in bounds], dtype=float)
    if np.any(hi < lo):
        raise ValueError("start_points: a lower bound exceeds its upper bound")
    logs = (lo > 0) & (hi > LOG_SPAN * lo)
    log_lo = np.log(np.where(logs, lo, 1.0))
    log_hi = np.log(np.where(logs, hi, 1.0))
    points = [np.asarray(x0, dtype=float)]
    for _ in range(n - 1):
        u = rng.random(len(lo))
        points.append(np.where(logs, np.exp(log_lo + u * (log_hi - log_lo)), lo + u * (hi - lo)))
    return points


def best_of(
    local: Callable[[np.ndarray], tuple[np.ndarray, float]], starts: Sequence[np.ndarray],
) -> FitResult:
    """Run the local optimiser ``local`` (a start -> (optimum, loss)) from every start and keep
    the lowest loss (the earliest start on a tie)."""
    if not starts:
        raise ValueError("best_of: no starting point")
    found = [local(s) for s in starts]
    losses = tuple(float(f[1]) for f in found)
    i = int(np.argmin(losses))
    return FitResult(x=np.asarray(found[i][0], dtype=float), loss=losses[i], start_losses=losses)

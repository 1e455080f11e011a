"""Counts made whole again where a product of ratios left them a rounding error off a whole number."""

from __future__ import annotations

import numpy as np

__all__ = ["snap_whole"]


def snap_whole(x: np.ndarray) -> np.ndarray:
    """``x`` with values within 1e-9 (relative) of a whole number made whole: a channel count or
    micro-batch times a share or a padding ratio (50 x 56/50 = 56.00000000000001) must not take
    one more tile, reduction step or group than the whole number it stands for."""
    x = np.asarray(x, dtype=float)
    r = np.round(x)
    return np.asarray(np.where(np.abs(x - r) <= 1e-9 * np.maximum(np.abs(x), 1.0), r, x))

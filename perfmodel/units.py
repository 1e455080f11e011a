"""Units and conventions: SI in code (bytes, seconds, FLOP/s, bytes/s); human units only when printing.

Conventions fixed for the whole package:

* 1 multiply-add = 2 FLOPs.
* Memory and traffic are in bytes; bandwidth in bytes/s; time in seconds; rates in FLOP/s.
* GiB (2**30 bytes) is used only for printing memory capacities and needs, GB/s (1e9 bytes/s)
  only for printing bandwidths, and the unit is written in every column header.
"""

from __future__ import annotations

import math

__all__ = [
    "GIB",
    "GB",
    "MB",
    "TERA",
    "GIGA",
    "MEGA",
    "BYTES_PER_ELEMENT",
    "fmt_bytes_gib",
    "fmt_seconds_ms",
    "fmt_rate",
]

KIB = 2**10
MIB = 2**20
GIB = 2**30
MB = 10**6
GB = 10**9
MEGA = 1e6
GIGA = 1e9
TERA = 1e12

#: Bytes per element of the activations and gradients for each training precision.
#: ``amp`` and ``bf16`` keep activations in 16-bit; ``fp32`` and ``tf32`` in 32-bit
#: (TF32 is a math mode for fp32 tensors, not a storage format).
BYTES_PER_ELEMENT: dict[str, int] = {"fp32": 4, "tf32": 4, "amp": 2, "bf16": 2}


def fmt_bytes_gib(n_bytes: float) -> str:
    """``n_bytes`` in GiB with two decimals (the unit belongs in the column header)."""
    return f"{n_bytes / GIB:.2f}"


def fmt_seconds_ms(seconds: float) -> str:
    """``seconds`` in milliseconds with two decimals."""
    return f"{seconds * 1e3:.2f}"


def fmt_rate(x: float) -> str:
    """A rate for a table or a line: whole numbers with separators from 100 up, three significant
    digits below (1.66, not 2; 0.0283, not 0), '-' for a non-finite value."""
    if not math.isfinite(x):
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"

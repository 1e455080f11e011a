"""The one error hierarchy of perfmodel; the CLI catches :class:`PerfmodelError` once.

::

    PerfmodelError                 base; ``exit_code`` says what the CLI returns
     ├── UsageError                (exit 2) arguments that cannot be honoured as given
     │    ├── StrategyError        a strategy spec that does not parse or cannot run
     │    └── BatchSplitError      a batch that cannot be split as asked
     └── DataError                 (exit 1) bad models, profiles, measurements or files
          ├── UnknownNameError     unknown model / hardware name, with the closest names
          ├── ProfileError         malformed hardware profile (file, field, expected)
          ├── MeasurementError     malformed measurement file (file, row, column)
          ├── NetworkError         a network definition that is inconsistent
          ├── PartitionError       the hypergraph partitioner failed or is missing
          └── NoFeasiblePlanError  no plan fits in memory (carries the smallest need)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "PerfmodelError",
    "UsageError",
    "StrategyError",
    "BatchSplitError",
    "DataError",
    "UnknownNameError",
    "ProfileError",
    "MeasurementError",
    "NetworkError",
    "PartitionError",
    "NoFeasiblePlanError",
    "closest_names",
    "suggestion",
    "did_you_mean",
]


class PerfmodelError(Exception):
    """Base of every error perfmodel raises on purpose."""

    exit_code: int = 1


class UsageError(PerfmodelError):
    """Arguments that cannot be honoured as given (CLI exit code 2)."""

    exit_code = 2


class StrategyError(UsageError):
    """A strategy spec that does not parse, or does not fit the GPUs, batch or network."""


class BatchSplitError(UsageError):
    """A batch that cannot be split over the GPUs or micro-batches as asked."""


class DataError(PerfmodelError):
    """Bad models, profiles, measurements or files (CLI exit code 1)."""

    exit_code = 1


class UnknownNameError(DataError):
    """An unknown model or hardware name; the message carries the closest valid names."""

    def __init__(self, what: str, name: str, valid: Iterable[str]) -> None:
        valid = sorted(valid)
        hint = suggestion(name, valid, f"valid: {', '.join(valid)}" if valid else "there are none")
        if what == "model" and name.endswith((".py", ".PY")):  # a file without the ':Name' of what to trace
            hint = f"a Python file needs the module's name after a colon, e.g. '{name[:80]}:MyNet'"
        # a huge name is cut: the message stays one readable line
        said = name if len(name) <= 80 else f"{name[:60]}... ({len(name):,} characters)"
        super().__init__(f"unknown {what} '{said}'; {hint}")
        self.name = name
        self.valid = valid


class ProfileError(DataError):
    """A hardware profile that is malformed: names the file, the field and what was expected."""


class MeasurementError(DataError):
    """A measurement file that is malformed: names the file, the row and the column."""


class NetworkError(DataError):
    """A network definition that is inconsistent (shapes, unknown inputs)."""


class PartitionError(DataError):
    """The hypergraph partitioner is missing or failed."""


class NoFeasiblePlanError(DataError):
    """No plan fits in the GPUs' memory; carries the smallest memory any plan needs."""

    def __init__(self, message: str, min_memory_bytes: float) -> None:
        super().__init__(message)
        self.min_memory_bytes = min_memory_bytes


def closest_names(name: str, valid: Iterable[str], n: int = 3) -> list[str]:
    """The up to ``n`` valid names closest to ``name``, case ignored (difflib ratio, prefix matches first)."""
    valid = list(valid)
    low = name.lower()
    by_low: dict[str, str] = {}
    for v in valid:
        by_low.setdefault(v.lower(), v)
    prefix = [v for v in valid if v.lower().startswith(low) and low]
    close = [by_low[c] for c in difflib.get_close_matches(low, list(by_low), n=n, cutoff=0.5)]
    out: list[str] = []
    for v in prefix + close:
        if v not in out:
            out.append(v)
    return out[:n]


def suggestion(name: str, valid: Iterable[str], otherwise: str = "") -> str:
    """``"did you mean a, b?"`` naming the valid names closest to ``name``, or ``otherwise`` when none is close."""
    close = closest_names(name[:200], valid)
    return f"did you mean {', '.join(close)}?" if close else otherwise


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """``"; did you mean a, b?"`` (:func:`suggestion`), or ``""`` when no valid name is close."""
    hint = suggestion(name, valid)
    return f"; {hint}" if hint else ""

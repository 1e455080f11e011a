"""Rows that repeat an earlier row cell for cell (a file given twice, a pasted block): counted once.

A repeated run with another measured value is a second measurement and stays; a row equal to
an earlier one in every column, the measured value included, says nothing new and would weigh
twice in a MAPE and in a calibration fit, so ``validate`` and ``calibrate`` keep the first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .measurements import Measurement

__all__ = ["REPEAT_ROLE", "exact_repeats", "repeat_reason", "without_repeats"]

#: the role of a row equal to an earlier one in every column: shown, neither scored nor fitted
REPEAT_ROLE = "repeat"


def _cells(m: Measurement) -> tuple[object, ...]:
    """Everything a row says (every column as parsed, and the columns kept as text), not where it is."""
    return (m.model, m.hardware, m.gpus, m.precision, m.batch_per_gpu, m.global_batch, m.strategy_text,
            m.measured_throughput, m.image_size, m.optimizer, m.step, m.framework, m.source,
            frozenset(m.columns.items()))


def exact_repeats(rows: Sequence[Measurement]) -> dict[int, int]:
    """For each index of ``rows`` that repeats an earlier row cell for cell, the index of the first."""
    first: dict[tuple[object, ...], int] = {}
    out: dict[int, int] = {}
    for i, m in enumerate(rows):
        out_of = first.setdefault(_cells(m), i)
        if out_of != i:
            out[i] = out_of
    return out


def without_repeats(rows: Sequence[Measurement], repeats: Mapping[int, int] | None = None) -> list[Measurement]:
    """``rows`` less the exact repeats (``repeats``: their :func:`exact_repeats`, found here if None), in order."""
    repeats = exact_repeats(rows) if repeats is None else repeats
    return [m for i, m in enumerate(rows) if i not in repeats]


def repeat_reason(first: Measurement) -> str:
    """Why a repeated row is not scored."""
    return f"repeats {first.where()} in every column: counted once, there"

"""A priced plan: its step's named terms (seconds), memory per GPU by part (bytes) and details."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Priced"]


@dataclass(frozen=True)
class Priced:
    """A plan's step as named terms (seconds), its memory per GPU by part (bytes) and details.

    ``time_s`` is the sum of the terms: a term is computed once, and the parts add up to
    the step by construction.
    """

    breakdown: dict[str, float]
    memory: dict[str, float]
    details: dict[str, Any]

    @property
    def time_s(self) -> float:
        return float(sum(self.breakdown.values()))

    @classmethod
    def of(cls, terms: dict[str, Any], memory: dict[str, Any], details: dict[str, Any]) -> Priced:
        """Terms and memory as floats."""
        return cls({k: float(v) for k, v in terms.items()}, {k: float(v) for k, v in memory.items()}, details)

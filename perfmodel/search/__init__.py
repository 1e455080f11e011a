"""Plan search: enumeration of degrees and ranking; the per-link DPs live with their strategies."""

from __future__ import annotations

from .enumerate import KINDS, candidates, factorisations
from .plan import PlanResult, plan

__all__ = ["KINDS", "candidates", "factorisations", "PlanResult", "plan"]

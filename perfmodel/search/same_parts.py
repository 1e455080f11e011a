"""One ranking row for an mp plan whose parts are a pipeline's stages: the two price the same."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..strategies.predict import Prediction
from ..strategies.spec import Strategy

__all__ = ["SPARE_SHAPES", "same_parts", "rank_distinct"]

#: shapes priced beyond the rows asked for, to fill the rows that merge (each merge prices one more)
SPARE_SHAPES = 4

Alternatives = tuple[tuple[str, float], ...]


def same_parts(a: Prediction, b: Prediction) -> bool:
    """Whether one of ``a``, ``b`` is an ``mp=K`` plan whose parts run as a pipeline's stages do (an
    acyclic chain of parts, no forward pass waiting mid-part: ``mid_pass_waits`` of
    :mod:`perfmodel.strategies.mp_candidates`) and the other ``pp=K`` with the same data parallelism,
    micro-batches and options, at the same step time (relative 1e-12): one plan, ranked twice."""
    mp, pp = (a, b) if a.strategy.mp > 1 else (b, a)
    choice = mp.details.get("partition_choice")
    if mp.strategy.mp == 1 or pp.strategy.pp != mp.strategy.mp or pp.strategy.mp != 1:
        return False
    if not isinstance(choice, dict):
        return False
    run: dict[str, Any] = next((c for c in choice.get("candidates", ()) if c.get("name") == choice.get("chosen")), {})
    if run.get("mid_pass_waits") != 0 or not run.get("quotient_acyclic"):  # parts that are not stages
        return False
    as_pipeline = mp.strategy.with_(mp=1, pp=mp.strategy.mp, schedule=pp.strategy.schedule,
                                    balance=pp.strategy.balance)
    return as_pipeline == pp.strategy and math.isclose(a.iteration_time_s, b.iteration_time_s, rel_tol=1e-12)


def rank_distinct(
    shapes: Sequence[Strategy], alternatives: Sequence[Alternatives], price_row: Callable[[Strategy], Prediction],
    top: int,
) -> tuple[list[Prediction], list[Alternatives], list[str]]:
    """The first ``top`` of ``shapes`` (ranked) priced by ``price_row``, a plan that :func:`same_parts`
    as a kept row folded into it: its spec named in that row's note (``""`` where none folded)."""
    kept: list[Prediction] = []
    alts: list[Alternatives] = []
    notes: list[str] = []
    for s, alt in zip(shapes, alternatives, strict=True):
        if len(kept) == top:
            break
        p = price_row(s)
        twin = next((i for i, q in enumerate(kept) if same_parts(q, p)), None)
        if twin is None:
            kept.append(p)
            alts.append(alt)
            notes.append("")
            continue
        whose = "its parts run as these stages" if p.strategy.mp > 1 else "these parts run as its stages"
        notes[twin] = f"{p.strategy.spec()} prices the same ({whose}: one row)"
    return kept, alts, notes

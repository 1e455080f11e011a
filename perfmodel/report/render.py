"""Render tables (pandas DataFrames) as text, CSV or JSON; no computation here."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..units import fmt_rate

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["render_frame", "to_json", "FORMATS", "fmt_rate", "assumption_columns"]

FORMATS = ("table", "json", "csv")


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        try:
            return _clean(x.item())
        except (ValueError, AttributeError):
            return x
    return x


def to_json(obj: Any) -> str:
    """JSON with non-finite numbers as null (the output contract never carries NaN or inf)."""
    return json.dumps(_clean(obj), indent=2, allow_nan=False)


def assumption_columns(assumptions: Mapping[str, Any]) -> dict[str, str]:
    """An answer's assumptions as CSV columns (``assumption_<key>``), so that a row read alone
    still says its profile and source, precision, optimizer and what is excluded."""
    return {f"assumption_{k}": str(v) for k, v in assumptions.items()}


def render_frame(
    df: pd.DataFrame | Sequence[Mapping[str, Any]], fmt: str = "table", floatfmt: str = "{:,.2f}"
) -> str:
    """A DataFrame, or rows as dicts with the same keys, as an aligned text table (numbers formatted) or CSV.

    Rows as dicts keep pandas out of the commands that only print a table (its import is a
    quarter of a second of ``perfmodel plan``'s start-up).
    """
    if fmt == "csv":
        import pandas as pd

        frame = df if isinstance(df, pd.DataFrame) else pd.DataFrame(list(df))
        return str(frame.to_csv(index=False)).rstrip("\n")
    if isinstance(df, Sequence):
        cols = list(df[0]) if df else []
        rows = [[r[c] for c in cols] for r in df]
        numeric = [_numeric([r[i] for r in rows]) for i in range(len(cols))]
    else:
        import pandas as pd

        cols = list(df.columns)
        rows = [list(r) for r in df.itertuples(index=False)]
        numeric = [bool(pd.api.types.is_numeric_dtype(df[c])) for c in cols]
    if not rows:
        return "(no rows)"
    cells = [[_fmt(v, floatfmt) for v in row] for row in rows]
    widths = [max(len(str(c)), *(len(r[i]) for r in cells)) for i, c in enumerate(cols)]

    def line(vals: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if n else v.ljust(w) for v, w, n in zip(vals, widths, numeric, strict=True)
        ).rstrip()

    out = [line([str(c) for c in cols]), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _numeric(values: list[Any]) -> bool:
    """A column of numbers (None for missing; booleans count, as in pandas), aligned right."""
    present = [v for v in values if v is not None]
    return bool(present) and all(isinstance(v, int | float | np.number) for v in present)


def _fmt(v: Any, floatfmt: str) -> str:
    if v is None or (isinstance(v, float | np.floating) and not math.isfinite(v)):
        return "-"  # no inf or NaN printed as a result
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float | np.floating):
        return floatfmt.format(v)
    if isinstance(v, int | np.integer):
        return f"{v:,}"
    return str(v)

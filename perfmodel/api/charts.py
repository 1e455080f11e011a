"""Charts of the notebook API's frames (matplotlib Figures; save them with ``fig.savefig``)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ..errors import UsageError
from ..report.charts import scale_chart as _scale_chart
from ..report.charts import sweep_chart as _sweep_chart

__all__ = ["scale_chart", "sweep_chart"]


def _frame(df: object, made_by: str) -> pd.DataFrame:
    if not isinstance(df, pd.DataFrame):
        raise UsageError(f"expected a DataFrame from perfmodel.api.{made_by}, got {type(df).__name__}")
    return df


def scale_chart(df: pd.DataFrame) -> Figure:
    """Speedup against GPU count per strategy, the ideal line, and parallel efficiency, from a
    :func:`~perfmodel.api.scale` frame (anything else raises :class:`UsageError`)."""
    return _scale_chart(_frame(df, "scale"))


def sweep_chart(
    df: pd.DataFrame,
    x: str = "gpus",
    y: str = "speedup_x",
    by: str | None = None,
    title: str | None = None,
) -> Figure:
    """Column ``y`` against ``x`` of a :func:`~perfmodel.api.sweep` frame, one line per value of
    ``by`` (column names; a name the frame lacks raises :class:`UsageError`)."""
    return _sweep_chart(_frame(df, "sweep"), x, y, by, title)

"""Charts of the notebook API's frames (matplotlib Figures; save them with ``fig.savefig``)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ..report.charts import scale_chart as _scale_chart
from ..report.charts import sweep_chart as _sweep_chart

__all__ = ["scale_chart", "sweep_chart"]


def scale_chart(df: pd.DataFrame) -> Figure:
    """Speedup against GPU count per strategy, the ideal line, and parallel efficiency."""
    return _scale_chart(df)


def sweep_chart(
    df: pd.DataFrame,
    x: str = "gpus",
    y: str = "speedup_x",
    by: str | None = None,
    title: str | None = None,
) -> Figure:
    """Column ``y`` against ``x`` of a :func:`sweep` frame, one line per value of ``by``."""
    return _sweep_chart(df, x, y, by, title)

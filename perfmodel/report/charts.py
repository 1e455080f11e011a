"""Charts of results as matplotlib Figures, one module per kind; this module gathers them."""

from __future__ import annotations

from .charts_base import CHART_SUFFIXES, save_chart
from .charts_gantt import pipeline_gantt
from .charts_plan import plan_chart
from .charts_scale import scale_chart
from .charts_sweep import sweep_chart

__all__ = [
    "CHART_SUFFIXES",
    "scale_chart",
    "plan_chart",
    "pipeline_gantt",
    "save_chart",
    "sweep_chart",
]

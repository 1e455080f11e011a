"""Presentation: tables, JSON, CSV and charts of result objects (no computation)."""

from __future__ import annotations

from .render import FORMATS, assumption_columns, fmt_rate, render_frame, to_json

__all__ = ["FORMATS", "assumption_columns", "fmt_rate", "render_frame", "to_json"]

"""Parallel strategies: the spec language, each dimension's pricing, ``predict`` and ``explain``."""

from __future__ import annotations

from .context import Context, context, weight_group
from .predict import (
    EXCLUDED,
    Prediction,
    assumptions,
    baseline_text,
    largest_batch_on_one_gpu,
    one_gpu_step,
    predict,
    predict_in,
    price,
)
from .priced import Priced
from .spec import Strategy, parse_strategy

__all__ = [
    "Context",
    "EXCLUDED",
    "Prediction",
    "Priced",
    "Strategy",
    "assumptions",
    "baseline_text",
    "context",
    "largest_batch_on_one_gpu",
    "one_gpu_step",
    "parse_strategy",
    "predict",
    "predict_in",
    "price",
    "weight_group",
]

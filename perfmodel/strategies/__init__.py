"""Parallel strategies: the spec language and the pricing of data, spatial, pipeline and hybrid plans."""

from __future__ import annotations

from .predict import Prediction, predict
from .spec import Strategy, parse_strategy

__all__ = ["Prediction", "predict", "Strategy", "parse_strategy"]

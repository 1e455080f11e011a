"""The model zoo: torchvision's networks layer for layer, and the few others the issues name."""

from __future__ import annotations

from .registry import MODELS, ModelEntry, get_model, model_names

__all__ = ["MODELS", "ModelEntry", "get_model", "model_names"]

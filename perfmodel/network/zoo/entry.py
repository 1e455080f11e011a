"""A zoo model's entry: its builder, default input size and source (what every zoo module exports)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..graph import Network

__all__ = ["ModelEntry"]


@dataclass(frozen=True)
class ModelEntry:
    """A zoo model: ``build(image_size)`` returns the network for a square input of that size."""

    name: str
    build: Callable[[int], Network]
    default_image_size: int
    source: str
    min_image_size: int = 32

"""Networks: the layer IR, the DAG and its chain, the builder, symbolic counts and the zoo."""

from __future__ import annotations

from .builder import NetBuilder
from .counts import CompiledCounts, LayerCounts, compile_counts, network_counts
from .graph import Link, Network
from .layers import Layer
from .zoo import get_model, model_names

__all__ = [
    "NetBuilder",
    "Network",
    "Link",
    "Layer",
    "LayerCounts",
    "CompiledCounts",
    "compile_counts",
    "network_counts",
    "get_model",
    "model_names",
]

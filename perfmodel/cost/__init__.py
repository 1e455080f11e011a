"""The cost model: formulas shared by numeric and symbolic paths, compute, collectives, memory."""

from __future__ import annotations

from .collectives import Group, allgather, allreduce, point_to_point, reduce_scatter
from .compute import LayerTimes, layer_times

__all__ = ["Group", "allreduce", "allgather", "reduce_scatter", "point_to_point", "LayerTimes", "layer_times"]

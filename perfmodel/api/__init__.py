"""Notebook API: models, hardware what-ifs, predictions, plans, scaling and sweeps as DataFrames.

Every function checks its arguments and raises the project's errors
(:class:`~perfmodel.errors.UsageError` for a wrong kind of argument,
:class:`~perfmodel.errors.ProfileError` for a what-if out of a field's physical range,
:class:`~perfmodel.errors.UnknownNameError` for an unknown model or profile); each docstring
says what it accepts. The parts live in modules by purpose: ``args`` (checks), ``gpus`` (GPU
lists), ``cache`` (one-GPU baselines), ``rows`` / ``frames`` / ``sweeps`` / ``scaling``
(DataFrames) and ``charts`` (Figures).
"""

from __future__ import annotations

from ..limits import MAX_BATCH
from .charts import scale_chart, sweep_chart
from .frames import plan_frame, predict_frame
from .gpus import MAX_GPU_POINTS, parse_gpu_list
from .loading import available_kinds, load_hardware, load_model
from .scaling import SCALE_STRATEGIES, scale
from .sweeps import sweep

__all__ = [
    "load_model",
    "load_hardware",
    "available_kinds",
    "parse_gpu_list",
    "predict_frame",
    "plan_frame",
    "scale",
    "scale_chart",
    "sweep",
    "sweep_chart",
    "SCALE_STRATEGIES",
    "MAX_GPU_POINTS",
    "MAX_BATCH",
]

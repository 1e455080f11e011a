"""perfmodel: an analytical performance model and parallel-plan search for training deep networks."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import PerfmodelError
from .hardware import Hardware, load_hardware
from .network import Network, model_names
from .search import PlanResult, plan
from .strategies import Prediction, Strategy, parse_strategy, predict
from .strategies.inputs import compile_counts, get_model

__all__ = [
    "__version__",
    "PerfmodelError",
    "Hardware",
    "load_hardware",
    "Network",
    "compile_counts",
    "get_model",
    "model_names",
    "PlanResult",
    "plan",
    "Prediction",
    "Strategy",
    "parse_strategy",
    "predict",
]

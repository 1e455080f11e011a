"""perfmodel: an analytical performance model and parallel-plan search for training deep networks."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import PerfmodelError
from .network import Network, compile_counts, get_model, model_names

__all__ = ["__version__", "PerfmodelError", "Network", "compile_counts", "get_model", "model_names"]

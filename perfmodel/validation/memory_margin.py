"""The memory model's measured error: saved activations against autograd's, per zoo model.

The reference (``perfmodel/data/autograd_saved_activations.json``) counts the tensors autograd
saves for backward (``torch.autograd.graph.saved_tensors_hooks``, ``tools/reference_counts.py
--saved``). ``scripts/make_residuals.py`` stores each model's relative error in
``residuals.json``; a model without a reference gets the largest error measured on any.
No ``torch.cuda.max_memory_allocated`` data was available (no GPU), so the other parts
(weights, gradients, optimizer state, buckets, workspace, framework reserve) are not checked
against a measurement.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import DataError
from ..network import compile_counts, get_model
from .intervals import shipped_table

__all__ = ["ActivationError", "activation_error", "activation_errors", "reference_path"]


@dataclass(frozen=True)
class ActivationError:
    """Relative error of the modelled saved activations (``fraction``, signed) and what it rests on."""

    fraction: float
    measured: bool
    note: str


def reference_path() -> Path:
    return Path(str(resources.files("perfmodel.data").joinpath("autograd_saved_activations.json")))


def activation_errors() -> dict[str, float]:
    """(modelled - autograd) / autograd saved elements per sample, per reference model (computed)."""
    path = reference_path()
    try:
        refs = json.loads(path.read_text(encoding="utf-8"))["saved_float32_elems_per_sample"]
        items = [(str(k), float(v)) for k, v in refs.items()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise DataError(f"{path}: cannot read the autograd reference ({e})") from None
    return {m: (compile_counts(get_model(m)).total("saved_elems") - ref) / ref for m, ref in items}


def activation_error(model: str) -> ActivationError:
    """The shipped error of ``model``'s activations, or the largest one for a model without a reference."""
    try:
        errors = {str(k): float(v) for k, v in shipped_table()["memory_model"]["activation_error"].items()}
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise DataError(f"residuals.json: no memory_model section ({e}); rerun scripts/make_residuals.py") from None
    if model in errors:
        return ActivationError(errors[model], True, f"{model}'s saved activations vs autograd's")
    worst = max(errors, key=lambda k: abs(errors[k]))
    return ActivationError(
        abs(errors[worst]),
        False,
        f"no autograd reference for {model}: the largest error of the {len(errors)} measured models ({worst})",
    )

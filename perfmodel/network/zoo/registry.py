"""The registry of zoo models: name -> builder, default input size and source."""

from __future__ import annotations

import numbers

from ...errors import UnknownNameError, UsageError
from ...limits import MAX_IMAGE_SIZE, shown
from ..graph import Network
from ..importers.resolve import is_import_spec, load_imported
from .entry import ModelEntry

__all__ = ["ModelEntry", "MODELS", "get_model", "model_entries", "model_names"]


def _entries() -> dict[str, ModelEntry]:
    # loaded on first use, to keep start-up small (they import .entry, never this module)
    from . import (
        alexnet,
        cosmoflow,
        densenet,
        efficientnet,
        googlenet,
        inception,
        mobilenet,
        resnet,
        squeezenet,
        tiny,
        torch7,
        unet,
        unet3d,
        vgg,
    )

    entries: list[ModelEntry] = [
        *tiny.ENTRIES,
        *alexnet.ENTRIES,
        *vgg.ENTRIES,
        *resnet.ENTRIES,
        *googlenet.ENTRIES,
        *inception.ENTRIES,
        *squeezenet.ENTRIES,
        *mobilenet.ENTRIES,
        *densenet.ENTRIES,
        *efficientnet.ENTRIES,
        *unet.ENTRIES,
        *unet3d.ENTRIES,
        *cosmoflow.ENTRIES,
        *torch7.ENTRIES,
    ]
    return {e.name: e for e in entries}


MODELS: dict[str, ModelEntry] = {}


def model_entries() -> dict[str, ModelEntry]:
    if not MODELS:
        MODELS.update(_entries())
    return MODELS


def model_names() -> list[str]:
    """The zoo's model names, sorted (imported models are named by their spec instead)."""
    return sorted(model_entries())


def get_model(name: str, image_size: int | None = None) -> Network:
    """The zoo network ``name`` at ``image_size`` (default: the size torchvision evaluates), or
    an imported one: ``file.py:Name``, ``model.onnx``, ``torchvision:NAME``, ``timm:NAME``
    (see :mod:`perfmodel.network.importers`)."""
    if is_import_spec(name):
        return load_imported(name, image_size)
    models = model_entries()
    if name not in models:
        raise UnknownNameError("model", name, models)
    entry = models[name]
    size = entry.default_image_size if image_size is None else image_size
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size > MAX_IMAGE_SIZE:
        raise UsageError(
            f"image size must be an integer from {entry.min_image_size} to {MAX_IMAGE_SIZE:,} "
            f"pixels, got {shown(size)}"
        )
    if size < entry.min_image_size:
        raise UsageError(
            f"image size {size} is too small for {name} (valid: >= {entry.min_image_size})"
        )
    return _build(name, size)


_CACHE: dict[tuple[str, int], Network] = {}


def _build(name: str, size: int) -> Network:
    key = (name, size)
    if key not in _CACHE:
        _CACHE[key] = model_entries()[name].build(size)
    return _CACHE[key]

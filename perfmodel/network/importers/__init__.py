"""Networks from outside the zoo: PyTorch modules traced with torch.fx, ONNX graphs, library models."""

from __future__ import annotations

from .emit import UnsupportedOp
from .fx import import_module
from .onnx import import_onnx
from .resolve import DEFAULT_IMAGE_SIZE, InputOptions, absolute_spec, input_options, is_import_spec, load_imported

__all__ = [
    "UnsupportedOp",
    "import_module",
    "import_onnx",
    "DEFAULT_IMAGE_SIZE",
    "InputOptions",
    "input_options",
    "is_import_spec",
    "absolute_spec",
    "load_imported",
]

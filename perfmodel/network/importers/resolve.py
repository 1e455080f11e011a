"""Model specs beyond the zoo: ``file.py:Name``, ``model.onnx``, ``torchvision:NAME``, ``timm:NAME``."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import DataError, UnknownNameError, UsageError
from ...limits import MAX_IMAGE_SIZE, shown
from ..graph import Network
from ..layers import Shape
from .fx import import_module
from .onnx import import_onnx

__all__ = ["InputOptions", "input_options", "is_import_spec", "absolute_spec", "load_imported", "DEFAULT_IMAGE_SIZE"]

#: The square input an imported model is traced at without ``--image-size`` / ``--input-shape``.
DEFAULT_IMAGE_SIZE = 224


@dataclass(frozen=True)
class InputOptions:
    """The input of an imported model: channels, or a whole per-sample shape (C,H,W or C,D,H,W)."""

    in_channels: int | None = None
    input_shape: Shape | None = None


_OPTIONS: contextvars.ContextVar[InputOptions | None] = contextvars.ContextVar("perfmodel_input", default=None)


@contextlib.contextmanager
def input_options(in_channels: int | None = None, input_shape: Shape | None = None) -> Iterator[None]:
    """Within the block, imported models take this input (the CLI's ``--in-channels``, ``--input-shape``)."""
    token = _OPTIONS.set(InputOptions(in_channels, input_shape))
    try:
        yield
    finally:
        _OPTIONS.reset(token)


def is_import_spec(spec: str) -> bool:
    """Whether ``spec`` names a model outside the zoo (a file, an ONNX graph or a library model)."""
    return (
        spec.startswith(("torchvision:", "timm:"))
        or spec.lower().endswith(".onnx")
        or (":" in spec and spec.rsplit(":", 1)[0].endswith(".py"))
    )


def absolute_spec(spec: str) -> str:
    """``spec`` with its file made absolute (``/abs/file.py:Name``, ``/abs/model.onnx``), so that a row
    or program naming the model finds it from any folder; a zoo or library name as it is."""
    if spec.lower().endswith(".onnx"):
        return str(Path(spec).resolve())
    path, sep, name = spec.rpartition(":")
    if sep and path.endswith(".py"):
        return f"{Path(path).resolve()}:{name}"
    return spec


def _shape(image_size: int | None, opts: InputOptions) -> Shape:
    if opts.input_shape is not None:
        shape = tuple(opts.input_shape)
        if len(shape) not in (2, 3, 4) or any(d < 1 or d > MAX_IMAGE_SIZE for d in shape):
            raise UsageError(f"input shape {shape} must be C,L or C,H,W or C,D,H,W of positive extents")
        if image_size is not None and shape[-1] != image_size:
            raise UsageError(f"--image-size {image_size} contradicts --input-shape {','.join(map(str, shape))}")
        if opts.in_channels is not None and opts.in_channels != shape[0]:
            raise UsageError(f"--in-channels {opts.in_channels} contradicts --input-shape {shape}")
        return shape
    size = DEFAULT_IMAGE_SIZE if image_size is None else image_size
    return (opts.in_channels or 3, size, size)


_CACHE: dict[tuple[Any, ...], Network] = {}


def load_imported(
    spec: str, image_size: int | None = None, in_channels: int | None = None, input_shape: Shape | None = None
) -> Network:
    """The network ``spec`` names, imported at the given input (else the CLI's input options)."""
    ctx = _OPTIONS.get() or InputOptions()
    opts = InputOptions(in_channels if in_channels is not None else ctx.in_channels,
                        input_shape if input_shape is not None else ctx.input_shape)
    if spec.lower().endswith(".onnx"):
        path = _file(spec)
        key: tuple[Any, ...] = ("onnx", str(path.resolve()), path.stat().st_mtime_ns, image_size, opts)
        if key not in _CACHE:
            _CACHE[key] = import_onnx(path, image_size, opts.in_channels, opts.input_shape)
        return _CACHE[key]
    shape = _shape(image_size, opts)
    # what the model's own code prints (loading, building, its traced forward) goes to stderr: stdout
    # carries perfmodel's result, which JSON and CSV readers parse
    with contextlib.redirect_stdout(sys.stderr):
        if spec.startswith(("torchvision:", "timm:")):
            key = (spec, shape)
            make = _library(spec)
        else:
            file, name = spec.rsplit(":", 1)
            path = _file(file)
            key = ("py", str(path.resolve()), path.stat().st_mtime_ns, name, shape)
            make = _from_file(path, name) if key not in _CACHE else _unused
        if key not in _CACHE:
            _CACHE[key] = import_module(make, spec.rsplit("/", 1)[-1], shape, source=f"imported from {spec}")
    return _CACHE[key]


def _unused() -> Any:
    raise AssertionError("cached")


def _file(spec: str) -> Path:
    path = Path(spec)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "is not a regular file" if path.exists() else "does not exist"
        raise DataError(f"model file '{spec}' {what}")
    return path


def _from_file(path: Path, name: str) -> Callable[[], Any]:
    """The class or zero-argument factory ``name`` defined in the Python file ``path``."""
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    mod_name = f"perfmodel_user_{digest}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise DataError(f"cannot load '{path}' as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # dataclasses and pickling look their module up there
    sys.path.insert(0, str(path.resolve().parent))
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in the user's folder
    try:
        spec.loader.exec_module(module)
    except SystemExit as e:
        del sys.modules[mod_name]
        raise _exited(path, e, "loading") from None
    except Exception as e:
        del sys.modules[mod_name]
        line = getattr(e, "lineno", None)
        where = f" (line {line})" if line and f"line {line}" not in str(e) else ""
        raise DataError(f"cannot load '{path}': {type(e).__name__}: {e}{where}") from None
    finally:
        sys.path.pop(0)
        sys.dont_write_bytecode = writes
    obj = getattr(module, name, None)
    if obj is not None and not callable(obj):
        raise DataError(f"'{name}' in '{path}' holds a value of type {type(obj).__name__}, not a torch.nn.Module "
                        "class or a function that returns one")
    if obj is None:
        found = [n for n, v in vars(module).items()
                 if (inspect.isclass(v) or inspect.isfunction(v)) and getattr(v, "__module__", "") == mod_name]
        raise UnknownNameError(f"model in '{path}'", name, found)

    def make() -> Any:
        try:
            return obj()
        except SystemExit as e:
            raise _exited(path, e, f"building {name}") from None

    return make


def _exited(path: Path, e: SystemExit, doing: str) -> DataError:
    """A model file that ended the program (``sys.exit``) while perfmodel was ``doing`` something."""
    return DataError(f"'{path}' called sys.exit({shown(e.code, 40) if e.code is not None else ''}) while {doing}: "
                     f"a model file must define the model, not end the program")


def _library(spec: str) -> Callable[[], Any]:
    lib, name = spec.split(":", 1)
    try:
        if lib == "torchvision":
            import torchvision.models as tvm

            try:
                fn = tvm.get_model_builder(name)
            except ValueError:
                raise UnknownNameError("torchvision model", name, tvm.list_models()) from None
            kwargs: dict[str, Any] = {"weights": None}
            if name in ("googlenet", "inception_v3"):
                kwargs.update(aux_logits=False, init_weights=False)
            return lambda: fn(**kwargs)
        import timm

        if name not in timm.list_models():
            raise UnknownNameError("timm model", name, timm.list_models())
        return lambda: timm.create_model(name, pretrained=False)
    except (ImportError, RuntimeError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"{spec} needs {lib}, which is not installed or does not load here ({first})") from None

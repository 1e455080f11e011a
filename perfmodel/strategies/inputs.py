"""Checks of the public entry points' arguments (models, plans, profiles, the search's ``top``):
a wrong kind of argument raises :class:`~perfmodel.errors.UsageError` naming it and its value.

They sit below ``predict``, ``plan`` and the notebook API (:mod:`perfmodel.api.args`), which
all use them; :func:`get_model` and :func:`compile_counts` are the package's public ones (the
network layer's take a checked name or network).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..hardware import Hardware, load_hardware
from ..limits import as_integer, check_count, shown
from ..network import CompiledCounts, Network
from ..network import compile_counts as _compile_counts
from ..network import get_model as _get_model
from .spec import Strategy, parse_strategy

__all__ = [
    "check_model", "check_strategy", "check_hardware", "check_top", "get_model", "compile_counts", "plan_of",
    "hardware_of", "MAX_TOP",
]

#: The most plans a search keeps (``plan``'s ``top``).
MAX_TOP = 1000


def check_model(model: object) -> str | Network:
    """A zoo model name (or import spec) or a :class:`Network`."""
    if isinstance(model, Network) or (isinstance(model, str) and model.strip()):
        return model
    raise UsageError(f"model must be a zoo name such as 'resnet50' or a Network, got {shown(model, 40)}")


def get_model(model: str | Network, image_size: int | None = None) -> Network:
    """The zoo network ``model`` at ``image_size`` pixels (default: the size torchvision evaluates),
    or an imported one (``file.py:Name``, ``model.onnx``, ``torchvision:NAME``, ``timm:NAME``); a
    :class:`Network` passes through. ``image_size`` is None or an integer (Python or NumPy). Any
    other kind of ``model`` is a :class:`~perfmodel.errors.UsageError`; an unknown name (an empty
    one too) an :class:`~perfmodel.errors.UnknownNameError` naming the zoo's models."""
    if isinstance(model, Network):
        return model
    if not isinstance(model, str):
        check_model(model)  # raises, naming what is accepted
    return _get_model(model, None if image_size is None else as_integer("image_size", image_size))


def compile_counts(model: str | Network, image_size: int | None = None) -> CompiledCounts:
    """The compiled per-layer counts of ``model``, a :class:`Network` or a name :func:`get_model` takes."""
    return _compile_counts(get_model(model, image_size))


def plan_of(strategy: object, gpus: int) -> Strategy:
    """A :class:`Strategy` as given, or a spec string parsed for ``gpus`` GPUs (an empty one is a
    :class:`~perfmodel.errors.StrategyError`); any other kind a :class:`~perfmodel.errors.UsageError`."""
    if isinstance(strategy, Strategy):
        return strategy
    if not isinstance(strategy, str):
        check_strategy(strategy)  # raises, naming what is accepted
    return parse_strategy(str(strategy), gpus)


def check_strategy(strategy: object, optional: bool = False) -> str | Strategy | None:
    """A plan spec (``"dp=8"``) or a :class:`Strategy` (None when ``optional``)."""
    if strategy is None and optional:
        return None
    if isinstance(strategy, Strategy) or (isinstance(strategy, str) and strategy.strip()):
        return strategy
    raise UsageError(
        f"strategy must be a spec string such as 'dp=8' or 'pp=4,mb=8', or a Strategy, got "
        f"{type(strategy).__name__} {shown(strategy, 40)}"
    )


def check_hardware(hardware: object) -> str | Path | Hardware:
    """A shipped profile name, a TOML path or a :class:`Hardware`."""
    if isinstance(hardware, (Hardware, Path)) or (isinstance(hardware, str) and hardware.strip()):
        return hardware
    raise UsageError(
        f"hardware must be a profile name (see perfmodel.hardware.profile_names()), a .toml path "
        f"or a Hardware, got {type(hardware).__name__} {shown(hardware, 40)}"
    )


def hardware_of(hardware: object) -> Hardware:
    """The profile ``hardware`` names (:func:`~perfmodel.hardware.load_hardware`: a shipped name, a
    path; an unknown or empty name lists the shipped ones); a :class:`Hardware` passes through; any
    other kind is a :class:`~perfmodel.errors.UsageError`."""
    if not isinstance(hardware, (str, Path, Hardware)):
        check_hardware(hardware)  # raises, naming what is accepted
    return load_hardware(hardware)  # type: ignore[arg-type]


def check_top(top: object) -> int:
    """How many plans to keep: an integer from 1 to :data:`MAX_TOP`."""
    return check_count("top", top, MAX_TOP)

"""Checks of the notebook API's arguments: each raises the project's error naming what is accepted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UsageError, did_you_mean
from ..hardware import PRECISIONS, Hardware
from ..limits import MAX_BATCH, MAX_GPUS, MAX_IMAGE_SIZE, check_count, shown
from ..network import Network
from ..search.enumerate import KINDS
from ..strategies.memory import OPTIMIZERS
from ..strategies.spec import Strategy

__all__ = [
    "check_model",
    "check_gpus",
    "check_strategy",
    "check_hardware",
    "check_precision",
    "check_optimizer",
    "check_image_size",
    "check_batches",
    "check_top",
    "names",
    "check_kinds",
]


def check_model(model: object) -> str | Network:
    """A zoo model name or a :class:`Network`."""
    if isinstance(model, Network) or (isinstance(model, str) and model.strip()):
        return model
    raise UsageError(f"model must be a zoo name such as 'resnet50' or a Network, got {shown(model, 40)}")


def check_gpus(gpus: object, what: str = "gpus") -> int:
    """A GPU count: an integer (not a bool) from 1 to ``MAX_GPUS``."""
    return check_count(what, gpus, MAX_GPUS)


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


def check_precision(precision: object) -> str:
    if isinstance(precision, str) and precision in PRECISIONS:
        return precision
    raise UsageError(f"unknown precision {shown(precision, 40)} (valid: {', '.join(PRECISIONS)})")


def check_optimizer(optimizer: object) -> str:
    if isinstance(optimizer, str) and optimizer in OPTIMIZERS:
        return optimizer
    raise UsageError(f"unknown optimizer {shown(optimizer, 40)} (valid: {', '.join(OPTIMIZERS)})")


def check_image_size(image_size: object) -> int | None:
    """None (the model's own size) or a size in pixels from 1 to ``MAX_IMAGE_SIZE``."""
    return None if image_size is None else check_count("image_size", image_size, MAX_IMAGE_SIZE)


def check_batches(batch_per_gpu: object, global_batch: object) -> tuple[int | None, int | None]:
    """At most one of the two batches, each an integer from 1 to ``MAX_BATCH`` (or None)."""
    if batch_per_gpu is not None and global_batch is not None:
        raise UsageError("give at most one of batch_per_gpu and global_batch")
    bpg = None if batch_per_gpu is None else check_count("batch_per_gpu", batch_per_gpu, MAX_BATCH)
    gb = None if global_batch is None else check_count("global_batch", global_batch, MAX_BATCH)
    return bpg, gb


def check_top(top: object) -> int:
    """How many plans to keep: an integer from 1 to 1,000."""
    return check_count("top", top, 1000)


def names(value: object, what: str, valid: Sequence[str], one: str) -> list[str]:
    """Names from a list of strings or one comma-separated string, each in ``valid`` (``what``
    names them in messages, ``one`` names one of them)."""
    if isinstance(value, str):
        items: list[Any] = [s.strip() for s in value.split(",")]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    else:
        raise UsageError(f"{what} must be a list of names or a comma list, got {type(value).__name__}")
    out: list[str] = []
    for s in items:
        if not isinstance(s, str):
            raise UsageError(f"{what} must be names, got {type(s).__name__} {shown(s, 40)}")
        s = s.strip()
        if not s:
            continue
        if s not in valid:
            raise UsageError(f"unknown {one} {shown(s, 40)} (valid: {', '.join(valid)}){did_you_mean(s, valid)}")
        if s not in out:
            out.append(s)
    if not out:
        raise UsageError(f"no {what} given (valid: {', '.join(valid)})")
    return out


def check_kinds(kinds: object) -> tuple[str, ...] | None:
    """None (every kind) or strategy kinds of the plan search, as a list or a comma list."""
    return None if kinds is None else tuple(names(kinds, "kinds", KINDS, "kind"))

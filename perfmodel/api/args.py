"""Checks of the notebook API's arguments: each raises the project's error naming what is accepted."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import UsageError, did_you_mean
from ..hardware import check_precision
from ..limits import MAX_BATCH, MAX_GPUS, MAX_IMAGE_SIZE, check_count, shown
from ..search.enumerate import KINDS
from ..strategies.inputs import check_hardware, check_model, check_strategy, check_top
from ..strategies.memory import OPTIMIZERS

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
    "check_progress",
    "names",
    "check_kinds",
]


def check_gpus(gpus: object, what: str = "gpus") -> int:
    """A GPU count: an integer (not a bool) from 1 to ``MAX_GPUS``."""
    return check_count(what, gpus, MAX_GPUS)


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


def check_progress(progress: object) -> Callable[[int, int], None] | None:
    """None or a callable taking (points done, points in all), checked before any point is priced."""
    if progress is None or callable(progress):
        return progress  # type: ignore[return-value]
    raise UsageError(f"progress must be None or a callable taking (done, total), got {type(progress).__name__} "
                     f"{shown(progress, 40)}")


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

"""Bounds on user-given counts, so that absurd numbers get a clear error instead of overflow.

The model computes in floats; a batch or image size with hundreds of digits would overflow
them (``OverflowError``) deep in the counts. Entry points check their inputs against these
bounds and raise a :class:`~perfmodel.errors.UsageError` that names the valid range.
"""

from __future__ import annotations

import numbers
from typing import TypeGuard

from .errors import UsageError

__all__ = ["MAX_GPUS", "MAX_BATCH", "MAX_IMAGE_SIZE", "MAX_SEED", "check_count", "as_integer", "is_integer", "shown"]

#: The most GPUs any plan may use (the CLI's ``--gpus`` bound).
MAX_GPUS = 1_000_000
#: The most samples one training step may hold (global batch, micro-batches).
MAX_BATCH = 1_000_000_000
#: The largest input height/width/depth in pixels.
MAX_IMAGE_SIZE = 1_000_000
#: The largest random seed (KaHyPar takes a C ``int``).
MAX_SEED = 2**31 - 1


def shown(value: object, width: int = 24) -> str:
    """``repr(value)``, cut to ``width`` characters so that a huge number stays one short line."""
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 4]}... ({len(text)} characters)"


def is_integer(value: object) -> TypeGuard[numbers.Integral]:
    """Whether ``value`` is an integer: a Python or NumPy one (``np.int64``), not a bool (nor
    ``np.bool_``) and not a float, even an integral one (``8.0``)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def as_integer(what: str, value: object, error: type[UsageError] = UsageError) -> int:
    """``value`` as a Python ``int`` if it :func:`is_integer`, else ``error`` naming ``what`` (its
    range is checked by the caller)."""
    if not is_integer(value):
        raise error(f"{what} must be an integer, got {shown(value)}")
    return int(value)


def check_count(what: str, value: object, maximum: int, minimum: int = 1,
                error: type[UsageError] = UsageError) -> int:
    """``value`` as a Python ``int`` if it :func:`is_integer` in ``[minimum, maximum]``, else
    ``error`` naming the range."""
    if is_integer(value) and minimum <= int(value) <= maximum:
        return int(value)
    raise error(f"{what} must be an integer from {minimum:,} to {maximum:,}, got {shown(value)}")

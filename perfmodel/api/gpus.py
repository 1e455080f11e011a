"""GPU lists for sweeps: ``1,2,4,8``, ``1-8``, ``8-64:8``, ``1-1024:log2``."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..errors import UsageError
from ..limits import MAX_GPUS, is_integer, shown

__all__ = ["parse_gpu_list", "MAX_GPU_POINTS"]

#: The most GPU counts one sweep may ask for (a guard against ``1-1000000``).
MAX_GPU_POINTS = 4096
_MAX_GPUS = MAX_GPUS


def parse_gpu_list(spec: str | int | Iterable[int]) -> list[int]:
    """GPU counts from ``1,2,4,8``, ``1-8`` (every count), ``8-64:8`` (step 8) or ``1-1024:log2``.

    ``A-B:log2`` doubles from ``A`` while the count stays <= ``B``. Items combine with commas;
    the result is sorted with duplicates removed. Also one count or a list (tuple, set, range,
    1-D NumPy array) of counts, each a Python or NumPy integer (not a bool or a float). Raises
    :class:`UsageError` naming the bad item.
    """
    if isinstance(spec, np.ndarray) and spec.ndim == 1:
        spec = spec.tolist()  # Python scalars
    if is_integer(spec):
        spec = [spec]  # type: ignore[list-item]
    if not isinstance(spec, (str, list, tuple, range, set, frozenset)):
        raise UsageError(f"GPU list must be counts like 1,2,4,8 or 1-1024:log2, got {type(spec).__name__} "
                         f"{shown(spec, 40)}")
    if not isinstance(spec, str):
        values = list(spec)
        for v in values:
            if not is_integer(v) or not 1 <= int(v) <= _MAX_GPUS:
                raise UsageError(f"GPU counts must be integers from 1 to {_MAX_GPUS:,}, got {shown(v, 40)}")
        if not values:
            raise UsageError("GPU list is empty (example: 1,2,4,8 or 1-1024:log2)")
        return sorted({int(v) for v in values})
    text = spec.strip()
    if not text:
        raise UsageError("GPU list is empty (example: 1,2,4,8 or 1-1024:log2)")
    out: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise UsageError(f"GPU list '{text}' has an empty item (example: 1,2,4,8)")
        out.update(_gpu_item(item, text))
        if len(out) > MAX_GPU_POINTS:
            raise UsageError(
                f"GPU list '{text}' names more than {MAX_GPU_POINTS} counts (use a step, e.g. 1-1024:log2 or 8-512:8)"
            )
    return sorted(out)


def _count(word: str, item: str, text: str) -> int:
    try:
        v = int(word)
    except ValueError:
        raise UsageError(
            f"GPU list '{text}': '{item}' is not a count, a range A-B, A-B:STEP or A-B:log2 (example: 1-1024:log2)"
        ) from None
    if not 1 <= v <= _MAX_GPUS:
        raise UsageError(f"GPU list '{text}': {v} is not a GPU count from 1 to {_MAX_GPUS:,}")
    return v


def _gpu_item(item: str, text: str) -> list[int]:
    body, _, step = item.partition(":")
    if "-" not in body:
        if step:
            raise UsageError(f"GPU list '{text}': a step needs a range, e.g. 1-64:{step} (got '{item}')")
        return [_count(body.strip(), item, text)]
    lo_s, _, hi_s = body.partition("-")
    lo, hi = _count(lo_s.strip(), item, text), _count(hi_s.strip(), item, text)
    if lo > hi:
        raise UsageError(f"GPU list '{text}': range '{item}' runs backwards (write {hi}-{lo})")
    step = step.strip().lower()
    if step == "log2":
        n = int(math.floor(math.log2(hi / lo))) + 1
        if n > MAX_GPU_POINTS:
            raise UsageError(f"GPU list '{text}': '{item}' names too many counts")
        vals = [lo * 2**k for k in range(n)]
        return [v for v in vals if v <= hi]
    k = 1 if not step else _step(step, item, text)
    if (hi - lo) // k + 1 > MAX_GPU_POINTS:
        raise UsageError(
            f"GPU list '{text}': '{item}' names more than {MAX_GPU_POINTS} counts "
            "(use a step, e.g. 1-1024:log2 or 8-512:8)"
        )
    return list(range(lo, hi + 1, k))


def _step(step: str, item: str, text: str) -> int:
    try:
        k = int(step)
    except ValueError:
        raise UsageError(
            f"GPU list '{text}': step '{step}' in '{item}' is not an integer or 'log2' (examples: 8-64:8, 1-1024:log2)"
        ) from None
    if k < 1:
        raise UsageError(f"GPU list '{text}': step {k} in '{item}' must be >= 1")
    return k

"""Strided layouts as torch computes them: which reshapes are views and which copy (both importers).

A view shares its input's storage with new strides; ``reshape`` (and ``flatten``, ``view``) of a
tensor whose strides cannot be regrouped into the new shape copies it into a contiguous one
(one elementwise kernel in eager PyTorch). The test is ATen's ``computeStride``
(aten/src/ATen/TensorUtils.cpp): walk the old dimensions from the last, grouping those that are
contiguous with each other into chunks; each chunk must map onto whole new dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["Strides", "contiguous", "view_strides", "permuted", "attention_out_strides", "rows_copy",
           "seq_first_copy"]

Strides = tuple[int, ...]


def contiguous(shape: Sequence[int]) -> Strides:
    """Row-major strides of ``shape`` (in elements)."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(out))


def view_strides(old: Sequence[int], strides: Sequence[int], new: Sequence[int]) -> Strides | None:
    """The strides of ``old`` (with ``strides``) viewed as ``new``, or None when it must copy."""
    if math.prod(old) != math.prod(new):
        return None
    if math.prod(old) == 0 or not old:
        return contiguous(new)
    out = [0] * len(new)
    view_d = len(new) - 1
    base = strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and strides[d - 1] != tensor_numel * base):
            while view_d >= 0 and (view_numel < tensor_numel or new[view_d] == 1):
                out[view_d] = view_numel * base
                view_numel *= new[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return tuple(out) if view_d == -1 else None


def rows_copy(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether ``aten::matmul`` copies a tensor of 3 or more dimensions multiplied by a matrix:
    it folds it into the GEMM's rows with ``reshape(-1, E)``, a copy when that is not a view (a
    ``TorchDispatchMode`` shows ``clone`` before ``mm`` for ``nn.MultiheadAttention``'s
    ``batch_first`` in-projection)."""
    return len(shape) >= 3 and view_strides(shape, strides, (math.prod(shape[:-1]), shape[-1])) is None


def seq_first_copy(value: Any, batch_first: bool) -> bool:
    """Whether ``nn.MultiheadAttention``'s projection copies traced input tensor ``value`` (None: no),
    which ``batch_first`` transposes to sequence-first (``transpose(1, 0)``) before it (:func:`rows_copy`)."""
    if value is None:
        return False
    shape, strides = tuple(value.shape), tuple(value.stride())
    if batch_first and len(shape) >= 2:
        swap = (1, 0, *range(2, len(shape)))
        shape, strides = permuted(shape, swap), permuted(strides, swap)
    return rows_copy(shape, strides)


def permuted(strides: Sequence[int], perm: Sequence[int]) -> Strides:
    """The strides of ``x.permute(perm)``."""
    return tuple(strides[p] for p in perm)


def attention_out_strides(q_shape: Sequence[int], q_strides: Sequence[int], out_shape: Sequence[int]) -> Strides:
    """The layout of ``scaled_dot_product_attention``'s output ``(B, H, L, Ev)``: dense, with ``q``'s
    dimension order (the fused kernels allocate it like ``q``: PyTorch's CPU flash attention as
    measured in tests/test_view_strides.py; CUDA flash attention ``empty_like`` of ``q`` transposed
    to ``(B, L, H, E)``, which keeps that order when ``q`` is dense, or when it is sliced out of a
    packed ``(B, L, 3, H, E)`` projection). So merging the heads with ``transpose(1, 2).reshape``
    after attention on such a projection is a view, not a copy (no ``clone`` in a
    ``TorchDispatchMode``). The math fallback would write ``(B, H, L, Ev)``; it is not priced."""
    if len(out_shape) != len(q_shape):
        return contiguous(out_shape)
    order = sorted(range(len(q_shape)), key=lambda i: (-q_strides[i], i))  # outermost first
    acc, out = 1, [0] * len(out_shape)
    for i in reversed(order):
        out[i] = acc
        acc *= out_shape[i]
    return tuple(out)

"""Gradient accumulation in the search: the fewest micro-batches with which a plan fits.

Memory per GPU is affine in the micro-batch (weights, gradients, optimizer state and the
reserve are fixed; inputs, saved activations and the transient buffers grow with the
samples each micro-batch holds), so two prices of a plan, at its own micro-batch and at one
sample per micro-batch, give the largest micro-batch that fits, and from it the fewest
micro-batches. For plans without a pipeline that is also the fastest count: a layer's
seconds are ``max`` of affine terms with non-negative intercepts (launch, weight traffic),
so one call on ``a + b`` samples never costs more than two on ``a`` and ``b``, and the
last micro-batch's backward, behind which the gradient exchange hides, only grows.
"""

from __future__ import annotations

import math

__all__ = ["fewest_micro_batches"]


def fewest_micro_batches(
    per_replica: int, mb: int, mem_bytes: float, mem_one_sample_bytes: float, cap_bytes: float
) -> int | None:
    """The fewest micro-batches (> ``mb``) of ``per_replica`` samples that fit ``cap_bytes``.

    ``mem_bytes`` is the memory with ``mb`` micro-batches (micro-batch ``ceil(per_replica/mb)``),
    ``mem_one_sample_bytes`` with one sample per micro-batch. ``None`` when not even one
    sample fits, or the plan already fits.
    """
    if mem_one_sample_bytes > cap_bytes or mem_bytes <= cap_bytes:
        return None
    m = math.ceil(per_replica / mb)
    if m <= 1:
        return None
    per_sample = (mem_bytes - mem_one_sample_bytes) / (m - 1)
    if per_sample <= 0:
        return None
    m_fit = max(1, 1 + math.floor((cap_bytes - mem_one_sample_bytes) / per_sample))
    return max(mb + 1, math.ceil(per_replica / m_fit))

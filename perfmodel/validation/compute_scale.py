"""A pricing context whose per-layer forward and backward seconds are scaled by one factor.

Single-GPU calibration per speedup group (:mod:`.calibrate_group`) fits this factor to a
network's own 1-GPU run. What it scales is every layer's forward and backward time as
:meth:`~perfmodel.strategies.context.Context.times` prices it (GPU kernels, or the host's
dispatch where that is slower): the work a 1-GPU run measures. What it leaves alone is
everything priced from the profile's numbers directly, which a 1-GPU run says nothing or
almost nothing about: the gradient exchange, NCCL's contention, the bucket copies, pipeline
transfers, the optimizer step and the fixed step overhead. Terms built from layer times
follow them: recomputation scales with the factor, a pipeline bubble by its compute share.
Filter and channel splits, which price their sharded layers themselves, scale them the same
way (:meth:`~perfmodel.strategies.context.Context.scaled`).
"""

from __future__ import annotations

import dataclasses

from ..strategies.context import Context

__all__ = ["scaled_context"]


def scaled_context(ctx: Context, compute_scale: float) -> Context:
    """``ctx`` itself when the scale is 1, else a copy (own memo) whose layer times are scaled."""
    if compute_scale == 1.0:
        return ctx
    return dataclasses.replace(ctx, compute_scale=ctx.compute_scale * compute_scale, memo={})

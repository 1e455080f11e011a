"""A pricing context whose per-layer forward and backward seconds are scaled by one factor.

Single-GPU calibration per speedup group (:mod:`.calibrate_group`) fits this factor to a
network's own 1-GPU run. What it scales is every layer's forward and backward time as
:meth:`~perfmodel.strategies.context.Context.times` prices it (GPU kernels, or the host's
dispatch where that is slower): the work a 1-GPU run measures. What it leaves alone is
everything priced from the profile's numbers directly, which a 1-GPU run says nothing or
almost nothing about: the gradient exchange, NCCL's contention, the bucket copies, pipeline
transfers, the optimizer step and the fixed step overhead. Terms built from layer times
follow them: recomputation scales with the factor, a pipeline bubble by its compute share.
Plans whose compute does not go through ``Context.times`` (filter and channel splits) are
priced unscaled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.compute import LayerTimes
from ..strategies.context import Context

__all__ = ["ScaledContext", "scaled_context"]


@dataclass(frozen=True, eq=False)
class ScaledContext(Context):
    """:class:`Context` whose layer times are ``compute_scale`` times the profile's."""

    compute_scale: float = 1.0

    def times(
        self, batch: float, grid: tuple[int, int, int] = (1, 1, 1)
    ) -> tuple[LayerTimes, dict[str, np.ndarray]]:
        lt, ev = super().times(batch, grid)
        return LayerTimes(lt.fwd * self.compute_scale, lt.bwd * self.compute_scale), ev


def scaled_context(ctx: Context, compute_scale: float) -> Context:
    """``ctx`` itself when the scale is 1, else a copy whose layer times are scaled."""
    if compute_scale == 1.0:
        return ctx
    return ScaledContext(
        ctx.net, ctx.cc, ctx.hw, ctx.precision, ctx.optimizer, ctx.link_starts, ctx.cut_elems,
        compute_scale=compute_scale,
    )

"""One-GPU baselines shared by every point of a sweep that changes nothing a single GPU sees."""

from __future__ import annotations

from typing import Any

from ..strategies.predict import Context, one_gpu_step

__all__ = ["Baselines"]


class Baselines:
    """One-GPU baselines, shared by every point that changes nothing a single GPU sees."""

    def __init__(self) -> None:
        self._memo: dict[tuple[Any, ...], tuple[float, int] | None] = {}

    def get(self, ctx: Context, batch: int) -> tuple[float, int] | None:
        hw = ctx.hw
        key = (
            id(ctx.net),
            repr(hw.device),
            repr(dict(hw.compute)),
            hw.kernel_launch_s,
            hw.framework_reserve_bytes,
            ctx.precision,
            ctx.optimizer,
            ctx.cudnn_major,
            ctx.memory_format,
            ctx.fusion,
            ctx.amp_runtime,
            batch,
        )
        if key not in self._memo:
            self._memo[key] = one_gpu_step(ctx, batch)
        return self._memo[key]

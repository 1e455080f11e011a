"""One-GPU baselines shared by every point of a sweep that changes nothing a single GPU sees."""

from __future__ import annotations

from typing import Any

from ..strategies.baseline import Baseline
from ..strategies.predict import Context, data_plan_counts, is_own_baseline, one_gpu_baseline, unbounded_count
from ..strategies.spec import Strategy

__all__ = ["Baselines"]


class Baselines:
    """One-GPU baselines (:func:`~perfmodel.strategies.predict.one_gpu_baseline`), shared by every
    point that changes nothing a single GPU sees: the profile's device, efficiencies, kernel and
    collective parameters, launch latency and reserve (a what-if of the links or node count keeps
    them), the software, the batch and the counts the plan adds to the baseline."""

    def __init__(self) -> None:
        self._memo: dict[tuple[Any, ...], Baseline | None] = {}

    def get(self, ctx: Context, batch: int, s: Strategy, fits: bool, per_replica: bool) -> Baseline | None:
        """The baseline of plan ``s`` (``fits``: in memory) at ``batch`` samples on one GPU,
        ``per_replica`` when that is one replica's share of the plan's global batch (weak scaling)."""
        hw = ctx.hw
        own = s.spec() if is_own_baseline(s) else None
        key = (
            id(ctx.net),
            repr(hw.device),
            repr(dict(hw.compute)),
            repr(hw.kernels),
            repr(hw.collectives),
            hw.kernel_launch_s,
            hw.framework_reserve_bytes,
            ctx.precision,
            ctx.optimizer,
            ctx.cudnn_major,
            ctx.memory_format,
            ctx.fusion,
            ctx.amp_runtime,
            batch,
            own,
            tuple(data_plan_counts([s], per_replica)),
            None if fits else unbounded_count(s, batch, per_replica),
        )
        if key not in self._memo:
            self._memo[key] = one_gpu_baseline(ctx, batch, s, plan_fits=fits, per_replica=per_replica)
        return self._memo[key]

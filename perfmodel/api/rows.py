"""Rows of the notebook API's frames: one priced plan, or a gap with its reason (SI units)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..cost.fusion import DEFAULT_FUSION, fusion_assumption
from ..cost.grouped import cudnn_assumption
from ..cost.layout import memory_format_assumption
from ..report.answers import frame_columns
from ..search.plan import DEFAULT_BATCH_PER_GPU
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME
from ..strategies.predict import Context, price, replica_batch
from ..strategies.spec import Strategy
from ..strategies.wording import kernels_assumption
from .args import check_batches
from .cache import Baselines

__all__ = ["price_row", "gap_row", "text_columns", "as_list", "resolve_batches", "software_attrs"]


def software_attrs(cudnn_major: int, memory_format: str, fusion: str = DEFAULT_FUSION,
                   amp_runtime: str = DEFAULT_AMP_RUNTIME) -> dict[str, Any]:
    """The software a frame's plans assume, for its ``df.attrs``: the cuDNN era, the memory format,
    the batch-norm/add/ReLU fusion, the mixed-precision runtime of a 16-bit run and the kernels
    each layer is priced as."""
    return {"cudnn_major": int(cudnn_major), "cudnn": cudnn_assumption(cudnn_major), "memory_format": memory_format,
            "memory_format_assumption": memory_format_assumption(memory_format), "fusion": fusion,
            "fusion_assumption": fusion_assumption(fusion), "amp_runtime": amp_runtime,
            "kernels": kernels_assumption()}


def resolve_batches(batch_per_gpu: object, global_batch: object) -> tuple[int | None, int | None]:
    """The checked batches; neither given means ``DEFAULT_BATCH_PER_GPU`` per GPU."""
    bpg, gb = check_batches(batch_per_gpu, global_batch)
    return (DEFAULT_BATCH_PER_GPU, None) if bpg is None and gb is None else (bpg, gb)


def price_row(
    ctx: Context,
    s: Strategy,
    gpus: int,
    batch_per_gpu: int | None,
    global_batch: int | None,
    base: Baselines,
    per_gpu_baseline: bool = True,
) -> dict[str, Any]:
    """Price ``s`` and say everything a frame row needs (SI units); the speedup is against one GPU
    at one replica's batch (``batch_per_gpu`` samples for data parallelism, global / ``dp`` for a plan
    whose GPUs share samples: :func:`~perfmodel.strategies.predict.replica_batch`) where
    ``batch_per_gpu`` is given and ``per_gpu_baseline`` (weak scaling), else at the global batch
    (:func:`~perfmodel.strategies.predict.one_gpu_baseline`, as ``predict``)."""
    B = batch_per_gpu * gpus if batch_per_gpu is not None else global_batch
    assert B is not None
    r = price(ctx, s, B)
    weak = batch_per_gpu is not None and per_gpu_baseline
    b1 = replica_batch(s, B) if weak else B
    mem = float(sum(r.memory.values()))
    one = base.get(ctx, b1, s, mem <= ctx.hw.device.memory_bytes, weak)
    thr = B / r.time_s
    speedup = math.nan if one is None else one.speedup(thr)
    row: dict[str, Any] = {
        "plan": s.spec(),
        "plan_kind": s.kind,
        "global_batch": B,
        "step_s": r.time_s,
        "samples_per_s": thr,
        "speedup_x": speedup,
        "efficiency_%": 100 * speedup / gpus,
        "baseline_batch": b1,
        "memory_per_gpu_bytes": mem,
        "memory_capacity_bytes": float(ctx.hw.device.memory_bytes),
        "fits": mem <= ctx.hw.device.memory_bytes,
        "dominant": max(r.breakdown, key=lambda k: r.breakdown[k]),
        "reason": None,
    }
    row.update(frame_columns(ctx.net.name, ctx.hw, ctx.precision, s.kind, r.time_s, thr, mem))
    row.update({f"breakdown_{k}_s": v for k, v in r.breakdown.items()})
    return row


def gap_row(reason: str) -> dict[str, Any]:
    return {
        "plan": None,
        "plan_kind": None,
        "step_s": math.nan,
        "samples_per_s": math.nan,
        "speedup_x": math.nan,
        "efficiency_%": math.nan,
        "memory_per_gpu_bytes": math.nan,
        "fits": False,
        "dominant": None,
        "reason": reason,
    }


def text_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Missing text (no plan, no reason) as None rather than NaN, in every text column."""
    for c in ("plan", "plan_kind", "dominant", "reason", "interval_group"):
        if c in df.columns:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


def as_list(x: Any) -> list[Any] | None:
    """``x`` as a list if it is a sweep axis (a list, tuple or range), else None."""
    return list(x) if isinstance(x, (list, tuple, range)) else None

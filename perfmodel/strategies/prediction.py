"""The price of one plan as one result object: step time, speedup, memory, breakdown, assumptions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cost.compute import HALF_PRECISIONS
from ..cost.fusion import DEFAULT_FUSION, fusion_assumption
from ..cost.grouped import DEFAULT_CUDNN_MAJOR, cudnn_assumption
from ..cost.layout import DEFAULT_MEMORY_FORMAT, memory_format_assumption
from ..units import GIB
from .amp_runtime import DEFAULT_AMP_RUNTIME
from .amp_step import amp_assumption
from .baseline import Baseline, baseline_text
from .context import Context
from .memory import half_model
from .pipeline import PipelineTask, pipeline_tasks
from .spec import Strategy
from .wording import kernels_assumption, optimizer_assumption, precision_assumption, release_words

__all__ = ["Prediction", "EXCLUDED", "assumptions", "baseline_text", "speedup"]

#: What no prediction includes.
EXCLUDED = (
    "data loading and augmentation, host-to-device input copies, evaluation, checkpointing "
    "(included: the loss, zero_grad and host synchronisation, as one fixed cost per step: "
    "efficiency.kernels.step_overhead_s; NCCL's slow-down of the backward compute it overlaps "
    "and each collective's base latency: [collectives]; DDP's copies of every gradient tensor "
    "into its bucket and back)"
)



@dataclass(frozen=True)
class Prediction:
    """The price of one plan: step time and its parts, memory per GPU and its parts, assumptions."""

    model: str
    hardware: str
    gpus: int
    strategy: Strategy
    precision: str
    optimizer: str
    global_batch: int
    image_size: int
    iteration_time_s: float
    throughput_samples_per_s: float
    speedup_vs_1gpu: float | None
    speedup_baseline: str
    memory_per_gpu_bytes: float
    memory_capacity_bytes: float
    #: seconds per step by part (compute, gradient exchange, ...; they add up to ``iteration_time_s``)
    breakdown: dict[str, float]
    #: bytes per GPU by part (parameters, gradients, optimizer state, activations, ...)
    memory: dict[str, float]
    #: what the price assumes, in words (profile and source, precision, optimizer, exclusions)
    assumptions: dict[str, str]
    details: dict[str, Any] = field(default_factory=dict)
    baseline: Baseline | None = None
    #: the software the plan was priced for (also in words in ``assumptions``)
    cudnn_major: int = DEFAULT_CUDNN_MAJOR
    memory_format: str = DEFAULT_MEMORY_FORMAT
    #: the batch-norm/add/ReLU chains the run's framework fuses (perfmodel.cost.fusion)
    fusion: str = DEFAULT_FUSION
    #: the mixed-precision runtime of a 16-bit run (perfmodel.strategies.amp_runtime)
    amp_runtime: str = DEFAULT_AMP_RUNTIME

    @property
    def fits_in_memory(self) -> bool:
        return bool(self.memory_per_gpu_bytes <= self.memory_capacity_bytes)

    @property
    def parallel_efficiency(self) -> float | None:
        return None if self.speedup_vs_1gpu is None else self.speedup_vs_1gpu / self.gpus

    @property
    def dominant(self) -> str:
        return max(self.breakdown, key=lambda k: self.breakdown[k])

    def pipeline_schedule(self) -> list[PipelineTask]:
        """The tasks of the priced pipeline step (:func:`~.pipeline.pipeline_tasks` on the
        stages' seconds and sends the pricing used); empty for a plan without stages."""
        stages = self.details.get("stages") if self.strategy.pp > 1 else None
        if not isinstance(stages, list) or len(stages) < 2:
            return []
        return pipeline_tasks(
            [float(st["forward_s"]) for st in stages],
            [float(st["backward_s"]) for st in stages],
            [float(st.get("send_forward_s", 0.0)) for st in stages],
            [float(st.get("send_backward_s", 0.0)) for st in stages],
            self.strategy.mb,
            str(self.details.get("schedule", self.strategy.schedule)),
            self.strategy.recompute,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "hardware": self.hardware,
            "gpus": self.gpus,
            "strategy": self.strategy.spec(),
            "strategy_kind": self.strategy.kind,
            "precision": self.precision,
            "optimizer": self.optimizer,
            "cudnn_major": self.cudnn_major,
            "memory_format": self.memory_format,
            "fusion": self.fusion,
            "amp_runtime": self.amp_runtime,
            "global_batch": self.global_batch,
            "image_size": self.image_size,
            "iteration_time_s": self.iteration_time_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "speedup_vs_1gpu": self.speedup_vs_1gpu,
            "speedup_baseline": self.speedup_baseline,
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "parallel_efficiency": self.parallel_efficiency,
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
            "memory_capacity_bytes": self.memory_capacity_bytes,
            "fits_in_memory": self.fits_in_memory,
            "dominant_cost": self.dominant,
            "breakdown": dict(self.breakdown),
            "memory": dict(self.memory),
            "assumptions": dict(self.assumptions),
            "details": _jsonable(self.details),
        }


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def speedup(throughput_samples_per_s: float, baseline_batch: int, baseline_step_s: float) -> float:
    """Throughput over one GPU's: that GPU trains ``baseline_batch`` samples in ``baseline_step_s``."""
    return throughput_samples_per_s / (baseline_batch / baseline_step_s)


def assumptions(ctx: Context, baseline: str = "") -> dict[str, str]:
    hw = ctx.hw
    out = {
        "hardware": f"{hw.name}: {hw.description}",
        "hardware_source": hw.sources.get("profile", "") + (f" (file {hw.path})" if hw.path else ""),
        "precision": precision_assumption(hw, ctx.precision, half_model(ctx.precision, ctx.amp_runtime)),
        "optimizer": optimizer_assumption(ctx.optimizer, ctx.param_bytes),
        "gradient_exchange": "NCCL-style allreduce in 25 MiB buckets overlapped with backward (PyTorch DDP)",
        "cudnn": cudnn_assumption(ctx.cudnn_major) + release_words(hw, ctx.cudnn_major),
        "memory_format": memory_format_assumption(ctx.memory_format),
        "kernels": kernels_assumption(),
        "memory_capacity": f"{hw.device.memory_bytes / GIB:.1f} GiB per GPU, "
        f"{hw.framework_reserve_bytes / GIB:.1f} GiB reserved by the framework",
        "excluded": EXCLUDED,
    }
    if ctx.fusion != DEFAULT_FUSION:  # stated where it is not the eager default
        out["fusion"] = fusion_assumption(ctx.fusion)
    if ctx.precision in HALF_PRECISIONS:
        out["mixed_precision"] = amp_assumption(ctx.precision, ctx.amp_runtime)
    if baseline:
        out["speedup_baseline"] = baseline
    return out

"""The one-GPU baseline every speedup of an answer is measured against, as a value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..units import fmt_rate

__all__ = ["Baseline", "baseline_text"]


@dataclass(frozen=True)
class Baseline:
    """One GPU of ``hardware`` training ``batch`` samples per step, accumulating gradients over
    ``micro_batches`` micro-batches when they do not fit it at once (``batch`` is the answer's
    global batch: strong scaling; weak scaling's per-GPU batch for ``scale --batch-per-gpu``)."""

    hardware: str
    batch: int
    micro_batches: int
    step_time_s: float
    gpus: int = 1
    #: False where it runs the micro-batches of a plan that does not fit, as that plan is priced,
    #: without the memory bound (an infeasible plan is compared with the same infeasible work)
    fits: bool = True

    @property
    def throughput_samples_per_s(self) -> float:
        return self.batch / self.step_time_s

    def speedup(self, throughput_samples_per_s: float) -> float:
        return throughput_samples_per_s / self.throughput_samples_per_s

    def text(self, what: str = "the same global batch") -> str:
        described = _described(self.hardware, what, self.batch, self.micro_batches)
        unfit = "" if self.fits else ", which does not fit either: priced as the plan is, without the memory bound"
        return f"{described}{unfit}: {fmt_rate(self.throughput_samples_per_s)} samples/s"

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "hardware": self.hardware,
            "batch": self.batch,
            "micro_batches": self.micro_batches,
            "step_time_s": self.step_time_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "fits": self.fits,
        }


def baseline_text(hardware: str, batch: int, steps: int, weak: bool) -> str:
    """What a speedup is measured against: one GPU at the per-GPU (weak) or global (strong) batch."""
    return _described(hardware, "the same batch per GPU" if weak else "the same global batch", batch, steps)


def _described(hardware: str, what: str, batch: int, steps: int) -> str:
    acc = f", accumulating gradients over {steps:,} micro-batches" if steps > 1 else ""
    return f"1 GPU of {hardware} at {what} ({batch:,} samples{acc})"

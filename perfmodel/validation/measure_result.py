"""A measured training step and its per-layer times, as a measurement-format row and as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..cost.layout import DEFAULT_MEMORY_FORMAT

__all__ = ["LayerTiming", "MeasureResult", "layout_text", "framework_text"]


def layout_text(fmt: str) -> str:
    """How a measured row names its memory format: ``NHWC``/``NCHW`` in capitals, the words
    :func:`perfmodel.validation.software_era.memory_format_of` reads back."""
    torch_name = "torch.channels_last" if fmt == "nhwc" else "torch.contiguous_format"
    return f"{fmt.upper()} ({torch_name})"


def framework_text(torch_version: str, cudnn_version: str = "", memory_format: str = "") -> str:
    """A measured row's framework: ``PyTorch v``, the cuDNN it loaded and the layout it ran when
    known, in the words :mod:`perfmodel.validation.software_era` reads back (rule 1 of each), so
    ``validate`` prices the row's grouped convolutions and transposes as they ran."""
    cudnn = f", cuDNN {cudnn_version}" if cudnn_version else ""
    layout = f", {layout_text(memory_format)}" if memory_format else ""
    return f"PyTorch {torch_version}{cudnn}{layout}"


@dataclass(frozen=True)
class LayerTiming:
    """Median seconds of one layer, alone, for the whole batch: forward and backward."""

    name: str
    kind: str
    forward_s: float
    backward_s: float


@dataclass(frozen=True)
class MeasureResult:
    """A measured training step of one model on one device, with per-layer times."""

    model: str
    image_size: int
    batch: int
    precision: str
    device: str
    device_name: str
    steps: int
    warmup: int
    step_time_s: float
    step_times_s: tuple[float, ...]
    layers: tuple[LayerTiming, ...]
    environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def memory_format(self) -> str:
        """The layout the run's model and inputs were in (``environment``; PyTorch's default, nchw,
        for a result that does not say)."""
        return self.environment.get("memory_format") or DEFAULT_MEMORY_FORMAT

    @property
    def throughput_samples_per_s(self) -> float:
        return self.batch / self.step_time_s

    def measurement_row(self, hardware: str = "unspecified") -> dict[str, object]:
        """The run as one row of the measurement format (``perfmodel validate`` reads it)."""
        env = self.environment
        return {
            "model": self.model,
            "hardware": hardware,
            "gpus": 1,
            "precision": self.precision,
            "batch_per_gpu": self.batch,
            "global_batch": "",
            "strategy": "dp=1",
            "measured_throughput": self.throughput_samples_per_s,
            "image_size": self.image_size,
            "framework": framework_text(env.get("torch", "?"), env.get("cudnn_version", ""),
                                        env.get("memory_format", "")) + " (perfmodel measure)",
            "source": f"perfmodel measure on {self.device_name} ({self.device}), "
            f"{env.get('date', '')}; median of {self.steps} steps after {self.warmup} warm-up",
            "step_time_s": self.step_time_s,
            "device_name": self.device_name,
            "driver": env.get("driver", ""),
            "cuda": env.get("cuda", ""),
            "cudnn": env.get("cudnn_version", ""),
            "memory_format": env.get("memory_format", ""),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "image_size": self.image_size,
            "batch": self.batch,
            "precision": self.precision,
            "device": self.device,
            "device_name": self.device_name,
            "steps": self.steps,
            "warmup": self.warmup,
            "step_time_s": self.step_time_s,
            "step_times_s": list(self.step_times_s),
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "environment": dict(self.environment),
            "layers": [lt.__dict__ for lt in self.layers],
        }

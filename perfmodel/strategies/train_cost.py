"""Time to train and its cost: a plan's step time times the steps of E epochs, priced per GPU-hour."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..network import Network
from .predict import Prediction

__all__ = [
    "IMAGENET_1K_TRAIN_IMAGES",
    "TrainingEstimate",
    "default_dataset_size",
    "training_estimate",
    "human_duration",
]

#: Training images of ImageNet-1k (ILSVRC 2012): 1,281,167 (Russakovsky et al., "ImageNet
#: Large Scale Visual Recognition Challenge", IJCV 115, 2015, Table 2, CLS-LOC train).
IMAGENET_1K_TRAIN_IMAGES = 1_281_167

#: Largest epochs and dataset size accepted (bounds on input).
MAX_EPOCHS = 1e6
MAX_DATASET = 10**12


def default_dataset_size(net: Network) -> tuple[int, str] | None:
    """ImageNet-1k's training set for a 1000-class image classifier; None for other networks."""
    if len(net.input_shape) == 3 and net.layers and net.layers[-1].out_shape == (1000,):
        return IMAGENET_1K_TRAIN_IMAGES, "ImageNet-1k training set, 1,281,167 images (Russakovsky et al. 2015)"
    return None


@dataclass(frozen=True)
class TrainingEstimate:
    """Wall-clock time of ``epochs`` passes over ``dataset_size`` samples and, with a price, its cost."""

    epochs: float
    dataset_size: int
    dataset_note: str
    steps: int
    gpus: int
    time_s: float
    time_interval_s: tuple[float, float] | None
    price_per_gpu_hour: float | None = None
    currency: str = "USD"
    price_source: str = ""

    @property
    def gpu_hours(self) -> float:
        return self.time_s / 3600 * self.gpus

    @property
    def cost(self) -> float | None:
        return None if self.price_per_gpu_hour is None else self.gpu_hours * self.price_per_gpu_hour

    @property
    def cost_interval(self) -> tuple[float, float] | None:
        if self.price_per_gpu_hour is None or self.time_interval_s is None:
            return None
        k = self.gpus * self.price_per_gpu_hour / 3600
        return self.time_interval_s[0] * k, self.time_interval_s[1] * k

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "time_to_train_s": self.time_s,
            "time_to_train_interval_s": None if self.time_interval_s is None else list(self.time_interval_s),
            "training": {
                "epochs": self.epochs,
                "dataset_size": self.dataset_size,
                "dataset": self.dataset_note,
                "steps": self.steps,
                "gpu_hours": self.gpu_hours,
                "excluded": "evaluation, checkpointing, start-up and data loading stalls",
            },
        }
        if self.price_per_gpu_hour is not None:
            d.update(
                cost=self.cost,
                cost_interval=None if self.cost_interval is None else list(self.cost_interval),
                price_per_gpu_hour=self.price_per_gpu_hour,
                currency=self.currency,
                price_source=self.price_source,
            )
        return d

    def text(self) -> str:
        epochs = f"{self.epochs:g} epoch{'' if self.epochs == 1 else 's'}"
        out = f"time to train {epochs} of {self.dataset_size:,} samples ({self.steps:,} steps): "
        out += human_duration(self.time_s)
        if self.time_interval_s is not None:
            lo, hi = self.time_interval_s
            out += f" [{human_duration(lo)} - {human_duration(hi)}]"
        out += f", {self.gpu_hours:,.1f} GPU-hours"
        if self.cost is not None:
            out += f"; cost {self.cost:,.2f} {self.currency}"
            if self.cost_interval is not None:
                out += f" [{self.cost_interval[0]:,.2f} - {self.cost_interval[1]:,.2f}]"
            out += f" at {self.price_per_gpu_hour:g} {self.currency} per GPU-hour"
            if self.price_source:
                out += f" ({self.price_source})"
        return out


def human_duration(seconds: float) -> str:
    """'3.2 h', '41 min', '12 s' or '2.5 days'."""
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def training_estimate(
    p: Prediction,
    epochs: float,
    dataset_size: int,
    dataset_note: str = "",
    step_interval_s: tuple[float, float] | None = None,
    price_per_gpu_hour: float | None = None,
    currency: str = "USD",
    price_source: str = "",
) -> TrainingEstimate:
    """``ceil(epochs x dataset_size / global batch)`` steps at ``p``'s step time (and its interval)."""
    if not (isinstance(epochs, int | float) and 0 < epochs <= MAX_EPOCHS and math.isfinite(epochs)):
        raise UsageError(f"epochs must be a number in (0, {MAX_EPOCHS:g}], got {epochs!r}")
    if isinstance(dataset_size, bool) or not isinstance(dataset_size, int) or not 0 < dataset_size <= MAX_DATASET:
        raise UsageError(f"dataset size must be an integer from 1 to {MAX_DATASET:,} samples, got {dataset_size!r}")
    if price_per_gpu_hour is not None and not (0 <= price_per_gpu_hour <= 1e6 and math.isfinite(price_per_gpu_hour)):
        raise UsageError(f"price per GPU-hour must be a number from 0 to 1e6, got {price_per_gpu_hour!r}")
    steps = math.ceil(epochs * dataset_size / p.global_batch)
    interval = None if step_interval_s is None else (steps * step_interval_s[0], steps * step_interval_s[1])
    return TrainingEstimate(
        epochs=float(epochs),
        dataset_size=dataset_size,
        dataset_note=dataset_note or f"{dataset_size:,} samples",
        steps=steps,
        gpus=p.gpus,
        time_s=steps * p.iteration_time_s,
        time_interval_s=interval,
        price_per_gpu_hour=price_per_gpu_hour,
        currency=currency,
        price_source=price_source,
    )

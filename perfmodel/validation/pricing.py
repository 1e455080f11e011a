"""Price one measured run with the cost model: predicted throughput of the row's own plan."""

from __future__ import annotations

from dataclasses import dataclass

from ..cost.cudnn_release import release_hardware
from ..hardware import Hardware
from ..network import get_model
from ..strategies.predict import context, price
from .amp_runtime_of import amp_runtime_of
from .measurements import Measurement
from .software_era import cudnn_major_of, cudnn_release_of, fusion_of, memory_format_of
from .step_scope import FORWARD_BACKWARD, without_optimizer_update

__all__ = ["RowPrice", "price_row", "global_batch_of"]


@dataclass(frozen=True)
class RowPrice:
    """The model's step time and throughput for one measured row, and whether it fits memory."""

    global_batch: int
    step_time_s: float
    throughput_samples_per_s: float
    memory_per_gpu_bytes: float
    memory_capacity_bytes: float
    breakdown: dict[str, float]

    @property
    def fits_in_memory(self) -> bool:
        return self.memory_per_gpu_bytes <= self.memory_capacity_bytes


def global_batch_of(m: Measurement) -> int | None:
    """Samples per step over all GPUs (None when the row gives no batch)."""
    if m.batch_per_gpu is not None:
        return m.batch_per_gpu * m.gpus
    return m.global_batch


def price_row(m: Measurement, hw: Hardware, compute_scale: float = 1.0) -> RowPrice:
    """Price row ``m`` on ``hw``; raises :class:`~perfmodel.errors.PerfmodelError` if it cannot.

    ``compute_scale`` multiplies every layer's forward and backward seconds (a per-group
    single-GPU calibration: :attr:`~perfmodel.strategies.context.Context.compute_scale` says what
    it scales); the other terms are priced as they are. Grouped convolutions are priced as the
    row's cuDNN runs them (:func:`~perfmodel.validation.software_era.cudnn_major_of`), with the
    activations in the row's memory format (:func:`~perfmodel.validation.software_era.memory_format_of`) and
    the batch-norm/add/ReLU chains its framework fused (:func:`~perfmodel.validation.software_era.fusion_of`)
    and its mixed-precision runtime (:func:`~perfmodel.validation.amp_runtime_of.amp_runtime_of`),
    its convolutions as the cuDNN release it states runs them (cuDNN 7.0 on Volta in fp32:
    :func:`~perfmodel.cost.cudnn_release.release_hardware`);
    a row whose ``step`` is ``forward-backward`` is priced without the optimizer's update
    (:func:`~perfmodel.validation.step_scope.without_optimizer_update`)."""
    batch = global_batch_of(m)
    if batch is None:
        raise ValueError(f"{m.where()}: no batch given")
    net = get_model(m.model, m.image_size)
    hw = release_hardware(hw, m.precision, cudnn_release_of(m))
    ctx = context(net, hw, m.precision, m.optimizer, compute_scale, cudnn_major_of(m), memory_format_of(m),
                  fusion=fusion_of(m), amp_runtime=amp_runtime_of(m))
    priced = price(ctx, m.strategy, batch)
    if m.step == FORWARD_BACKWARD:
        priced = without_optimizer_update(priced, ctx.values)
    t = priced.time_s
    return RowPrice(
        global_batch=batch,
        step_time_s=t,
        throughput_samples_per_s=batch / t,
        memory_per_gpu_bytes=float(sum(priced.memory.values())),
        memory_capacity_bytes=hw.device.memory_bytes,
        breakdown=dict(priced.breakdown),
    )

"""Memory per GPU: weights, gradients, optimizer state, the input batch, activations in flight, workspace."""

from __future__ import annotations

import math

from ..cost.compute import GRAD_BYTES_PER_PARAM, HALF_PRECISIONS
from ..errors import UsageError
from .amp_runtime import DEFAULT_AMP_RUNTIME, runtime_of

__all__ = [
    "OPTIMIZERS",
    "grad_bytes_per_param",
    "half_model",
    "INPUT_BYTES_PER_ELEMENT",
    "input_batch_bytes",
    "optimizer_bytes_per_param",
    "optimizer_traffic_bytes_per_param",
    "weight_bytes_per_param",
]

#: ``sgd`` is SGD with momentum; ``sgd-plain`` SGD without it (``torch.optim.SGD(params, lr)``,
#: as torchgpipe's benchmarks train); ``adam`` Adam.
OPTIMIZERS = ("sgd", "sgd-plain", "adam")

#: The input batch sits on the GPU as the data loader delivers it: fp32 (autocast casts it
#: inside the first layer under amp/bf16; the cast copy is that layer's saved input).
INPUT_BYTES_PER_ELEMENT = 4


def _check(optimizer: str) -> None:
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer '{optimizer}' (valid: {', '.join(OPTIMIZERS)})")


def optimizer_bytes_per_param(optimizer: str) -> int:
    """State bytes per parameter: SGD with momentum keeps one fp32 buffer, plain SGD none, Adam
    two (m and v)."""
    _check(optimizer)
    return {"sgd": 4, "sgd-plain": 0, "adam": 8}[optimizer]


def optimizer_traffic_bytes_per_param(optimizer: str) -> int:
    """Bytes the update reads and writes per parameter (fp32): SGD+momentum reads w, g, m and
    writes w, m (20 B); plain SGD reads w, g and writes w (12 B); Adam reads w, g, m, v and
    writes w, m, v (28 B)."""
    _check(optimizer)
    return {"sgd": 20, "sgd-plain": 12, "adam": 28}[optimizer]


def half_model(precision: str, amp_runtime: str = DEFAULT_AMP_RUNTIME) -> bool:
    """Whether a run at ``precision`` under ``amp_runtime`` keeps only 16-bit weights and gradients
    (a runtime whose :attr:`~.amp_runtime.AmpRuntime.sixteen_bit_model` holds: ``model.half()``)."""
    return runtime_of(amp_runtime).sixteen_bit_model and precision in HALF_PRECISIONS


def weight_bytes_per_param(precision: str, amp_runtime: str = DEFAULT_AMP_RUNTIME) -> int:
    """fp32 weights, plus the 16-bit copies autocast caches during the forward pass under amp/bf16;
    a 16-bit model (:func:`half_model`) holds its 16-bit weights only (2 B)."""
    if half_model(precision, amp_runtime):
        return 2
    return 4 + (2 if precision in HALF_PRECISIONS else 0)


def grad_bytes_per_param(precision: str, amp_runtime: str = DEFAULT_AMP_RUNTIME) -> int:
    """Bytes of one parameter's gradient (and of its DDP bucket slot, which has the gradient's
    dtype): fp32, or fp16 in a 16-bit model (:func:`half_model`), whose ``.grad`` has the
    parameter's dtype."""
    return 2 if half_model(precision, amp_runtime) else GRAD_BYTES_PER_PARAM


def input_batch_bytes(input_shape: tuple[int, ...], samples: float, tiles: int = 1) -> float:
    """Bytes of ``samples`` network inputs of ``input_shape`` (C, [D,] H, W) on one GPU holding
    ``1/tiles`` of each (a spatial tile). A 512^3 CosmoFlow sample of 4 channels is 2 GiB."""
    return samples * math.prod(input_shape) * INPUT_BYTES_PER_ELEMENT / tiles

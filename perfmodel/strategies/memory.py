"""Memory per GPU: weights, gradients, optimizer state, the input batch, activations in flight, workspace."""

from __future__ import annotations

import math

from ..errors import UsageError

__all__ = [
    "OPTIMIZERS",
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


def weight_bytes_per_param(precision: str) -> int:
    """fp32 weights, plus the 16-bit copies autocast caches during the forward pass under amp/bf16."""
    return 4 + (2 if precision in ("amp", "bf16") else 0)


def input_batch_bytes(input_shape: tuple[int, ...], samples: float, tiles: int = 1) -> float:
    """Bytes of ``samples`` network inputs of ``input_shape`` (C, [D,] H, W) on one GPU holding
    ``1/tiles`` of each (a spatial tile). A 512^3 CosmoFlow sample of 4 channels is 2 GiB."""
    return samples * math.prod(input_shape) * INPUT_BYTES_PER_ELEMENT / tiles

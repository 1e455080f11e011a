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
    "HALF_MODEL_WORDS",
    "INPUT_BYTES_PER_ELEMENT",
    "input_batch_bytes",
    "input_bytes_per_element",
    "optimizer_bytes_per_param",
    "optimizer_traffic_bytes_per_param",
    "weight_bytes_per_param",
]

#: ``sgd`` is SGD with momentum; ``sgd-plain`` SGD without it (``torch.optim.SGD(params, lr)``,
#: as torchgpipe's benchmarks train); ``adam`` Adam.
OPTIMIZERS = ("sgd", "sgd-plain", "adam")

#: The input batch sits on the GPU as the data loader delivers it: fp32 (autocast casts it
#: inside the first layer under amp/bf16; the cast copy is that layer's saved input); a 16-bit
#: model takes a 16-bit input (:func:`input_bytes_per_element`).
INPUT_BYTES_PER_ELEMENT = 4

#: State tensors per parameter, each of the parameter's shape and dtype: SGD's momentum buffer
#: (torch/optim/sgd.py ``_single_tensor_sgd``: ``buf = grad.detach().clone()``, the gradient's dtype,
#: which is the parameter's), none for plain SGD, Adam's ``exp_avg`` and ``exp_avg_sq``
#: (torch/optim/adam.py ``_init_group``: ``torch.zeros_like(p)``); Adam's ``step`` is one scalar per
#: tensor, not counted. torch 2.13 on CPU: a ``.half()`` model's state is float16 (the oracle test).
_STATE_TENSORS = {"sgd": 1, "sgd-plain": 0, "adam": 2}
#: Tensors of the parameter's dtype the update reads and writes per parameter: SGD+momentum reads
#: w, g, m and writes w, m (5); plain SGD reads w, g and writes w (3); Adam reads w, g, m, v and
#: writes w, m, v (7).
_UPDATE_TENSORS = {"sgd": 5, "sgd-plain": 3, "adam": 7}

#: What a 16-bit model keeps at 16 bits (the assumption every output of one states).
HALF_MODEL_WORDS = ("kept at 16 bits: weights (no fp32 master, no autocast copy), gradients and DDP's buckets "
                    "(the allreduce moves 2 bytes per parameter), the optimizer state and its update's traffic "
                    "(torch.optim keeps its buffers in the parameter's dtype), and the input batch (a half input)")


def _check(optimizer: str) -> None:
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer '{optimizer}' (valid: {', '.join(OPTIMIZERS)})")


def optimizer_bytes_per_param(optimizer: str, param_bytes: int = GRAD_BYTES_PER_PARAM) -> int:
    """State bytes per parameter of ``param_bytes`` per element (4, or 2 in a 16-bit model: the
    state has the parameter's dtype): SGD with momentum keeps one buffer (4 B at fp32), plain SGD
    none, Adam two (m and v: 8 B at fp32, 4 B at fp16)."""
    _check(optimizer)
    return _STATE_TENSORS[optimizer] * param_bytes


def optimizer_traffic_bytes_per_param(optimizer: str, param_bytes: int = GRAD_BYTES_PER_PARAM) -> int:
    """Bytes the update reads and writes per parameter of ``param_bytes`` per element:
    SGD+momentum 20 B at fp32, plain SGD 12 B, Adam 28 B; half that in a 16-bit model."""
    _check(optimizer)
    return _UPDATE_TENSORS[optimizer] * param_bytes


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


def input_bytes_per_element(precision: str, amp_runtime: str = DEFAULT_AMP_RUNTIME) -> int:
    """Bytes of one input element on the GPU: :data:`INPUT_BYTES_PER_ELEMENT` (fp32), or 2 for a
    16-bit model (:func:`half_model`), whose input is cast before the step (``input.half()``: a
    ``.half()`` model's first convolution refuses an fp32 input)."""
    return 2 if half_model(precision, amp_runtime) else INPUT_BYTES_PER_ELEMENT


def input_batch_bytes(input_shape: tuple[int, ...], samples: float, tiles: int = 1,
                      bytes_per_element: int = INPUT_BYTES_PER_ELEMENT) -> float:
    """Bytes of ``samples`` network inputs of ``input_shape`` (C, [D,] H, W) on one GPU holding
    ``1/tiles`` of each (a spatial tile), ``bytes_per_element`` each (:func:`input_bytes_per_element`).
    A 512^3 CosmoFlow sample of 4 channels is 2 GiB at fp32."""
    return samples * math.prod(input_shape) * bytes_per_element / tiles

"""The kernels mixed precision itself launches in an eager PyTorch step: autocast's weight casts, GradScaler's.

Under ``torch.autocast`` (``amp``: fp16, ``bf16``) the ops on autocast's lower-precision list
(convolutions, transposed convolutions, ``linear``; not batch norm, whose cuDNN kernel takes
16-bit activations with fp32 scale and shift) cast each fp32 parameter they receive to 16 bits.
PyTorch's ``aten/src/ATen/autocast_mode.cpp`` (``cached_cast``) caches the cast of an fp32 leaf
that requires grad, so each weight and bias is cast once per autocast region, and clears the
cache when the outermost region exits (``clear_cache`` at nesting level 0: "at the end of each
forward pass"). Each cast is one ``aten::_to_copy`` kernel reading 4 and writing 2 bytes per
element; its backward (``ToCopyBackward0``) converts the 16-bit gradient back to fp32, one more
kernel per tensor reading 2 and writing 4 bytes. ``perfmodel export``'s runtime enters the region
once per micro-batch forward (``Pieces.forward``), as NVIDIA's ConvNets trainer does per step, so
the casts repeat for every micro-batch (``M``); ``tests/test_amp_step.py`` counts them against torch.

``amp`` (fp16) also runs ``torch.amp.GradScaler`` (``torch/amp/grad_scaler.py``, as the NVIDIA
DeepLearningExamples PyTorch ConvNets trainer asserts: "Gradient Scaler is needed for AMP"; bf16
runs have none), per step:

* ``scale``: the loss times the scale, and in backward its gradient times the scale: 2 scalar
  kernels per micro-batch;
* ``unscale_``: the inverse scale in fp64 (``double``, ``reciprocal``, ``float``), a zeroed
  ``found_inf`` (``torch.full``) and the per-device copies of both (``_MultiDeviceReplicator.get``
  copies with ``copy=True`` even on the same device): 6 scalar kernels; then
  ``_amp_foreach_non_finite_check_and_unscale_`` reads and writes every fp32 gradient once
  (8 bytes per parameter) in multi-tensor launches: ``multi_tensor_apply`` with one tensor list
  (``aten/src/ATen/native/cuda/MultiTensorApply.cuh``) splits each tensor into chunks of
  ``kChunkSize`` = 65,536 elements, one block each, and launches whenever 320 blocks or 110
  tensors fill a launch (``depth_to_max_tensors[0]``, ``depth_to_max_blocks[0]`` of the 4 KB
  kernel-argument configuration that every CUDA build has; CUDA 12.1+ drivers allow 770 and
  2,240, fewer launches);
* ``step``: ``found_inf.item()`` (``_maybe_opt_step``), a device-to-host copy (one launch) on
  which the host waits: the GPU then idles until the host has dispatched the optimizer's first
  kernel (one op, ``h``);
* ``update``: ``_amp_update_scale_`` (one single-thread kernel).

Every kernel is priced as the model prices memory-bound kernels: its bytes over the achievable
memory bandwidth (``beta_mem * eta_mem``) plus one launch gap ``tau``. fp32 and tf32 launch none
of these: :func:`amp_step` is ``None`` for them and the step is priced as before. The casts,
which run inside forward and backward, are their own term, ``amp_casts`` (:func:`amp_casts_s`);
GradScaler's kernels join the ``optimizer_step`` term (:func:`amp_update_s`), both of the GPU the
update is priced on (the stage or part holding the most parameters,
:func:`~.dimension.optimizer_step_s`), serial with the step, not inside each layer's time: in a
pipeline that stage's casts count ``M`` times, as if on the critical path. A row timed without the
optimizer (``step = forward-backward``) keeps ``amp_casts`` and drops the update with the scaler.

The runtime (:mod:`.amp_runtime`) decides which of these run: PyTorch autocast (the default) as
above; a 16-bit model (``model.half()``) none; MXNet ``multi_precision`` no casts and no scaler
but its update writes the fp16 weight copy and reads the 16-bit gradient
(``P (e + e - 4) / (beta_mem eta_mem)`` beside the fp32 update's traffic); TensorFlow AMP as
autocast.

Not priced: the casts of activations into fp32-list ops (the loss's logits, layer and group norm
in fp32, softmax), the input batch's cast to 16 bits in the first layer, and the host time of each
cast (the host is taken to run ahead of the GPU, as in a GPU-bound step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..cost.compute import GRAD_BYTES_PER_PARAM, HALF_PRECISIONS, ComputeValues
from ..cost.formulas import Num
from ..network import Network
from .amp_runtime import DEFAULT_AMP_RUNTIME, runtime_of
from .context import Context
from .data import param_tensors
from .memory import HALF_MODEL_WORDS

__all__ = [
    "AMP_CASTS_WORDS",
    "amp_update_words",
    "AmpStep",
    "CAST_KINDS",
    "CHUNK_ELEMS",
    "LAUNCH_TENSORS",
    "LAUNCH_BLOCKS",
    "SCALER_SCALAR_KERNELS",
    "amp_step",
    "amp_casts_s",
    "amp_update_s",
    "gradient_numels",
    "amp_step_s",
    "stage_amp_step",
    "part_amp_step",
    "amp_assumption",
    "unscale_launches",
]

#: Layer kinds on autocast's lower-precision list that hold parameters (autocast_mode.cpp:
#: conv1d/2d/3d, conv_transpose1d/2d/3d, linear on CUDA; the same on CPU for bf16).
CAST_KINDS = frozenset({"conv", "conv_transpose", "linear"})
#: multi_tensor_apply's elements per block (``kChunkSize``, MultiTensorApply.cuh).
CHUNK_ELEMS = 65536
#: Tensors and blocks of one launch with one tensor list (4 KB kernel arguments, MultiTensorApply.cuh).
LAUNCH_TENSORS = 110
LAUNCH_BLOCKS = 320
#: GradScaler's scalar kernels per step besides ``scale`` (2 per micro-batch) and the unscale:
#: double, reciprocal, float, full and the two per-device copies in ``unscale_``, the found_inf
#: copy to the host in ``step``, ``_amp_update_scale_`` in ``update`` (torch/amp/grad_scaler.py).
SCALER_SCALAR_KERNELS = 8


#: ``explain``'s legend of the ``amp_casts`` term.
AMP_CASTS_WORDS = ("autocast's casts of each conv/linear weight and bias to 16 bits and of its gradient back to "
                   "fp32, per micro-batch: 2*M*(T*tau + P*(4 + e)/(beta_mem*eta_mem))")


def amp_update_words(precision: str, runtime: str = DEFAULT_AMP_RUNTIME) -> str:
    """What the ``optimizer_step`` term adds under ``precision`` and ``runtime`` (``explain``'s legend)."""
    if precision not in HALF_PRECISIONS:
        return ""
    rt = runtime_of(runtime)
    if rt.master_copy:
        return "; with the fp16 weight copy the multi-precision update writes and its 16-bit gradient read"
    if rt.scaler_at_fp16 and precision == "amp":
        return "; with GradScaler's unscale, scalar kernels and found_inf synchronisation"
    return ""


@dataclass(frozen=True)
class AmpStep:
    """What mixed precision launches per step on one GPU: ``cast_tensors`` parameter tensors of
    ``cast_params`` elements that autocast casts (per micro-batch, forward and back), under
    GradScaler (``scaler``) the unscale of ``grad_params`` gradient elements in
    ``unscale_launches`` launches, and under MXNet multi-precision (``master_copy``) the 16-bit copy of
    ``grad_params`` weights the update writes."""

    cast_tensors: float
    cast_params: float
    grad_params: float
    unscale_launches: float
    scaler: bool
    master_copy: bool = False


def unscale_launches(numels: list[float]) -> int:
    """Launches of ``multi_tensor_apply`` with one tensor list over tensors of ``numels``
    elements: each tensor's chunks of :data:`CHUNK_ELEMS` are blocks; a launch goes when
    :data:`LAUNCH_BLOCKS` blocks are queued or :data:`LAUNCH_TENSORS` tensors are done, the
    remainder at the end (MultiTensorApply.cuh's loop; empty tensors are skipped)."""
    launches = blocks = tensors = 0
    for n in numels:
        chunks = math.ceil(n / CHUNK_ELEMS)
        if chunks == 0:
            continue
        tensors += 1
        for c in range(chunks):
            blocks += 1
            last = c == chunks - 1
            if (tensors == LAUNCH_TENSORS and last) or blocks == LAUNCH_BLOCKS:
                launches += 1
                blocks = 0
                tensors = 0 if last else 1  # a tensor cut mid-way carries over
    return launches + (1 if blocks else 0)


@lru_cache(maxsize=64)
def _layer_tables(net: Network) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per layer: whether autocast casts its parameters, its parameter tensors, and the share of
    its parameters in its largest tensor (the weight; a norm's scale and shift are halves)."""
    cast = np.array([layer.kind in CAST_KINDS and layer.params > 0 for layer in net.layers])
    tensors = param_tensors(net)
    weight_share = np.ones(len(net.layers))
    for i, layer in enumerate(net.layers):
        if tensors[i] == 2:
            # a conv's or linear's bias has one element per output feature: the output's channel
            # axis (first of (C, H, W)) for a convolution, its last axis for a linear on (T, D)
            bias = (layer.out_shape[-1] if layer.kind == "linear" else layer.out_shape[0]) \
                if layer.kind in CAST_KINDS else layer.params / 2
            weight_share[i] = (layer.params - bias) / layer.params
    for a in (cast, weight_share):
        a.setflags(write=False)
    return cast, tensors, weight_share


def amp_step(net: Network, precision: str, held: np.ndarray, runtime: str = DEFAULT_AMP_RUNTIME) -> AmpStep | None:
    """:class:`AmpStep` of a GPU holding ``held`` parameters per layer of ``net`` (a layer's
    tensors count where it holds any: a shard of a split is a slice of each) under the
    mixed-precision ``runtime`` (:mod:`.amp_runtime`), or None for fp32 and tf32 and for a 16-bit
    model, which launch none of these kernels."""
    rt = runtime_of(runtime)
    if precision not in HALF_PRECISIONS or not (rt.casts or rt.master_copy):
        return None
    return _amp_step(net, precision, np.asarray(held, dtype=float).tobytes(), runtime)


@lru_cache(maxsize=1024)
def _amp_step(net: Network, precision: str, held_bytes: bytes, runtime: str) -> AmpStep:
    held = np.frombuffer(held_bytes)
    rt = runtime_of(runtime)
    cast, tensors, _ = _layer_tables(net)
    on = cast & (held > 0) & rt.casts
    scaler = rt.scaler_at_fp16 and precision == "amp"
    return AmpStep(
        cast_tensors=float(tensors[on].sum()),
        cast_params=float(held[on].sum()),
        grad_params=float(held.sum()),
        unscale_launches=float(unscale_launches(gradient_numels(net, held))) if scaler else 0.0,
        scaler=scaler,
        master_copy=rt.master_copy,
    )


def gradient_numels(net: Network, held: np.ndarray) -> list[float]:
    """Elements of each gradient tensor of a GPU holding ``held`` parameters per layer of ``net``,
    in layer order (a layer's weight, then its bias or a norm's shift): the tensors GradScaler
    unscales."""
    _, tensors, weight_share = _layer_tables(net)
    numels: list[float] = []
    for i in np.flatnonzero(np.asarray(held) > 0):
        w = float(held[i] * weight_share[i])
        numels += [w] if tensors[i] == 1 else [w, float(held[i]) - w]
    return numels


def stage_amp_step(ctx: Context, ranges: list[tuple[int, int]]) -> AmpStep | None:
    """:func:`amp_step` of the stage (layers ``[a, b)`` of ``ranges``) holding the most parameters,
    the first of equals: the stage whose update the ``optimizer_step`` term prices."""
    sums = [float(ctx.cc.params[a:b].sum()) for a, b in ranges]
    a, b = ranges[sums.index(max(sums))]
    held = np.zeros(len(ctx.cc.params))
    held[a:b] = ctx.cc.params[a:b]
    return amp_step(ctx.net, ctx.precision, held, ctx.amp_runtime)


def part_amp_step(ctx: Context, unit_layer: np.ndarray, unit_params: np.ndarray,
                  assignment: np.ndarray) -> AmpStep | None:
    """:func:`amp_step` of the ``mp`` part holding the most parameters, the first of equals: each
    unit (a layer or a share of its channels, ``unit_layer``) holds ``unit_params`` and belongs to
    part ``assignment``."""
    a = np.asarray(assignment)
    sums = np.bincount(a, weights=unit_params)
    mine = a == int(np.argmax(sums))
    held = np.bincount(np.asarray(unit_layer)[mine], weights=unit_params[mine], minlength=len(ctx.cc.params))
    return amp_step(ctx.net, ctx.precision, held, ctx.amp_runtime)


def amp_step_s(a: AmpStep, micro_batches: Num, v: ComputeValues) -> Num:
    """Seconds of ``a`` per step: its casts and its update's part, :func:`amp_casts_s` +
    :func:`amp_update_s`."""
    return amp_casts_s(a, micro_batches, v) + amp_update_s(a, micro_batches, v)


def amp_casts_s(a: AmpStep, micro_batches: Num, v: ComputeValues) -> Num:
    """Seconds of autocast's casts per step (numbers or symbols, by ``v`` and ``micro_batches``): every
    micro-batch casts each tensor to 16 bits and its gradient back, ``2 M (T tau + P (4 + e) /
    (beta_mem eta_mem))`` (module docstring)."""
    bw = v.memory_bandwidth_bytes_per_s * v.eta_memory
    per_pass = a.cast_tensors * v.launch_s + a.cast_params * (GRAD_BYTES_PER_PARAM + v.elem_bytes) / bw
    return micro_batches * 2 * per_pass


def amp_update_s(a: AmpStep, micro_batches: Num, v: ComputeValues) -> Num:
    """Seconds mixed precision adds to the update: GradScaler's ``(2 M + 8 + L) tau + 8 G /
    (beta_mem eta_mem) + h``; MXNet multi-precision's fp16 copy written and 16-bit gradient read,
    ``G (2 e - 4) / (beta_mem eta_mem)`` (module docstring)."""
    bw = v.memory_bandwidth_bytes_per_s * v.eta_memory
    total: Num = 0.0
    if a.scaler:
        launches = 2 * micro_batches + SCALER_SCALAR_KERNELS + a.unscale_launches
        total = launches * v.launch_s + a.grad_params * 2 * GRAD_BYTES_PER_PARAM / bw + v.host_op_s
    if a.master_copy:
        total = total + a.grad_params * (2 * v.elem_bytes - GRAD_BYTES_PER_PARAM) / bw
    return total


def amp_assumption(precision: str, runtime: str = DEFAULT_AMP_RUNTIME) -> str:
    """What the step pays for mixed precision under ``runtime``, in words (every output's assumptions)."""
    if precision not in HALF_PRECISIONS:
        return f"{precision}: no autocast casts, no loss scaling"
    rt = runtime_of(runtime)
    if runtime != DEFAULT_AMP_RUNTIME:
        named = f"{runtime}: {rt.words}" + (f"; {HALF_MODEL_WORDS}" if rt.sixteen_bit_model else "")
        if not rt.casts:
            return named + ("; part of the optimizer_step term" if rt.master_copy else "")
        prefix = named + "; "
    else:
        prefix = ""
    scaler = ("; torch.amp.GradScaler: loss scaled, every gradient unscaled and checked in multi-tensor "
              "launches, one host synchronisation on found_inf and a scale update per step (in the "
              "optimizer_step term)" if precision == "amp" else "; no loss scaler (bf16)")
    return (prefix + "torch.autocast casts each convolution and linear weight and bias to 16 bits once per "
            "micro-batch forward and its gradient back to fp32 (one kernel per tensor each way; the amp_casts term)"
            + scaler)

"""Assumption wording that depends on the device or the plan: precision fallbacks, gradient exchange, kernels."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..cost.cudnn_release import CUDNN70_VOLTA_FP32_SLOWDOWN, SLOW_RELEASE
from ..cost.gradient_sums import GRADIENT_SUMS_WORDS
from ..hardware import Hardware
from ..hardware.generation import generation
from ..hardware.profile import PEAK_KEY
from .spec import Strategy
from .split_search import LOCAL_MOVE_LINKS

__all__ = ["kernels_assumption", "precision_assumption", "optimizer_assumption", "exchange_assumption",
           "contention_words", "copies_words", "param_dtype", "stage_split_assumption", "release_words"]

_PRECISION = {
    "fp32": "fp32 everywhere (CUDA-core peak)",
    "tf32": "fp32 storage, TF32 tensor-core math for convolutions and matmuls",
    "amp": "mixed precision: fp16 tensor-core math and activations, fp32 master weights and gradients",
    "bf16": "bf16 tensor-core math and activations, fp32 master weights and gradients",
}

# PyTorch docs, "TensorFloat-32 (TF32) on Ampere (and later) devices" (notes/cuda.rst):
# torch.backends.cudnn.allow_tf32 defaults to True (since 1.7); torch.backends.cuda.matmul.allow_tf32
# defaulted to True in 1.7-1.11 and to False from 1.12 (pytorch/pytorch PR #76509)
#: The dtype activations are stored in at each precision (perfmodel.units.BYTES_PER_ELEMENT).
_STORAGE = {"fp32": "fp32", "tf32": "fp32", "amp": "fp16", "bf16": "bf16"}
_FP32_ON_TF32_GPUS = (
    "; PyTorch's default fp32 on this GPU runs convolutions in TF32 (torch.backends.cudnn.allow_tf32 = True):"
    " this is fp32 with it set False, --precision tf32 is closer to the default"
)


def precision_assumption(hw: Hardware, precision: str, half_model: bool = False) -> str:
    """What ``precision`` means on ``hw``; a device without its tensor-core format says so
    (V100 has no TF32 or BF16: convolutions and matmuls run at its fp32 peak). ``half_model``:
    a 16-bit model (``model.half()``, :func:`~.memory.half_model`), with no fp32 master."""
    key = PEAK_KEY[precision]
    if half_model and key in hw.device.peak_flops_per_s:
        return f"a 16-bit model: {key} tensor-core math, activations, weights and gradients (no fp32 master)"
    if precision == "fp32" and "tf32" in hw.device.peak_flops_per_s:
        return _PRECISION["fp32"] + _FP32_ON_TF32_GPUS
    if key in hw.device.peak_flops_per_s:
        return _PRECISION[precision]
    fp32 = hw.device.peak_flops_per_s["fp32"]
    stored = "weights, gradients and activations" if half_model else "activations"
    return (
        f"{hw.device.name} has no {key.upper()}: convolutions and matmuls at the fp32 peak "
        f"({fp32 / 1e12:.1f} TFLOP/s), {_STORAGE[precision]} {stored}"
        + (" (a 16-bit model, no fp32 master)" if half_model else "")
    )


def kernels_assumption() -> str:
    """Which kernels a layer is priced as, for every output's assumptions: eager PyTorch's on CUDA
    (a non-default fusion re-prices the chains it fuses and says so), its gradient sums at forks
    (:mod:`perfmodel.cost.gradient_sums`), its normalisation kernels (:mod:`perfmodel.cost.norm_kernels`)
    and its products of activations (:mod:`perfmodel.cost.batched_matmul`)."""
    return (
        "each layer priced as the CUDA kernels eager PyTorch launches for it (cuDNN/cuBLAS for convolutions "
        "and matmuls, PyTorch's own memory-bound kernels for the rest, each with its launch and host op), "
        "except the chains a --fusion other than eager fuses; layer norm, group norm and softmax as the "
        "kernels layer_norm_kernel.cu, group_norm_kernel.cu and SoftMax.cu launch (memory-bound passes over "
        "the tensor, row statistics in fp32; perfmodel.cost.norm_kernels), not as FLOPs at peak, moving fp32 "
        "bytes under amp and bf16 with autocast's casts where autocast (or TensorFlow's AMP) runs "
        "(perfmodel.cost.autocast_fp32), at 16 bits in a 16-bit model (--amp-runtime pytorch-half, "
        "mxnet-multi-precision); products of two "
        "activations as cuBLAS batched GEMMs and attention as FlashAttention-2's kernels "
        "(perfmodel.cost.batched_matmul); "
        + GRADIENT_SUMS_WORDS
    )


def release_words(hw: Hardware, cudnn_major: int) -> str:
    """What a cuDNN ``cudnn_major`` run on ``hw`` is priced as where the release matters: on Volta
    under cuDNN 7, the 7.6 kernels its numbers were fitted on (:mod:`perfmodel.cost.cudnn_release`);
    empty elsewhere."""
    if cudnn_major != SLOW_RELEASE[0] or generation(hw.device.name) != "volta":
        return ""
    major, minor = SLOW_RELEASE
    return (f"; on Volta its convolutions are priced as cuDNN 7.6's (the release the profile's numbers were "
            f"fitted on): cuDNN {major}.{minor}'s fp32 convolutions took {CUDNN70_VOLTA_FP32_SLOWDOWN:.3f}x that "
            f"time (DeepBench's 2017 V100 sheet), applied by validate to rows stating {major}.{minor}, not here")


def optimizer_assumption(optimizer: str, param_bytes: int) -> str:
    """The optimizer and its state buffers, which have the parameters' dtype (``param_bytes``: 4
    for fp32 parameters, 2 for a 16-bit model's)."""
    dtype = param_dtype(param_bytes)
    return {"sgd": f"SGD with momentum (one {dtype} state buffer)", "adam": f"Adam (two {dtype} state buffers)",
            "sgd-plain": "SGD without momentum (no state buffer)"}[optimizer]


def exchange_assumption(s: Strategy) -> str:
    """How plan ``s`` exchanges gradients (the framework behaviour it models)."""
    if s.comm == "dataparallel":
        return (
            "single-process torch.nn.DataParallel: inputs scattered and weights replicated from GPU 0 "
            "every step, outputs gathered and gradients reduced onto GPU 0 after backward, one Python "
            "thread launching kernels for every GPU"
        )
    if s.is_ps:
        return f"parameter server ({s.comm[3:]}): push gradients, pull weights; worst case reported"
    if s.overlap == "none":
        return (
            "NCCL-style allreduce in 25 MiB buckets after the backward pass ends (overlap=none: ChainerMN's "
            "default optimizer, Horovod without overlap, TensorFlow replicated)"
        )
    return "NCCL-style allreduce in 25 MiB buckets overlapped with backward (PyTorch DDP)"


def contention_words(overlap: str) -> str:
    """What the ``nccl_contention`` term of a plan exchanging with ``overlap`` is."""
    if overlap == "none":
        return "no overlap (overlap=none): the allreduce runs after backward"
    return (
        "backward compute slowed while NCCL's allreduces run beside it: NCCL's thread blocks hold C of the S "
        "SMs (gamma = C/(S - C)) and its traffic takes memory bandwidth (kappa bytes per byte the algorithm sends, "
        "at beta_mem*eta_mem), over the overlap window min(allreduce, backward); in a pipeline summed over the "
        "stages on the step's critical path (the backward bottleneck and those after it in the drain)"
    )


def param_dtype(param_bytes: int) -> str:
    """The dtype of the weights, gradients, DDP buckets and optimizer state in words: ``fp32`` (4
    bytes per element) or ``16-bit`` (2: a 16-bit model, :func:`~.memory.half_model`)."""
    return "fp32" if param_bytes == 4 else "16-bit"


def copies_words(param_bytes: int) -> str:
    """What the ``gradient_bucket_copies`` term is, for gradients of ``param_bytes`` per element."""
    return (
        "the gradient copies into the exchange buffers and back (DDP's reducer, reducer.cpp; assumed the same "
        "for a parameter server's push/pull buffers and DataParallel's coalesced reduce, an upper bound there): "
        f"a launch per parameter tensor and {2 * param_bytes} bytes per parameter ({param_dtype(param_bytes)} "
        "gradients read and written) over the memory bandwidth each way; in a pipeline the copies in of the "
        "stages on the step's critical path (the backward bottleneck and those after it in the drain) and "
        "stage 0's copy back"
    )


def stage_split_assumption(s: Strategy, details: Mapping[str, Any], n_links: int) -> str:
    """How a pipeline plan's stage split was chosen (``details``: its pricing's, with ``balance``
    and, where searched, ``balance_search`` of :func:`.compose.price`), for its assumptions."""
    bal = ":".join(str(x) for x in details.get("balance", ()))
    found = details.get("balance_search")
    if s.balance or not found:
        return f"stage split balance={bal} ({n_links} chain links), as given"
    n, priced, gap = int(found["splits"]), int(found["priced_in_full"]), float(found["gap_bound_s"])
    every = math.comb(n_links - 1, s.pp - 1)
    if found["exhaustive"]:
        pool = f"all {n:,} contiguous splits of the {n_links} chain links"
    else:
        pool = (f"{n:,} of the {every:,} contiguous splits of the {n_links} chain links (the reference "
                f"candidates and every move of one of their cuts by up to {LOCAL_MOVE_LINKS} links; the best of "
                "those, not of every split)")
    exact = ("exactly: the others' lower bounds (fill-drain and optimizer steps) are above it" if gap == 0.0
             else f"the search stopped at its budget: the best may be up to {gap * 1e3:.3g} ms faster")
    return (f"stage split balance={bal}: the fastest that fits in memory (the fastest if none fits) among "
            f"{pool}, {priced:,} priced in full, {exact}")

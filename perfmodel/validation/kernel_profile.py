"""What one training step runs, kernel by kernel: torch.profiler over :func:`.measure.training_step`.

Per-layer times (:mod:`.measure`) say which layer costs what; they cannot say whether a layer's
time went to its convolution, to cuDNN's NCHW <-> NHWC transposes around it or to a batch-norm
pass. This profiles whole steps and sums the GPU time of every kernel by name, each name put in
one class by the first pattern of :data:`KERNEL_CLASSES` it matches. The patterns follow the
kernel names the libraries launch:

* cuDNN's layout transposes ``cudnn::ops::nchwToNhwcKernel`` / ``nhwcToNchwKernel`` and its
  convolutions ``sm80_xmma_fprop_implicit_gemm_...`` (a TF32 NCHW convolution profiled in
  pytorch/pytorch issue #81940), ``volta_fp16_s884cudnn_...`` (perfmodel/data/KERNELS.md),
  ``cudnn::detail::dgrad_engine`` / ``wgrad_alg0_engine``, ``implicit_convolve_sgemm``, Winograd
  and FFT kernels;
* batch norm: cuDNN's ``bn_fw_tr_1C11_kernel_NCHW`` / ``bn_bw_1C11_kernel_new`` and PyTorch's
  ``batch_norm_collect_statistics_kernel`` ... ``batch_norm_backward_elemt_kernel``
  (``aten/src/ATen/native/cuda/Normalization.cuh``);
* cuDNN's padding and folding of NHWC tensors (``nhwcAddPaddingKernel``, ``nhwcToFoldedNhwc``), as
  layout work beside the transposes;
* attention: FlashAttention's and PyTorch's fused kernels (``flash_fwd_kernel``, ``fmha_cutlassF``),
  cuDNN's ``sdpa`` engines;
* GEMMs of cuBLAS / cuBLASLt (``ampere_sgemm_...``, ``sm80_xmma_gemm_...``, Hopper's ``nvjet_...``,
  their ``splitKreduce`` passes, CUTLASS kernels);
* PyTorch's own kernels: ``multi_tensor_apply_kernel`` (the optimizer and AMP's unscale),
  pooling, softmax, dropout, ``reduce_kernel``, copies, ``vectorized_elementwise_kernel``;
* NCCL's collectives (``ncclKernel_...``, ``ncclDevKernel_...``).

On the CPU (trying the tool without a GPU) the "kernels" are ATen operators' own CPU times
(``aten::mkldnn_convolution``, ``aten::native_batch_norm``, ...), classed by the same patterns.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..cost.layout import DEFAULT_MEMORY_FORMAT
from ..errors import DataError, UsageError
from ..network import get_model
from .measure import DEVICES, training_step
from .measure_torch import require_torch

__all__ = ["KERNEL_CLASSES", "KernelTime", "classify", "profile_step", "class_totals", "kernel_events"]

#: (class, pattern) in the order tried; the first match names a kernel's class (module docstring).
KERNEL_CLASSES: tuple[tuple[str, str], ...] = (
    ("transpose", r"nchwToNhwc|nhwcToNchw|nhwcAddPadding|FoldedNhwc|(?<!conv_)transpose|permute"),
    ("batch_norm", r"bn_fw|bn_bw|batch_norm|batchnorm"),
    ("nccl", r"nccl"),
    ("attention", r"flash|fmha|attention|sdpa"),
    ("convolution", r"fprop|dgrad|wgrad|implicit_gemm|convolve|cudnn|winograd|fft|im2col|col2im|conv(?!ert)"),
    ("gemm", r"gemm|gemv|nvjet|splitKreduce|cutlass|cublas|\baten::(mm|addmm|bmm|matmul|linear)\b"),
    ("optimizer", r"multi_tensor_apply|_foreach|sgd"),
    ("pooling", r"pool"),
    ("softmax", r"softmax"),
    ("dropout", r"dropout|bernoulli"),
    ("reduction", r"reduce|\baten::(sum|mean)\b"),
    ("copy", r"copy|memcpy|memset|\bcat\b|concat|contiguous|clone"),
    ("elementwise", r"elementwise|\baten::(add|mul|div|relu|threshold|clamp|sigmoid|silu|gelu|fill|zero)"),
)


@dataclass(frozen=True)
class KernelTime:
    """One kernel name's time in a step: ``calls`` per step, ``seconds`` per step (GPU time of
    the kernel on a GPU; the operator's own CPU time on the CPU), and its class."""

    name: str
    kind: str
    calls: float
    seconds: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.calls) and math.isfinite(self.seconds) and self.calls >= 0 and self.seconds >= 0):
            raise DataError(f"kernel {self.name}: calls ({self.calls}) and seconds ({self.seconds}) must be "
                            f"finite and >= 0")


def classify(name: str) -> str:
    """The class of kernel (or CPU operator) ``name``: the first of :data:`KERNEL_CLASSES` whose
    pattern it contains (case-insensitive), else ``other``."""
    for kind, pattern in KERNEL_CLASSES:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return "other"


def profile_step(model: str, batch: int, precision: str, memory_format: str = DEFAULT_MEMORY_FORMAT,
                 device: str = "cuda", steps: int = 3, warmup: int = 3) -> list[KernelTime]:
    """Every kernel of ``steps`` profiled training steps of zoo ``model`` (after ``warmup``
    unprofiled ones), per step, longest first."""
    torch = require_torch()
    if steps < 1 or warmup < 0 or batch < 1:
        raise UsageError(f"profile: batch ({batch}) and steps ({steps}) must be >= 1, warm-up >= 0")
    if device not in DEVICES:
        raise UsageError(f"profile: unknown device '{device}' (valid: {', '.join(DEVICES)})")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("profile: device cuda but torch sees no CUDA device (use device cpu)")
    step = training_step(torch, get_model(model, None), torch.device(device), precision, batch, memory_format)
    for _ in range(warmup):
        step()
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
    return _per_step(kernel_events(torch, prof, device), steps)


def kernel_events(torch: Any, prof: Any, device: str) -> list[tuple[str, float]]:
    """(name, seconds) of each profiled GPU kernel, or of each ATen operator's own CPU time."""
    out: list[tuple[str, float]] = []
    for e in prof.events():
        if device == "cuda":
            # a user annotation (the optimizer's ``Optimizer.step#SGD.step`` range) is on the GPU's
            # timeline too, around kernels already counted: not a kernel (torch's own tables skip it)
            if e.device_type != torch.autograd.DeviceType.CUDA or getattr(e, "is_user_annotation", False):
                continue
            out.append((e.name, float(e.time_range.elapsed_us()) * 1e-6))  # the kernel's own interval
        elif e.name.startswith("aten::"):
            out.append((e.name, float(e.self_cpu_time_total) * 1e-6))
    return out


def _per_step(events: list[tuple[str, float]], steps: int) -> list[KernelTime]:
    calls: dict[str, int] = defaultdict(int)
    secs: dict[str, float] = defaultdict(float)
    for name, s in events:
        calls[name] += 1
        secs[name] += s
    rows = [KernelTime(n, classify(n), calls[n] / steps, secs[n] / steps) for n in calls]
    return sorted(rows, key=lambda r: -r.seconds)


def class_totals(rows: list[KernelTime]) -> dict[str, tuple[float, float]]:
    """Per class: (seconds per step, share of the step's profiled time), largest first."""
    total = sum(r.seconds for r in rows)
    by: dict[str, float] = defaultdict(float)
    for r in rows:
        by[r.kind] += r.seconds
    return {k: (v, v / total if total > 0 else 0.0) for k, v in sorted(by.items(), key=lambda kv: -kv[1])}

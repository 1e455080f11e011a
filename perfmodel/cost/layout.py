"""The memory format of activations (NCHW or NHWC) and the transposes NCHW costs on tensor cores.

cuDNN's tensor-core convolution kernels work on channels-last (NHWC) tensors. Given NCHW tensors,
cuDNN transposes them to NHWC before the kernel and the result back after (NVIDIA Deep Learning
Performance Guide, "Convolutional Layers User's Guide", section "Tensor Layouts In Memory: NCHW vs
NHWC": "choose tensor layouts in memory to avoid transposing input and output data ... We
recommend using the NHWC format where possible"; PyTorch tutorial "Channels Last Memory Format in
PyTorch"; MosaicML Composer's "Channels Last" method card: "the NCHW tensor must be transposed to
NHWC before the convolution and transposed back to NCHW after"). The tensor-core kernel numbers
of :mod:`perfmodel.cost.work` were fitted on DeepBench's fp16 sheets, which ran NHWC
(``perfmodel/data/KERNELS.md``: the fp16 sheets' code uses the NHWC layout), so they are the
native kernels' costs and the transposes are an extra cost of NCHW runs only. cuDNN 8 on the
A100 does so for TF32 too: an NCHW TF32 convolution profiled in pytorch/pytorch issue #81940 (2022,
cuDNN 8.3.2) runs ``sm80_xmma_fprop_implicit_gemm_tf32..._nhwckrsc_nhwc`` (59% of the GPU time)
between ``cudnn::ops::nchwToNhwcKernel`` (17%) and ``nhwcToNchwKernel`` (16%). cuDNN 8 also has
native NCHW kernels on Ampere that it picks where they are faster (NVIDIA's engineers in
tensorflow/tensorflow PR #56744, 2022: "in some cases the NCHW kernels are faster on Ampere" for
fp32/tf32), so on the A100 in TF32 the transposes are an upper bound, not priced per layer.

Under ``nchw`` each tensor-core convolution call gets, as memory-bound kernels (each reads and
writes its tensor once at the profile's memory efficiency, one launch each):

* forward: the input in, the output out;
* data gradient: the output gradient in, the input gradient out;
* weight gradient: the input and the output gradient in (a call of its own: the two gradients
  are separate cuDNN functions, ``cudnnConvolutionBackwardData`` and ``cudnnConvolutionBackwardFilter``
  in the cuDNN API reference, so the output gradient is transposed once for each), in fp16 and
  bf16 only: in TF32, cuDNN's NHWC path is faster than its NCHW one "only for the fwd and bwd_data
  convolutions" (NVIDIA's engineers in tensorflow/tensorflow PR #58054, 2022, which turns NHWC on
  for TF32 inference only for that reason), so a TF32 weight gradient runs its native NCHW kernel
  at no less than the NHWC kernel's speed and pays no transposes.

Filters are left out: they are parameters, whose bytes do not grow with the batch (every memory
field of :class:`~perfmodel.cost.work.KernelWork` is linear in it, which ``explain``'s symbolic
batch relies on), and at a training batch they are small against the activations (ResNet-50 at 256
samples per GPU: 25.6M parameters, 77M elements over the three calls, against 5.6G activation
elements transposed per step, 1.4%).

On one GPU of a filter or channel split each tensor is transposed at its own share
(:mod:`.shares`: a filter split reads the whole gathered input, a channel split writes a partial
sum of the whole output), the same elements the convolution's kernels read and write.

Exempt: depthwise convolutions (``groups == channels``), which PyTorch runs with its own CUDA
kernels on the NCHW tensor and this model prices on the CUDA cores (:mod:`.depthwise`: the fp16 or
channels-last layers PyTorch hands to cuDNN, ``use_cudnn_depthwise`` in ``Convolution.cpp``, run
cuDNN's depthwise kernels, not its tensor-core GEMMs, and are priced the same way); precisions
that do not run on tensor cores on the GPU (fp32 before Ampere, fp32 with TF32 off): their NCHW
kernels are native. Grouped, transposed and 3-D convolutions go through the same cuDNN call and
are transposed like any other (channels-last 3-D is PyTorch's ``channels_last_3d``).

Memory: the transposed copies are temporaries of one convolution call (cuDNN workspace or
PyTorch's caching allocator), freed when it returns; saved activations stay NCHW, so the memory
model's saved activations and peak are unchanged by the format.

PyTorch's default is ``torch.contiguous_format``, i.e. NCHW (``torch.channels_last`` must be asked
for: ``model.to(memory_format=torch.channels_last)``), which is why ``nchw`` is the default here.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import UsageError
from .kernels import LayerKernels
from .shares import TensorShares, operand_elems
from .work import KernelWork

__all__ = ["MEMORY_FORMATS", "DEFAULT_MEMORY_FORMAT", "check_memory_format", "memory_format_assumption",
           "transposed_layers", "with_transposes"]

#: The activation layouts perfmodel prices: PyTorch's contiguous (NCHW) and channels-last (NHWC).
MEMORY_FORMATS: tuple[str, ...] = ("nchw", "nhwc")
#: PyTorch's default ``torch.contiguous_format``.
DEFAULT_MEMORY_FORMAT = "nchw"


def check_memory_format(fmt: object) -> str:
    """``fmt`` if perfmodel knows it, else a :class:`~perfmodel.errors.UsageError` naming the choices."""
    if not isinstance(fmt, str) or fmt not in MEMORY_FORMATS:
        raise UsageError(f"unknown memory format {fmt!r} (valid: {', '.join(MEMORY_FORMATS)})")
    return fmt


def memory_format_assumption(fmt: str) -> str:
    """The layout in words, for every output's assumptions and ``explain``."""
    how = ("cuDNN transposes each tensor-core convolution's tensors to NHWC and back (memory-bound "
           "kernels; PyTorch's default torch.contiguous_format)" if fmt == "nchw"
           else "tensor-core convolutions run natively on channels-last tensors (torch.channels_last)")
    return f"memory format {fmt}: {how}; set --memory-format to the run's (valid: {', '.join(MEMORY_FORMATS)})"


def transposed_layers(lk: LayerKernels, tensor_cores: bool, memory_format: str) -> np.ndarray:
    """Mask of the layers whose convolution calls transpose their tensors (module docstring)."""
    if memory_format == "nhwc" or not tensor_cores:
        return np.zeros(len(lk.conv), dtype=bool)
    return np.asarray(lk.conv & ~lk.depthwise, dtype=bool)


def with_transposes(work: KernelWork, lk: LayerKernels, scale: np.ndarray, tensor_cores: bool,
                    memory_format: str, half_precision: bool = True,
                    shares: TensorShares | None = None) -> KernelWork:
    """``work`` plus the transposes of NCHW tensor-core convolutions: per present GEMM kernel (the
    weight gradient only in fp16/bf16, ``half_precision``; module docstring), its two tensors
    (x and y, dy and dx, x and dy: per sample times ``scale``, each at its share of a
    filter/channel split, :func:`~.shares.operand_elems`, as the kernel's own operands) read and
    written once, and two launches; ``work`` itself where no layer transposes."""
    mask = transposed_layers(lk, tensor_cores, memory_format)
    if not mask.any():
        return work
    act = np.where(mask, operand_elems(lk, scale, shares), 0.0)  # x + y per call
    calls_f = (lk.n["fwd"] > 0).astype(float)
    calls_b = (lk.n["dgrad"] > 0).astype(float) + (lk.n["wgrad"] > 0) * float(half_precision)
    return dataclasses.replace(
        work,
        mem_elems_fwd=work.mem_elems_fwd + 2.0 * act * calls_f,
        mem_elems_bwd=work.mem_elems_bwd + 2.0 * act * calls_b,
        launches_fwd=work.launches_fwd + np.where(mask, 2.0 * calls_f, 0.0),
        launches_bwd=work.launches_bwd + np.where(mask, 2.0 * calls_b, 0.0),
    )

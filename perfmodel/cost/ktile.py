"""cuDNN 7's tensor-core forward: a K-tile of one filter position and 32 channels, or a CUDA-core kernel.

*The mechanism.* An implicit-GEMM convolution forward reduces over ``C*R*S``; the tensor-core
kernels of the Volta era cut that reduction into K-tiles of one filter position ``(r, s)`` and an
interval of channels (NVIDIA CUTLASS documentation, "Implicit GEMM Convolution",
``media/docs/implicit_gemm_convolution.md``: the filter and activation iterators advance over
``(r, s, c)`` with ``c`` innermost, one filter position per threadblock K-tile, and the kernels
assume ``C`` a multiple of the tile's channel extent), 32 channels on Volta (the K extent of every
threadblock shape of CUTLASS's ``GenerateSM70_TensorOp_884``: 256x128x32 ... 64x64x32; cuDNN 7's
kernels are the same family, ``volta_fp16_s884cudnn_fp16_256x128_ldg8_...``). A layer whose
(padded) channels per group are not a multiple of 32 computes ``ceil(C/32)*32`` channels per
filter position: a first layer of 1 or 3 channels (8 after the alignment padding of
:mod:`.tensor_core`) does 32/8 = 4 times the padded problem's multiply-adds, 32 times the
1-channel layer's own.

*Who runs it.* DeepBench's fp16 benchmark forces that kernel (``code/nvidia/conv_bench.cu`` @
``da81ba7``: ``CUDNN_TENSOR_OP_MATH`` and ``IMPLICIT_PRECOMP_GEMM``, "Tensor Op math only supports
IMPLICIT_PRECOMP_GEMM algorithm"), and its V100 first layers (cuDNN 7.6.2) take 69-95 TFLOP/s of
the K-tiled problem, against 4-22 TFLOP/s of the padded one: N16 1x161x700 -> 32 5x20/2 1.857 ms
(the 1-channel problem's FLOPs x 32 x 2, its 32 filters in a 64-wide tile: 95 TFLOP/s), 3x224x224
-> 64 7x7/2 0.466 ms (86), 3x224x224 -> 64 3x3 0.405 ms (73), 1x48x480 -> 16 3x3 0.187 ms (73;
perfmodel/data/KERNELS.md). A framework that lets cuDNN choose (``cudnnFind``: PyTorch's
``cudnn.benchmark``, TensorFlow's autotuning) also has the CUDA-core kernels of the same call:
16-bit tensors with an fp32 compute type run every algorithm (cuDNN Developer Guide,
``cudnnConvolutionForward``, "PSEUDO_HALF_CONFIG"), unpadded, at the fp32 rate (DeepBench's fp32
sheet: the 1-channel 5x20 layer above in 0.227 ms, 8x faster than its forced tensor-core call),
and keeps the faster. So where the K-tile wastes work the forward is the faster of the K-tiled
tensor-core kernel and the CUDA-core kernel the fp32 rules price (:func:`cuda_core_alternative`),
unless the algorithm is forced (``cuda_core_ratio`` 0: DeepBench's rows).

*Where.* cuDNN 7 only (``cudnn_major`` = :data:`KTILE_MAJOR`), on tensor cores, forward
kernels of convolutions (a transposed layer's data-gradient slot). DeepBench measured the waste
with cuDNN 7.6.2; later libraries have implicit-GEMM iterators for few channels (CUTLASS's
``IteratorAlgorithm::kFewChannels`` / ``kFixedChannels``, which load 1-8 channels of a filter
position per access instead of a whole K-tile of them) and first-layer tensor-core kernels
(``first_layer_wgrad_kernel`` in NVIDIA PyProf's list of tensor-core kernels, ``prof/tc.py``), and
no measured first layer of cuDNN 8 or 9 says which of them runs: those releases are priced as
before. The data gradient and weight gradient keep their shape rules: the documented mapping is
the forward's, and DeepBench's first layers have no data gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..hardware import Hardware
from ..hardware.profile import KernelParams
from .efficiency import TILES, gemm_shape_efficiency
from .kernels import LayerKernels
from .rounding import snap_whole
from .tensor_core import ChannelPads
from .tile_intensity import layer_half_intensity

__all__ = ["KTILE_CHANNELS", "KTILE_MAJOR", "ktile_factor", "cuda_core_ratio", "cuda_core_alternative"]

#: Channels of one filter position a Volta tensor-core K-tile holds (module docstring).
KTILE_CHANNELS = 32
#: The cuDNN major whose tensor-core forward runs these K-tiles (cuDNN 6 and older have no
#: tensor-core kernels; 8 and later: module docstring).
KTILE_MAJOR = 7


def ktile_factor(lk: LayerKernels, pads: ChannelPads, role: np.ndarray, tensor_cores: bool,
                 cudnn_major: int) -> np.ndarray:
    """Per layer, the factor that takes the forward's padded reduction (``C/g`` padded to 8, times
    ``R*S``: :func:`~.tensor_core.pad_slot`) to its K-tiled one, ``ceil((C/g)/32)*32`` channels per
    filter position, for convolution forwards (``role`` "fwd") on tensor cores under cuDNN 7;
    else 1."""
    ones = np.ones(len(lk.groups))
    if not tensor_cores or cudnn_major != KTILE_MAJOR:
        return ones
    per_group = np.maximum(np.where(lk.transposed, lk.c_out, lk.c_in) / np.maximum(lk.groups, 1), 1.0)
    tiled = np.ceil(snap_whole(per_group) / KTILE_CHANNELS) * KTILE_CHANNELS / (per_group * pads.c)
    return np.where((np.asarray(role) == "fwd") & lk.conv & ~lk.depthwise, np.maximum(tiled, 1.0), ones)


def cuda_core_ratio(hw: Hardware, precision: str) -> float:
    """Seconds per effective FLOP of a CUDA-core convolution over a tensor-core one at
    ``precision`` on ``hw``: ``(R eta_conv) / (R_fp32 eta_conv,fp32)``; 0 where the precision runs
    no tensor cores or the profile has no fp32 numbers (no alternative priced)."""
    peak, fp32 = hw.device.peak(precision), hw.device.peak_flops_per_s["fp32"]
    if peak <= fp32 or precision not in hw.compute or "fp32" not in hw.compute:
        return 0.0
    return float(peak * hw.compute[precision].conv / (fp32 * hw.compute["fp32"].conv))


def cuda_core_alternative(lk: LayerKernels, kp: KernelParams, mnk: tuple[np.ndarray, np.ndarray, np.ndarray],
                          groups: tuple[np.ndarray, np.ndarray], ratio: float) -> np.ndarray:
    """Effective FLOPs, at the tensor-core rate, of a forward run by cuDNN's CUDA-core implicit GEMM:
    the unpadded ``mnk`` on the CUDA-core tiles (:data:`~.efficiency.TILES`) and I_1/2, unsplit
    (cuDNN's forwards), at the fp32 rate (``ratio``: :func:`cuda_core_ratio`); ``groups``: (GEMMs per
    layer, groups one kernel covers)."""
    m, n, k = mnk
    every, per_kernel = groups
    rules: dict[str, Any] = {"split_k": False, "m_loads": lk.x_loads, "tile_set": TILES}
    eff = gemm_shape_efficiency(m, n, k, per_kernel, sms=kp.sm_count,
                                half_intensity=layer_half_intensity(kp, lk.conv, False), **rules)
    out: np.ndarray = 2 * every * m * n * k / eff * ratio
    return out

"""The tile intensity I_1/2 of each layer's GEMM-shaped kernels: cuBLAS GEMM or implicit-GEMM convolution.

:func:`~perfmodel.cost.efficiency.gemm_shape_efficiency` prices a block computing a ``tm x tn``
output tile at ``I / (I + I_1/2)`` of the asymptotic rate, ``I`` the tile's FMAs per operand
element it moves. ``I_1/2`` is where moving an operand element costs as much issue time as the
FMAs it feeds, so it grows with the work done per element loaded besides the load itself.

An implicit-GEMM convolution does more of that work than a GEMM: its lowered operand is never
formed, so every element it loads is addressed through the convolution's index arithmetic
(output position and filter tap to input position, ``(n, p, q, r, s, c) -> (n, h, w, c)``) and
predicated against the padding (NVIDIA CUTLASS documentation, "Implicit GEMM Convolution": the
activation and filter tile iterators compute these coordinates and a predicate per access;
cuDNN API reference, ``CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM``: precomputes some of
those indices into a workspace because they cost time in the main loop). A cuBLAS GEMM loads
dense tiles at a fixed leading dimension: pointer increments only (CUTLASS documentation,
"Efficient GEMM in CUDA"). So on CUDA cores a linear layer's GEMMs are priced with the
generation's GEMM I_1/2 (``tile_half_intensity_gemm``, fitted per generation on DeepBench's
cuBLAS rows by ``scripts/fit_kernel_params.py``; absent: the convolutions' value). Tensor-core
kernels keep the one I_1/2 their efficiencies were fitted with.
"""

from __future__ import annotations

import numpy as np

from ..hardware.profile import KernelParams

__all__ = ["layer_half_intensity"]


def layer_half_intensity(kp: KernelParams, conv: np.ndarray, tensor_cores: bool) -> np.ndarray:
    """Per layer, the I_1/2 of its GEMM-shaped kernels: the convolutions' where ``conv`` (cuDNN),
    the GEMMs' elsewhere (cuBLAS; the same unless the profile sets ``tile_half_intensity_gemm``)."""
    conv = np.asarray(conv, dtype=bool)
    return np.where(conv, kp.half_intensity(tensor_cores), kp.half_intensity(tensor_cores, gemm=True))

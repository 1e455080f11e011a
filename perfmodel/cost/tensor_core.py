"""Tensor-core channel padding: a convolution's C and K rounded up to 8 on every GEMM side they enter.

cuDNN runs a convolution on tensor cores only with input and output channels that are multiples of
8 in fp16; otherwise it pads the tensors to such counts (NVIDIA cuDNN Developer Guide, "Tensor Core
Operations", sections "Data and Filter Formats" and "Padding": "the cuDNN library will pad the
tensors as needed to enable Tensor Core operations"), and DeepBench's fp16 convolution benchmark
pads ``C`` and ``K`` to multiples of 8 itself before timing (``code/nvidia/conv_bench.cu``:
``pad_dim(padded_c, 8); pad_dim(padded_k, 8)``, perfmodel/data/KERNELS.md). The padded problem is
what runs, so a padded channel count enters every GEMM dimension built from it:

==============  =======================  ===========================
kernel          ``C`` (padded)           ``K`` (padded)
==============  =======================  ===========================
forward         reduction ``C*R*S``      columns ``K``
data gradient   columns ``C``            reduction ``K*R*S`` (x stride)
weight grad.    columns ``C*R*S``        rows ``K``
==============  =======================  ===========================

(implicit-GEMM views: NVIDIA cuDNN Developer Guide, "Convolution Formulas"; Chetlur et al.,
"cuDNN: Efficient Primitives for Deep Learning", 2014, section 3). A first layer of 3 channels
thus does 8/3 of its forward FLOPs, a 1-channel one 8 times. Linear layers are cuBLAS GEMMs: only
their columns keep the alignment rule of :func:`~.efficiency.pad_channels`, their reduction and rows
are left as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .efficiency import pad_channels
from .kernels import LayerKernels
from .rounding import snap_whole

__all__ = ["ChannelPads", "channel_pads", "pad_slot", "pad_sum_view"]


@dataclass(frozen=True)
class ChannelPads:
    """Per layer, padded over actual channels of the convolution underlying it (1 where unpadded)."""

    c: np.ndarray  # input channels C of the underlying convolution
    k: np.ndarray  # output channels K of the underlying convolution


def channel_pads(lk: LayerKernels, tensor_cores: bool) -> ChannelPads:
    """The padding of each layer's underlying ``C`` and ``K`` (a transposed layer's are its output's and
    input's: :func:`~perfmodel.cost.kernels.layer_kernels`); all ones off tensor cores."""
    pad_in = np.where(lk.c_in > 0, pad_channels(lk.c_in, tensor_cores) / np.maximum(lk.c_in, 1), 1.0)
    pad_out = np.where(lk.c_out > 0, pad_channels(lk.c_out, tensor_cores) / np.maximum(lk.c_out, 1), 1.0)
    return ChannelPads(c=np.where(lk.transposed, pad_out, pad_in), k=np.where(lk.transposed, pad_in, pad_out))


def pad_slot(lk: LayerKernels, pads: ChannelPads, slot: str, role: np.ndarray,
             mnk: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(m, n, k)`` of GEMM slot ``slot`` (running the underlying convolution's ``role`` kernel) after
    padding (table in the module docstring): the columns of every layer, the reduction (forward, data
    gradient) or rows (weight gradient) of convolutions only."""
    m, n, k = mnk
    fwd = role == "fwd"
    n = snap_whole(n * np.where(fwd, pads.k, pads.c))
    other = np.where(lk.conv, np.where(fwd, pads.c, pads.k), 1.0)
    if slot == "wgrad":
        return snap_whole(m * other), n, k
    return m, n, snap_whole(k * other)


def pad_sum_view(lk: LayerKernels, pads: ChannelPads) -> tuple[np.ndarray, np.ndarray]:
    """``(n, k)`` of the data gradient as a sum of matrix products (``C*R*S`` columns, ``K`` reduction:
    :func:`~perfmodel.cost.kernels.layer_kernels`'s ``dgrad_sum_n`` / ``dgrad_sum_k``) after padding."""
    return snap_whole(lk.dgrad_sum_n * pads.c), snap_whole(lk.dgrad_sum_k * pads.k)


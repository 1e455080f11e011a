"""The memory-bound kernels eager PyTorch (CUDA) launches for layer norm, group norm and softmax.

Per sample, ``n`` activation elements, ``r`` rows (layer norm: ``n / norm_elems``; group norm:
its groups), affine: the layer has a weight and bias (``params > 0``):

==================  ================================================  ================================================
kind                forward                                           backward
==================  ================================================  ================================================
layernorm           one kernel reads x, writes y and the row          ``dx`` kernel: read dy and x, write dx (``3n``);
                    statistics: ``2n`` (two kernels, x read twice:    affine: a gamma/beta kernel reads dy and x again
                    ``3n``, where ``norm_elems % 4 != 0``)            (``2n``); each reads the row statistics
groupnorm           moments (read x: ``n``); affine: per-channel      input gradients (read dy, x: ``2n``); affine: the
(spatial)           scale/shift (tiny); normalise (read x, write y:   ``rstd * gamma`` product (tiny); fused parameters
                    ``2n``): ``3n``, 3 launches (2 without affine)    (tiny); dx (read dy, x, write dx: ``3n``);
                                                                      affine: gamma/beta from the per-channel sums
                                                                      (tiny): ``5n``, 5 launches (3 without affine)
groupnorm (one      moments, normalise: ``3n``, 2 launches            fused parameters (read dy, x: ``2n``), dx
element per                                                           (``3n``); affine: gamma/beta (read dy, x:
channel)                                                              ``2n``): ``7n``, 3 launches (``5n``, 2 without)
softmax (and        one kernel reads x, writes y: ``2n``              one kernel reads y and dy, writes dx: ``3n``
log-softmax)
==================  ================================================  ================================================

Row statistics (mean and rstd, kept in fp32 at every precision: the accumulate type) are
:data:`STAT_BYTES` per row, written forward and read by each backward kernel that takes them.
The elements above are at the precision's size, except under ``torch.autocast`` (``amp``,
``bf16``), which runs these three ops in fp32: :mod:`.autocast_fp32` moves them at 4 bytes and
adds the casts autocast inserts around them.

Sources (PyTorch ``aten/src/ATen/native/cuda/``): ``layer_norm_kernel.cu``,
``LayerNormKernelImplInternal`` (``vectorized_layer_norm_kernel`` where ``N % vec_size == 0``,
``vec_size = 4``, and the buffers are aligned, else ``RowwiseMomentsCUDAKernel`` then
``LayerNormForwardCUDAKernel``) and ``LayerNormBackwardKernelImplInternal``
(``layer_norm_grad_input_kernel[_vectorized]``, then one ``GammaBetaBackward*CUDAKernel`` where
dgamma or dbeta is wanted; from 2.6 a second ``sum(0)`` pass only where rows exceed 65,536 with
a narrow normalised shape, not modelled); ``group_norm_kernel.cu``, ``GroupNormKernelImplInternal``
(``RowwiseMomentsCUDAKernel``, ``ComputeFusedParamsCUDAKernel``, a ``gpu_kernel`` elementwise pass;
``GroupNorm1dForward`` where ``HxW == 1``) and ``GroupNormBackwardKernelImplInternal``
(``ComputeInternalGradientsCUDAKernel``, the ``c1`` product, ``ComputeBackwardFusedParamsCUDAKernel``,
the dx pass, ``GammaBetaBackwardCUDAKernel1/2``; ``GroupNorm1dBackward`` where ``HxW == 1``);
``SoftMax.cu``, ``host_softmax`` (``dispatch_softmax_forward`` or ``cunn_SoftMaxForward``: one
kernel) and ``host_softmax_backward`` (one kernel on the output and its gradient). One op is
dispatched per layer forward (``native_layer_norm``, ``native_group_norm``, ``_softmax``) and one
backward: checked on CPU in tests/test_norm_kernels.py. An instance norm is imported as a group
norm of one channel per group (PyTorch runs it as a batch norm over ``N*C`` channels, whose passes
are the same ``3n`` / ``5n``).
"""

from __future__ import annotations

from ..network.layers import Layer, numel

__all__ = ["NORM_KINDS", "STAT_BYTES", "LN_VEC", "norm_kernels"]

#: Layer kinds priced here.
NORM_KINDS = ("layernorm", "groupnorm", "softmax")
#: Bytes of one row's statistics: mean and rstd, two fp32 values.
STAT_BYTES = 8
#: PyTorch's layer-norm forward runs its one vectorised kernel where the normalised size is a
#: multiple of this (``vec_size`` in ``layer_norm_kernel.cu``).
LN_VEC = 4

Kernels = tuple[float, float, float, float, int, int]


def _layernorm(layer: Layer, n: float, affine: bool) -> Kernels:
    width = int(layer.attr("norm_elems")) or int(n)
    rows = n / width
    stats = STAT_BYTES * rows
    one_kernel = width % LN_VEC == 0
    fwd, fwd_launches = (2 * n, 1) if one_kernel else (3 * n, 2)
    fwd_stats = stats if one_kernel else 2 * stats  # the moments kernel writes them, the normalise reads them
    bwd_kernels = 2 if affine else 1
    return fwd, (3 + 2 * affine) * n, fwd_stats, bwd_kernels * stats, fwd_launches, bwd_kernels


def _groupnorm(layer: Layer, n: float, affine: bool) -> Kernels:
    groups = max(int(layer.attr("groups")), 1)
    stats = STAT_BYTES * groups
    if numel(layer.out_shape[1:]) > 1:  # spatial: HxW > 1
        return 3 * n, 5 * n, stats, stats, 2 + affine, 3 + 2 * affine
    return 3 * n, (5 + 2 * affine) * n, stats, stats, 2, 2 + affine


def norm_kernels(layer: Layer) -> Kernels:
    """(fwd elems, bwd elems, fwd extra bytes, bwd extra bytes, fwd launches, bwd launches) per
    sample of a layer of :data:`NORM_KINDS` (table in the module docstring)."""
    n = float(layer.out_elems)
    affine = layer.params > 0
    if layer.kind == "layernorm":
        return _layernorm(layer, n, affine)
    if layer.kind == "groupnorm":
        return _groupnorm(layer, n, affine)
    if layer.kind == "softmax":
        return 2 * n, 3 * n, 0.0, 0.0, 1, 1
    raise ValueError(f"norm_kernels: layer {layer.name} is a {layer.kind}, not one of {NORM_KINDS}")

"""Tensor-core kernels' own shape rules: tiles, the forward's split-K, ALGO_1 data and weight gradients.

Three facts about the GEMM-shaped kernels cuBLAS and cuDNN run on tensor cores (amp, bf16, tf32),
which their CUDA-core kernels do not share:

* *Tiles of at least 64 x 64.* A tensor-core threadblock computes a tile of at least 64 x 64
  outputs: NVIDIA CUTLASS's kernel generator lists the threadblock shapes of its Volta tensor-op
  GEMMs and convolutions as 256x128, 128x256, 128x128, 256x64, 64x256, 64x128, 128x64 and 64x64
  (``tools/library/scripts/generator.py``, ``GenerateSM70_TensorOp_884``, ``NVIDIA/cutlass`` @
  ``059645530175c5ff466f3bf1eccbba5850495e49``; the Turing and Ampere generators start at 64x64
  too), and cuDNN 7's Volta kernels carry the same in their names
  (``volta_fp16_s884cudnn_fp16_256x128_ldg8_...``, ``..._256x64_...``, ``..._128x128_...`` in
  nvprof listings of fp16 training: ``NVIDIA/apex`` issue #666, ``pytorch/pytorch`` issue #54324).
  The 32- and 8-wide tiles of :data:`~.efficiency.TILES` are CUDA-core (SIMT) kernels'
  (``sgemm_32x32_sliced1x4``), so on tensor cores they are dropped and a small or narrow problem
  wastes more of its tiles. The tiles larger than 128x128 are not added: the tile intensity
  ``I_1/2`` the tensor-core efficiencies were fitted with (``tile_half_intensity_tensor_cores``)
  has 128x128 as its largest tile, and a 256x128 tile's higher intensity would raise the priced
  ceiling of every large GEMM by ~4% without a refit (A100 16384^3 fp16: 0.99 -> 0.95 of its
  measured time, perfmodel/data/KERNELS.md).
* *The forward may split its reduction.* cuDNN 7 ships split-K forward tensor-core kernels
  (``volta_fp16_s884cudnn_fp16_128x128_ldg8_splitK_relu_f2f_exp_small_nhwc_tn_v1``, a kernel name
  in ``pytorch/kineto`` @ ``afdaf5084cc24daf17fd8b13e09529b29bbfaae1``,
  ``tb_plugin/test/test_profiler.py``; ``relu`` marks cuDNN's forward epilogue): a forward whose
  tiles do not fill a wave is split over its ``C*R*S`` reduction like a GEMM
  (:func:`~.efficiency.gemm_shape_efficiency`'s split-K), where the CUDA-core forward kernels are
  priced unsplit.
* *The data gradient at unit stride is ALGO_1's implicit GEMM.* Under cuDNN 7 tensor-core math
  runs ``BWD_DATA_ALGO_1`` (and Winograd) only (NVIDIA cuDNN Developer Guide 7.x, "Tensor Core
  Operations"; DeepBench's ``conv_bench.cu`` forces it: "Tensor Op math only supports this
  algorithm"), so the sum of products (``ALGO_0``, :func:`~perfmodel.cost.work.kernel_work`'s
  other view) is not priced there. At stride > 1 the sum view stays, standing for cuDNN's strided
  kernels (perfmodel/data/KERNELS.md: the zero-inserted implicit GEMM alone prices them 4x slow).

* *The weight gradient is ALGO_1, deterministic: an unsplit tile is stored once.* Tensor-core
  math runs ``BWD_FILTER_ALGO_1`` (and Winograd) only (the same "Tensor Core Operations" list,
  unchanged in cuDNN 8 and 9's legacy API: "Supported Algorithms"), and ALGO_1 is deterministic:
  cuDNN's non-deterministic weight-gradient algorithms are ALGO_0 and ALGO_3, which add into dW
  with atomic operations (cuDNN API reference, ``cudnnConvolutionBwdFilterAlgo_t``; Developer
  Guide, "Reproducibility (Determinism)"). The fitted ``wgrad_tile_passes`` price a tile's
  stores as several passes over it: what the CUDA-core kernels ``cudnnFind`` picks among
  (ALGO_0 and ALGO_3 included) show on DeepBench's fp32 rows, where even unsplit tiles pay
  them (perfmodel/data/KERNELS.md, "Winograd's transformed filters": passes on split tiles
  only priced the fp32 1x1 layers on 7x7 outputs at 0.60 of measured). A deterministic kernel
  adds nothing into dW: a tile that holds its whole reduction writes it once, and only split-K
  partial tiles go through the workspace and its reduction pass, keeping the fitted passes.

Convolutions' weight gradients keep :data:`~.efficiency.TILES`: their split numbers
(``wgrad_tile_passes``, ``wgrad_max_split``, the tensor-core split efficiency) were fitted with that
list, and this tile set without refitting them prices DeepBench's V100 tensor-core weight
gradients at 53% MAPE instead of 38% (perfmodel/data/KERNELS.md, "Tensor-core tiles").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .efficiency import TILES

__all__ = ["TENSOR_CORE_TILES", "UNIT_STRIDE_MAX", "tensor_core_rules", "sum_view_tiles", "keep_sum_view",
           "wgrad_store_passes"]

#: Threadblock tiles (rows x columns) of tensor-core GEMM and implicit-GEMM kernels: those of
#: :data:`~.efficiency.TILES` at least 64 on each side (module docstring).
TENSOR_CORE_TILES: tuple[tuple[int, int], ...] = (
    (128, 128), (128, 64), (64, 128), (64, 64),
)
#: Largest implicit-over-sum FLOP ratio still read as unit stride: the ratio is the zero-insertion
#: factor, a product of strides (1 at unit stride, >= 2 otherwise), up to channel padding's rounding.
UNIT_STRIDE_MAX = 1.5


def tensor_core_rules(conv: np.ndarray, role: np.ndarray, tensor_cores: bool) -> dict[str, Any]:
    """Options of :func:`~.efficiency.gemm_shape_efficiency` for a forward or data-gradient GEMM slot
    whose layers run ``role`` (the underlying convolution's kernel): on tensor cores their tile set,
    and split-K for GEMMs and convolution forwards (not data gradients); nothing off tensor cores."""
    if not tensor_cores:
        return {}
    split = (np.asarray(role) == "fwd") | ~np.asarray(conv, dtype=bool)
    return {"tile_set": TENSOR_CORE_TILES, "split_k": split}


def sum_view_tiles(tensor_cores: bool) -> tuple[tuple[int, int], ...]:
    """The tile set of the data gradient's sum-of-products kernels."""
    return TENSOR_CORE_TILES if tensor_cores else TILES


def keep_sum_view(zero_insert: np.ndarray, conv: np.ndarray, tensor_cores: bool) -> np.ndarray:
    """Where the data gradient's sum-of-products view is priced: everywhere off tensor cores; on
    tensor cores only for strided convolutions (``zero_insert``: the implicit view's FLOPs over the
    sum view's, the zero-insertion factor) and for layers that are not cuDNN convolutions."""
    z = np.asarray(zero_insert, dtype=float)
    if not tensor_cores:
        return np.ones(z.shape, dtype=bool)
    return np.asarray((z > UNIT_STRIDE_MAX) | ~np.asarray(conv, dtype=bool))


def wgrad_store_passes(passes: np.ndarray, tensor_cores: bool) -> np.ndarray:
    """Store passes of an unsplit weight-gradient tile: ``passes`` (the fitted per-tile cost, 1 for
    cuBLAS GEMMs) off tensor cores; one on tensor cores (deterministic ALGO_1, module docstring)."""
    p = np.asarray(passes, dtype=float)
    return np.ones_like(p) if tensor_cores else p

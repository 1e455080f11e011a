"""Shape rules: how close a GEMM-shaped kernel of a given shape gets to the GPU's peak.

Everything here takes plain numbers or numpy arrays of problem sizes (shapes are always
numbers) and returns numbers: the *effective* work of a kernel, i.e. the FLOPs it would do
at the profile's asymptotic rate ``peak x efficiency``. The hardware symbols of ``explain``
(peaks, bandwidths, efficiencies) enter only where :mod:`perfmodel.cost.compute` divides
these works by them, so the same formulas print and evaluate.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "TILES",
    "MAX_CTAS_PER_SM",
    "gemm_shape_efficiency",
    "winograd_mask",
    "pad_channels",
    "zero_insert_factor",
    "winograd_gain",
    "WINOGRAD_TILE",
    "TENSOR_CORE_ALIGN",
    "im2col_loads",
]

#: Output tiles (rows x columns) the GEMM/implicit-GEMM kernels of cuBLAS and cuDNN choose
#: between; the library picks the one that finishes first for the shape (CUTLASS's
#: threadblock shapes 128x128, 128x64, 64x64, 64x32, 32x32: NVIDIA CUTLASS docs, "Efficient
#: GEMM in CUDA", hierarchical tiling; cuBLAS kernel names carry the same, e.g.
#: ``sgemm_128x128``, ``sgemm_32x32_sliced1x4`` in NeuSight's kernel traces). Both
#: orientations are listed: a library computes C or its transpose, whichever tiles better;
#: the 128x8 tiles stand for the GEMV-like kernels of very narrow products.
TILES: tuple[tuple[int, int], ...] = (
    (128, 128), (128, 64), (64, 128), (64, 64), (128, 32), (32, 128), (64, 32), (32, 64), (32, 32), (128, 8), (8, 128),
)

#: Thread blocks resident on one SM at a time: a 128x128 tile's block (256 threads of ~128
#: registers) takes half an SM's 64K registers, so two fit; smaller tiles fit
#: ``2 * 128*128 / (tm*tn)`` of them, up to this many (occupancy; NVIDIA CUDA C Best Practices
#: Guide, "Occupancy"; 64K 32-bit registers per SM on Pascal through Hopper).
MAX_CTAS_PER_SM = 4
#: Blocks of a 128x128 tile resident per SM.
CTAS_128X128 = 2

#: Tensor cores need channel counts that are multiples of 8 for fp16/bf16 (NVIDIA, "Deep
#: Learning Performance Guide: Convolutional layers", channels in and out a multiple of 8,
#: else cuDNN pads the tensors or falls back); perfmodel prices the padded problem.
TENSOR_CORE_ALIGN = 8


def _tile_table(sms: int, tiles: tuple[tuple[int, int], ...] = TILES) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per tile of ``tiles`` (column vectors): rows, columns, resident blocks per wave."""
    key = (int(sms), tiles)
    hit = _TABLES.get(key)
    if hit is None:
        tm = np.array([t[0] for t in tiles], dtype=float)[:, None]
        tn = np.array([t[1] for t in tiles], dtype=float)[:, None]
        ctas = np.clip(CTAS_128X128 * (128 * 128) // (tm * tn), 1, MAX_CTAS_PER_SM)
        hit = (tm, tn, sms * ctas)
        _TABLES[key] = hit
    return hit


_TABLES: dict[tuple[int, tuple[tuple[int, int], ...]], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def gemm_shape_efficiency(
    m: np.ndarray, n: np.ndarray, k: np.ndarray, groups: np.ndarray, sms: int, half_intensity: np.ndarray | float,
    split_k: np.ndarray | bool = True, store_passes: np.ndarray | float = 1.0, split_rate: float = 1.0,
    m_loads: np.ndarray | float = 1.0, n_loads: np.ndarray | float = 1.0, max_split: np.ndarray | float = np.inf,
    split_passes: np.ndarray | float = 2.0, spread: np.ndarray | bool = False,
    tile_set: tuple[tuple[int, int], ...] = TILES,
) -> np.ndarray:
    """Fraction of the asymptotic rate a (``groups`` x) ``m x n x k`` GEMM reaches.

    For each tile shape ``tm x tn`` of ``tile_set`` (:data:`TILES` unless the kernels have their own
    set, e.g. tensor cores': :mod:`.tensor_core_tiles`; the library picks the fastest):

    * *tile quantisation*: the output is covered by ``ceil(m/tm) * ceil(n/tn)`` whole tiles
      per group, the padding is wasted work;
    * *wave quantisation*: tiles run in waves of ``sms x ctas`` resident blocks (:data:`CTAS_128X128`,
      :data:`MAX_CTAS_PER_SM`); the last
      partial wave leaves SMs idle (NVIDIA, "Deep Learning Performance Guide: Matrix
      Multiplication Background", sections "Tile quantization" and "Wave quantization");
    * *split-K* (where ``split_k``: GEMMs and weight gradients; cuDNN's forward and
      data-gradient convolution kernels do not split their reduction): when the tiles cannot
      fill one wave, the reduction ``k`` is split into slices that run as extra blocks and are
      summed (CUTLASS ``GemmSplitKParallel``; cuDNN's weight-gradient kernels do the same over
      the N*P*Q reduction), into as many slices as fill one wave where that is faster than
      not splitting (short slices lose to their stores: *tile intensity* below); a
      split kernel runs at ``split_rate`` of
      an unsplit one (its slices' partial tiles go through a workspace and a reduction pass:
      CUTLASS ``GemmSplitKParallel`` is a partitioned GEMM plus a reduction kernel), 1 for
      cuBLAS GEMMs, the profile's ``wgrad_split_efficiency`` for cuDNN weight gradients;
    * *split cap and spread* (weight gradients): a split uses at most ``max_split`` slices per
      tile; with ``spread``, the ``last`` blocks of a partial last wave are spread evenly over
      the SMs (the block scheduler fills idle SMs first) and share each SM only with each other,
      so that wave takes ``ceil(last / sms) / ctas`` of a full one instead of a whole one;
    * *tile intensity*: a block computing a ``tm x tn`` tile over a reduction of ``kb`` (``k``
      or its split-K slice) does ``tm*tn*kb`` FMAs and moves ``(m_loads*tm + n_loads*tn)*kb``
      operands in (``*_loads``: elements loaded per element of the operand, below 1 for a
      lowered convolution input whose replicas come from on-chip memory: :func:`im2col_loads`)
      and its ``tm*tn`` output tile out, ``store_passes`` times (1; 2 where a tile is atomically
      added into its destination; ``split_passes`` for split-K slices, whose partial tiles are
      written and read back), so its intensity is
      ``I = tm*tn*kb / ((m_loads*tm + n_loads*tn)*kb + store_passes*tm*tn)``: a short reduction
      (a 1x1 convolution over few channels) is bound by its epilogue, as CUTLASS's
      documentation notes of GEMMs with small K ("Efficient GEMM in CUDA": the epilogue's
      cost is amortised over the mainloop's K iterations). The rate is ``I / (I + I_1/2)``
      (the roofline of one tile; Williams, Waterman & Patterson, "Roofline", CACM 2009),
      ``I_1/2 = half_intensity`` a per-generation parameter (per problem: cuBLAS GEMMs and
      implicit-GEMM convolutions may differ, :mod:`.tile_intensity`).
    """
    m = np.asarray(m, dtype=float)[None]
    n = np.asarray(n, dtype=float)[None]
    k = np.maximum(np.asarray(k, dtype=float), 1.0)[None]
    groups = np.asarray(groups, dtype=float)[None]
    half = np.asarray(half_intensity, dtype=float)[None]
    ml, nl = np.asarray(m_loads, dtype=float)[None], np.asarray(n_loads, dtype=float)[None]
    cap = np.maximum(np.floor(np.asarray(max_split, dtype=float)), 1.0)[None]
    spread_at = np.asarray(spread, dtype=bool)[None]
    passes = np.asarray(store_passes, dtype=float)[None], np.asarray(split_passes, dtype=float)[None]
    tm, tn, slots = _tile_table(sms, tile_set)  # one row per tile, broadcast over problems
    useful = groups * m * n * k
    tiles = np.maximum(groups * np.ceil(m / tm) * np.ceil(n / tn), 1.0)
    most = np.where(split_k, np.clip(np.floor(slots / tiles), 1.0, np.minimum(k, cap)), 1.0)
    best = np.zeros(np.broadcast_shapes(np.shape(useful), np.shape(tiles))[1:])
    for split in (most, np.ones_like(most)):  # the library splits only where that is faster
        waves = _waves(tiles * split, slots, sms, spread_at)
        kb = np.ceil(k / split)
        # executed work: every slot of every wave does a full tile of kb, each SM shared by the
        # blocks resident on it
        executed = waves * slots * tm * tn * kb
        stores = np.where(split > 1, passes[1], passes[0])
        intensity = tm * tn * kb / ((ml * tm + nl * tn) * kb + stores * tm * tn)
        rate = intensity / (intensity + half) * np.where(split > 1, split_rate, 1.0)
        best = np.maximum(best, np.max(useful / executed * rate, axis=0))
    return np.asarray(np.clip(best, 1e-6, 1.0))


def _waves(blocks: np.ndarray, slots: np.ndarray, sms: int, spread: np.ndarray) -> np.ndarray:
    """Waves of ``slots`` resident blocks that ``blocks`` take: whole waves, the last partial one
    counted whole, or (where ``spread``) as ``ceil(last / sms)`` blocks per SM of ``slots / sms``."""
    full = np.floor(blocks / slots)
    last = blocks - full * slots
    return np.asarray(np.where(spread, full + np.ceil(last / sms) * sms / slots, np.ceil(blocks / slots)))


def winograd_mask(
    shape_ok: np.ndarray, groups: np.ndarray, c: np.ndarray, k: np.ndarray, tensor_cores: bool, min_channels: float
) -> np.ndarray:
    """Where cuDNN's Winograd/FFT kernels run: 3x3 and 5x5 stride-1, undilated convolutions
    (``shape_ok``) whose call is ungrouped (``groups``: the groups one call covers, 1 for a group
    run as its own call: :mod:`perfmodel.cost.grouped`) with at least ``min_channels`` channels
    (``c``, ``k``: per call) in and out, in fp32 on
    CUDA cores (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016:
    F(4x4, 3x3) does 4x fewer multiplies than direct convolution; cuDNN picks WINOGRAD /
    WINOGRAD_NONFUSED / FFT_TILING for such layers in DeepBench's V100/P100 fp32 results and in
    NeuSight's kernel traces, and implicit GEMM for 3-channel first layers). With tensor cores
    (amp/bf16/tf32) cuDNN runs implicit GEMM, so no gain is taken. Where the mask holds,
    :func:`perfmodel.cost.work.kernel_work` still prices the faster of Winograd (the gain plus
    the transforms) and implicit GEMM, so few channels fall back to the latter smoothly."""
    if tensor_cores:
        return np.zeros(np.shape(shape_ok), dtype=bool)
    return np.asarray(
        np.asarray(shape_ok, dtype=bool)
        & (np.asarray(groups) == 1)
        & (np.asarray(c) >= min_channels)
        & (np.asarray(k) >= min_channels)
    )


#: Output tile of cuDNN's fused Winograd kernels, F(4x4, 3x3) (Lavin & Gray 2016, section 4):
#: a P x Q output is covered by ceil(P/4) x ceil(Q/4) tiles, so small feature maps waste part
#: of each tile (7x7: 64 computed outputs for 49).
WINOGRAD_TILE = 4


def winograd_gain(gain: float, out_h: np.ndarray, out_w: np.ndarray) -> np.ndarray:
    """The Winograd FLOP gain on a ``out_h x out_w`` output after tile padding."""
    t = WINOGRAD_TILE
    used = np.asarray(out_h, dtype=float) * np.asarray(out_w, dtype=float)
    covered = np.ceil(np.asarray(out_h) / t) * np.ceil(np.asarray(out_w) / t) * t * t
    return np.asarray(np.maximum(1.0, gain * used / np.maximum(covered, 1.0)))


def pad_channels(c: np.ndarray, tensor_cores: bool) -> np.ndarray:
    """Channels rounded up to :data:`TENSOR_CORE_ALIGN` under tensor cores, else unchanged."""
    c = np.asarray(c, dtype=float)
    if not tensor_cores:
        return c
    return np.ceil(c / TENSOR_CORE_ALIGN) * TENSOR_CORE_ALIGN


def zero_insert_factor(stride: tuple[int, ...]) -> float:
    """Work of a strided convolution's data gradient computed as an implicit GEMM over the
    zero-inserted output gradient, over its forward FLOPs: ``prod(s)``.

    The data gradient of a convolution of stride ``s`` is the stride-1 convolution of the output
    gradient with ``s - 1`` zeros inserted between its elements along each axis (Dumoulin & Visin,
    "A guide to convolution arithmetic for deep learning", arXiv:1603.07285, 2016, section 4.5):
    one dot product of ``K*R*S`` per input-gradient position, ``prod(s)`` times the forward's
    positions. cuDNN's ``CUDNN_CONVOLUTION_BWD_DATA_ALGO_1`` is such an implicit GEMM; it
    multiplies the inserted zeros like any other operand (DeepBench's P100 5x10 stride-2 data
    gradients with C = K = 32, whose GEMM shape is the forward's, take 3.5-4.1x its time). The
    alternative that skips them, ``ALGO_0``'s sum of products, pays atomic adds instead
    (:func:`perfmodel.cost.work.kernel_work` prices the faster of the two)."""
    return float(np.prod([max(s, 1) for s in stride]))


def im2col_loads(kernel: tuple[int, ...], stride: tuple[int, ...]) -> tuple[float, float]:
    """Elements loaded per element of a convolution's lowered (im2col) operand: (the input, in
    the forward and weight gradient; the output gradient, in the data gradient).

    Lowering replicates each input element into the columns of every filter tap that reads it
    (Chetlur et al., "cuDNN: Efficient Primitives for Deep Learning", 2014, section 3.1: the
    lowered matrix is up to ``R*S`` times the input); an implicit-GEMM kernel loads each
    element once and serves its replicas from on-chip memory, so a tile loads ``1/(R*S)`` of its
    lowered operand at stride 1. Along the outer spatial axes a stride ``s`` leaves
    ``min(R, s) / R`` of a window's rows new to the next window; along the contiguous last
    axis the ``s - 1`` skipped elements between two windows share their 32-byte sectors with
    the used ones and are loaded too (NVIDIA CUDA C++ Best Practices Guide, "Strided
    Accesses"), so that axis costs ``s / S``: a 1x1 stride-2 convolution loads 2 elements per
    used one. The data gradient's lowered output gradient is dense (its zero-inserted
    positions are never loaded): ``1 / (R*S)``."""
    x = 1.0
    for i, (r, s) in enumerate(zip(kernel, stride, strict=False)):
        x *= (s if i == len(kernel) - 1 else min(r, s)) / r
    return x, 1.0 / float(np.prod(kernel))

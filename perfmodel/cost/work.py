"""The work of every kernel of every layer at a batch size: effective FLOPs, bytes, launches.

Numbers only (numpy arrays over layers): the shape rules of :mod:`perfmodel.cost.efficiency`
applied to the kernels of :mod:`perfmodel.cost.kernels` at ``batch`` samples on a tile.
:mod:`perfmodel.cost.compute` divides these by the hardware's rates (numbers or symbols).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import partial
from typing import Any

import numpy as np

from ..hardware.profile import KernelParams
from .autocast_fp32 import Memory, autocast_memory
from .depthwise import depthwise_flops
from .efficiency import TILES, gemm_shape_efficiency, winograd_gain, winograd_mask
from .formulas import Num
from .grouped import DEFAULT_CUDNN_MAJOR, extra_launches, kernel_groups
from .kernels import MM_SLOTS, LayerKernels, slot_roles
from .ktile import cuda_core_alternative, ktile_factor
from .rounding import snap_whole
from .shares import TensorShares, operand_elems, per_gpu_kernels
from .tensor_core import ChannelPads, channel_pads, pad_slot, pad_sum_view
from .tensor_core_tiles import keep_sum_view, sum_view_tiles, tensor_core_rules, wgrad_store_passes
from .tile_intensity import layer_half_intensity

__all__ = ["KernelWork", "kernel_work", "tile_scale", "EFF_FLOOR", "window_path_loads", "SECTOR_BYTES"]

#: Smallest efficiency a kernel is priced at (as gemm_shape_efficiency's own floor): keeps every
#: time finite for any in-range profile fraction.
EFF_FLOOR = 1e-6


@dataclass(frozen=True)
class KernelWork:
    """Per layer, for one micro-batch on one tile.

    ``flops[s]``: effective FLOPs of GEMM slot ``s`` at the matmul peak (direct FLOPs divided
    by the shape efficiency, the Winograd gain, and for weight gradients their efficiency);
    ``cc_flops[s]``: effective FLOPs of depthwise kernels at the fp32 (CUDA-core) peak
    (:func:`~perfmodel.cost.depthwise.depthwise_flops`);
    ``mm_elems[s]``: activation elements the GEMM kernel reads and writes (with the layer's
    weights, its roofline floor); ``mem_elems_fwd/bwd`` and ``mem_extra_bytes_fwd/bwd``: what
    the memory-bound kernels move (elements at the precision, plus indices and masks in bytes);
    ``launches_fwd/bwd``: kernels; ``host_ops_fwd/bwd``: ops the host dispatches. Arrays over
    layers, or Python floats (or sympy expressions) for one layer (:meth:`at`).
    """

    flops: dict[str, Num]
    cc_flops: dict[str, Num]
    mm_elems: dict[str, Num]
    mem_elems_fwd: Num
    mem_elems_bwd: Num
    mem_extra_bytes_fwd: Num
    mem_extra_bytes_bwd: Num
    launches_fwd: Num
    launches_bwd: Num
    host_ops_fwd: Num
    host_ops_bwd: Num
    #: loads on the critical path of the forward window kernels (:func:`window_path_loads`),
    #: priced at the memory latency; a number at the micro-batch the work was taken at
    window_loads_fwd: Num = 0.0

    def per_sample(self, batch: float) -> KernelWork:
        """The batch-proportional fields divided by ``batch`` (for a symbolic batch factor)."""
        d = {f: getattr(self, f) for f in ("launches_fwd", "launches_bwd", "host_ops_fwd", "host_ops_bwd")}
        return KernelWork(
            flops={s: x / batch for s, x in self.flops.items()},
            cc_flops={s: x / batch for s, x in self.cc_flops.items()},
            mm_elems={s: x / batch for s, x in self.mm_elems.items()},
            mem_elems_fwd=self.mem_elems_fwd / batch, mem_elems_bwd=self.mem_elems_bwd / batch,
            mem_extra_bytes_fwd=self.mem_extra_bytes_fwd / batch,
            mem_extra_bytes_bwd=self.mem_extra_bytes_bwd / batch, **d,
            window_loads_fwd=self.window_loads_fwd,
        )

    def where(self, mask: np.ndarray, other: KernelWork) -> KernelWork:
        """Per layer, ``other``'s work where ``mask`` holds and this one's elsewhere (arrays over layers)."""
        m = np.asarray(mask, dtype=bool)
        d: dict[str, Any] = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            d[f.name] = ({s: np.where(m, b[s], x) for s, x in a.items()} if isinstance(a, dict)
                         else np.where(m, b, a))
        return KernelWork(**d)

    def at(self, i: int) -> KernelWork:
        """Layer ``i`` alone, as Python floats (to build its sympy expression)."""
        slots: dict[str, Any] = {
            f: {s: float(x[i]) for s, x in getattr(self, f).items()} for f in ("flops", "cc_flops", "mm_elems")
        }
        scalars: dict[str, Any] = {f: float(getattr(self, f)[i]) for f in (
            "mem_elems_fwd", "mem_elems_bwd", "mem_extra_bytes_fwd", "mem_extra_bytes_bwd",
            "launches_fwd", "launches_bwd", "host_ops_fwd", "host_ops_bwd", "window_loads_fwd")}
        return KernelWork(**slots, **scalars)


def kernel_work(
    lk: LayerKernels,
    kp: KernelParams,
    scale: np.ndarray,
    tensor_cores: bool,
    half_precision: bool = False,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    shares: TensorShares | None = None,
    loop_groups: bool = False,
    autocast: str = "",
    cuda_core_ratio: float = 0.0,
) -> KernelWork:
    """The work of every kernel when each layer's per-sample counts are multiplied by ``scale``
    (the micro-batch times the fraction of the layer's extent its tile holds), on one GPU of a
    filter/channel split where ``shares`` (:mod:`.shares`): the GEMM and depthwise kernels are
    those of the smaller layer that GPU runs (:func:`~.shares.per_gpu_kernels`: ``ceil(F/n)``
    filters or ``ceil(C/n)`` input channels on the GEMM side they enter, padded as such on tensor
    cores), moving each tensor at its share (:func:`~.shares.operand_elems`), and the memory-bound
    and window kernels, which act on the output, ``shares.y`` of it.

    ``tensor_cores``: the precision runs on tensor cores (channels padded, :mod:`perfmodel.cost.tensor_core`;
    no Winograd);
    ``half_precision``: 16-bit activations, whose CUDA-core (depthwise) kernels do two outputs'
    work per fp32 lane (packed half2; :mod:`perfmodel.cost.depthwise`); ``cudnn_major``: the
    cuDNN whose grouped convolutions run one kernel per group before 8 (:mod:`perfmodel.cost.grouped`);
    ``loop_groups``: every grouped layer runs as a loop of ordinary calls, one per group, whatever
    the era (the alternative to cuDNN's one kernel from cuDNN 8, :func:`~.grouped.may_loop`);
    ``autocast``: ``torch.autocast``'s 16-bit type, if any (:func:`_memory_kernels`);
    ``cuda_core_ratio``: a CUDA-core convolution's seconds per effective FLOP over a tensor-core one
    (:func:`~.ktile.cuda_core_ratio`), for cuDNN 7's choice of a CUDA-core forward where its
    tensor-core K-tiles waste work (:mod:`.ktile`); 0: the tensor-core algorithm is forced
    (DeepBench's fp16 rows), no alternative.
    """
    scale = np.asarray(scale, dtype=float)
    out_scale = scale if shares is None else scale * shares.y
    lk_all, lk = lk, lk if shares is None else per_gpu_kernels(lk, shares)
    bmm = lk.gemm_batch > 0  # batched GEMMs (batched_matmul.py): the micro-batch multiplies their count
    groups = np.where(bmm, lk.gemm_batch * scale, lk.groups)  # and one kernel's tiles cover them all
    kg = np.where(bmm, groups, kernel_groups(lk.groups, lk.depthwise, cudnn_major, loop_groups))
    # a group run as its own call is an ordinary convolution of C/g -> K/g channels (grouped.py)
    wino = winograd_mask(lk.winograd_shape, kg, lk.c_in / lk.groups, lk.c_out / lk.groups, tensor_cores,
                         kp.winograd_min_channels)
    gain = np.where(wino, winograd_gain(kp.winograd_gain, lk.out_h, lk.out_w), 1.0)
    pads = channel_pads(lk, tensor_cores)  # the underlying convolution's C and K, padded on tensor cores
    flops: dict[str, np.ndarray] = {}
    cc: dict[str, np.ndarray] = {}
    dw = depthwise_flops(lk, kp, scale, half_precision)
    operands = operand_elems(lk_all, scale, shares)
    mm_elems: dict[str, np.ndarray] = {}
    for s in MM_SLOTS:
        present = lk.n[s] > 0
        flops[s] = np.where(present & ~lk.depthwise,
                            _gemm_flops(lk, kp, s, scale, tensor_cores, (bmm, groups, kg), pads, (wino, gain),
                                        (cudnn_major, cuda_core_ratio)), 0.0)
        # depthwise kernels run on CUDA cores, priced per output element (perfmodel.cost.depthwise)
        cc[s] = np.where(present & lk.depthwise, dw[s], 0.0)
        mm_elems[s] = np.where(present, operands, 0.0)
    ef, eb, xf, xb, lf, lb = _memory_kernels(lk, autocast, out_scale, scale if shares is None else scale * shares.x)
    return KernelWork(
        flops=flops,
        cc_flops=cc,
        mm_elems=mm_elems,
        mem_elems_fwd=ef, mem_elems_bwd=eb, mem_extra_bytes_fwd=xf, mem_extra_bytes_bwd=xb,
        launches_fwd=lf + extra_launches(lk.groups, lk.depthwise, cudnn_major, lk.n["fwd"] > 0, loop_groups),
        launches_bwd=lb + lk.grad_sums_bwd + extra_launches(
            lk.groups, lk.depthwise, cudnn_major, (lk.n["dgrad"] > 0).astype(float) + (lk.n["wgrad"] > 0),
            loop_groups),
        host_ops_fwd=lk.host_ops_fwd,
        host_ops_bwd=lk.host_ops_bwd + lk.grad_sums_bwd,
        window_loads_fwd=window_path_loads(lk, kp, out_scale, 2.0 if half_precision else 4.0),
    )


def _gemm_flops(lk: LayerKernels, kp: KernelParams, s: str, scale: np.ndarray, tensor_cores: bool,
                batched: tuple[np.ndarray, np.ndarray, np.ndarray], pads: ChannelPads,
                winograd: tuple[np.ndarray, np.ndarray], ktile: tuple[int, float]) -> np.ndarray:
    """Effective FLOPs (FLOPs over efficiency) of GEMM slot ``s`` of every layer (:func:`kernel_work`);
    ``batched``: (product layers, GEMMs per layer, groups one kernel covers), ``winograd``: (where
    Winograd may run, its gain), ``ktile``: (cuDNN major, CUDA-core ratio) of :mod:`.ktile`'s rule."""
    bmm, groups, kg = batched
    wino, gain = winograd
    m = np.where(lk.m_batch[s] & ~bmm, lk.m[s] * scale, lk.m[s])
    k = np.where(lk.m_batch[s] | bmm, lk.k[s], lk.k[s] * scale)
    role = slot_roles(lk, s)  # which of the underlying convolution's kernels slot s runs
    unpadded = (m, lk.n[s], k)
    m, n, k = pad_slot(lk, pads, s, role, unpadded)
    tiled = ktile_factor(lk, pads, role, tensor_cores, ktile[0])  # cuDNN 7's 32-channel K-tiles (ktile.py)
    k = snap_whole(k * tiled)
    direct = 2 * groups * m * n * k
    eff = _slot_efficiency(lk, kp, s, role, (m, n, k), tensor_cores, kg, pads, direct)
    # a profile's fractions may be as small as it likes; below EFF_FLOOR they price as EFF_FLOOR (finite)
    wgrad_eff = max(kp.wgrad_efficiency_tensor_cores if tensor_cores else kp.wgrad_efficiency, EFF_FLOOR)
    implicit = direct / eff / (wgrad_eff if s == "wgrad" else 1.0)
    # Winograd: the reduced GEMMs plus the transforms, whose cost grows with C + K per output
    # pixel (npq: the GEMM's batch-growing side); cudnnFind keeps the faster of the two
    npq = k if s == "wgrad" else m
    fast = direct / (eff * gain) + kp.winograd_transform_flops * (lk.c_in + lk.c_out) * npq
    result: np.ndarray = np.where(wino, np.minimum(implicit, fast), implicit)
    if ktile[1] > 0 and np.any(tiled > 1):  # cudnnFind may take a CUDA-core forward instead
        cuda_core = cuda_core_alternative(lk, kp, unpadded, (groups, kg), ktile[1])
        result = np.where(tiled > 1, np.minimum(result, cuda_core), result)
    return result


def _memory_kernels(lk: LayerKernels, autocast: str, out_scale: np.ndarray, in_scale: np.ndarray) -> Memory:
    """Every layer's memory-bound kernels: elements moved at the precision and extra bytes, forward
    and backward (the layer's own kernels and autograd's sums of the gradients into its output,
    :mod:`.gradient_sums`, at ``out_scale`` times their per-sample counts), and launches; the layers
    ``torch.autocast`` to ``autocast`` runs in fp32 at 4 bytes per element, and its casts of their
    inputs at ``in_scale`` (:mod:`perfmodel.cost.autocast_fp32`; ``""``: no autocast)."""
    mem = (lk.mem_elems_fwd, lk.mem_elems_bwd, lk.mem_bytes_extra_fwd, lk.mem_bytes_extra_bwd, lk.launches_fwd,
           lk.launches_bwd)
    (ef, eb, xf, xb, lf, lb), cast = (mem, 0.0) if lk.autocast is None else autocast_memory(lk.autocast, mem, autocast)
    return (ef * out_scale, (eb + lk.grad_sum_elems_bwd) * out_scale, xf * out_scale + cast * in_scale,
            xb * out_scale + cast * in_scale, lf, lb)


def _slot_efficiency(lk: LayerKernels, kp: KernelParams, s: str, role: np.ndarray,
                     mnk: tuple[np.ndarray, np.ndarray, np.ndarray], tensor_cores: bool, kg: np.ndarray,
                     pads: ChannelPads, direct: np.ndarray) -> np.ndarray:
    """The shape efficiency of GEMM slot ``s`` (of the groups one kernel covers, ``kg``); for a
    data gradient the better of the implicit GEMM and the sum of products, as cuDNN picks."""
    m, n, k = mnk
    half = layer_half_intensity(kp, lk.conv, tensor_cores)  # the shape rule's I_1/2 per layer
    split_eff = kp.wgrad_split_efficiency_tensor_cores if tensor_cores else kp.wgrad_split_efficiency
    shape = partial(gemm_shape_efficiency, m, n, k, sms=kp.sm_count, half_intensity=half,
                    split_k=~lk.conv if s != "wgrad" else True, **_slot_rules(lk, kp, s, role, split_eff, tensor_cores))
    if s == "wgrad":
        wgrad: np.ndarray = shape(groups=kg)
        return wgrad
    # tensor cores: their own tiles, a forward that may split its reduction, ALGO_0 only at stride > 1
    # (tensor_core_tiles.py)
    eff: np.ndarray = shape(groups=kg, **tensor_core_rules(lk.conv, role, tensor_cores))
    sum_eff, zero_insert = _dgrad_sum_efficiency(lk, m, direct, pads, kp, kg, half, sum_view_tiles(tensor_cores))
    alt = np.where((role == "dgrad") & keep_sum_view(zero_insert, lk.conv, tensor_cores), sum_eff, 0.0)
    best: np.ndarray = np.maximum(eff, alt)
    return best


def _slot_rules(lk: LayerKernels, kp: KernelParams, s: str, role: np.ndarray, split_eff: float,
                tensor_cores: bool) -> dict[str, Any]:
    """The shape-rule options of GEMM slot ``s`` (running ``role``, :func:`~.kernels.slot_roles`): operand loads
    of the lowered convolution operand (the forward's and data gradient's ``m`` side, the weight gradient's ``n`` side),
    and for weight gradients their split-K rules (:func:`~perfmodel.cost.efficiency.gemm_shape_efficiency`):
    at most ``wgrad_max_split`` slices, grids smaller than a wave spread over the SMs, and an
    output tile that costs ``wgrad_tile_passes`` passes (cuDNN's weight-gradient kernels add
    their partial tiles into dW through a workspace reduction or atomic adds: cuDNN API
    reference, ``cudnnConvolutionBwdFilterAlgo_t``, ALGO_0 and ALGO_3 "non-deterministic"); on
    tensor cores deterministic ALGO_1, whose unsplit tiles are stored once
    (:func:`~.tensor_core_tiles.wgrad_store_passes`)."""
    if s == "wgrad":  # cuDNN's convolution kernels; linear layers' are cuBLAS GEMMs
        passes = np.where(lk.conv, kp.wgrad_tile_passes, 1.0)
        return {"n_loads": lk.x_loads, "split_rate": split_eff,
                "store_passes": wgrad_store_passes(passes, tensor_cores),
                "max_split": np.where(lk.conv, kp.wgrad_max_split, np.inf),
                "split_passes": np.where(lk.conv, passes, 2.0), "spread": lk.conv}
    return {"m_loads": np.where(role == "fwd", lk.x_loads, lk.dy_loads)}


def _dgrad_sum_efficiency(lk: LayerKernels, m: np.ndarray, direct: np.ndarray, pads: ChannelPads,
                          kp: KernelParams, kg: np.ndarray, half: np.ndarray,
                          tiles: tuple[tuple[int, int], ...] = TILES) -> tuple[np.ndarray, np.ndarray]:
    """Shape efficiency of the data gradient as a sum of matrix products (``dgrad_sum_n`` x
    ``dgrad_sum_k``, :func:`~perfmodel.cost.kernels.layer_kernels`), relative to the implicit
    view's FLOPs ``direct``: it does the forward's FLOPs, not the zero-inserted data gradient's
    (:func:`~perfmodel.cost.efficiency.zero_insert_factor`), and adds every element of its
    ``m x n`` product into the input gradient with an atomic add (cuDNN API reference,
    ``cudnnConvolutionBwdDataAlgo_t``: ALGO_0 is non-deterministic): its output tiles pay two
    store passes (read, add, write), and each atomic costs ``dgrad_atomic_flops`` FLOP-equivalents
    at the matmul peak on top (atomics resolve in the L2 cache, at its atomic throughput, not the
    SMs'; NVIDIA CUDA C++ Programming Guide, "Atomic Functions"). Per FLOP that is
    ``dgrad_atomic_flops / (2 K)``: a product over few filters ``K`` (a 1-channel first layer's
    ``n = R*S`` columns, DeepSpeech's 32-filter 5x10 layers) is bound by its atomics. Zero where
    the layer has no such view; ``kg`` the groups one kernel covers, ``half`` the shape rule's I_1/2,
    ``tiles`` the kernels' tile set. Also returns the implicit view's FLOPs over this view's (the
    zero-insertion factor of a strided data gradient, 1 at unit stride and where there is no view)."""
    n, k = pad_sum_view(lk, pads)
    has = n > 0
    n, k = np.where(has, n, 1.0), np.where(has, k, 1.0)
    shape = partial(gemm_shape_efficiency, m, n, k, sms=kp.sm_count, half_intensity=half, split_k=False,
                    store_passes=2.0, tile_set=tiles)
    eff = shape(groups=kg)
    own = 2 * lk.groups * m * n * k
    seconds_like = own / eff + kp.dgrad_atomic_flops * lk.groups * m * n  # effective FLOPs
    # the caller divides the implicit view's FLOPs by this: implicit / own effective FLOPs
    zero_insert = np.where(has, direct / np.maximum(own, 1.0), 1.0)
    return np.where(has, direct / np.maximum(seconds_like, 1.0), 0.0), zero_insert


#: Bytes of one sector, the unit in which L1 requests lines from L2 and DRAM (NVIDIA CUDA C++
#: Best Practices Guide, "Coalesced Access to Global Memory": a warp's loads are served as
#: 32-byte transactions; 32 threads reading consecutive 4-byte words need 4 of them).
SECTOR_BYTES = 32.0
WARP = 32.0


def window_path_loads(lk: LayerKernels, kp: KernelParams, scale: np.ndarray, elem_bytes: float) -> np.ndarray:
    """Loads on the critical path of each layer's forward window kernel (Little's law).

    A thread issues its window's loads one after another (each result is consumed before the next
    load issues), so the kernel keeps at most one load per thread in flight: ``min(threads,
    resident)`` of them, ``resident`` the threads the GPU holds at once (``sm_count x
    threads_per_sm``) or fewer where the SM's sector requests in flight run out first (a warp load
    whose threads lie ``stride`` elements apart touches ``min(32, stride x e)`` sectors, not the
    ``e`` of a coalesced one; ``sector_slots_per_sm``). All ``threads x window`` loads then take
    ``threads x window / in flight`` latencies (Little, Oper. Res. 9(3), 1961; Volkov, "Understanding
    Latency Hiding on GPUs", PhD thesis, UC Berkeley 2016: bytes in flight = latency x bandwidth).
    """
    threads = lk.window_threads_fwd * scale
    if threads.size == 0:
        return np.zeros_like(np.asarray(scale, dtype=float))
    warp_sectors = np.minimum(WARP, WARP * np.maximum(lk.window_stride_fwd, 1.0) * elem_bytes / SECTOR_BYTES)
    sectors = warp_sectors / WARP  # per thread and load
    per_sm = np.minimum(float(kp.threads_per_sm), kp.sector_slots_per_sm / sectors)
    rounds = np.maximum(threads / (kp.sm_count * per_sm), 1.0)  # all threads in flight: one window
    return np.where(threads > 0, rounds * lk.window_loads_fwd, 0.0)


def tile_scale(lk: LayerKernels, batch: float, grid: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> np.ndarray:
    """``batch`` times the fraction of each layer's per-sample spatial extent a tile of ``grid`` holds."""
    s_d, s_h, s_w = grid
    frac = np.where(lk.spatial_dims == 2, 1 / (s_h * s_w), np.where(lk.spatial_dims == 3, 1 / (s_d * s_h * s_w), 1.0))
    return np.asarray(batch * frac)

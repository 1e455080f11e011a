"""Per-layer compute time: the kernels each layer launches, priced from their shapes on the profile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from ..hardware import Hardware
from ..hardware.profile import KernelParams
from ..network.counts import CompiledCounts
from .autocast_fp32 import AUTOCAST_DTYPES
from .formulas import Num, is_symbolic
from .fusion import DEFAULT_FUSION, own_arithmetic, with_fusion
from .grouped import DEFAULT_CUDNN_MAJOR, loop_candidates
from .kernel_model import GRAD_BYTES_PER_PARAM, ComputeValues, phase_times, tensor_cores
from .kernels import LayerKernels, network_kernels
from .ktile import cuda_core_ratio
from .layout import DEFAULT_MEMORY_FORMAT, with_transposes
from .rounding import snap_whole
from .shares import TensorShares
from .work import KernelWork, kernel_work

#: Precisions whose activations are 16-bit: their CUDA-core kernels (depthwise convolutions)
#: use packed half2 arithmetic, two FMAs per fp32 lane (NVIDIA Tesla V100 whitepaper: FP16
#: 31.4 TFLOPS on CUDA cores vs FP32 15.7).
HALF_PRECISIONS = ("amp", "bf16")

__all__ = [
    "ComputeValues",
    "ShapeRules",
    "LayerTimes",
    "layer_seconds",
    "layer_times",
    "kind_masks",
    "GRAD_BYTES_PER_PARAM",
    "HALF_PRECISIONS",
    "OUT_SHARE",
]


@dataclass(frozen=True)
class LayerTimes:
    """Seconds per layer for one micro-batch on one GPU: forward, and backward (both gradients)."""

    fwd: np.ndarray
    bwd: np.ndarray

    @property
    def total(self) -> float:
        return float(self.fwd.sum() + self.bwd.sum())


@lru_cache(maxsize=256)
def kind_masks(cc: CompiledCounts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boolean masks over layers: convolutions, linear layers, and layers with parameters."""
    kinds = cc.kinds
    conv = np.array([k in ("conv", "conv_transpose") for k in kinds])
    lin = np.array([k in ("linear", "matmul", "attention") for k in kinds])
    return conv, lin, cc.params > 0


@dataclass(frozen=True)
class ShapeRules:
    """What fixes each kernel's effective FLOPs besides the counts: the profile's kernel-model
    numbers, whether the precision runs on tensor cores, and, when the batch is a symbol, the
    micro-batch the shapes are taken at (``batch_value``); ``cudnn_major``: the cuDNN whose
    kernels run grouped convolutions (:mod:`perfmodel.cost.grouped`); ``memory_format``: the
    activations' layout, ``nchw`` adding cuDNN's transposes around tensor-core convolutions
    (:mod:`perfmodel.cost.layout`); ``fusion``: which batch-norm/add/ReLU chains the run's framework
    fuses (:mod:`perfmodel.cost.fusion`; default eager PyTorch, none); ``values``: the profile's
    numbers at the precision, which decide where a grouped layer runs as a loop of per-group
    calls (:func:`layer_seconds`) when the formula's own values are symbols (``explain``, whose
    ``--set`` re-evaluation keeps that choice); ``autocast``: the 16-bit type ``torch.autocast`` runs
    the precision at (``""``: none, as in a 16-bit model that runs every op at 16 bits;
    :mod:`perfmodel.cost.autocast_fp32`); ``cuda_core_ratio``: a CUDA-core convolution's seconds per
    effective FLOP over the precision's (:func:`~perfmodel.cost.ktile.cuda_core_ratio`; 0: none), with
    which cuDNN 7's forward may leave tensor cores where their K-tiles waste work (:mod:`perfmodel.cost.ktile`)."""

    kernels: KernelParams
    tensor_cores: bool
    batch_value: float | None = None
    half_precision: bool = False
    cudnn_major: int = DEFAULT_CUDNN_MAJOR
    memory_format: str = DEFAULT_MEMORY_FORMAT
    fusion: str = DEFAULT_FUSION
    values: ComputeValues | None = None
    autocast: str = ""
    cuda_core_ratio: float = 0.0

    @classmethod
    def of(cls, hw: Hardware, precision: str, batch_value: float | None = None,
           cudnn_major: int = DEFAULT_CUDNN_MAJOR, memory_format: str = DEFAULT_MEMORY_FORMAT,
           fusion: str = DEFAULT_FUSION, autocast: bool = True) -> ShapeRules:
        """The rules of ``precision`` on ``hw``; ``autocast`` False: a 16-bit run without
        ``torch.autocast`` (``model.half()``, MXNet's fp16 model), whose norms stay 16-bit."""
        dtype = AUTOCAST_DTYPES.get(precision, "") if autocast else ""
        return cls(hw.kernels, tensor_cores(hw, precision), batch_value, precision in HALF_PRECISIONS, cudnn_major,
                   memory_format, fusion, ComputeValues.of(hw, precision), dtype, cuda_core_ratio(hw, precision))


#: The key under which a split GPU's counts record the output share they were scaled by
#: (:func:`~perfmodel.strategies.channels.split_counts`).
OUT_SHARE = "out_share"


def _scale(cc: CompiledCounts, counts: Mapping[str, np.ndarray], shares: TensorShares | None) -> np.ndarray:
    """Each layer's output counts over its per-sample counts on the whole tensor, less the
    output's share of a filter/channel split (``shares``, priced per tensor by
    :func:`~perfmodel.cost.work.kernel_work`): micro-batch x tile fraction.

    With ``shares`` the counts must be the split GPU's, outputs at ``shares.y`` and that share
    recorded under :data:`OUT_SHARE` (``split_counts``): whole counts would leave the output's
    share out of the bytes, or (divided by it) price a whole layer per GPU. ``ValueError`` else."""
    full = cc.evaluate(1.0)["out_elems"]
    ratio = np.asarray(counts["out_elems"], dtype=float) / np.where(full > 0, full, 1.0)
    if shares is None:
        return ratio
    share = counts.get(OUT_SHARE)
    if share is None or not np.allclose(share, shares.y, rtol=1e-12, atol=0.0):
        raise ValueError(f"shares of a split need the split GPU's counts (split_counts, with '{OUT_SHARE}' equal "
                         f"to shares.y); got {'none' if share is None else 'another share'}")
    # the counts were multiplied by the share and are divided by it here: snap the round trip's
    # last-bit error back to the whole micro-batch it came from (96.00000000000001 would add a
    # tile row to every ceil over the batch side, and explain's symbolic path has no such error)
    return snap_whole(ratio / shares.y)


def layer_seconds(
    cc: CompiledCounts,
    counts: Mapping[str, np.ndarray],
    weights: np.ndarray,
    v: ComputeValues,
    batch: Num = 1.0,
    rules: ShapeRules | None = None,
    shares: TensorShares | None = None,
) -> tuple[Any, Any]:
    """Forward and backward seconds of every layer: one formula for numbers and symbols.

    The work of layer ``i`` is ``batch`` times what ``counts`` give (counts are linear in the
    batch: pass the counts of the batch and ``batch=1``, or the counts per sample and the
    batch, possibly a symbol); ``weights[i]`` its parameters on this GPU. Each layer is priced
    as the kernels it launches (:mod:`perfmodel.cost.kernels`), each kernel's effective FLOPs
    from its shape (:mod:`perfmodel.cost.work`) at the real micro-batch: ``batch`` when it is
    a number, ``rules.batch_value`` when it is a symbol (the expression is then linear in
    ``batch`` with the shape efficiencies of that micro-batch). With numbers it returns two
    arrays (vectorised over layers); with symbols, two lists of per-layer sympy expressions
    (:func:`~perfmodel.cost.kernel_model.phase_times`). ``shares``: each tensor's and the FLOPs'
    share on one GPU of a filter/channel split (:mod:`perfmodel.cost.shares`), whose ``counts``
    hold the output's share. From cuDNN 8 a grouped layer is the faster of cuDNN's one kernel and
    a loop of per-group calls (:func:`_faster_groups`, :mod:`perfmodel.cost.grouped`).
    """
    rules = rules or ShapeRules(KernelParams(), False)
    symbolic = is_symbolic(batch, *v.as_tuple())
    b_num = rules.batch_value if is_symbolic(batch) else float(batch)
    if b_num is None:
        raise ValueError("layer_seconds: a symbolic batch needs rules.batch_value (the micro-batch)")
    scale = _scale(cc, counts, shares) * b_num
    lk = with_fusion(network_kernels(cc.network), cc.network, rules.fusion)
    work = _work(lk, rules, scale, shares)
    conv, _, _ = kind_masks(cc)
    ew_f = np.asarray(counts["fwd_flops"]) - np.asarray(counts["fwd_matmul_flops"])
    ew_b = np.asarray(counts["bwd_input_flops"]) - np.minimum(counts["bwd_input_flops"], counts["fwd_matmul_flops"])
    ew_b = np.where(conv | kind_masks(cc)[1], ew_b, counts["bwd_input_flops"])
    if rules.fusion != DEFAULT_FUSION:  # arithmetic folded into a fused chain's kernel
        own_f, own_b = own_arithmetic(cc.network, rules.fusion)
        ew_f, ew_b = ew_f * own_f, ew_b * own_b
    ew = (ew_f * b_num, ew_b * b_num)
    work = _faster_groups(work, lk, rules, scale, shares, weights, conv, ew, None if symbolic else v)
    if not symbolic:
        eta = np.where(conv, v.eta_conv, v.eta_linear)
        return phase_times(work, weights, v, eta, *ew)
    per = work.per_sample(b_num) if is_symbolic(batch) else work
    fwd, bwd = [], []
    for i in range(len(weights)):
        wi = _times_batch(per.at(i), batch if is_symbolic(batch) else 1.0)
        f, b = phase_times(wi, float(weights[i]), v, v.eta_conv if conv[i] else v.eta_linear,
                           batch * float(ew_f[i]), batch * float(ew_b[i]))
        fwd.append(f)
        bwd.append(b)
    return fwd, bwd


def _work(lk: LayerKernels, rules: ShapeRules, scale: np.ndarray, shares: TensorShares | None,
          loop_groups: bool = False) -> KernelWork:
    """Every layer's kernel work with its tensor-core transposes (``loop_groups``: grouped
    layers as loops of per-group calls, :func:`~perfmodel.cost.work.kernel_work`)."""
    work = kernel_work(lk, rules.kernels, scale, rules.tensor_cores, rules.half_precision, rules.cudnn_major, shares,
                       loop_groups, rules.autocast, rules.cuda_core_ratio)
    return with_transposes(work, lk, scale, rules.tensor_cores, rules.memory_format, rules.half_precision, shares)


def _faster_groups(work: KernelWork, lk: LayerKernels, rules: ShapeRules, scale: np.ndarray,
                   shares: TensorShares | None, weights: np.ndarray, conv: np.ndarray,
                   ew: tuple[np.ndarray, np.ndarray], v: ComputeValues | None) -> KernelWork:
    """``work`` with each grouped layer that a loop of ordinary calls, one per group, runs faster
    than cuDNN's one kernel (from cuDNN 8: :mod:`perfmodel.cost.grouped`) priced as that loop: the
    faster by forward plus backward seconds at ``v`` (numbers; ``rules.values`` when None)."""
    candidates = loop_candidates(lk.groups, lk.depthwise, rules.cudnn_major)
    if not candidates.any():
        return work
    v = v if v is not None else rules.values
    if v is None:
        raise ValueError("layer_seconds: grouped layers on symbols need rules.values (ShapeRules.of) to be priced")
    loop = _work(lk, rules, scale, shares, loop_groups=True)
    eta = np.where(conv, v.eta_conv, v.eta_linear)
    one = phase_times(work, weights, v, eta, *ew)
    looped = phase_times(loop, weights, v, eta, *ew)
    return work.where(candidates & (looped[0] + looped[1] < one[0] + one[1]), loop)


def _times_batch(w: KernelWork, batch: Num) -> KernelWork:
    """A one-layer work record with its batch-proportional fields multiplied by ``batch``."""
    if not is_symbolic(batch) and batch == 1.0:
        return w
    return KernelWork(
        flops={s: _mul(batch, x) for s, x in w.flops.items()},
        cc_flops={s: _mul(batch, x) for s, x in w.cc_flops.items()},
        mm_elems={s: _mul(batch, x) for s, x in w.mm_elems.items()},
        mem_elems_fwd=_mul(batch, w.mem_elems_fwd), mem_elems_bwd=_mul(batch, w.mem_elems_bwd),
        mem_extra_bytes_fwd=_mul(batch, w.mem_extra_bytes_fwd), mem_extra_bytes_bwd=_mul(batch, w.mem_extra_bytes_bwd),
        launches_fwd=w.launches_fwd, launches_bwd=w.launches_bwd,
        host_ops_fwd=w.host_ops_fwd, host_ops_bwd=w.host_ops_bwd, window_loads_fwd=w.window_loads_fwd,
    )


def _mul(batch: Num, x: Any) -> Any:
    """``batch * x``, keeping an absent (zero) count a plain 0.0 so the kernel drops out."""
    return x if (isinstance(x, float) and x == 0.0) else batch * x


def layer_times(
    cc: CompiledCounts,
    hw: Hardware,
    precision: str,
    batch: float,
    s_d: float = 1.0,
    s_h: float = 1.0,
    s_w: float = 1.0,
    counts: dict[str, np.ndarray] | None = None,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    shares: TensorShares | None = None,
    fusion: str = DEFAULT_FUSION,
    autocast: bool = True,
) -> LayerTimes:
    """Per-layer forward and backward seconds for ``batch`` samples on one tile.

    Each layer is the kernels eager PyTorch launches for it (:mod:`perfmodel.cost.kernels`),
    each GEMM-shaped kernel priced by its effective FLOPs (shape rules,
    :mod:`perfmodel.cost.efficiency`) or its bytes, memory-bound kernels by their bytes,
    plus a launch gap per kernel, and no faster than the host dispatches its ops
    (:mod:`perfmodel.cost.kernel_model`). The formula is :func:`layer_seconds` on the
    profile's :class:`ComputeValues`, with the grouped-convolution kernels of cuDNN ``cudnn_major``
    and the activations in ``memory_format``; ``shares`` those of a filter/channel split's GPU,
    which need that GPU's ``counts`` (``split_counts``; ``ValueError`` without them); ``fusion`` the
    batch-norm/add/ReLU chains the run's framework fuses (:mod:`perfmodel.cost.fusion`); ``autocast``
    False a 16-bit run without ``torch.autocast`` (:meth:`ShapeRules.of`).
    """
    if shares is not None and counts is None:
        raise ValueError("layer_times: shares of a split need the split GPU's counts (pass counts=split_counts(...))")
    ev = counts if counts is not None else cc.evaluate(batch, s_d, s_h, s_w)
    rules = ShapeRules.of(hw, precision, cudnn_major=cudnn_major, memory_format=memory_format, fusion=fusion,
                          autocast=autocast)
    fwd, bwd = layer_seconds(cc, ev, cc.params, ComputeValues.of(hw, precision), 1.0, rules, shares)
    return LayerTimes(fwd=np.asarray(fwd, dtype=float), bwd=np.asarray(bwd, dtype=float))

"""Per-layer compute time: a roofline on the profile with work-size-dependent efficiency."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

import numpy as np
import sympy as sp

from ..hardware import Hardware
from ..network.counts import CompiledCounts
from ..units import BYTES_PER_ELEMENT
from .formulas import Num, is_symbolic, kernel_time, smax, smin, where

__all__ = [
    "ComputeValues",
    "LayerTimes",
    "layer_seconds",
    "layer_times",
    "kind_masks",
    "GRAD_BYTES_PER_PARAM",
]

#: Gradients and master weights are fp32 under every precision (mixed precision keeps fp32
#: master weights: Micikevicius et al., "Mixed Precision Training", ICLR 2018, section 3.1).
GRAD_BYTES_PER_PARAM = 4


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
    lin = np.array([k == "linear" for k in kinds])
    return conv, lin, cc.params > 0


@dataclass(frozen=True)
class ComputeValues:
    """The hardware numbers a compute formula reads: floats from a profile, or sympy symbols.

    :meth:`of` takes them from a profile at a precision (``predict``, the search);
    :meth:`symbols` names them (``explain``: the same formula evaluated on symbols, so
    its value at :meth:`of`'s numbers is ``predict``'s).
    """

    peak_flops_per_s: Num  # R: tensor-core (or fp32) peak of convolutions and matmuls at the precision
    fp32_peak_flops_per_s: Num  # R_fp32: CUDA-core peak, elementwise ops
    eta_conv: Num  # achievable fraction of R for convolutions
    eta_linear: Num  # achievable fraction of R for linear layers
    eta_memory: Num  # achievable fraction of the memory bandwidth
    half_work_flops: Num  # w_half: Hockney's n_1/2 of a kernel, FLOPs
    memory_bandwidth_bytes_per_s: Num  # beta_mem
    launch_s: Num  # tau: kernel launch overhead
    elem_bytes: Num  # e: bytes per activation element at the precision

    #: The symbol of each field in ``explain`` (:meth:`symbols`).
    SYMBOL_NAMES = (
        "R", "R_fp32", "eta_conv", "eta_linear", "eta_mem", "w_half", "beta_mem", "tau", "e",
    )

    @classmethod
    def of(cls, hw: Hardware, precision: str) -> ComputeValues:
        """The profile's numbers at ``precision``."""
        eff = hw.compute[precision]
        return cls(
            peak_flops_per_s=hw.device.peak(precision),
            fp32_peak_flops_per_s=hw.device.peak_flops_per_s["fp32"],
            eta_conv=eff.conv,
            eta_linear=eff.linear,
            eta_memory=eff.memory,
            half_work_flops=eff.half_work_flops,
            memory_bandwidth_bytes_per_s=hw.device.memory_bandwidth_bytes_per_s,
            launch_s=hw.kernel_launch_s,
            elem_bytes=BYTES_PER_ELEMENT[precision],
        )

    @classmethod
    def symbols(cls) -> ComputeValues:
        """Every field as a positive sympy symbol named by :attr:`SYMBOL_NAMES`."""
        return cls(*sp.symbols(" ".join(cls.SYMBOL_NAMES), positive=True))

    def as_tuple(self) -> tuple[Num, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


def layer_seconds(
    cc: CompiledCounts,
    counts: Mapping[str, np.ndarray],
    weights: np.ndarray,
    v: ComputeValues,
    batch: Num = 1.0,
) -> tuple[Any, Any]:
    """Forward and backward seconds of every layer: one formula for numbers and symbols.

    The work of layer ``i`` is ``batch * counts[key][i]`` (counts are linear in the batch:
    pass the counts of the batch and ``batch=1``, or the counts per sample and the batch,
    possibly a symbol); ``weights[i]`` its parameters on this GPU. With numeric ``v`` and
    ``batch`` it returns two arrays (vectorised over layers); with symbols, two lists of
    per-layer sympy expressions. Each layer costs ``max(matmul, elementwise, memory) +
    launches`` (see :func:`layer_times`).
    """
    conv, lin, _ = kind_masks(cc)
    mm = conv | lin
    if not is_symbolic(batch, *v.as_tuple()):
        return _roofline(counts, weights, conv, mm, v, batch)
    pairs = [
        _roofline({k: x[i].item() for k, x in counts.items()}, weights[i].item(), conv[i], mm[i], v, batch)
        for i in range(len(weights))
    ]
    return [f for f, _ in pairs], [b for _, b in pairs]


def _roofline(
    ev: Mapping[str, Any], weights: Any, conv: Any, mm: Any, v: ComputeValues, batch: Num
) -> tuple[Num, Num]:
    """The roofline of :func:`layer_seconds` on arrays of layers or on one layer.

    Conditions and the backward input-gradient split are taken on the counts (numbers),
    the batch multiplies the work afterwards, so a symbolic batch stays a factor.
    """
    e = v.elem_bytes
    mem_bw = v.memory_bandwidth_bytes_per_s * v.eta_memory
    eta = where(conv, v.eta_conv, v.eta_linear)
    w_half, peak, fp32 = v.half_work_flops, v.peak_flops_per_s, v.fp32_peak_flops_per_s

    def scaled(x: Any) -> Any:
        return x if (not is_symbolic(batch) and batch == 1) else batch * x

    f_mm = ev["fwd_matmul_flops"]
    f_ew = ev["fwd_flops"] - f_mm
    b_in, b_w = ev["bwd_input_flops"], ev["bwd_weight_flops"]
    # forward
    t_mm = where(mm, kernel_time(scaled(f_mm), peak, eta, w_half), 0)
    t_ew = scaled(f_ew) / fp32
    t_mem = (scaled(ev["fwd_mem_elems"]) * e + weights * e) / mem_bw
    fwd = smax(t_mm, t_ew, t_mem) + v.launch_s
    # backward: input-gradient and weight-gradient kernels for matmul layers
    b_in_mm = where(mm, smin(b_in, f_mm), 0)
    b_in_ew = b_in - b_in_mm
    t_bmm = where(mm & (b_in_mm > 0), kernel_time(scaled(b_in_mm), peak, eta, w_half), 0) + where(
        mm & (b_w > 0), kernel_time(scaled(b_w), peak, eta, w_half), 0
    )
    t_bew = scaled(b_in_ew) / fp32
    t_bmem = (scaled(ev["bwd_mem_elems"]) * e + weights * (e + GRAD_BYTES_PER_PARAM)) / mem_bw
    n_kernels = where(mm, 2, 1)
    bwd = smax(t_bmm, t_bew, t_bmem) + n_kernels * v.launch_s
    return fwd, bwd


def layer_times(
    cc: CompiledCounts,
    hw: Hardware,
    precision: str,
    batch: float,
    s_d: float = 1.0,
    s_h: float = 1.0,
    s_w: float = 1.0,
    counts: dict[str, np.ndarray] | None = None,
) -> LayerTimes:
    """Per-layer forward and backward seconds for ``batch`` samples on one tile.

    Each layer costs ``max(matmul time, elementwise time, memory time) + launch``:

    * matmul time (convolutions, linear): :func:`kernel_time` of its FLOPs at the
      precision's tensor peak times the op kind's efficiency; backward runs two kernels
      (input gradient, weight gradient), each paying the half-work term;
    * elementwise FLOPs at the fp32 (CUDA-core) peak;
    * memory time: activation traffic at the precision's element size plus weight traffic
      (read in forward; read, and fp32 gradient written, in backward) over the memory
      bandwidth times its efficiency.

    The formula is :func:`layer_seconds` on the profile's :class:`ComputeValues`.
    """
    ev = counts if counts is not None else cc.evaluate(batch, s_d, s_h, s_w)
    fwd, bwd = layer_seconds(cc, ev, cc.params, ComputeValues.of(hw, precision))
    return LayerTimes(fwd=np.asarray(fwd, dtype=float), bwd=np.asarray(bwd, dtype=float))

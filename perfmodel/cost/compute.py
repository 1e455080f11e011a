"""Per-layer compute time: a roofline on the profile with work-size-dependent efficiency."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..hardware import Hardware
from ..network.counts import CompiledCounts
from ..units import BYTES_PER_ELEMENT
from .formulas import kernel_time

__all__ = ["LayerTimes", "layer_times", "kind_masks", "GRAD_BYTES_PER_PARAM"]

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
    lin = np.array([k in ("linear", "matmul", "attention") for k in kinds])
    return conv, lin, cc.params > 0


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
    """
    ev = counts if counts is not None else cc.evaluate(batch, s_d, s_h, s_w)
    eff = hw.compute[precision]
    peak = hw.device.peak(precision)
    fp32 = hw.device.peak_flops_per_s["fp32"]
    e = BYTES_PER_ELEMENT[precision]
    mem_bw = hw.device.memory_bandwidth_bytes_per_s * eff.memory
    conv, lin, _ = kind_masks(cc)
    mm = conv | lin
    eta = np.where(conv, eff.conv, eff.linear)
    w_half = eff.half_work_flops
    f_mm = ev["fwd_matmul_flops"]
    f_ew = ev["fwd_flops"] - f_mm
    b_in, b_w = ev["bwd_input_flops"], ev["bwd_weight_flops"]
    # forward
    t_mm = np.where(mm, kernel_time(f_mm, peak, eta, w_half), 0.0)
    t_ew = f_ew / fp32
    weights = cc.params
    t_mem = (ev["fwd_mem_elems"] * e + weights * e) / mem_bw
    fwd = np.maximum(np.maximum(t_mm, t_ew), t_mem) + hw.kernel_launch_s
    # backward: input-gradient and weight-gradient kernels for matmul layers
    b_in_mm = np.where(mm, np.minimum(b_in, f_mm), 0.0)
    b_in_ew = b_in - b_in_mm
    t_bmm = np.where(mm & (b_in_mm > 0), kernel_time(b_in_mm, peak, eta, w_half), 0.0) + np.where(
        mm & (b_w > 0), kernel_time(b_w, peak, eta, w_half), 0.0
    )
    t_bew = b_in_ew / fp32
    t_bmem = (ev["bwd_mem_elems"] * e + weights * (e + GRAD_BYTES_PER_PARAM)) / mem_bw
    n_kernels = np.where(mm, 2.0, 1.0)
    bwd = np.maximum(np.maximum(t_bmm, t_bew), t_bmem) + n_kernels * hw.kernel_launch_s
    return LayerTimes(fwd=fwd, bwd=bwd)

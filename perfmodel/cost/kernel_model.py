"""Layer times from kernel work and the hardware's numbers, for numbers (predict) and symbols (explain).

A layer's forward (backward) time is

    max(host ops x h,  sum over its GEMM kernels of max(W / (R * eta), W_cc / R_fp32, bytes / (beta_mem * eta_mem))
                       + max(memory-kernel bytes / (beta_mem * eta_mem), elementwise FLOPs / R_fp32)
                       + launches x tau)

where the memory-kernel term of a forward pooling layer is also no faster than its window kernel's
latency bound, loads on the critical path x L_mem (:func:`perfmodel.cost.work.window_path_loads`).

with ``W`` a kernel's effective FLOPs (:mod:`perfmodel.cost.work`: direct FLOPs over the shape
efficiency and the algorithm's gain), ``R`` the precision's matmul peak, ``R_fp32`` the fp32
peak, ``beta_mem`` the memory bandwidth, ``tau`` the per-kernel launch gap on the GPU and
``h`` the host (CPU) time eager PyTorch spends dispatching one op: a layer whose kernels
finish faster than the host can issue them runs at the host's pace (PyTorch performance
tuning guide, "CPU-bound small ops": each eager op costs microseconds of Python, dispatcher
and launch on the CPU). Only :func:`~perfmodel.cost.formulas.smax` and arithmetic are used,
so the same code evaluates numpy arrays and builds sympy expressions.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import sympy as sp

from ..hardware import Hardware
from ..units import BYTES_PER_ELEMENT
from .formulas import Num, smax
from .work import KernelWork

__all__ = ["ComputeValues", "mm_time", "phase_times", "tensor_cores", "GRAD_BYTES_PER_PARAM"]

#: Gradients and master weights are fp32 under every precision (mixed precision keeps fp32
#: master weights: Micikevicius et al., "Mixed Precision Training", ICLR 2018, section 3.1).
GRAD_BYTES_PER_PARAM = 4


@dataclass(frozen=True)
class ComputeValues:
    """The hardware numbers a compute formula reads: floats from a profile, or sympy symbols.

    :meth:`of` takes them from a profile at a precision (``predict``, the search);
    :meth:`symbols` names them (``explain``: the same formula evaluated on symbols, so
    its value at :meth:`of`'s numbers is ``predict``'s). The shape rules' numbers (SM count,
    tile intensity, Winograd gain, ...) are not symbols: they fix each kernel's effective
    FLOPs, a number (``hw.kernels``).
    """

    peak_flops_per_s: Num  # R: tensor-core (or fp32) peak of convolutions and matmuls at the precision
    fp32_peak_flops_per_s: Num  # R_fp32: CUDA-core peak, elementwise and depthwise ops
    eta_conv: Num  # achievable fraction of R for convolutions
    eta_linear: Num  # achievable fraction of R for linear layers
    eta_memory: Num  # achievable fraction of the memory bandwidth
    memory_bandwidth_bytes_per_s: Num  # beta_mem
    launch_s: Num  # tau: GPU-side gap per kernel launched
    elem_bytes: Num  # e: bytes per activation element at the precision
    host_op_s: Num  # h: host (CPU) seconds per op eager PyTorch dispatches
    step_overhead_s: Num  # t_step: fixed host/GPU seconds per training step
    mem_latency_s: Num = 5.28e-7  # L_mem: latency of one load a pooling kernel's thread waits for

    #: The symbol of each field in ``explain`` (:meth:`symbols`).
    SYMBOL_NAMES = (
        "R", "R_fp32", "eta_conv", "eta_linear", "eta_mem", "beta_mem", "tau", "e", "h", "t_step", "L_mem",
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
            memory_bandwidth_bytes_per_s=hw.device.memory_bandwidth_bytes_per_s,
            launch_s=hw.kernel_launch_s,
            elem_bytes=BYTES_PER_ELEMENT[precision],
            host_op_s=hw.kernels.host_op_s,
            step_overhead_s=hw.kernels.step_overhead_s,
            mem_latency_s=hw.kernels.memory_latency_s,
        )

    @classmethod
    def symbols(cls) -> ComputeValues:
        """Every field as a positive sympy symbol named by :attr:`SYMBOL_NAMES`."""
        return cls(*sp.symbols(" ".join(cls.SYMBOL_NAMES), positive=True))

    def as_tuple(self) -> tuple[Num, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))


def tensor_cores(hw: Hardware, precision: str) -> bool:
    """Whether ``precision`` runs its matmuls on units faster than the fp32 CUDA cores."""
    return hw.device.peak(precision) > hw.device.peak_flops_per_s["fp32"]


def mm_time(w: KernelWork, s: str, weights: Num, v: ComputeValues, eta: Num) -> Num:
    """GEMM slot ``s``: the slower of its FLOPs (tensor path or CUDA-core path) and its bytes
    (activations at the precision, and the weights: read by ``fwd`` and ``dgrad``, their gradient written
    by ``wgrad``, which reads no weights). Both are at the precision's element size: under autocast the
    GEMM takes the 16-bit cast of the weight and writes a 16-bit gradient of that cast (its conversion to
    the fp32 gradient is the cast's backward, :mod:`perfmodel.strategies.amp_step`), and a 16-bit model
    (``model.half()``) holds 16-bit weights and gradients."""
    present = w.mm_elems[s]
    wts = weights if isinstance(present, float) else np.where(np.asarray(present) > 0, weights, 0.0)
    wbytes = wts * v.elem_bytes
    return smax(
        w.flops[s] / (v.peak_flops_per_s * eta),
        w.cc_flops[s] / v.fp32_peak_flops_per_s,
        (w.mm_elems[s] * v.elem_bytes + wbytes) / (v.memory_bandwidth_bytes_per_s * v.eta_memory),
    )


def _zero(x: Any) -> bool:
    """Whether ``x`` is exactly zero as one value: a number, or a sympy expression that is 0
    (an array, the vectorised path over layers, is never dropped)."""
    if isinstance(x, np.ndarray):
        return False
    if isinstance(x, sp.Basic):
        return bool(x.is_zero)
    return bool(x == 0)


def _has(x: Num) -> bool:
    return not _zero(x)


def phase_times(
    w: KernelWork, weights: Num, v: ComputeValues, eta: Num, ew_fwd: Num, ew_bwd: Num, host: bool = True
) -> tuple[Num, Num]:
    """Forward and backward seconds of the layers ``w`` describes (see the module docstring).

    ``eta``: per layer, ``v.eta_conv`` or ``v.eta_linear``; ``ew_*``: elementwise FLOPs of
    the layers (priced at the fp32 peak against their bytes). ``host=False``: GPU time only.
    For one layer of Python floats (explain), kernels it does not launch are left out of the
    expression.
    """
    bw = v.memory_bandwidth_bytes_per_s * v.eta_memory

    # A kernel is left out of one layer's expression only when every count it prices is exactly
    # zero, so its term is 0 on any hardware values: the vectorised path, which keeps it, agrees.
    def slot(s: str) -> Num:
        if all(_zero(x) for x in (w.mm_elems[s], w.flops[s], w.cc_flops[s])):
            return 0
        if isinstance(weights, np.ndarray):  # mm_time reads them where each layer's GEMM moves elements
            return mm_time(w, s, weights, v, eta)
        return mm_time(w, s, 0.0 if _zero(w.mm_elems[s]) else weights, v, eta)  # the same rule, one layer

    def mem(elems: Num, extra: Num, ew: Num, loads: Num = 0.0) -> Num:
        if all(_zero(x) for x in (elems, extra, ew, loads)):
            return 0
        roof = ((elems * v.elem_bytes + extra) / bw, ew / v.fp32_peak_flops_per_s)
        if _zero(loads):
            return smax(*roof)
        return smax(*roof, loads * v.mem_latency_s)  # latency bound of window kernels

    gpu_f = (
        slot("fwd") + mem(w.mem_elems_fwd, w.mem_extra_bytes_fwd, ew_fwd, w.window_loads_fwd)
        + w.launches_fwd * v.launch_s
    )
    gpu_b = (
        slot("dgrad") + slot("wgrad") + mem(w.mem_elems_bwd, w.mem_extra_bytes_bwd, ew_bwd)
        + w.launches_bwd * v.launch_s
    )
    if not host:
        return gpu_f, gpu_b
    hf, hb = w.host_ops_fwd, w.host_ops_bwd
    fwd = smax(hf * v.host_op_s, gpu_f) if _has(hf) else gpu_f
    bwd = smax(hb * v.host_op_s, gpu_b) if _has(hb) else gpu_b
    return fwd, bwd

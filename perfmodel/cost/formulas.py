"""Cost formulas written once, evaluated on numbers (predict) or on sympy symbols (explain).

Every function here takes plain floats, numpy arrays or sympy expressions and uses only
arithmetic and :func:`smax`, so the formula ``explain`` prints is the formula ``predict``
evaluates. Notation follows the BSP model (docs/SOURCES.md work 4): a superstep costs
``w + g*h + L`` (work, time per byte times bytes, synchronisation latency).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy as sp

__all__ = [
    "smax",
    "smin",
    "kernel_time",
    "ring_allreduce",
    "tree_allreduce",
    "ring_allgather",
    "ring_reduce_scatter",
    "p2p",
    "log2",
    "ceil",
    "where",
    "is_symbolic",
    "ssum",
]

Num = Any  # float | np.ndarray | sympy.Expr


def is_symbolic(*xs: Num) -> bool:
    """Whether any of ``xs`` is a sympy expression (the formula is being explained)."""
    return any(isinstance(x, sp.Basic) for x in xs)


_is_sym = is_symbolic

#: Plain numbers, which take Python's max/min (the search's hot path: no numpy call).
_SCALARS = (float, int, np.float64)


def smax(*xs: Num) -> Num:
    """max() for numbers, numpy arrays (elementwise) and sympy expressions."""
    if all(type(x) in _SCALARS for x in xs):
        return max(xs)
    if _is_sym(*xs):
        return sp.Max(*xs, evaluate=False)
    out = xs[0]
    for x in xs[1:]:
        out = np.maximum(out, x)
    return out


def smin(*xs: Num) -> Num:
    """min() for numbers, numpy arrays (elementwise) and sympy expressions."""
    if all(type(x) in _SCALARS for x in xs):
        return min(xs)
    if _is_sym(*xs):
        return sp.Min(*xs, evaluate=False)
    out = xs[0]
    for x in xs[1:]:
        out = np.minimum(out, x)
    return out


def ssum(xs: Any) -> Num:
    """The sum of a numpy array (a float) or of a sequence of numbers or sympy expressions."""
    if isinstance(xs, np.ndarray):
        return float(xs.sum())
    return sp.Add(*xs) if _is_sym(*xs) else sum(xs)


def log2(x: Num) -> Num:
    return sp.log(x, 2) if _is_sym(x) else np.log2(x)


def ceil(x: Num) -> Num:
    """Smallest integer >= ``x``: ``sympy.ceiling`` on expressions, ``math.ceil`` semantics on numbers."""
    if _is_sym(x):
        return sp.ceiling(x)
    return np.ceil(x) if isinstance(x, np.ndarray) else float(math.ceil(x))


def where(condition: Any, if_true: Num, if_false: Num) -> Num:
    """``if_true`` where the numeric ``condition`` holds, else ``if_false``.

    The condition is always a number or a boolean array (a property of the network or the
    plan, never of the hardware), so on sympy operands, which are priced one layer at a
    time, it is a plain boolean and picks one branch; on arrays it is ``numpy.where``.
    """
    if isinstance(condition, np.ndarray) and condition.ndim > 0:
        return np.where(condition, if_true, if_false)
    return if_true if bool(condition) else if_false


def kernel_time(work_flops: Num, peak_flops_per_s: Num, efficiency: Num, half_work_flops: Num) -> Num:
    """Hockney's n_1/2 model: ``(w + w_1/2) / (R * eta)``; a kernel of ``w`` FLOPs reaches
    ``eta * w / (w + w_1/2)`` of the peak ``R`` (R. Hockney, "The science of computer
    benchmarking", SIAM 1996, ch. 3)."""
    return (work_flops + half_work_flops) / (peak_flops_per_s * efficiency)


# -- collectives under the alpha-beta model (Thakur, Rabenseifner & Gropp, "Optimization of
#    collective communication operations in MPICH", IJHPCA 19(1), 2005, section 4) -----------
def ring_allreduce(n_bytes: Num, p: Num, bw: Num, alpha: Num) -> Num:
    """Ring allreduce (reduce-scatter + allgather): ``2*(p - 1)/p * n/bw + 2*(p - 1)*alpha``."""
    return 2 * (p - 1) / p * n_bytes / bw + 2 * (p - 1) * alpha


def tree_allreduce(n_bytes: Num, p: Num, bw: Num, alpha: Num) -> Num:
    """Pipelined (double binary) tree allreduce: ``2*log2(p)*alpha + 2*n/bw``.

    Reduce up and broadcast down a tree, each pipelined so the bandwidth term does not grow
    with depth; NCCL's double binary tree reaches about this (Sanders, Speck & Traeff,
    Parallel Computing 35(12), 2009).
    """
    return 2 * log2(p) * alpha + 2 * n_bytes / bw


def ring_allgather(n_bytes_total: Num, p: Num, bw: Num, alpha: Num) -> Num:
    """Ring allgather of ``n`` bytes in total: ``(p - 1)/p * n/bw + (p - 1)*alpha``."""
    return (p - 1) / p * n_bytes_total / bw + (p - 1) * alpha


def ring_reduce_scatter(n_bytes_total: Num, p: Num, bw: Num, alpha: Num) -> Num:
    """Ring reduce-scatter of ``n`` bytes: the same cost as the allgather."""
    return (p - 1) / p * n_bytes_total / bw + (p - 1) * alpha


def p2p(n_bytes: Num, bw: Num, alpha: Num) -> Num:
    """Point-to-point transfer: ``alpha + n/bw``."""
    return alpha + n_bytes / bw

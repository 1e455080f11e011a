"""Leave-one-model-out scores of PipeDream's rows: the numbers only they inform, derived without the scored model.

Most of the kernel model's fitted numbers are shared with DeepBench's kernels, but a few are
informed by PipeDream's per-layer rows alone (:data:`DERIVED`): the memory efficiency (DeepBench
has no memory-bound kernel), the window kernels' latency bound (pooling rows only), the
depthwise numbers (NASNet's rows only: the tap-loop efficiency, per-output and weight-gradient
work of :mod:`perfmodel.cost.depthwise`), the profiler's forward prologue
(:data:`~perfmodel.validation.kernel_rows.PIPEDREAM_FWD_PROLOGUE_S`) and the modules' forward
host work (:func:`~perfmodel.validation.kernel_rows.module_host_s`). Scoring a model's rows with
numbers read off those same rows flatters the score; :func:`held_out_prices` prices each model's
rows with these numbers derived from the other models' rows only, by the rules of
:func:`derive` (the loss of ``scripts/fit_kernel_params.py`` for the fitted ones,
:func:`prologue_rule` for the prologue, :func:`module_host_s` for the host work).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize, minimize_scalar

from ..hardware import Hardware, load_hardware
from .fit_bounds import BOUNDS, UNIT
from .kernel_rows import PIPEDREAM_FWD_OVERHEAD_S, KernelRow, module_host_s
from .kernels import price_rows

__all__ = ["DEPTHWISE_BOUNDS", "DERIVED", "PipeDreamNumbers", "derive", "prologue_rule", "with_numbers",
           "held_out_prices"]

#: the numbers :func:`derive` sets from PipeDream's rows alone (not re-derived per left-out model:
#: the 0.26 ms forward profiler cost, PIPEDREAM_FWD_OVERHEAD_S, issue 14's estimate over all
#: profiles, which module_host_s subtracts; and the numbers shared with DeepBench's fit, which a
#: full refit without each model, ``fit_kernel_params.py --lomo``, covers)
DERIVED = ("memory", "memory_latency_s", "sector_slots_per_sm", "depthwise_efficiency", "depthwise_output_flops",
           "depthwise_wgrad_flops", "prologue_s", "host_s")
#: the depthwise numbers and the fitting script's bounds on them
DEPTHWISE_BOUNDS = tuple((k, *BOUNDS[k]) for k in ("depthwise_efficiency", "depthwise_output_flops",
                                                    "depthwise_wgrad_flops"))


@dataclass(frozen=True)
class PipeDreamNumbers:
    """The numbers PipeDream's rows alone inform (units in the names; efficiencies are fractions)."""

    memory: float
    memory_latency_s: float
    sector_slots_per_sm: float
    depthwise_efficiency: float
    depthwise_output_flops: float
    depthwise_wgrad_flops: float
    prologue_s: float
    #: (op name, host seconds) of :func:`~perfmodel.validation.kernel_rows.module_host_s`
    host_s: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, hw: Hardware, prologue_s: float, host_s: tuple[tuple[str, float], ...] = ()) -> PipeDreamNumbers:
        """``hw``'s own values of the numbers, with ``prologue_s`` and ``host_s``."""
        k = hw.kernels
        return cls(hw.compute["fp32"].memory, k.memory_latency_s, k.sector_slots_per_sm, k.depthwise_efficiency,
                   k.depthwise_output_flops, k.depthwise_wgrad_flops, prologue_s, host_s)

    def host_of(self, r: KernelRow) -> float:
        """Host seconds of ``r``'s module before its first launch (forward rows only)."""
        return dict(self.host_s).get(r.op.split(" ")[0], 0.0) if r.what == "layer_fwd" else 0.0


def with_numbers(rows: Sequence[KernelRow], hw: Hardware, n: PipeDreamNumbers) -> tuple[list[KernelRow], Hardware]:
    """``rows`` (forward prologue replaced) and ``hw`` (fp32 memory efficiency and kernel numbers replaced)."""
    comp = dict(hw.compute)
    comp["fp32"] = dataclasses.replace(comp["fp32"], memory=n.memory)
    kern = dataclasses.replace(hw.kernels, memory_latency_s=n.memory_latency_s,
                               sector_slots_per_sm=n.sector_slots_per_sm, depthwise_efficiency=n.depthwise_efficiency,
                               depthwise_output_flops=n.depthwise_output_flops,
                               depthwise_wgrad_flops=n.depthwise_wgrad_flops)
    out = [dataclasses.replace(r, extra_hidden_s=n.prologue_s + n.host_of(r), host_s=n.host_of(r))
           if r.what == "layer_fwd" else r for r in rows]
    return out, dataclasses.replace(hw, compute=comp, kernels=kern)


def _log_loss(rows: Sequence[KernelRow], hw: Hardware, n: PipeDreamNumbers) -> float:
    """The fitting script's loss: mean |log(predicted / measured)|."""
    if not rows:
        return 0.0
    priced, h = with_numbers(rows, hw, n)
    pred, _ = price_rows(priced, {hw.name: h}, before=False)
    return float(np.mean(np.abs(np.log(pred / np.array([r.measured_s for r in rows])))))


def _fit_1d(loss: Callable[[float], float], lo: float, hi: float) -> float:
    return float(minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-3 * (hi - lo)}).x)


def prologue_rule(rows: Sequence[KernelRow], hw: Hardware, n: PipeDreamNumbers) -> float:
    """The forward prologue: the seconds ``P`` of a window's host work before its module's first
    launch, during which untimed work launched before the window runs hidden.

    Over the forward rows with untimed work in their window, the excess of the price with all of
    that work serial over the measured time follows ``min(untimed work, P + h)`` (``h``: the
    module's own host work, :attr:`PipeDreamNumbers.host_s`): it grows with the work, then levels
    off once the work outlasts the window's host work. ``P`` is the least absolute deviations fit
    of that curve (bounded by the whole forward profiler cost,
    :data:`PIPEDREAM_FWD_OVERHEAD_S`, of which it is part); 0 when no row has untimed work.
    """
    fwd = [r for r in rows if r.what == "layer_fwd" and r.extra]
    if not fwd:
        return 0.0
    priced, h = with_numbers(fwd, hw, dataclasses.replace(n, prologue_s=0.0))
    serial = [dataclasses.replace(r, extra_hidden_s=0.0) for r in priced]
    bare = [dataclasses.replace(r, extra=()) for r in serial]
    p, _ = price_rows(serial, {hw.name: h}, before=False)
    p0, _ = price_rows(bare, {hw.name: h}, before=False)
    extra, excess = p - p0, p - np.array([r.measured_s for r in fwd])
    host = np.array([r.host_s for r in priced])
    return _fit_1d(lambda x: float(np.mean(np.abs(excess - np.minimum(extra, x + host)))), 0.0,
                   PIPEDREAM_FWD_OVERHEAD_S)


def _fit_latency(pool: Sequence[KernelRow], hw: Hardware, n: PipeDreamNumbers) -> PipeDreamNumbers:
    """The window kernels' latency and sector slots (the fitting script's bounds) on the pooling rows."""
    if not pool:
        return n

    def at(x: np.ndarray) -> PipeDreamNumbers:
        lat, slots = BOUNDS["memory_latency_s"], BOUNDS["sector_slots_per_sm"]
        return dataclasses.replace(n, memory_latency_s=float(np.clip(x[0] * UNIT["memory_latency_s"], *lat)),
                                   sector_slots_per_sm=float(np.clip(x[1] * UNIT["sector_slots_per_sm"], *slots)))

    x0 = np.array([n.memory_latency_s / UNIT["memory_latency_s"], n.sector_slots_per_sm / UNIT["sector_slots_per_sm"]])
    sol = minimize(lambda x: _log_loss(pool, hw, at(x)), x0, method="Nelder-Mead",
                   options={"maxiter": 200, "xatol": 1e-3, "fatol": 1e-4})
    return at(sol.x)


def _fit_depthwise(dw: Sequence[KernelRow], hw: Hardware, n: PipeDreamNumbers) -> PipeDreamNumbers:
    """The three depthwise numbers (:data:`DEPTHWISE_BOUNDS`) fitted together on the depthwise rows."""
    scale = np.array([getattr(n, k) or 1.0 for k, _, _ in DEPTHWISE_BOUNDS])

    def at(x: np.ndarray) -> PipeDreamNumbers:
        eff, out, wgrad = (float(np.clip(v * s, lo, hi))
                           for (_, lo, hi), v, s in zip(DEPTHWISE_BOUNDS, x, scale, strict=True))
        return dataclasses.replace(n, depthwise_efficiency=eff, depthwise_output_flops=out, depthwise_wgrad_flops=wgrad)

    sol = minimize(lambda x: _log_loss(dw, hw, at(x)), np.ones(len(DEPTHWISE_BOUNDS)), method="Nelder-Mead",
                   options={"maxiter": 300, "xatol": 1e-3, "fatol": 1e-4})
    return at(sol.x)


def derive(
    rows: Sequence[KernelRow], hw: Hardware, refit: Collection[str] = ("memory", "depthwise")
) -> PipeDreamNumbers:
    """:class:`PipeDreamNumbers` from PipeDream ``rows`` on ``hw`` (its values as starting points),
    one pass in this order: the modules' host work (:func:`module_host_s` over the models of
    ``rows``), a first :func:`prologue_rule` on ``rows`` (never the shipped prologue, which saw
    every model), the memory efficiency on every row
    (bounds 0.4-1, as the fitting script's), the latency and sector slots on the pooling rows, the
    depthwise numbers on the depthwise convolutions (kept at ``hw``'s when ``rows`` have none),
    then :func:`prologue_rule` again. The memory efficiency and the depthwise numbers are fitted
    only if ``"memory"`` / ``"depthwise"`` are in ``refit`` (the fitting script fits them itself,
    with DeepBench's rows)."""
    n = PipeDreamNumbers.of(hw, 0.0, tuple(sorted(module_host_s({r.model for r in rows}).items())))
    n = dataclasses.replace(n, prologue_s=prologue_rule(rows, hw, n))
    if "memory" in refit:
        n = dataclasses.replace(n, memory=_fit_1d(
            lambda x: _log_loss(rows, hw, dataclasses.replace(n, memory=x)), *BOUNDS["memory"]))
    n = _fit_latency([r for r in rows if r.layer.kind in ("avgpool", "maxpool")], hw, n)
    dw = [r for r in rows if r.op.startswith("conv depthwise")]
    if dw and "depthwise" in refit:
        n = _fit_depthwise(dw, hw, n)
    return dataclasses.replace(n, prologue_s=prologue_rule(rows, hw, n))


def held_out_prices(rows: Sequence[KernelRow]) -> tuple[np.ndarray, dict[str, PipeDreamNumbers]]:
    """Each PipeDream row of ``rows`` priced with :func:`derive` on the other models' PipeDream rows
    (NaN for the rows of other sources), and the numbers used for each left-out model."""
    out = np.full(len(rows), np.nan)
    pipe = [i for i, r in enumerate(rows) if r.source == "pipedream"]
    if not pipe:
        return out, {}
    hw = load_hardware(rows[pipe[0]].profile)
    used: dict[str, PipeDreamNumbers] = {}
    for model in sorted({rows[i].model for i in pipe}):
        n = derive([rows[i] for i in pipe if rows[i].model != model], hw)
        idx = [i for i in pipe if rows[i].model == model]
        priced, h = with_numbers([rows[i] for i in idx], hw, n)
        out[idx], _ = price_rows(priced, {hw.name: h}, before=False)
        used[model] = n
    return out, used

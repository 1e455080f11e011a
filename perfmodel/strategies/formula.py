"""The step formula ``explain`` prints: named sympy terms, their symbols, values and what-ifs.

The symbols are the hardware's (:class:`~perfmodel.cost.compute.ComputeValues` and the link
symbols of :mod:`perfmodel.cost.collectives`) and the plan's (``b``, ``M``, grouped element
counts); the terms are built by evaluating the pricing's own formulas on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from ..cost.collectives import Group, link_params, link_symbols, ring_tier
from ..cost.compute import ComputeValues, ShapeRules, layer_seconds
from ..cost.shares import TensorShares
from ..errors import ProfileError, UsageError
from ..hardware.ranges import RANGES, check_value, describe
from .context import Context
from .dimension import Valuation
from .expr_code import MODULES, compile_expr
from .prediction import Prediction

__all__ = [
    "StepFormula",
    "SymbolValuation",
    "symbol_valuation",
    "SYMBOLS",
    "SYMBOL_MEANING",
    "HARDWARE_SYMBOLS",
    "ZERO_OK_SYMBOLS",
    "SYMBOL_FIELD",
    "what_if_value",
    "B_SYM",
    "M",
    "LINK",
    "MODULES",
    "E",
    "symbol_values",
    "layer_exprs",
    "tier",
    "count_words",
    "finish",
]

SYMBOLS = ComputeValues.symbols()
R, R32, ETA_C, ETA_L, ETA_M, BETA_MEM, TAU, E, H_OP, T_STEP, L_MEM = SYMBOLS.as_tuple()
M = sp.Symbol("M", positive=True)
B_SYM = sp.Symbol("b", positive=True)
LINK = link_symbols()

#: What each symbol stands for (printed by ``explain``).
SYMBOL_MEANING: dict[str, str] = {
    "b": "samples per micro-batch on one GPU",
    "M": "micro-batches per step",
    "R": "peak FLOP/s of convolutions and matmuls at the precision",
    "R_fp32": "fp32 (CUDA-core) peak FLOP/s, for elementwise ops",
    "eta_conv": "achievable fraction of R for convolutions",
    "eta_linear": "achievable fraction of R for linear layers",
    "eta_mem": "achievable fraction of the memory bandwidth",
    "beta_mem": "memory bandwidth, bytes/s",
    "tau": "GPU-side gap per kernel launched, s",
    "h": "host (CPU) time per op eager PyTorch dispatches, s",
    "t_step": "fixed seconds per step: zero_grad, loss, host synchronisation",
    "e": "bytes per activation element",
    "L_mem": "memory latency of a dependent load (window kernels' latency bound), s",
    "beta_intra": "effective intra-node bandwidth per GPU, bytes/s",
    "alpha_intra": "intra-node latency, s",
    "beta_net": "effective network bandwidth per GPU, bytes/s",
    "alpha_net": "network latency, s",
    "alpha_0": "fixed latency of one collective (NCCL's base latency), s",
    "gamma_intra": "extra compute seconds per second beside an allreduce in a node: NCCL's SMs, C/(S - C)",
    "gamma_net": "extra compute seconds per second beside an allreduce across nodes: NCCL's SMs, C/(S - C)",
    "kappa": "device-memory bytes per byte a collective moves over its link",
}

#: The symbols a what-if may change (:meth:`StepFormula.evaluate`, ``explain --set``): the
#: hardware profile's numbers. The batch, micro-batches, element size and the plan's element
#: counts fix the plan itself.
HARDWARE_SYMBOLS: tuple[str, ...] = (
    "R", "R_fp32", "eta_conv", "eta_linear", "eta_mem", "beta_mem", "tau", "h", "t_step", "L_mem",
    "beta_intra", "alpha_intra", "beta_net", "alpha_net", "alpha_0", "gamma_intra", "gamma_net", "kappa",
)

#: The profile field (:data:`~perfmodel.hardware.ranges.RANGES`) each hardware symbol stands
#: for; a what-if value must lie in that field's physical range. ``gamma_*`` stand for no
#: field (they are ``C/(S - C)`` of NCCL's channels and the SM count) and only need to be >= 0.
SYMBOL_FIELD: dict[str, str] = {
    "R": "peak", "R_fp32": "peak", "eta_conv": "conv", "eta_linear": "linear", "eta_mem": "memory",
    "beta_mem": "memory_bandwidth_bytes_per_s", "tau": "kernel_launch_s", "h": "host_op_s",
    "t_step": "step_overhead_s", "L_mem": "memory_latency_s", "beta_intra": "bandwidth_bytes_per_s",
    "alpha_intra": "latency_s", "beta_net": "bandwidth_bytes_per_s", "alpha_net": "latency_s",
    "alpha_0": "base_latency_s", "kappa": "memory_passes",
}

#: Hardware symbols that may be 0 in a what-if, where 0 is a machine one can think of: the
#: latencies (an ideal link), NCCL's base latency, compute contention and memory passes (no
#: contention), the launch gap ``tau``, the host time per op ``h`` (a host that is never the
#: bottleneck, as with CUDA graphs) and the fixed step cost ``t_step``: every symbol whose
#: profile range holds 0, and ``gamma_*``. The others divide a time (peaks, bandwidths,
#: efficiencies) or have a physical floor (``L_mem``: a memory access takes >= 1 ns).
ZERO_OK_SYMBOLS: frozenset[str] = frozenset(
    {name for name, fld in SYMBOL_FIELD.items() if RANGES[fld].holds(0.0)} | {"gamma_intra", "gamma_net"}
)


def what_if_value(where: str, name: str, value: float, given: str) -> float:
    """``value`` for hardware symbol ``name`` if a what-if may take it, else one
    :class:`UsageError` line naming the valid values (``where`` starts it, ``given`` is the
    value as the user wrote it): finite, > 0 (>= 0 for :data:`ZERO_OK_SYMBOLS`), an
    efficiency at most 1, inside the physical range of the profile field it stands for."""
    zero_ok = name in ZERO_OK_SYMBOLS
    fld = SYMBOL_FIELD.get(name)
    valid = f" (valid: {describe(fld)})" if fld else ""
    if not (math.isfinite(value) and (value > 0 or (value == 0 and zero_ok))):
        what = "a finite number >= 0" if zero_ok else "a positive finite number"
        raise UsageError(f"{where}: the value must be {what}, got {given}{valid}")
    if name.startswith("eta") and value > 1:
        raise UsageError(f"{where}: an efficiency is a fraction of peak (valid: 0 < {name} <= 1), got {given}")
    if fld is not None:
        try:
            check_value(where, fld, value)
        except ProfileError as e:
            raise UsageError(str(e)) from None
    return value


@dataclass(frozen=True)
class SymbolValuation(Valuation):
    """The pricing's values as symbols (:class:`~.dimension.Valuation`): the hardware's, ``b``
    and ``M``; each count a term names becomes a symbol whose value and meaning are recorded."""

    values: dict[sp.Symbol, float] = field(default_factory=dict)
    meaning: dict[str, str] = field(default_factory=dict)
    #: the shared parts :meth:`define` named, in order (a later one may read an earlier one), and
    #: each compiled once (:func:`_lambdify`): what-ifs re-evaluate them
    definitions: dict[sp.Symbol, Any] = field(default_factory=dict)
    definition_functions: dict[sp.Symbol, Callable[..., float]] = field(default_factory=dict)

    @property
    def symbolic(self) -> bool:
        return True

    def count(self, name: str, value: float, meaning: str) -> Any:
        sym = sp.Symbol(name, positive=True)
        self.values[sym] = float(value)
        self.meaning[name] = meaning
        return sym

    def define(self, name: str, expr: Any, meaning: str) -> Any:
        if not isinstance(expr, sp.Basic) or expr.is_Atom:
            return expr  # a number or one symbol: nothing to share
        sym = sp.Symbol(name, positive=True)
        self.definitions[sym], self.definition_functions[sym] = expr, _lambdify(expr)
        self.values[sym] = self.definition_functions[sym](self.values)
        self.meaning[name] = meaning
        return sym


def symbol_valuation(values: dict[sp.Symbol, float]) -> SymbolValuation:
    """Symbols for the hardware, ``b`` and ``M``, recording the plan's counts into ``values``."""
    return SymbolValuation(SYMBOLS, LINK, B_SYM, M, values, {})


@dataclass(frozen=True)
class StepFormula:
    """Named terms (sympy), their numeric values, the total and the prediction it reproduces.

    ``legend`` explains terms whose symbols need it (grouped exchanges), ``meaning`` the
    plan's own symbols (element counts, simulated times), ``notes`` what is not a closed
    form. ``resimulate`` (``mp`` plans) recomputes the simulated symbols at other values.
    """

    terms: dict[str, sp.Expr]
    term_values: dict[str, float]
    values: dict[sp.Symbol, float]
    iteration_time_s: float
    prediction: Prediction
    legend: dict[str, str] = field(default_factory=dict)
    meaning: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    resimulate: Callable[[dict[sp.Symbol, float]], dict[sp.Symbol, float]] | None = field(
        default=None, repr=False, compare=False
    )
    functions: dict[str, Callable[..., float]] = field(default_factory=dict, repr=False, compare=False)
    all_values: dict[sp.Symbol, float] = field(default_factory=dict, repr=False, compare=False)
    numeric_terms: tuple[str, ...] = ()
    #: shared parts the terms read by name (:meth:`SymbolValuation.define`), in order, and their
    #: compiled forms; a what-if re-evaluates them before the terms
    definitions: dict[sp.Symbol, Any] = field(default_factory=dict)
    definition_functions: dict[sp.Symbol, Callable[..., float]] = field(default_factory=dict, repr=False,
                                                                         compare=False)

    @property
    def total(self) -> sp.Expr:
        return sp.Add(*self.terms.values())

    def meaning_of(self, name: str) -> str:
        return self.meaning.get(name) or SYMBOL_MEANING.get(name, "a named term of the breakdown, s")

    def what_if_values(self, changes: Mapping[str | sp.Symbol, float]) -> dict[sp.Symbol, float]:
        """The symbol values with hardware symbols ``changes`` replaced (and simulated times redone)."""
        base = self.all_values or self.values
        by_name = {str(s): s for s in base}
        new = dict(base)
        for key, value in changes.items():
            name = str(key)
            if name not in HARDWARE_SYMBOLS:
                raise UsageError(
                    f"what-if of '{name}': only hardware symbols can change (valid: {', '.join(HARDWARE_SYMBOLS)})"
                )
            v = what_if_value(f"what-if of '{name}'", name, float(value), repr(value))
            if name in by_name:
                new[by_name[name]] = v
        if self.resimulate is not None:
            new.update(self.resimulate(new))
        for sym, expr in self.definitions.items():
            new[sym] = _value(self.definition_functions.get(sym), expr, new)
        return new

    def evaluate(self, changes: Mapping[str | sp.Symbol, float] | None = None,
                 at: dict[sp.Symbol, float] | None = None) -> dict[str, float]:
        """Each term's seconds with hardware symbols set to ``changes`` (names or symbols), or at the
        values ``at`` a :meth:`what_if_values` gave. A symbol the formula does not contain changes nothing."""
        vals = at if at is not None else self.what_if_values(changes or {})
        return {k: _value(self.functions.get(k), v, vals) for k, v in self.terms.items()}

    def time_s(self, changes: Mapping[str | sp.Symbol, float] | None = None) -> float:
        """The step time with hardware symbols set to ``changes`` (:meth:`evaluate`)."""
        return float(sum(self.evaluate(changes).values()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.prediction.strategy.spec(),
            "formula": "T_step = " + " + ".join(f"T_{k}" for k in self.terms),
            "terms": {
                k: {"expression": _short(v), "value_s": self.term_values[k], "legend": self.legend.get(k, "")}
                for k, v in self.terms.items()
            },
            "definitions": {
                str(d): {"expression": _short(e), "value_s": self.values[d], "meaning": self.meaning_of(str(d))}
                for d, e in self.definitions.items()
            },
            "symbols": {str(s): {"value": v, "meaning": self.meaning_of(str(s))} for s, v in self.values.items()
                        if s not in self.definitions},
            "notes": list(self.notes),
            "numeric_terms": list(self.numeric_terms),
            "iteration_time_s": self.iteration_time_s,
            "predict_iteration_time_s": self.prediction.iteration_time_s,
        }


def _reachable(terms: dict[str, Any], definitions: dict[sp.Symbol, Any]) -> dict[sp.Symbol, Any]:
    """The definitions the terms read, directly or through a later definition, in their order."""
    read = set().union(*(v.free_symbols for v in terms.values() if isinstance(v, sp.Basic)))
    for sym, expr in reversed(definitions.items()):
        if sym in read:
            read |= expr.free_symbols
    return {sym: expr for sym, expr in definitions.items() if sym in read}


def _short(expr: sp.Expr, limit: int = 600) -> str:
    text = str(expr)
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text)} characters)"


def _lambdify(expr: Any) -> Callable[..., float]:
    """A function of the values dict (numbers pass through)."""
    if not isinstance(expr, sp.Basic):
        value = float(expr)
        return lambda values: value
    free = sorted(expr.free_symbols, key=str)
    fn = compile_expr(free, expr)
    return lambda values: float(fn(*(values[x] for x in free)))


def _value(fn: Callable[..., float] | None, expr: Any, values: dict[sp.Symbol, float]) -> float:
    return float((fn or _lambdify(expr))(values))


def symbol_values(ctx: Context, group: Group | None) -> dict[sp.Symbol, float]:
    lp = link_params(ctx.hw, group)
    numbers = ComputeValues.of(ctx.hw, ctx.precision).as_tuple()
    return {
        **{sym: x for sym, x in zip(SYMBOLS.as_tuple(), numbers, strict=True)},
        LINK.bw_intra: lp.bw_intra,
        LINK.alpha_intra: lp.alpha_intra,
        LINK.bw_net_per_gpu: lp.bw_net_per_gpu,
        LINK.alpha_net: lp.alpha_net,
        LINK.alpha_base: lp.alpha_base,
        LINK.sm_intra: lp.sm_intra,
        LINK.sm_net: lp.sm_net,
        LINK.mem_passes: lp.mem_passes,
    }


def layer_exprs(
    ctx: Context,
    batch: Any,
    grid: tuple[int, int, int],
    batch_value: float,
    counts: dict[str, np.ndarray] | None = None,
    params: np.ndarray | None = None,
    shares: TensorShares | None = None,
) -> tuple[list[Any], list[Any]]:
    """Forward and backward time of every layer as expressions: :func:`layer_seconds` on symbols.

    Every count is linear in the batch, so the count of ``batch`` samples is ``batch`` times
    the per-sample count on the tile (the same counts, evaluated at ``b = 1``), or of
    ``counts`` per sample and ``params`` per layer where given (a GPU's share of a split, each
    tensor's share in ``shares``);
    ``batch_value`` is the micro-batch the kernels' shape efficiencies are taken at. Each layer
    is multiplied by the context's calibration factor (:attr:`Context.compute_scale`), as
    :meth:`Context.times` multiplies predict's.
    """
    ev = counts if counts is not None else ctx.cc.evaluate(1.0, *grid)
    weights = params if params is not None else ctx.cc.params
    rules = ShapeRules.of(ctx.hw, ctx.precision, batch_value, ctx.cudnn_major, ctx.memory_format, ctx.fusion,
                          ctx.autocast)
    fwd, bwd = layer_seconds(ctx.cc, ev, np.asarray(weights), SYMBOLS, batch, rules, shares)
    k = ctx.compute_scale
    if k == 1.0:
        return list(fwd), list(bwd)
    return [k * x for x in fwd], [k * x for x in bwd]


def tier(group: Group) -> tuple[Any, Any, str]:
    """The bandwidth and latency a ring over ``group`` runs at (:func:`ring_tier`), in words too."""
    bw, alpha = ring_tier(group, LINK)
    where = "in one node" if group.nodes <= 1 else f"over {group.nodes} nodes, {group.per_node} GPUs each"
    return bw, alpha, where


def count_words(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")


def finish(
    terms: dict[str, Any],
    values: dict[sp.Symbol, float],
    pred: Prediction,
    legend: dict[str, str] | None = None,
    meaning: dict[str, str] | None = None,
    notes: list[str] | None = None,
    resimulate: Callable[[dict[sp.Symbol, float]], dict[sp.Symbol, float]] | None = None,
    also: set[sp.Symbol] | None = None,
    definitions: dict[sp.Symbol, Any] | None = None,
    definition_functions: dict[sp.Symbol, Callable[..., float]] | None = None,
) -> StepFormula:
    """Evaluate the terms, in the order of ``predict``'s breakdown; the symbols kept are those of the terms,
    of the shared parts they read (``definitions``, valued in ``values``, compiled where given in
    ``definition_functions``) and ``also`` (read by a simulation).

    A breakdown entry the symbolic pricing did not give (a term priced by a function that
    takes numbers only) enters as a symbol ``T_<key>`` valued at predict's number, said in
    the notes and the legend, so a new term of a dimension is never missing from the formula.
    """
    values = dict(values)
    legend = dict(legend or {})
    ordered = {k: terms[k] for k in pred.breakdown if k in terms}
    extra = [k for k in terms if k not in pred.breakdown]
    if extra:
        raise ValueError(f"explain built terms predict's breakdown lacks: {', '.join(extra)}")
    numeric = [k for k in pred.breakdown if k not in terms]
    for k in numeric:
        sym = sp.Symbol(f"T_{k}", positive=True)
        values[sym] = float(pred.breakdown[k])
        ordered[k] = sym
        legend[k] = "evaluated numerically: the symbolic pricing gives no closed form for this term"
    notes = list(notes or ())
    if numeric:
        notes.append(f"{', '.join('T_' + k for k in numeric)}: predict's number (no closed form yet); "
                     "a what-if leaves it unchanged.")
    fns = {k: _lambdify(v) for k, v in ordered.items()}
    term_values = {k: fns[k](values) for k in ordered}
    definitions = _reachable(ordered, definitions or {})
    exprs = [*ordered.values(), *definitions.values()]
    used = set().union(*(v.free_symbols for v in exprs if isinstance(v, sp.Basic))) | (also or set())
    return StepFormula(
        ordered,
        term_values,
        {k: v for k, v in values.items() if k in used},
        sum(term_values.values()),
        pred,
        legend=legend,
        meaning=meaning or {},
        notes=tuple(notes),
        resimulate=resimulate,
        functions=fns,
        all_values=dict(values),
        numeric_terms=tuple(numeric),
        definitions=definitions,
        definition_functions={d: (definition_functions or {}).get(d) or _lambdify(e)
                              for d, e in definitions.items()},
    )

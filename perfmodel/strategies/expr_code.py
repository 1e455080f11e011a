"""The step formula's sympy expressions compiled to plain Python functions, without sympy's code printer.

``sp.lambdify`` prints an expression through sympy's code printer (term ordering, precedence,
minus-sign extraction at every node), which took ~85% of an ``explain`` (about 1.3 s of 1.5 s for
``resnet18 pp=4,dp=2,mb=8``). The formulas use few node kinds (sums, products, powers, ``Max``,
``Min``, ``ceiling``, numbers and symbols): :func:`compile_expr` writes their Python source
directly, ~10x faster, and falls back to ``sp.lambdify`` for any other kind. Both evaluate the
same arithmetic; only the order of a sum's terms may differ (rounding, ~1e-13 relative at worst
where terms cancel).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import sympy as sp

__all__ = ["MODULES", "compile_expr"]

#: How ``sp.lambdify`` evaluates the formulas' functions (the fallback of :func:`compile_expr`).
MODULES: list[Any] = ["math", {"Max": max, "Min": min, "ceiling": math.ceil}]
_NAMESPACE: dict[str, Any] = {"max": max, "min": min, "ceil": math.ceil, "sqrt": math.sqrt, "inf": math.inf,
                              "nan": math.nan}


class _Unsupported(Exception):
    """A node kind :func:`_source` does not write (``sp.lambdify`` takes the expression)."""


def _join(op: str, args: Sequence[Any], names: dict[Any, str], memo: dict[Any, str]) -> str:
    return op.join(_source(a, names, memo) for a in args)


def _node(e: sp.Basic, names: dict[Any, str], memo: dict[Any, str]) -> str:
    if e.is_Add:
        return "(" + _join(" + ", e.args, names, memo) + ")"
    if e.is_Mul:
        return "(" + _join("*", e.args, names, memo) + ")"
    if e.is_Pow:
        base, exp = e.args
        if exp == -1:
            return f"(1/{_source(base, names, memo)})"
        if exp == sp.S.Half:
            return f"sqrt({_source(base, names, memo)})"
        return f"({_source(base, names, memo)}**{_source(exp, names, memo)})"
    calls = {sp.Max: "max", sp.Min: "min", sp.ceiling: "ceil"}
    if e.func in calls:
        return f"{calls[e.func]}({_join(', ', e.args, names, memo)})"
    raise _Unsupported(type(e).__name__)


def _source(e: Any, names: dict[Any, str], memo: dict[Any, str]) -> str:
    """Python source of ``e``, the symbols written as ``names``."""
    if isinstance(e, (int, float)) or (isinstance(e, sp.Basic) and e.is_Number):
        return f"({float(e)!r})"  # parenthesised: -2.0**x would read as -(2.0**x)
    if not isinstance(e, sp.Basic):
        raise _Unsupported(type(e).__name__)
    text = memo.get(e)
    if text is None:
        text = names[e] if e in names else _node(e, names, memo)
        memo[e] = text
    return text


def compile_expr(args: Sequence[sp.Symbol], expr: Any) -> Callable[..., Any]:
    """``sp.lambdify(args, expr, modules=MODULES)``: a function of ``args`` (in order) giving
    ``expr``'s value, a list of values where ``expr`` is a list or tuple."""
    names = {x: f"_{i}" for i, x in enumerate(args)}
    memo: dict[Any, str] = {}
    try:
        if isinstance(expr, (list, tuple)):
            body = "[" + ", ".join(_source(e, names, memo) for e in expr) + "]"
        else:
            body = _source(expr, names, memo)
        namespace = dict(_NAMESPACE)
        exec(compile(f"def _f({', '.join(names.values())}):\n    return {body}\n", "<formula>", "exec"), namespace)
    except (_Unsupported, SyntaxError, RecursionError, MemoryError):
        return sp.lambdify(list(args), expr, modules=MODULES)  # type: ignore[no-any-return]
    fn: Callable[..., Any] = namespace["_f"]
    return fn

"""compile_expr evaluates explain's formulas as sympy's lambdify does (the oracle), only faster to build."""

from __future__ import annotations

import math

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import parse_strategy
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.expr_code import MODULES, compile_expr
from perfmodel.strategies.predict import context

X = sp.symbols("x0:4", positive=True)
LEAVES = st.sampled_from([*X, sp.Integer(3), sp.Rational(1, 3), sp.Float(2.5), sp.Integer(-1)])


def _tree(children: st.SearchStrategy[sp.Expr]) -> st.SearchStrategy[sp.Expr]:
    pair = st.tuples(children, children)
    return st.one_of(
        pair.map(lambda p: p[0] + p[1]),
        pair.map(lambda p: p[0] * p[1]),
        pair.map(lambda p: p[0] - 2 * p[1]),
        pair.map(lambda p: sp.Max(p[0], p[1])),
        pair.map(lambda p: sp.Min(p[0], p[1])),
        children.map(lambda c: 1 / (1 + X[0] ** 2 + c**2)),
        children.map(lambda c: sp.sqrt(1 + X[1] ** 2 + c**2)),
        children.map(lambda c: sp.ceiling(c / 7)),
        children.map(lambda c: (X[2] + 1) ** sp.Rational(3, 2) * c),
    )


def _agree(got: float, want: float) -> bool:
    return math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12 * max(1.0, abs(want)))


@settings(max_examples=200, deadline=None)
@given(st.recursive(LEAVES, _tree, max_leaves=12), st.lists(st.floats(0.1, 50.0), min_size=4, max_size=4))
def test_random_expressions_evaluate_as_lambdify(expr: sp.Expr, point: list[float]) -> None:
    args = sorted(expr.free_symbols, key=str)
    values = [point[X.index(a)] for a in args]
    want = float(sp.lambdify(args, expr, modules=MODULES)(*values))
    assert _agree(float(compile_expr(args, expr)(*values)), want), expr


@pytest.mark.parametrize(("model", "gpus", "spec", "batch"), [
    ("resnet18", 8, "pp=2,dp=4,mb=4,schedule=1f1b", 256),
    ("resnet18", 4, "sp=2x2", 4),
    ("resnet50", 4, "mp=2,dp=2", 32),
])
def test_explains_terms_evaluate_as_lambdify(model: str, gpus: int, spec: str, batch: int) -> None:
    net = get_model(model, 64 if model.startswith("resnet") else None)
    f = explain_plan(context(net, load_hardware("v100-16gb-dgx1"), "amp", "sgd"), parse_strategy(spec, gpus), batch)
    for key, term in f.terms.items():
        if not isinstance(term, sp.Basic):
            continue
        args = sorted(term.free_symbols, key=str)
        values = [f.all_values[a] for a in args]
        want = float(sp.lambdify(args, term, modules=MODULES)(*values))
        assert _agree(float(compile_expr(args, term)(*values)), want), key
        assert f.term_values[key] == pytest.approx(want, rel=1e-12, abs=1e-18)


def test_lists_and_plain_numbers() -> None:
    fn = compile_expr(X[:2], [X[0] * X[1], 2.0, sp.ceiling(X[0] / 3)])
    assert fn(2.0, 5.0) == [10.0, 2.0, 1]


@pytest.mark.parametrize("expr", [sp.log(X[0]) + X[1], sp.Piecewise((X[0], X[1] > 1), (X[1], True))])
def test_other_functions_fall_back_to_lambdify(expr: sp.Expr) -> None:
    args = sorted(expr.free_symbols, key=str)
    want = sp.lambdify(args, expr, modules=MODULES)(2.0, 3.0)
    assert compile_expr(args, expr)(2.0, 3.0) == pytest.approx(want, rel=1e-15)


def test_a_negative_numeric_base_keeps_its_sign_under_a_power() -> None:
    # -2.0**z reads as -(2.0**z) in Python: a negative number must be written parenthesised
    z = sp.Symbol("z")
    expr = sp.Pow(sp.Integer(-2), z, evaluate=False)
    assert compile_expr([z], expr)(2.0) == pytest.approx(4.0)
    assert compile_expr([z], sp.Integer(-3) * z)(2.0) == pytest.approx(-6.0)

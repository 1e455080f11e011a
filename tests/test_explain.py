"""explain: the symbolic step formula evaluates to predict's iteration time."""

from __future__ import annotations

import pytest
import sympy as sp

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import parse_strategy
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.predict import context


@pytest.mark.parametrize("model, gpus, spec, batch", [
    ("resnet18", 8, "dp=8", 256),
    ("resnet18", 64, "dp=64,comm=hierarchical", 2048),
    ("resnet18", 8, "pp=4,dp=2,mb=8", 256),
    ("resnet18", 8, "pp=2,dp=4,mb=4,recompute=true,comm=tree", 256),
    ("resnet18", 4, "sp=2x2", 4),
    ("alexnet", 8, "dp=8,comm=ps-sharded", 256),
])
def test_formula_equals_predict(model: str, gpus: int, spec: str, batch: int) -> None:
    ctx = context(get_model(model, 128 if model == "resnet18" and spec.startswith("sp") else None),
                  load_hardware("a100-80gb-dgx"), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy(spec, gpus), batch)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)
    names = {str(s) for s in f.values}
    if spec == "dp=8":
        assert {"b", "R", "beta_intra", "alpha_intra", "tau"} <= names
        # the formula really depends on the link: doubling beta_intra cannot make it slower
        total = f.total.subs(f.values)
        faster = f.total.subs({**f.values, sp.Symbol("beta_intra", positive=True): 2 * f.values[
            next(s for s in f.values if str(s) == "beta_intra")]})
        assert float(faster) <= float(total)

"""The step as named terms, each computed once: spatial x pipeline plans, and the layering of strategies."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sympy as sp

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import context, parse_strategy, predict
from perfmodel.strategies.explain import StepFormula, explain_plan

PACKAGE = Path(__file__).resolve().parents[1] / "perfmodel"


@pytest.mark.parametrize(
    ("model", "size", "spec", "batch"),
    [("resnet50", 512, "sp=2x2,pp=2", 16), ("cosmoflow", 128, "sp=2x2x1,pp=2", 8),
     ("resnet18", None, "sp=2x2,pp=2,mb=4,recompute=true", 64)],
)
def test_spatial_pipeline_terms_are_the_critical_stage(model: str, size: int | None, spec: str, batch: int) -> None:
    p = predict(model, 8, spec, global_batch=batch, image_size=size)
    b = p.breakdown
    assert sum(b.values()) == pytest.approx(p.iteration_time_s, rel=1e-12)
    # compute, halo exchange and redistribution of the critical stage: its stage seconds (which
    # carry its halos and redistributions) for every micro-batch, nothing counted twice
    stages = p.details["stages"]
    mb = p.strategy.mb
    per_stage = [mb * (st["forward_s"] + st["backward_s"]) for st in stages]
    own = b["compute"] + b["halo_exchange"] + b["redistribution"]
    assert any(own == pytest.approx(x, rel=1e-9) for x in per_stage)
    assert b["halo_exchange"] > 0 and b["compute"] > 0 and b["pipeline_bubble"] >= 0


def test_halo_of_the_pipeline_is_at_most_the_unpipelined_plans() -> None:
    pp = predict("resnet50", 8, "sp=2x2,pp=2", global_batch=16, image_size=512)
    flat = predict("resnet50", 8, "sp=2x2,dp=2", global_batch=32, image_size=512)
    # the same tiles of 16 samples per replica: a stage holds a part of the links' halos
    assert pp.breakdown["halo_exchange"] < flat.breakdown["halo_exchange"]


def _imports(path: Path) -> list[tuple[ast.ImportFrom, bool]]:
    """Every ``from ... import`` of a module, and whether it sits inside a function."""
    tree = ast.parse(path.read_text())
    out: list[tuple[ast.ImportFrom, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out += [(n, True) for n in ast.walk(node) if isinstance(n, ast.ImportFrom)]
    inner = {id(n) for n, _ in out}
    out += [(n, False) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in inner]
    return out


#: strategies/spec.py (the spec language) is checked with its owners' tests.
MODULES = [p for p in sorted((PACKAGE / "strategies").glob("*.py")) if p.name != "spec.py"] + sorted(
    (PACKAGE / "partition").glob("*.py")
)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_strategies_and_partition_import_cleanly(path: Path) -> None:
    """No private name from another module, no function-level import of the package, and
    partition never imports strategies (it sits below them)."""
    for node, in_function in _imports(path):
        if node.level == 0:
            continue
        names = [a.name for a in node.names]
        assert not [n for n in names if n.startswith("_")], f"{path.name} imports private {names} from {node.module}"
        assert not in_function, f"{path.name} imports {node.module} inside a function"
        if path.parent.name == "partition":
            assert not (node.module or "").startswith("strategies"), f"{path.name} imports {node.module}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_modules_and_functions_fit_a_screen(path: Path) -> None:
    """Modules under ~400 lines, functions under ~80 (the team's limits for these packages)."""
    src = path.read_text()
    assert len(src.splitlines()) <= 400, f"{path.name}: {len(src.splitlines())} lines"
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            assert length <= 80, f"{path.name}: {node.name} is {length} lines"


#: Plans of every chain kind and both split kinds on small networks (mp plans are covered in test_explain).
_PLANS = [
    ("resnet18", None, "dp=8,comm=tree"), ("resnet18", None, "pp=4,dp=2,mb=4,schedule=1f1b,recompute=true"),
    ("resnet18", None, "sp=2x2,dp=2,decomp=auto"), ("vgg11", None, "dp=8,comm=ps-sharded"),
    ("squeezenet1_1", None, "sp=2x2,pp=2,mb=2"), ("cosmoflow", 128, "sp=2x2x2"),
    ("mobilenet_v2", None, "channel=4,dp=2"), ("alexnet", None, "filter=2,dp=4,comm=hierarchical"),
]


@pytest.mark.parametrize(("model", "size", "spec"), _PLANS, ids=[p[2] for p in _PLANS])
@pytest.mark.parametrize("hardware", ["v100-16gb-dgx1", "h100-80gb-dgx"])
def test_explain_is_predict_on_symbols(model: str, size: int | None, spec: str, hardware: str) -> None:
    """explain evaluates the pricing's own functions on symbols: at the profile's values its
    terms add up to predict's step, and a what-if equals predict on the changed profile."""
    net = get_model(model, size)
    hw = load_hardware(hardware)
    s = parse_strategy(spec, 8)
    f = explain_plan(context(net, hw, "amp", "sgd"), s, 8 * 4)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)
    faster = hw.what_if(inter_bandwidth_scale=2.0, intra_bandwidth_scale=3.0)
    p = predict(net, 8, s, faster, "amp", global_batch=32)
    changed = {"beta_net": float(f.all_values[_symbol(f, "beta_net")]) * 2,
               "beta_intra": float(f.all_values[_symbol(f, "beta_intra")]) * 3}
    assert f.time_s(changed) == pytest.approx(p.iteration_time_s, rel=1e-9)


def _symbol(f: StepFormula, name: str) -> sp.Symbol:
    return next(s for s in f.all_values if str(s) == name)

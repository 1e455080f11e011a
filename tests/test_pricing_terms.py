"""The step as named terms, each computed once: spatial x pipeline plans, explain on symbols.

(The layering and size rules are in tests/test_structure.py.)"""

from __future__ import annotations

import dataclasses

import pytest
import sympy as sp

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import context, parse_strategy, predict
from perfmodel.strategies.explain import StepFormula, explain_plan


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
    # a what-if keeps the plan's decisions (explain's docstring): predict the changed profile on
    # the same stage split, which faster links may otherwise move (squeezenet1_1 sp=2x2,pp=2 on
    # V100: links 8:5 -> 7:6)
    if s.pp > 1 and not s.balance:
        s = dataclasses.replace(s, balance=tuple(f.prediction.details["balance"]))
    p = predict(net, 8, s, faster, "amp", global_batch=32)
    changed = {"beta_net": float(f.all_values[_symbol(f, "beta_net")]) * 2,
               "beta_intra": float(f.all_values[_symbol(f, "beta_intra")]) * 3}
    assert f.time_s(changed) == pytest.approx(p.iteration_time_s, rel=1e-9)


def _symbol(f: StepFormula, name: str) -> sp.Symbol:
    return next(s for s in f.all_values if str(s) == name)

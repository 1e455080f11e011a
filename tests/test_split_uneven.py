"""Splits whose degree does not divide the channels: explain's formula still equals predict.

The split GPU's counts are scaled by its output share and divided by it again; that round trip
must give back the whole micro-batch, or one more tile row enters every ceil over the batch side
(review of 68901fb: resnet50 filter=3,dp=2 at 96 per group priced its fc 4.5% above explain).
"""

from __future__ import annotations

import pytest

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import parse_strategy
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.predict import context


@pytest.mark.parametrize("model, spec, batch", [
    ("resnet50", "filter=3,dp=2", 192),
    ("mobilenet_v2", "filter=3,dp=2", 192),
    ("mobilenet_v2", "filter=6", 64),
    ("resnext50_32x4d", "channel=3,dp=2", 128),
])
@pytest.mark.parametrize("precision", ["fp32", "amp"])
def test_uneven_split_formula_equals_predict(model: str, spec: str, batch: int, precision: str) -> None:
    ctx = context(get_model(model), load_hardware("v100-32gb-pcie"), precision, "sgd")
    strategy = parse_strategy(spec)
    f = explain_plan(ctx, parse_strategy(spec, strategy.gpus), batch)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)

"""One context prices each (plan, global batch) once; the searches of a scale sweep share it.

``scale resnet50 --gpus 1-1024:log2`` priced 5,604 plans of which 2,952 were distinct (its kinds at
one GPU count search many of the same candidates): 14.7 s, 9.9 s with the memo. The oracle for the
shared searches is ``plan`` itself, which builds a fresh context per call.
"""

from __future__ import annotations

import pytest

from perfmodel import api
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.search import plan
from perfmodel.strategies import context, parse_strategy
from perfmodel.strategies.compose import price


def test_memo_keys_on_plan_and_batch() -> None:
    net, hw = get_model("resnet18", 64), load_hardware("v100-16gb-dgx1")
    ctx = context(net, hw, "amp", "sgd")
    s = parse_strategy("pp=2,dp=2,mb=2", 4)
    a, b = price(ctx, s, 64), price(ctx, s, 128)
    assert price(ctx, s, 64) is a and a.time_s != b.time_s
    for batch, got in ((64, a), (128, b)):
        fresh = price(context(net, hw, "amp", "sgd"), s, batch)
        assert fresh.breakdown == got.breakdown and fresh.memory == got.memory
    other = price(ctx, parse_strategy("dp=4", 4), 64)
    assert other.time_s != a.time_s


def test_scale_rows_are_plans_best() -> None:
    df = api.scale("resnet18", [2, 8], global_batch=256, strategies=["dp", "pp", "hybrid", "best"], image_size=64)
    kinds = {"dp": ("dp",), "pp": ("pp",), "hybrid": ("hybrid",), "best": None}
    for _, row in df[df["reason"].isna()].iterrows():
        k = kinds[str(row["strategy"])]
        r = plan("resnet18", int(row["gpus"]), "a100-80gb-dgx", "amp", 256, image_size=64, top=1,
                 **({} if k is None else {"kinds": k}))
        assert r.plans[0].strategy.spec() == row["plan"]
        assert r.plans[0].iteration_time_s == pytest.approx(float(row["step_s"]), rel=1e-12)

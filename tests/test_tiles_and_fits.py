"""The search's early check of spatial plans against their full price: ``tiles_and_fits``
says what ``price`` reports (any tiled link; memory within the GPU's), and a search that uses it
ranks the same plans as pricing every candidate in full."""

from __future__ import annotations

import importlib

import pytest

from perfmodel.errors import PerfmodelError
from perfmodel.hardware import load_hardware
from perfmodel.network.zoo import get_model
from perfmodel.search.plan import Pricer, plan_in
from perfmodel.strategies.compose import memory_ceiling_bytes, price, split_memory_bytes, tiles_and_fits
from perfmodel.strategies.context import clear_contexts, context
from perfmodel.strategies.spatial import sample_layers, spatial_layers
from perfmodel.strategies.spec import parse_strategy
from perfmodel.strategies.split_search import split_pool

#: (model, profile, plan, global batches): spatial pipelines on both sides of both answers
CASES = [
    ("resnet50", "a100-80gb-dgx", "sp=2x2,dp=2,decomp=auto", (4, 16384)),  # no pipeline
    ("unet", "v100-16gb-dgx1", "sp=2x2,dp=2,mb=2", (8, 512)),
    ("resnet50", "a100-80gb-dgx", "sp=2x2,pp=2,dp=2", (16, 32768)),
    ("resnet50", "a100-80gb-dgx", "sp=2x2,pp=2,dp=2,decomp=auto", (16, 4096, 32768)),
    ("resnet50", "v100-16gb-dgx1", "sp=2x2,pp=4,dp=2,mb=4,schedule=1f1b,decomp=auto", (32, 8192, 65536)),
    ("unet", "v100-16gb-dgx1", "sp=2x2,pp=2,dp=4,mb=2,decomp=auto", (8, 64, 1024)),
    ("vgg16", "v100-16gb-dgx1", "sp=1x2,pp=3,dp=2,mb=2,recompute=true,decomp=auto", (8, 512, 4096)),
    # pools that are not every split (C(17, 5) and C(17, 15) > EXHAUSTIVE_SPLITS)
    ("resnet50", "a100-80gb-dgx", "sp=1x4,pp=6,dp=2,mb=4,decomp=auto", (64, 16384, 65536)),
    ("resnet50", "a100-80gb-dgx", "sp=1x4,pp=16,mb=16,schedule=1f1b,decomp=auto", (256, 65536)),
]


def _reported(ctx_args: tuple[str, str], spec: str, batch: int) -> tuple[tuple[bool, bool], tuple[bool, bool]]:
    model, profile = ctx_args
    ctx = context(get_model(model), load_hardware(profile), "amp", "sgd")
    s = parse_strategy(spec, None)
    r = price(ctx, s, batch)
    full = (bool(r.details["spatial_links"]), sum(r.memory.values()) <= ctx.hw.device.memory_bytes)
    return tiles_and_fits(ctx, s, batch), full


@pytest.mark.parametrize(("model", "profile", "spec", "batches"), CASES)
def test_probe_says_what_price_reports(model: str, profile: str, spec: str, batches: tuple[int, ...]) -> None:
    for b in batches:
        probe, full = _reported((model, profile), spec, b)
        assert probe == full, (spec, b)


def test_cases_reach_every_answer() -> None:
    """The cases above cover tiled and untiled plans, fitting and not: else the check is weak."""
    seen = {_reported((m, p), spec, b)[1] for m, p, spec, bs in CASES for b in bs}
    assert {t for t, _ in seen} == {True, False}
    assert {f for _, f in seen} == {True, False}


@pytest.mark.parametrize("spec", ["pp=4,mb=8", "pp=4,dp=2,mb=8,schedule=1f1b", "pp=3,mb=2,recompute=true",
                                  "pp=5,mb=3,schedule=1f1b,recompute=true", "pp=2,sp=2x2,mb=4,decomp=auto"])
def test_memory_ceiling_is_above_every_split(spec: str) -> None:
    """The ceiling the early check trusts is at least every contiguous split's memory (and above
    the smallest: a bound, not the answer)."""
    net = get_model("resnet18")
    ctx = context(net, load_hardware("v100-16gb-dgx1"), "amp", "adam")
    s = parse_strategy(spec)
    m, workspace = 6, 3.0e8
    layers = spatial_layers(ctx, s, m) if s.sp_degree > 1 else sample_layers(ctx, m)
    every = split_memory_bytes(ctx, s, layers, split_pool(len(net.links), s.pp, []), m * s.mb, workspace)
    ceiling = memory_ceiling_bytes(ctx, s, layers, m * s.mb, workspace)
    assert every.max() <= ceiling
    assert every.min() < ceiling


def test_probe_raises_what_price_raises() -> None:
    ctx = context(get_model("resnet50"), load_hardware("a100-80gb-dgx"), "amp", "sgd")
    for spec, batch in (("sp=2x2,pp=2,dp=2", 31), ("sp=2x2,pp=2,dp=2,balance=3:3", 64),
                        ("sp=2x2,pp=2,dp=2,mb=64", 64)):
        s = parse_strategy(spec, None)
        with pytest.raises(PerfmodelError) as full:
            price(ctx, s, batch)
        with pytest.raises(PerfmodelError) as probe:
            tiles_and_fits(ctx, s, batch)
        assert str(probe.value) == str(full.value)


class _FullPricer(Pricer):
    """The search's pricer without the early check: every spatial pipeline priced in full first."""

    early_check = False


@pytest.mark.parametrize(("model", "profile", "gpus", "batch"),
                         [("resnet50", "a100-80gb-dgx", 64, 2048), ("unet", "v100-16gb-dgx1", 32, 64)])
def test_search_ranks_as_with_every_plan_priced(
    model: str, profile: str, gpus: int, batch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = context(get_model(model), load_hardware(profile), "amp", "sgd")
    fast = plan_in(ctx, gpus, batch, ("hybrid", "sp", "pp"), top=5)
    monkeypatch.setattr(importlib.import_module("perfmodel.search.plan"), "Pricer", _FullPricer)
    clear_contexts()  # a context of its own, none of the first search's priced plans
    slow = plan_in(context(get_model(model), load_hardware(profile), "amp", "sgd"), gpus, batch,
                   ("hybrid", "sp", "pp"), top=5)
    assert [p.strategy for p in fast.plans] == [p.strategy for p in slow.plans]
    assert [p.iteration_time_s for p in fast.plans] == [p.iteration_time_s for p in slow.plans]
    assert (fast.candidates, fast.priced, fast.rejected) == (slow.candidates, slow.priced, slow.rejected)

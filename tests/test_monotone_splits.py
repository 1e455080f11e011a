"""Automatic pipeline splits: a faster device, memory or link never makes them slower.

``pp=S`` without ``balance=`` prices a pool of splits and keeps the fastest that fits: every
contiguous split, or on long chains the neighbours of candidates computed on fixed reference
profiles (``STAGE_REFERENCE_PROFILES``), so the pool is the same whatever profile prices the
plan; the step is then a minimum over fixed plans,
each of which gets faster on faster hardware (``test_properties.py`` pins them).
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_properties import FASTER, REL, case, price, seeded, step

from perfmodel.errors import DataError, PerfmodelError
from perfmodel.hardware import load_hardware, profile_names
from perfmodel.strategies import predict
from perfmodel.strategies.pipeline import STAGE_REFERENCE_PROFILES


def test_reference_profiles_are_shipped_and_of_several_generations() -> None:
    assert set(STAGE_REFERENCE_PROFILES) <= set(profile_names())
    devices = {load_hardware(n).device.name.split()[1] for n in STAGE_REFERENCE_PROFILES}
    assert len(devices) >= 2, devices
    topologies = {load_hardware(n).intra.topology for n in STAGE_REFERENCE_PROFILES}
    assert len(topologies) >= 2, topologies


def test_unet_pipeline_gets_faster_with_memory_bandwidth() -> None:
    """The case that was measured: 53.1 ms at 2x memory bandwidth, 57.5 ms at 4x."""
    hw = load_hardware("a100-80gb-dgx")
    times = [predict("unet", 32, "pp=4,dp=8,mb=8", hw.what_if(memory_bandwidth_scale=f), batch_per_gpu=4)
             .iteration_time_s for f in (1, 2, 4, 8)]
    assert all(b <= a * (1 + REL) for a, b in zip(times, times[1:], strict=False)), times


@seeded(120)
@given(case(kinds=("pipeline", "hybrid")), st.data())
def test_faster_hardware_never_slows_an_automatic_split(c: tuple[Any, ...], data: st.DataObject) -> None:
    p = step(c)
    base = load_hardware(c[3])
    for key, factors in FASTER:
        factor = data.draw(st.sampled_from(factors), label=key)
        q = step(c, base.what_if(**{key: factor}))
        assert q.iteration_time_s <= p.iteration_time_s * (1 + REL), (
            f"{p.strategy.spec()} on {c[3]}: {key}={factor} {p.iteration_time_s:.6g} -> {q.iteration_time_s:.6g} s")
        if "balance_candidates" in p.details:
            assert q.details["balance_candidates"] == p.details["balance_candidates"]


@seeded(40)
@given(case(kinds=("pipeline",)))
def test_candidate_splits_do_not_depend_on_the_profile(c: tuple[Any, ...]) -> None:
    net, g, s, _, precision, optimizer, batch = c
    seen = []
    for name in profile_names():
        try:
            p = predict(net, g, s, name, precision, batch_per_gpu=batch, optimizer=optimizer)
        except PerfmodelError:  # more GPUs than this profile has, a batch it cannot split
            continue
        seen.append(p.details.get("balance_candidates", "every split"))
    assert all(x == seen[0] for x in seen)


@seeded(80)
@given(case(kinds=("filter", "channel", "pipeline", "hybrid", "spatial")))
def test_speedup_of_a_plan_that_fits_never_exceeds_its_gpus(c: tuple[Any, ...]) -> None:
    p = price(c)
    if p.speedup_vs_1gpu is not None and p.fits_in_memory:
        assert p.speedup_vs_1gpu <= p.gpus * (1 + REL), (p.strategy.spec(), p.speedup_vs_1gpu)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_a_non_finite_step_is_an_error_naming_its_cause(monkeypatch: Any) -> None:
    """Guard behind the ranges: a computed inf/NaN is never a result."""
    data = importlib.import_module("perfmodel.strategies.data")
    monkeypatch.setattr(data, "allreduce", lambda *a, **k: math.inf)
    with pytest.raises(DataError, match="not a finite number.*gradient_exchange_exposed"):
        predict("tiny_cnn", 8, "dp=8", "a100-80gb-dgx", batch_per_gpu=2)

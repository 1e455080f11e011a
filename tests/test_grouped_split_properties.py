"""The speedup invariants over zoo models with grouped and depthwise convolutions, every split and cuDNN era.

tests/test_properties.py draws ungrouped networks at the default cuDNN; here the draws are the
zoo's grouped models (BVLC AlexNet's two groups, ResNeXt's 32, MobileNet v2's and EfficientNet's
depthwise layers), data / spatial / filter / channel plans and every cuDNN major a profile's GPU
can run (:mod:`perfmodel.cost.grouped`: the eras price grouped layers differently). Invariants:

* the speedup of a plan that fits never exceeds its GPU count;
* one GPU is the serial model (speedup 1);
* more FLOP/s or memory bandwidth never slows a fixed plan.

Seeded (``derandomize=True``) and bounded; the known case that broke the first one (AlexNet's
``filter=2`` at cuDNN 8/9, fp32: cuDNN's one kernel for both groups on one GPU against an
ordinary convolution with Winograd on each GPU of the split) is pinned as explicit examples, and
the 250 seeded draws reach it too (on the code before ``grouped.py``'s loop choice they fail with
2.59x on two GPUs).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from perfmodel.cost.grouped import CUDNN_MAJORS
from perfmodel.errors import PerfmodelError
from perfmodel.hardware import load_hardware, profile_names
from perfmodel.network import Network, get_model
from perfmodel.strategies import predict
from perfmodel.strategies.predict import context, predict_in, resolve_batch
from perfmodel.strategies.spec import parse_strategy

REL = 1e-9
#: Zoo models with grouped (1 < groups < channels) or depthwise convolutions, at small images.
GROUPED_ZOO = {"alexnet_bvlc": (199, 224), "resnext50_32x4d": (64,), "mobilenet_v2": (64,), "efficientnet_b0": (64,)}
#: Plans per GPU count: data, spatial, filter and channel splits, and a split beside data parallelism.
PLANS = {2: ("dp=2", "sp=2", "filter=2", "channel=2"),
         4: ("dp=4", "sp=2x2", "filter=4", "channel=4", "filter=2,dp=2", "channel=2,dp=2", "sp=2,dp=2")}
PROFILES = tuple(p for p in profile_names() if load_hardware(p).max_gpus >= 4)


def seeded(examples: int) -> settings:
    return settings(derandomize=True, deadline=None, database=None, max_examples=examples,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def case(draw: st.DrawFn, gpus: tuple[int, ...] = (2, 4)) -> tuple[Any, ...]:
    """(model, image size, GPUs, plan, profile, precision, cuDNN major, batch per GPU)."""
    name = draw(st.sampled_from(sorted(GROUPED_ZOO)))
    size = draw(st.sampled_from(GROUPED_ZOO[name]))
    g = draw(st.sampled_from(gpus))
    plan = draw(st.sampled_from(PLANS[g])) if g > 1 else "dp=1"
    hw = draw(st.sampled_from(PROFILES))
    precision = draw(st.sampled_from(["fp32", "tf32", "amp", "bf16"]))
    major = draw(st.sampled_from(CUDNN_MAJORS))
    batch = draw(st.sampled_from([1, 8, 32, 64]))
    return name, size, g, plan, hw, precision, major, batch


_NETS: dict[tuple[str, int], Network] = {}


def _net(name: str, size: int) -> Network:
    if (name, size) not in _NETS:
        _NETS[(name, size)] = get_model(name, size)
    return _NETS[(name, size)]


def _price(c: tuple[Any, ...], plan: str | None = None, gpus: int | None = None) -> Any:
    name, size, g, s, hw, precision, major, batch = c
    try:
        return predict(_net(name, size), gpus or g, plan or s, hw, precision, batch_per_gpu=batch, cudnn_major=major)
    except PerfmodelError:  # an era the GPU cannot run, a split the layer cannot take, no memory
        assume(False)
        raise


@seeded(250)
@example(("alexnet_bvlc", 224, 2, "filter=2", "a100-80gb-dgx", "fp32", 9, 64))
@example(("alexnet_bvlc", 224, 2, "filter=2", "v100-16gb-dgx1", "fp32", 8, 32))
@example(("alexnet_bvlc", 199, 2, "channel=2", "p100-16gb-nvlink", "amp", 9, 64))
@given(case())
def test_speedup_never_exceeds_gpu_count(c: tuple[Any, ...]) -> None:
    p = _price(c)
    assume(p.speedup_vs_1gpu is not None and p.fits_in_memory)
    assert 0 < p.speedup_vs_1gpu <= p.gpus * (1 + REL), (c, p.speedup_vs_1gpu, p.speedup_baseline)


@seeded(40)
@example(("alexnet_bvlc", 224, 1, "dp=1", "a100-80gb-dgx", "fp32", 9, 64))
@given(case(gpus=(1,)))
def test_one_gpu_is_the_serial_model(c: tuple[Any, ...]) -> None:
    p = _price(c, "dp=1", 1)
    assume(p.fits_in_memory)
    assert p.speedup_vs_1gpu == 1.0


FASTER = (("peak_scale", (1.5, 2.0, 10.0)), ("memory_bandwidth_scale", (1.5, 2.0, 10.0)))


@seeded(60)
@example(("alexnet_bvlc", 224, 2, "filter=2", "a100-80gb-dgx", "fp32", 9, 64), None)
@given(case(), st.data())
def test_faster_hardware_never_slows_a_plan(c: tuple[Any, ...], data: st.DataObject | None) -> None:
    name, size, g, s, hw, precision, major, batch = c
    base = load_hardware(hw)
    try:
        ctx = context(_net(name, size), base, precision, "sgd", cudnn_major=major)
        p = predict_in(ctx, parse_strategy(s), resolve_batch(g, batch, None), baseline=False)
    except PerfmodelError:
        assume(False)
        raise
    for key, factors in FASTER:
        factor = factors[-1] if data is None else data.draw(st.sampled_from(factors), label=key)
        q = predict_in(context(_net(name, size), base.what_if(**{key: factor}), precision, "sgd", cudnn_major=major),
                       parse_strategy(s), resolve_batch(g, batch, None), baseline=False)
        assert q.iteration_time_s <= p.iteration_time_s * (1 + REL), (c, key, factor)


def test_the_draws_reach_grouped_and_depthwise_layers() -> None:
    """The models drawn hold what the properties are about: grouped layers and depthwise layers."""
    kinds = {name: {("depthwise" if ly.groups == ly.in_shape[0] else "grouped") for ly in _net(name, sizes[0]).layers
                    if ly.kind == "conv" and ly.groups > 1} for name, sizes in GROUPED_ZOO.items()}
    assert kinds["alexnet_bvlc"] == {"grouped"} and kinds["resnext50_32x4d"] == {"grouped"}
    assert kinds["mobilenet_v2"] == {"depthwise"} and kinds["efficientnet_b0"] == {"depthwise"}


@pytest.mark.parametrize("major", [8, 9])
def test_alexnet_filter_split_is_not_superlinear_at_one_kernel_eras(major: int) -> None:
    """The closing note's case: BVLC AlexNet, filter=2 over 2 GPUs, fp32, cuDNN 8/9 (was 2.30x on the V100)."""
    p = predict("alexnet_bvlc", 2, "filter=2", "v100-16gb-dgx1", "fp32", global_batch=64, cudnn_major=major)
    assert p.speedup_vs_1gpu is not None and 1.0 < p.speedup_vs_1gpu <= 2.0, p.speedup_vs_1gpu

"""Property: explain's formula at the profile's values is predict's step, for any model, profile, precision,
cuDNN era, memory format, fusion, mixed-precision runtime, calibration and plan explain supports."""

from __future__ import annotations

import contextlib
from functools import cache

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from perfmodel.cost.cudnn_gpus import check_cudnn_for_gpu
from perfmodel.cost.fusion import FUSIONS, RUNS_IN
from perfmodel.cost.grouped import CUDNN_MAJORS
from perfmodel.cost.layout import MEMORY_FORMATS
from perfmodel.errors import PerfmodelError
from perfmodel.hardware import Hardware, load_hardware, profile_names
from perfmodel.hardware.profile import PRECISIONS
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.graph import Network
from perfmodel.strategies import context, parse_strategy
from perfmodel.strategies.amp_runtime import AMP_RUNTIMES
from perfmodel.strategies.explain import explain_plan

#: Every family at a small input (explain builds one expression per layer): plain, residual,
#: grouped (ResNeXt), depthwise and SE (MobileNet, EfficientNet), dense forks (DenseNet), inception,
#: Torch7's with a softmax, 3-D (CosmoFlow), U-Net, and a transformer block (layer norm, softmax).
MODELS = {
    "alexnet_bvlc": None, "vgg11": 32, "resnet18": 32, "resnext50_32x4d": 32, "mobilenet_v2": 32,
    "efficientnet_b0": 32, "densenet121": 32, "googlenet_v1": None, "inception_v3": 75, "squeezenet1_1": 32,
    "cosmoflow": 128, "unet": 32, "tiny_cnn": None, "attention_block": None,
}

#: Plans of every kind explain prices: data (each exchange), spatial, pipeline, filter/channel,
#: hypergraph model parallelism, and their hybrids (gpus, spec).
PLANS = [
    (1, "dp=1"), (4, "dp=2,mb=3"), (4, "dp=4,comm=tree"), (4, "dp=4,comm=ps-central"), (4, "dp=4,comm=ps-sharded"),
    (8, "dp=8,comm=hierarchical"), (4, "dp=4,overlap=none"), (2, "dp=2,comm=dataparallel"),
    (2, "dp=2,mb=2,recompute=true"), (4, "sp=2x2"), (4, "sp=2x2,decomp=auto"), (8, "sp=2x2,dp=2"),
    (2, "pp=2,mb=3"), (4, "pp=2,dp=2,mb=2,schedule=1f1b"), (4, "pp=4,mb=4,recompute=true"),
    (4, "sp=2x1,pp=2,mb=2"), (2, "filter=2"), (4, "channel=4"), (8, "filter=2,dp=4"), (4, "channel=2,dp=2"),
    (2, "mp=2"), (4, "mp=2,dp=2"),
]


def _attention_block() -> Network:
    """A pre-norm self-attention block on 1024 tokens of 512: layer norms, matmuls, a softmax (large
    enough that at 256 samples per GPU their arithmetic, not the host, sets their time)."""
    n, d = 1024, 512
    b = NetBuilder("attention_block", (n, d))
    x = b.norm("input", "layernorm", params=2 * d, norm_elems=d)
    q, k, v = b.linear(x, d), b.linear(x, d), b.linear(x, d)
    att = b.softmax(b.matmul(q, b.view(k, (d, n))))
    y = b.add("input", b.linear(b.matmul(att, v), d))
    b.linear(b.flatten(b.norm(y, "layernorm", params=2 * d, norm_elems=d)), 10)
    return b.build()


@cache
def _net(name: str) -> Network:
    return _attention_block() if name == "attention_block" else get_model(name, MODELS[name])


@cache
def _hw(name: str) -> Hardware:
    return load_hardware(name)


def _cudnn_majors(hw: Hardware) -> list[int]:
    ok = []
    for major in CUDNN_MAJORS:
        with contextlib.suppress(PerfmodelError):  # a cuDNN that never ran on this GPU
            ok.append(check_cudnn_for_gpu(major, hw))
    return ok


@settings(max_examples=14, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data(), model=st.sampled_from(sorted(MODELS)), profile=st.sampled_from(profile_names()),
       plan=st.sampled_from(PLANS), per_gpu=st.sampled_from([1, 3, 8, 32, 256]),
       fusion=st.sampled_from(FUSIONS), amp_runtime=st.sampled_from(sorted(AMP_RUNTIMES)),
       optimizer=st.sampled_from(["sgd", "adam"]), scale=st.sampled_from([1.0, 1.0, 0.83]))
def test_explain_total_is_predicts_step(data: st.DataObject, model: str, profile: str, plan: tuple[int, str],
                                         per_gpu: int, fusion: str, amp_runtime: str, optimizer: str,
                                         scale: float) -> None:
    hw = _hw(profile)
    need = RUNS_IN.get(fusion)  # a fused kernel that runs at one precision and format only
    precision = need[0][0] if need else data.draw(st.sampled_from(PRECISIONS), "precision")
    memory_format = need[1][0] if need else data.draw(st.sampled_from(MEMORY_FORMATS), "memory format")
    cudnn = data.draw(st.sampled_from(_cudnn_majors(hw)), "cudnn")
    gpus, spec = plan
    ctx = context(_net(model), hw, precision, optimizer, compute_scale=scale, cudnn_major=cudnn,
                  memory_format=memory_format, fusion=fusion, amp_runtime=amp_runtime)
    try:
        f = explain_plan(ctx, parse_strategy(spec, gpus), per_gpu * gpus)
    except PerfmodelError:  # a plan this network cannot take (a split it cannot tile, too few samples)
        assume(False)
        return
    p = f.prediction
    assert f.iteration_time_s == pytest.approx(p.iteration_time_s, rel=1e-9)
    for name, value in f.term_values.items():  # each term is its breakdown entry
        assert value == pytest.approx(p.breakdown[name], rel=1e-9, abs=1e-15), name

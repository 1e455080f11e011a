"""The kernel-level compute model: kernels per layer, shape rules, host bound, scores on measured kernels."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.compute import layer_times
from perfmodel.cost.efficiency import (
    gemm_shape_efficiency,
    pad_channels,
    winograd_gain,
    winograd_mask,
)
from perfmodel.cost.kernels import network_kernels
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts, get_model
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.predict import context
from perfmodel.strategies.spec import parse_strategy
from perfmodel.validation.kernels import score_kernels
from tests.cli_helpers import run_main, run_main_once

MODELS = ("resnet50", "vgg16", "efficientnet_b0", "densenet121", "inception_v3", "resnext50_32x4d", "unet")


@pytest.mark.parametrize("model", MODELS)
def test_forward_gemm_views_do_the_counted_flops(model: str) -> None:
    # the forward kernels' GEMM views (m x n x k per group) do exactly the forward matmul FLOPs
    # that the counts give (which equal torch's FlopCounterMode, tests/test_zoo.py)
    net = get_model(model)
    lk, counts = network_kernels(net), compile_counts(net).evaluate(1.0)
    gemm = 2 * lk.groups * lk.m["fwd"] * lk.n["fwd"] * lk.k["fwd"]
    np.testing.assert_allclose(gemm, counts["fwd_matmul_flops"], rtol=1e-9)
    # the weight gradient has the same FLOPs; the data gradient too for stride-1 layers
    np.testing.assert_allclose(2 * lk.groups * lk.m["wgrad"] * lk.n["wgrad"] * lk.k["wgrad"],
                               np.where(counts["bwd_weight_flops"] > 0, counts["fwd_matmul_flops"], 0), rtol=1e-9)


def test_wave_and_tile_quantisation() -> None:
    # a GEMM that fills whole 128x128 tiles in whole waves loses nothing to quantisation
    full = gemm_shape_efficiency(np.array([128.0 * 80]), np.array([128.0]), np.array([4096.0]), np.array([1.0]),
                                 80, 8.0)
    # 80 tiles on 160 slots: split-K in 2 slices of 2048, each storing and re-reading its tile
    i = 128 * 128 * 2048 / (256 * 2048 + 2 * 128 * 128)
    assert full[0] == pytest.approx(i / (i + 8), rel=1e-9)
    # one tile more than a wave of 128x128 tiles is slower per FLOP (a second, nearly empty wave)
    plus = gemm_shape_efficiency(np.array([128.0 * 81]), np.array([128.0]), np.array([4096.0]), np.array([1.0]),
                                 80, 8.0, split_k=False)
    assert plus[0] < full[0]
    # narrow problems waste the padding of their tiles: 4 output channels per group (ResNeXt's)
    narrow = gemm_shape_efficiency(np.array([1e5]), np.array([4.0]), np.array([36.0]), np.array([32.0]), 80, 8.0)
    assert narrow[0] < 0.5 * full[0]
    assert np.all((narrow > 0) & (narrow <= 1))


def test_algorithm_and_alignment_rules() -> None:
    ok = np.array([True, True, False])
    c = np.array([64.0, 16.0, 64.0])
    assert winograd_mask(ok, np.ones(3), c, c, False, 32).tolist() == [True, False, False]
    assert not winograd_mask(ok, np.ones(3), c, c, True, 32).any()  # tensor cores: implicit GEMM
    assert winograd_gain(2.0, np.array([56.0]), np.array([56.0]))[0] == pytest.approx(2.0)
    assert winograd_gain(2.0, np.array([7.0]), np.array([7.0]))[0] == pytest.approx(2.0 * 49 / 64)
    assert pad_channels(np.array([3.0, 64.0]), True).tolist() == [8.0, 64.0]
    assert pad_channels(np.array([3.0]), False).tolist() == [3.0]


def test_depthwise_kernels_run_on_cuda_cores_packed_in_half_precision() -> None:
    from perfmodel.cost.work import kernel_work

    lk = network_kernels(get_model("mobilenet_v2"))
    kp = load_hardware("v100-16gb-dgx1").kernels
    full, half = kernel_work(lk, kp, np.full(len(lk.groups), 32.0), False), \
        kernel_work(lk, kp, np.full(len(lk.groups), 32.0), False, half_precision=True)
    dw = lk.depthwise
    assert dw.sum() > 10 and np.all(full.flops["fwd"][dw] == 0) and np.all(full.cc_flops["fwd"][dw] > 0)
    np.testing.assert_allclose(half.cc_flops["fwd"], full.cc_flops["fwd"] / 2)


def test_memory_kernels_of_pooling_and_batch_norm() -> None:
    net = get_model("resnet50")
    lk = network_kernels(net)
    kinds = [layer.kind for layer in net.layers]
    bn, mp = kinds.index("batchnorm"), kinds.index("maxpool")
    n = net.layers[bn].out_elems
    assert lk.mem_elems_fwd[bn] == 3 * n and lk.mem_elems_bwd[bn] == 5 * n  # issue 14: 5 passes backward
    # max-pool backward moves over twice its forward's bytes (zero-fill, window reads of indices)
    fwd_bytes = 4 * lk.mem_elems_fwd[mp] + lk.mem_bytes_extra_fwd[mp]
    assert 4 * lk.mem_elems_bwd[mp] + lk.mem_bytes_extra_bwd[mp] > 2 * fwd_bytes


def test_small_batches_are_host_bound() -> None:
    hw = load_hardware("a100-80gb-dgx")
    cc = compile_counts(get_model("efficientnet_b0"))
    t = layer_times(cc, hw, "amp", 1)
    h = hw.kernels.host_op_s
    # at one sample most layers wait for the host: their time is exactly its dispatch time
    assert np.mean(np.isclose(t.fwd, h)) > 0.5
    assert np.all(t.fwd >= h - 1e-15) and np.all(t.bwd >= h - 1e-15)


@settings(max_examples=30, deadline=None)
@given(model=st.sampled_from(MODELS[:4]), batch=st.integers(1, 256),
       precision=st.sampled_from(["fp32", "tf32", "amp"]), scale=st.floats(1.0, 4.0))
def test_faster_device_is_never_slower(model: str, batch: int, precision: str, scale: float) -> None:
    hw = load_hardware("a100-80gb-dgx")
    fast = hw.what_if(peak_scale=scale, memory_bandwidth_scale=scale)
    cc = compile_counts(get_model(model))
    a, b = layer_times(cc, hw, precision, batch), layer_times(cc, fast, precision, batch)
    assert np.all(b.fwd <= a.fwd * (1 + 1e-12)) and np.all(b.bwd <= a.bwd * (1 + 1e-12))


@pytest.mark.parametrize(
    "hw", ["a100-40gb-pcie", "a100-80gb-pcie", "h100-80gb-pcie", "p100-16gb-pcie", "v100-32gb-pcie"])
def test_pcie_profiles(hw: str) -> None:
    p = load_hardware(hw)
    assert p.gpus_per_node == 8 and p.intra.topology == "pcie" and p.max_nodes == 1
    assert all(v.strip() for v in p.sources.values()) and "kernels" in p.sources
    ctx = context(get_model("resnet50"), p, "amp", "sgd")
    f = explain_plan(ctx, parse_strategy("dp=8", 8), 8 * 64)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)


def test_kernel_scores_beat_the_layer_roofline() -> None:
    scores = {(s.source, s.gpu, s.op): s for s in score_kernels()}
    pipe = scores[("pipedream", "all", "all")]
    assert pipe.rows > 3000 and pipe.mape_pct < pipe.mape_before_pct
    v100 = scores[("deepbench", "V100-SXM2 (DGX-1) fp32", "conv fwd")]
    assert v100.mape_pct < v100.mape_before_pct
    for s in scores.values():
        assert np.isfinite(s.mape_pct) and s.rows > 0


def test_validate_kernels_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main_once(["validate", "--kernels", "--format", "json"], capsys)
    assert code == 0
    d = json.loads(out)
    assert {"deepbench", "pipedream", "neusight"} <= {r["source"] for r in d["kernels"]}
    assert "hooks" in d["assumptions"]
    code, _, err = run_main(["validate", "--kernels", "x.csv"], capsys)
    assert code == 2 and "takes no FILES" in err

"""The latency bound of window (pooling) kernels: against PipeDream's measured V100 layers, and its laws."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import get_model
from perfmodel.cost.compute import ShapeRules, layer_seconds
from perfmodel.cost.kernel_model import ComputeValues, phase_times
from perfmodel.cost.kernels import layer_kernels
from perfmodel.cost.work import kernel_work, window_path_loads
from perfmodel.hardware import load_hardware
from perfmodel.hardware.profile import KernelParams
from perfmodel.network.counts import compile_counts
from perfmodel.network.layers import Layer
from perfmodel.validation.kernel_rows import load_rows
from perfmodel.validation.kernels import price_rows


def _mape(rows: list) -> float:  # type: ignore[type-arg]
    pred, _ = price_rows(rows, before=False)
    meas = np.array([r.measured_s for r in rows])
    return float(np.mean(np.abs(pred - meas) / meas) * 100)


@pytest.fixture(scope="module")
def pooling_fwd() -> list:  # type: ignore[type-arg]
    return [r for r in load_rows(("pipedream",)) if r.what == "layer_fwd" and r.op.startswith("avgpool")]


def test_average_pool_forward_within_40_percent_of_pipedream(pooling_fwd: list) -> None:  # type: ignore[type-arg]
    # a bandwidth roofline alone is 62% off (global 7x7/13x13 pools predicted 4-12x too fast)
    assert len(pooling_fwd) >= 40
    assert _mape(pooling_fwd) < 40.0


def test_global_pools_no_longer_bandwidth_priced(pooling_fwd: list) -> None:  # type: ignore[type-arg]
    # ResNet/ResNeXt's AvgPool2d(7) at 128-256 planes of 2048/512 channels: measured 0.15-0.39 ms
    glob = [r for r in pooling_fwd if r.layer.kernel == (7, 7)]
    assert len(glob) >= 5
    pred, _ = price_rows(glob, before=False)
    meas = np.array([r.measured_s for r in glob])
    assert np.median(pred / meas) > 0.3  # 0.20-0.27 with bytes only


def test_latency_bound_off_leaves_the_roofline(pooling_fwd: list) -> None:  # type: ignore[type-arg]
    # at the floor latency (1 ns) the same rows price as bytes only: the bound is what moves them
    hw = load_hardware("v100-16gb-dgx1")
    fast = dataclasses.replace(hw, kernels=dataclasses.replace(hw.kernels, memory_latency_s=1e-9))
    p_fast, _ = price_rows(pooling_fwd, {"v100-16gb-dgx1": fast}, before=False)
    p, _ = price_rows(pooling_fwd, before=False)
    assert np.all(p >= p_fast - 1e-12)
    assert np.sum(p > p_fast * 1.5) >= 10


def _pool(c: int, hw_in: int, k: int, stride: int) -> Layer:
    out = (hw_in - k) // stride + 1
    return Layer(name="p", kind="avgpool", inputs=("x",), in_shapes=((c, hw_in, hw_in),), out_shape=(c, out, out),
                 kernel=(k, k), stride=(stride, stride))


def _fwd(layer: Layer, batch: float, kp: KernelParams, latency: float) -> float:
    lk = layer_kernels([layer], [False])
    w = kernel_work(lk, kp, np.array([batch]), False)
    v = dataclasses.replace(ComputeValues.of(load_hardware("v100-16gb-dgx1"), "fp32"), mem_latency_s=latency)
    f, _ = phase_times(w, np.zeros(1), v, np.ones(1), 0.0, 0.0, host=False)
    return float(np.asarray(f)[0])


pools = st.builds(_pool, st.integers(1, 512), st.integers(7, 64), st.integers(1, 7), st.integers(1, 4))


@settings(max_examples=60, deadline=None)
@given(pools, st.integers(1, 256), st.floats(1e-8, 2e-6), st.floats(1e-8, 2e-6))
def test_lower_latency_never_slower(layer: Layer, batch: int, a: float, b: float) -> None:
    kp = KernelParams()
    lo, hi = sorted((a, b))
    assert _fwd(layer, batch, kp, lo) <= _fwd(layer, batch, kp, hi) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(pools, st.integers(1, 256), st.floats(1e-8, 2e-6))
def test_never_faster_than_the_bandwidth_roofline(layer: Layer, batch: int, latency: float) -> None:
    kp = KernelParams()
    hw = load_hardware("v100-16gb-dgx1")
    bw = hw.device.memory_bandwidth_bytes_per_s * hw.compute["fp32"].memory
    roof = (sum(math.prod(s) for s in layer.in_shapes) + layer.out_elems) * batch * 4 / bw
    assert _fwd(layer, batch, kp, latency) >= roof * (1 - 1e-12)


@settings(max_examples=80, deadline=None)
@given(st.floats(1.0, 1e8), st.floats(1.0, 1e8), st.floats(1.0, 400.0), st.floats(1.0, 64.0))
def test_more_threads_at_equal_loads_never_slower(t1: float, t2: float, loads: float, stride: float) -> None:
    # the same total loads spread over more threads (shorter windows) never take longer
    lo, hi = sorted((t1, t2))
    total = lo * loads
    kp = KernelParams()

    def path(threads: float) -> float:
        lk = layer_kernels([], [])
        lk = dataclasses.replace(lk, window_threads_fwd=np.array([threads]),
                                 window_loads_fwd=np.array([total / threads]), window_stride_fwd=np.array([stride]))
        return float(window_path_loads(lk, kp, np.ones(1), 4.0)[0])

    assert path(hi) <= path(lo) * (1 + 1e-9)


def test_few_threads_take_one_window_of_latencies() -> None:
    # 64 planes of a 7x7 global pool: 64 threads, each 49 dependent loads -> 49 latencies
    lk = layer_kernels([_pool(64, 7, 7, 7)], [False])
    assert float(window_path_loads(lk, KernelParams(), np.ones(1), 4.0)[0]) == pytest.approx(49.0)


def test_symbolic_formula_equals_numbers_on_a_pooling_layer() -> None:
    # explain evaluates the same code on symbols: ResNet-50's 3x3/2 max pool on A100 at amp,
    # where the latency term is the largest, must give predict's seconds
    net = get_model("resnet50", 224)
    cc = compile_counts(net)
    hw = load_hardware("a100-80gb-dgx")
    b = sp.Symbol("b", positive=True)
    sym = ComputeValues.symbols()
    f, _ = layer_seconds(cc, cc.evaluate(1.0), cc.params, sym, b, ShapeRules.of(hw, "amp", 32.0))
    num, _ = layer_seconds(cc, cc.evaluate(32.0), cc.params, ComputeValues.of(hw, "amp"), 1.0, ShapeRules.of(hw, "amp"))
    i = next(j for j, layer in enumerate(net.layers) if layer.kind == "maxpool")
    assert sp.Symbol("L_mem", positive=True) in f[i].free_symbols
    values = dict(zip(sym.as_tuple(), ComputeValues.of(hw, "amp").as_tuple(), strict=True))
    assert float(f[i].subs({b: 32.0, **values})) == pytest.approx(float(num[i]), rel=1e-9)

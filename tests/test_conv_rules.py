"""The convolution shape rules against DeepBench's measured kernels, and their monotonicity.

Each measured bound below is one the model before these rules failed (perfmodel at commit
25f660a, figures in the comments), so a test fails if its rule is removed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.hardware import Hardware, load_hardware
from perfmodel.validation.fit_values import set_in_table
from perfmodel.validation.kernel_rows import KernelRow, conv_layer, load_rows
from perfmodel.validation.kernels import price_rows

Select = Callable[[KernelRow], bool]


@pytest.fixture(scope="module")
def priced() -> tuple[list[KernelRow], np.ndarray]:
    rows = [r for r in load_rows(("deepbench",)) if r.op != "gemm"]
    pred, _ = price_rows(rows, before=False)
    return rows, pred


def _mape(priced: tuple[list[KernelRow], np.ndarray], keep: Select) -> tuple[int, float]:
    rows, pred = priced
    err = [abs(p / r.measured_s - 1) for r, p in zip(rows, pred, strict=True) if keep(r)]
    return len(err), 100 * float(np.mean(err))


def _c(r: KernelRow) -> int:
    return r.layer.in_shapes[0][0]


def _k(r: KernelRow) -> int:
    return r.layer.out_shape[0]


def _weights(r: KernelRow) -> int:
    return _c(r) * _k(r) * r.layer.kernel[0] * r.layer.kernel[1]


def _winograd_shape(r: KernelRow) -> bool:
    return r.layer.kernel in ((3, 3), (5, 5)) and r.layer.stride == (1, 1)


def test_dgrad_sum_of_products_prices_few_channel_layers(priced) -> None:
    # cuDNN's BWD_DATA_ALGO_0 view (n = C*R*S): P100 data gradients of 1- and 3-channel layers
    # (the implicit view alone: 270% MAPE, 4-6x too slow)
    n, mape = _mape(priced, lambda r: r.gpu == "P100" and r.what == "dgrad" and _c(r) <= 4)
    assert n == 10 and mape < 60


def test_winograd_weight_gradients_of_wide_layers(priced) -> None:
    # Winograd wgrad at the forward's rate, transforms amortised over C + K (before: 68.8%)
    n, mape = _mape(priced, lambda r: r.precision == "fp32" and r.what == "wgrad" and _winograd_shape(r)
                    and min(_c(r), _k(r)) >= 128)
    assert n == 42 and mape < 40


def test_weight_gradient_split_k_rate(priced) -> None:
    # a flat weight-gradient penalty made large-weight kernels ~2x slow; split-K only where the
    # output tiles cannot fill the GPU (before: fp32 non-Winograd 27.2%, tensor cores 59.9%)
    n, mape = _mape(priced, lambda r: r.precision == "fp32" and r.what == "wgrad" and not _winograd_shape(r)
                    and _weights(r) >= 2**17)
    assert n == 56 and mape < 25.5
    n, mape = _mape(priced, lambda r: r.precision == "amp" and r.what == "wgrad" and _weights(r) >= 2**17)
    assert n == 51 and mape < 45


def test_deepbench_conv_totals_improve_on_the_previous_model(priced) -> None:
    # all DeepBench convolution kernels, P100 and V100 (fp32 and tensor cores): before 34.6%
    n, mape = _mape(priced, lambda r: True)
    assert n == 826 and mape < 29


SHAPES = st.tuples(
    st.sampled_from([1, 3, 16, 64, 256, 1024]),  # C
    st.sampled_from([7, 14, 28, 56, 112]),  # H = W
    st.sampled_from([16, 64, 256, 512, 2048]),  # K
    st.sampled_from([(1, 1), (3, 3), (5, 5), (1, 7), (7, 7)]),  # R, S
    st.sampled_from([1, 2]),  # stride
)


def _rows(shape: tuple[int, int, int, tuple[int, int], int], batch: float, profile: str, precision: str,
          ) -> list[KernelRow]:
    c, hw, k, (r, s), st_ = shape
    layer = conv_layer(c, hw, hw, k, r, s, (st_, st_), (r // 2, s // 2))
    return [KernelRow("test", "test", profile, precision, "conv", what, layer, False, batch, 1.0)
            for what in ("fwd", "dgrad", "wgrad")]


@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, batch=st.integers(1, 64), more=st.integers(1, 64),
       precision=st.sampled_from(["fp32", "amp"]))
def test_more_samples_never_take_less_time(shape, batch: int, more: int, precision: str) -> None:
    small, _ = price_rows(_rows(shape, batch, "v100-16gb-dgx1", precision), before=False)
    large, _ = price_rows(_rows(shape, batch + more, "v100-16gb-dgx1", precision), before=False)
    assert np.all(large >= small * (1 - 1e-9)), (small, large)


def _more_sms(hw: Hardware, factor: int) -> Hardware:
    """``hw`` with ``factor`` times its SMs and, SM for SM, its peaks."""
    faster = hw.what_if(peak_scale=float(factor))
    return dataclasses.replace(faster, kernels=dataclasses.replace(hw.kernels, sm_count=hw.kernels.sm_count * factor))


@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, batch=st.integers(1, 64), factor=st.integers(2, 4), precision=st.sampled_from(["fp32", "amp"]))
def test_more_sms_never_take_more_time(shape, batch: int, factor: int, precision: str) -> None:
    hw = load_hardware("v100-16gb-dgx1")
    rows = _rows(shape, batch, hw.name, precision)
    base, _ = price_rows(rows, {hw.name: hw}, before=False)
    big, _ = price_rows(rows, {hw.name: _more_sms(hw, factor)}, before=False)
    assert np.all(big <= base * (1 + 1e-9)), (base, big)


def test_profile_writer_puts_each_number_into_its_table_only() -> None:
    # the lead re-runs `fit_kernel_params.py ... --write` at merge: a key is replaced in its own
    # table (not the same key of another precision), added before the table's source when missing
    text = (
        "[efficiency.compute.fp32]\nconv = 0.5\nlinear = 1.0\n\n[efficiency.compute.amp]\nconv = 0.7\n\n"
        '[efficiency.kernels]\nsm_count = 80\nsource = "x"\n'
    )
    out = set_in_table(text, "efficiency.compute.amp", "conv", 0.6543, "note")
    out = set_in_table(out, "efficiency.kernels", "winograd_gain", 3.0, "note")
    assert "conv = 0.5\n" in out and "conv = 0.654" in out and "conv = 0.7" not in out
    assert out.index("winograd_gain = 3") < out.index('source = "x"') and out.count("winograd_gain") == 1


def test_sum_of_products_data_gradient_pays_no_zero_insertion() -> None:
    # cuDNN's sum-of-products data gradient does the forward's FLOPs whatever the stride; only
    # the implicit GEMM view of a strided layer pays the zero-inserted work (review of
    # 2026-11-23: the stride factor leaked into the sum-of-products path)
    from perfmodel.cost.kernels import network_kernels
    from perfmodel.cost.work import kernel_work
    from perfmodel.network import NetBuilder

    hw = load_hardware("v100-16gb-dgx1")
    ratio = []
    for stride in (1, 2):
        b = NetBuilder(f"few_channels_s{stride}", (3, 112, 112))
        x = b.conv("input", 3, 1, bias=False)
        b.conv(x, 64, 3, stride=stride, padding=1, bias=False)
        net = b.build()
        # the forward's lowered input loads depend on the stride (im2col_loads); this compares
        # the two views' FLOPs, so both strides load alike here
        lk = network_kernels(net)
        lk = dataclasses.replace(lk, x_loads=np.ones_like(lk.x_loads), dy_loads=np.ones_like(lk.dy_loads))
        w = kernel_work(lk, hw.kernels, np.full(len(net.layers), 64.0), False)
        ratio.append(w.flops["dgrad"][1] / w.flops["fwd"][1])
    assert ratio[1] == pytest.approx(ratio[0], rel=1e-9)

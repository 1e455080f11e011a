"""The cuDNN 7.0 Volta fp32 rule: its factor from DeepBench's 2017 and 2019 V100 sheets, where it
applies, and what it does to a measured row's price."""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.cost.cudnn_release import CUDNN70_VOLTA_FP32_SLOWDOWN, SLOW_RELEASE, release_hardware
from perfmodel.hardware import load_hardware
from perfmodel.validation.compare import DEFINITIONS
from perfmodel.validation.measurements import load_measurements
from perfmodel.validation.pricing import price_row
from perfmodel.validation.software_era import cudnn_release_of

DATA = resources.files("perfmodel.data")
SHAPE = ("N", "C", "H", "W", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w")
TIMES = ("fwd_ms", "bwd_data_ms", "bwd_filter_ms")


def _v100_fp32(name: str, gpu_prefix: str) -> dict[tuple[str, ...], dict[str, str]]:
    """The V100 fp32 convolution rows of a shipped file by problem shape (first row of a repeated shape)."""
    out: dict[tuple[str, ...], dict[str, str]] = {}
    for d in csv.DictReader(DATA.joinpath(name).read_text(encoding="utf-8").splitlines()):
        if d["precision"] == "fp32" and d["gpu"].startswith(gpu_prefix):
            out.setdefault(tuple(d[k] for k in SHAPE), d)
    return out


def test_factor_is_the_geometric_mean_of_the_2017_over_2019_kernels() -> None:
    old = _v100_fp32("kernels_deepbench_v100_2017_conv.csv", "V100 (DeepBench 2017)")
    new = _v100_fp32("kernels_deepbench_conv.csv", "V100-SXM2")
    assert set(old) == set(new) and len(old) == 90
    logs = [math.log(float(old[k][c]) / float(new[k][c])) for k in old for c in TIMES if old[k][c] and new[k][c]]
    assert len(logs) == 260  # 90 forward, 80 data gradients (first layers have none), 90 weight gradients
    assert math.exp(sum(logs) / len(logs)) == pytest.approx(CUDNN70_VOLTA_FP32_SLOWDOWN, abs=5e-4)
    # same benchmark path: both sheets record the same forward algorithm for every problem (two
    # 2017 cells lost their first letters: "LICIT_PRECOMP_GEMM")
    assert all(new[k]["fwd_algo"].endswith(old[k]["fwd_algo"]) for k in old)


def test_rule_slows_volta_fp32_convolutions_only() -> None:
    v100 = load_hardware("v100-16gb-dgx1")
    slow = release_hardware(v100, "fp32", SLOW_RELEASE)
    assert slow.compute["fp32"].conv == pytest.approx(v100.compute["fp32"].conv / CUDNN70_VOLTA_FP32_SLOWDOWN)
    assert dataclasses.replace(slow.compute["fp32"], conv=v100.compute["fp32"].conv) == v100.compute["fp32"]
    assert slow.compute["amp"] == v100.compute["amp"] and slow.device == v100.device
    assert release_hardware(load_hardware("titan-v"), "fp32", (7, 0)).compute["fp32"].conv < \
        load_hardware("titan-v").compute["fp32"].conv


@given(st.sampled_from(["v100-16gb-dgx1", "titan-v", "gtx-1080-ti", "a100-80gb-pcie"]),
       st.sampled_from(["fp32", "amp", "fp16"]),
       st.sampled_from([None, (7, 0), (7, 1), (7, 6), (6, 0), (8, 0)]))
def test_rule_is_identity_unless_volta_fp32_cudnn70(profile: str, precision: str,
                                                    release: tuple[int, int] | None) -> None:
    hw = load_hardware(profile)
    out = release_hardware(hw, precision, release)
    applies = profile in ("v100-16gb-dgx1", "titan-v") and precision == "fp32" and release == (7, 0)
    assert (out is not hw) == applies


def test_release_is_read_where_a_row_states_it() -> None:
    u39kun = load_measurements([str(DATA.joinpath("u39kun_runs.csv"))]).rows
    assert {cudnn_release_of(m) for m in u39kun} == {(7, 0)}
    jcj = load_measurements([str(DATA.joinpath("jcjohnson_runs.csv"))]).rows
    assert {cudnn_release_of(m) for m in jcj} == {(5, 1)}
    m = u39kun[0]
    assert cudnn_release_of(dataclasses.replace(m, framework="PyTorch 0.3.0 (cuDNN 7)", source="s",
                                                columns={"notes": ""})) is None


def test_a_cudnn70_volta_fp32_row_prices_slower_by_at_most_the_factor() -> None:
    rows = load_measurements([str(DATA.joinpath("u39kun_runs.csv"))]).rows
    for m in rows:
        hw = load_hardware(m.hardware)
        stated = price_row(m, hw).step_time_s
        # the same row stating only the major: "cuDNN 7.0.0.5" -> "cuDNN 7"
        only_major = dataclasses.replace(m, framework=re.sub(r"cuDNN 7\.[\d.]+", "cuDNN 7", m.framework))
        assert cudnn_release_of(only_major) is None
        unstated = price_row(only_major, hw).step_time_s
        if m.precision == "fp32" and m.hardware != "gtx-1080-ti":
            # convolution matmuls scale by the factor; memory-bound kernels, linear layers, host work do not
            assert 1.03 < stated / unstated < CUDNN70_VOLTA_FP32_SLOWDOWN
        else:
            assert stated == pytest.approx(unstated, rel=1e-12)


def test_validate_states_the_rule_among_its_assumptions() -> None:
    text = DEFINITIONS["cudnn"]
    assert "cuDNN 7.0" in text and "Volta" in text and f"{CUDNN70_VOLTA_FP32_SLOWDOWN:.3f}x" in text

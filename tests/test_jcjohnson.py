"""jcjohnson/cnn-benchmarks' forward+backward rows (perfmodel/data/jcjohnson_runs.csv): sources,
what they timed, the Pascal consumer profiles, and the recorded MAPE."""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from perfmodel.hardware import load_hardware
from perfmodel.hardware.generation import generation
from perfmodel.validation import load_measurements, validate
from perfmodel.validation.pricing import price_row
from perfmodel.validation.software_era import cudnn_major_of
from perfmodel.validation.step_scope import FORWARD_BACKWARD, FULL_STEP

DATA = Path(str(resources.files("perfmodel.data")))
FILE = DATA / "jcjohnson_runs.csv"
#: Uncalibrated throughput MAPE (%) of the set (python scripts/family_report.py, branch planner:
#: 23 rows; 11.4 before cudnn.torch's per-group calls could take Winograd, which moved AlexNet's
#: three rows from +2.5..+15.7% to +25.9..+40.5%: MEASUREMENTS.md "jcjohnson_runs.csv"); a change
#: that makes it worse by more than MARGIN fails.
RECORDED_MAPE = 14.5
MARGIN = 2.0
#: The networks the benchmark ran that the zoo does not define exactly (MEASUREMENTS.md,
#: "jcjohnson_runs.csv"): fb.resnet.torch's published ResNet-50 (batch norm after the addition)
#: and ResNet-200 (pre-activation).
NOT_SCORED = {"resnet50", "resnet200"}
#: Each profile and the CUDA device name the benchmark's JSON records for its card
#: (`gpu_name` of outputs/<gpu_cudnn>/<run>.json), with the cuDNN its 5.1 runs used.
CARDS = {"gtx-1080": ("GeForce GTX 1080", "5.1.05"), "titan-x-pascal": ("TITAN X", "5.1.05"),
         "gtx-1080-ti": ("GeForce GTX 1080 Ti", "5.1.10")}


def rows():  # type: ignore[no-untyped-def]
    return load_measurements([str(FILE)]).rows


def test_rows_are_sourced_and_keep_the_raw_times() -> None:
    rs = rows()
    assert len(rs) >= 23
    assert {"googlenet_v1", "alexnet_bvlc", "vgg16", "resnet18"} <= {m.model for m in rs}
    for m in rs:
        assert "jcjohnson/cnn-benchmarks outputs/" in m.source and "@ 83d441f852" in m.source
        assert m.columns.get("notes") and m.columns["input"] == "synthetic"
        fwd, bwd = float(m.columns["fwd_ms"]), float(m.columns["bwd_ms"])
        # the source's throughput: batch 16 over the mean forward plus the mean backward time
        assert m.batch_per_gpu == 16 and m.gpus == 1
        assert m.measured_throughput == pytest.approx(16e3 / (fwd + bwd), abs=0.006)
        assert m.step == FORWARD_BACKWARD
        assert m.hardware in CARDS
        json_name, cudnn = CARDS[m.hardware]
        assert m.source.endswith(f", {json_name})") and f"cuDNN {cudnn}," in m.framework
        assert cudnn_major_of(m) == 5
        assert m.model not in NOT_SCORED


def test_every_row_is_scored_within_the_recorded_mape() -> None:
    v = validate(load_measurements([str(FILE)]), "none")
    assert v.summary.unpredictable == 0
    assert v.summary.throughput_mape_pct <= RECORDED_MAPE + MARGIN


def test_fwd_bwd_rows_leave_out_the_update_and_keep_the_fixed_cost() -> None:
    m = rows()[0]
    hw = load_hardware(m.hardware)
    full, part = price_row(replace(m, step=FULL_STEP), hw), price_row(m, hw)
    assert full.breakdown["optimizer_step"] > part.breakdown["optimizer_step"] > 0
    assert part.breakdown["optimizer_step"] == hw.kernels.step_overhead_s
    assert {k: v for k, v in part.breakdown.items() if k != "optimizer_step"} == \
        {k: v for k, v in full.breakdown.items() if k != "optimizer_step"}


@pytest.mark.parametrize(("name", "sms", "peak", "bandwidth"),
                         [("gtx-1080", 20, 8.873e12, 320e9), ("titan-x-pascal", 28, 10.974e12, 480e9)])
def test_pascal_consumer_profiles(name: str, sms: int, peak: float, bandwidth: float) -> None:
    hw = load_hardware(name)
    # cores x 2 FLOP x boost clock: 2,560 at 1,733 MHz; 3,584 at 1,531 MHz (128 cores per SM)
    assert hw.device.peak("fp32") == peak == pytest.approx(sms * 128 * 2 * (1.733e9 if sms == 20 else 1.531e9),
                                                          rel=1e-3)
    assert hw.device.memory_bandwidth_bytes_per_s == bandwidth
    assert hw.kernels.sm_count == sms
    # no tensor cores: every precision runs at the fp32 peak
    assert hw.device.peak("amp") == hw.device.peak("tf32") == peak


def test_every_card_has_rows_and_its_profile_names_the_same_generation() -> None:
    assert {m.hardware for m in rows()} == set(CARDS)
    for name, (json_name, _) in CARDS.items():
        # validate reads a profile's device name only for its generation; the profile may spell
        # it as a later driver does ("NVIDIA GeForce GTX 1080 Ti", "TITAN X (Pascal)"), and the
        # 2016 driver's bare "TITAN X" names no generation (the Maxwell card had the same name)
        assert generation(load_hardware(name).device.name) == "pascal"
        assert generation(json_name) in ("pascal", None if json_name == "TITAN X" else "pascal")


def test_the_two_gp102_cards_are_priced_apart_by_no_more_than_their_peaks() -> None:
    # GTX 1080 Ti and TITAN X (Pascal): the same GP102 with 28 SMs; the 1080 Ti has the higher
    # boost clock and bandwidth, so it is predicted faster, by at most the larger of the two ratios
    ti, tx = load_hardware("gtx-1080-ti"), load_hardware("titan-x-pascal")
    bound = max(ti.device.peak("fp32") / tx.device.peak("fp32"),
                ti.device.memory_bandwidth_bytes_per_s / tx.device.memory_bandwidth_bytes_per_s)
    by_card = {(m.model, m.hardware): m for m in rows()}
    pairs = [(by_card[(k, "gtx-1080-ti")], m) for (k, hw), m in by_card.items()
             if hw == "titan-x-pascal" and (k, "gtx-1080-ti") in by_card]
    assert len(pairs) == 8
    for a, b in pairs:
        ratio = price_row(b, tx).step_time_s / price_row(a, ti).step_time_s
        assert 1.0 < ratio <= bound * (1 + 1e-9), (a.model, ratio, bound)

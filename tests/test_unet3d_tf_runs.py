"""NVIDIA's TensorFlow 3-D U-Net training runs (perfmodel/data/unet3d_tf_runs.csv): provenance, scope,
and the recorded hold-out error per GPU and precision (nothing is fitted to these rows)."""

from __future__ import annotations

from collections import defaultdict
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from perfmodel.validation import Measurement, load_measurements, validate
from perfmodel.validation.amp_runtime_of import amp_runtime_of
from perfmodel.validation.software_era import cudnn_major_of, fusion_of, memory_format_of
from perfmodel.validation.step_scope import FULL_STEP

DATA = Path(str(resources.files("perfmodel.data")))
FILE = DATA / "unet3d_tf_runs.csv"
#: Throughput MAPE (%) on main after the tensor-core tile rule (``python scripts/family_report.py``;
#: 100.5 when the set was added on branch ``importers``): without calibration, all rows and per
#: profile and precision; the per-group single-GPU calibration; the speedup MAPE. A change that
#: makes one worse by more than MARGIN points fails. Every row is priced too fast, far more than
#: the PyTorch example's rows of the same network (unet3d_runs.csv): see MEASUREMENTS.md, "unet3d_tf_runs.csv".
RECORDED_ALL = 55.9
RECORDED = {("a100-80gb-dgx", "amp"): 30.7, ("a100-80gb-dgx", "tf32"): 92.8,
            ("v100-16gb-dgx1", "amp"): 30.3, ("v100-16gb-dgx1", "fp32"): 63.9}
RECORDED_PER_GROUP = 14.7
RECORDED_SPEEDUP = 13.7
MARGIN = 2.0
#: The README's training rows (numbers of 61943241): DGX A100 80G at 1 and 8 GPUs, batch 2, 4, 8 per
#: GPU; DGX-1 V100 16G at 1 and 8 GPUs, batch 1 and 2; mixed precision and TF32 / FP32 each.
RUNS = {"a100-80gb-dgx": ({"amp", "tf32"}, (2, 4, 8)), "v100-16gb-dgx1": ({"amp", "fp32"}, (1, 2))}


@pytest.fixture(scope="module")
def rows() -> tuple[Measurement, ...]:
    return load_measurements([str(FILE)]).rows


def test_rows_are_sourced_and_keep_the_published_figure(rows: tuple[Measurement, ...]) -> None:
    assert {(m.hardware, m.precision, m.gpus, m.batch_per_gpu) for m in rows} == {
        (h, p, n, b) for h, (precisions, batches) in RUNS.items() for p in precisions for n in (1, 8)
        for b in batches}
    for m in rows:
        assert m.model == "unet3d_tf" and m.image_size == 128 and m.optimizer == "adam"
        assert m.source.startswith(
            "NVIDIA/DeepLearningExamples TensorFlow/Segmentation/UNet_3D_Medical/README.md @ 729963dd")
        assert "21.10-tf1" in m.framework and m.strategy.dp == m.gpus


def test_each_pair_keeps_the_readmes_precision_speedup(rows: tuple[Measurement, ...]) -> None:
    """The README's 'Throughput speedup' column is the mixed-precision figure over the TF32/FP32
    one to two decimals: a check of the transcription."""
    pairs: dict[tuple[str, int, int], dict[str, Measurement]] = defaultdict(dict)
    for m in rows:
        pairs[(m.hardware, m.gpus, m.batch_per_gpu)][m.precision] = m
    assert len(pairs) == 10
    for pair in pairs.values():
        amp = pair.pop("amp")
        (other,) = pair.values()
        published = float(amp.columns["published_amp_speedup"])
        assert other.columns["published_amp_speedup"] == amp.columns["published_amp_speedup"]
        assert amp.measured_throughput / other.measured_throughput == pytest.approx(published, abs=0.006)


def test_rows_are_priced_as_the_benchmark_ran(rows: tuple[Measurement, ...]) -> None:
    """Whole steps (Adam), the 21.10 container's cuDNN 8, NHWC at every precision (the layers'
    data_format is channels_last), XLA (every benchmark script passes --xla), TensorFlow's AMP."""
    for m in rows:
        assert m.step == FULL_STEP
        assert cudnn_major_of(m) == 8
        assert memory_format_of(m) == "nhwc"
        assert fusion_of(m) == "xla"
        if m.precision == "amp":
            assert amp_runtime_of(m) == "tensorflow-amp"


def test_no_other_set_has_this_network() -> None:
    others = sorted(p for p in DATA.glob("*runs.csv") if p != FILE)
    assert "unet3d_tf" not in {m.model for m in load_measurements([str(f) for f in others]).rows}


def test_recorded_error_per_gpu_and_precision() -> None:
    v = validate(load_measurements([str(FILE)]), "none")
    assert v.summary.unpredictable == 0
    mape = v.summary.throughput_mape_pct
    assert mape is not None and mape <= RECORDED_ALL + MARGIN
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    speedups = []
    for r in v.rows:
        assert r.error_pct is not None and r.error_pct > 0  # every row priced too fast
        by[(r.measurement.hardware, r.measurement.precision)].append(abs(r.error_pct))
        if r.speedup_error_pct is not None:
            speedups.append(abs(r.speedup_error_pct))
    for key, recorded in RECORDED.items():
        assert float(np.mean(by[key])) <= recorded + MARGIN, key
    assert len(speedups) == 10 and float(np.mean(speedups)) <= RECORDED_SPEEDUP + MARGIN


def test_recorded_per_group_calibrated_error() -> None:
    v = validate(load_measurements([str(FILE)]), "single-gpu-per-group")
    scored = [abs(r.error_pct) for r in v.rows if r.error_pct is not None and r.role != "calibration"]
    assert len(scored) == 10 and float(np.mean(scored)) <= RECORDED_PER_GROUP + MARGIN

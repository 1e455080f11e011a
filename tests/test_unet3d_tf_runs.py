"""NVIDIA's TensorFlow 3-D U-Net training runs (perfmodel/data/unet3d_tf_runs.csv): provenance, scope,
and the recorded hold-out error per GPU and precision (nothing is fitted to these rows)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from recorded_sets import (
    assert_per_group_within,
    assert_published_amp_speedups,
    assert_within_recorded,
    hold_out_errors,
    other_sets_rows,
    run_grid,
)

from perfmodel.validation import Measurement, load_measurements
from perfmodel.validation.amp_runtime_of import amp_runtime_of
from perfmodel.validation.software_era import cudnn_major_of, fusion_of, memory_format_of
from perfmodel.validation.step_scope import FULL_STEP

DATA = Path(str(resources.files("perfmodel.data")))
FILE = DATA / "unet3d_tf_runs.csv"
#: Throughput MAPE (%) on main after the tensor-core tile rule (``python scripts/family_report.py``;
#: 100.5 when the set was added on branch ``importers``): without calibration, all rows and per
#: profile and precision; the per-group single-GPU calibration; the speedup MAPE. A change that
#: makes one worse by more than MARGIN points fails. Every row is priced too fast, far more than
#: the PyTorch example's rows of the same network (unet3d_runs.csv): see MEASUREMENTS.md,
#: "unet3d_tf_runs.csv".
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
    assert {(m.hardware, m.precision, m.gpus, m.batch_per_gpu) for m in rows} == run_grid(RUNS)
    for m in rows:
        assert m.model == "unet3d_tf" and m.image_size == 128 and m.optimizer == "adam"
        assert m.source.startswith(
            "NVIDIA/DeepLearningExamples TensorFlow/Segmentation/UNet_3D_Medical/README.md @ 729963dd")
        assert "21.10-tf1" in m.framework and m.strategy.dp == m.gpus


def test_each_pair_keeps_the_readmes_precision_speedup(rows: tuple[Measurement, ...]) -> None:
    """The README's 'Throughput speedup' column is the mixed-precision figure over the TF32/FP32
    one to two decimals: a check of the transcription."""
    assert_published_amp_speedups(rows, 10)


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
    assert "unet3d_tf" not in {m.model for m in other_sets_rows(FILE)}


def test_recorded_error_per_gpu_and_precision() -> None:
    e = hold_out_errors(FILE)
    assert all(x > 0 for x in e.signed_pct)  # every row priced too fast
    assert_within_recorded(e, RECORDED_ALL, RECORDED, RECORDED_SPEEDUP, 10, MARGIN)


def test_recorded_per_group_calibrated_error() -> None:
    assert_per_group_within(FILE, RECORDED_PER_GROUP, 10, MARGIN)

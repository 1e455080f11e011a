"""NVIDIA's nnU-Net 3-D U-Net training runs (perfmodel/data/unet3d_runs.csv): provenance, scope, and the
recorded hold-out error per GPU and precision (nothing is fitted to these rows)."""

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
from perfmodel.validation.software_era import cudnn_major_of, fusion_of, memory_format_of
from perfmodel.validation.step_scope import FULL_STEP

DATA = Path(str(resources.files("perfmodel.data")))
FILE = DATA / "unet3d_runs.csv"
#: Throughput MAPE (%) on main after the tensor-core tile rule (``python scripts/family_report.py``;
#: 27.9 when the set was added on branch ``importers``, every row then priced too fast): without
#: calibration, all rows and per profile and precision; with the per-group single-GPU calibration
#: (the multi-GPU rows it scores); the speedup MAPE. A change that makes one worse by more than
#: MARGIN points fails. The 32-bit rows are priced too fast, most at batch 1, the AMP rows now too
#: slow (-10..-21%): see MEASUREMENTS.md, "unet3d_runs.csv".
RECORDED_ALL = 20.2
RECORDED = {("a100-80gb-dgx", "amp"): 16.2, ("a100-80gb-dgx", "tf32"): 7.7,
            ("v100-32gb-dgx1", "amp"): 15.7, ("v100-32gb-dgx1", "fp32"): 49.4}
RECORDED_PER_GROUP = 1.4
RECORDED_SPEEDUP = 1.5
MARGIN = 2.0
#: The README's 3-D training rows @ 4da7bf28: DGX A100 80G at 1 and 8 GPUs, batch 1, 2, 4 per GPU;
#: DGX-1 V100 32G at 1 and 8 GPUs, batch 1 and 2; mixed precision and TF32 / FP32 each.
RUNS = {"a100-80gb-dgx": ({"amp", "tf32"}, (1, 2, 4)), "v100-32gb-dgx1": ({"amp", "fp32"}, (1, 2))}


@pytest.fixture(scope="module")
def rows() -> tuple[Measurement, ...]:
    return load_measurements([str(FILE)]).rows


def test_rows_are_sourced_and_keep_the_published_figure(rows: tuple[Measurement, ...]) -> None:
    assert {(m.hardware, m.precision, m.gpus, m.batch_per_gpu) for m in rows} == run_grid(RUNS)
    for m in rows:
        assert m.model == "unet3d" and m.image_size == 128 and m.optimizer == "adam"
        assert m.source.startswith("NVIDIA/DeepLearningExamples PyTorch/Segmentation/nnUNet/README.md @ 4da7bf28")
        assert "pytorch-22.11" in m.framework and m.strategy.dp == m.gpus
        assert m.columns["precision_as_published"].startswith("Throughput - ")


def test_each_pair_keeps_the_readmes_precision_speedup(rows: tuple[Measurement, ...]) -> None:
    """The README's 'Throughput speedup' column is the mixed-precision figure over the TF32/FP32
    one of the same GPUs and batch, to two decimals: a check of the transcription."""
    assert_published_amp_speedups(rows, 10)


def test_rows_are_priced_as_the_benchmark_ran(rows: tuple[Measurement, ...]) -> None:
    """Whole training steps (FusedAdam's update inside the timed loop), the 22.11 container's cuDNN 8;
    AMP rows channels-last (benchmark.py: --layout NDHWC), 32-bit rows NCDHW; eager PyTorch."""
    for m in rows:
        assert m.step == FULL_STEP
        assert cudnn_major_of(m) == 8
        assert memory_format_of(m) == ("nhwc" if m.precision == "amp" else "nchw")
        assert fusion_of(m) == "eager"


def test_no_other_set_has_a_3d_unet_row() -> None:
    """The set is a hold-out: no other shipped measurement file prices this network."""
    assert "unet3d" not in {m.model for m in other_sets_rows(FILE)}


def test_recorded_error_per_gpu_and_precision() -> None:
    e = hold_out_errors(FILE)
    assert_within_recorded(e, RECORDED_ALL, RECORDED, RECORDED_SPEEDUP, 10, MARGIN)


def test_recorded_per_group_calibrated_error() -> None:
    assert_per_group_within(FILE, RECORDED_PER_GROUP, 10, MARGIN)

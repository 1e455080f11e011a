"""Lambda's H100 ResNet-50 training runs (perfmodel/data/hopper_runs.csv): provenance, scope, and the
recorded hold-out error per GPU and precision (nothing is fitted to these rows)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from recorded_sets import assert_within_recorded, hold_out_errors, other_sets_rows

from perfmodel.validation import Measurement, load_measurements
from perfmodel.validation.software_era import cudnn_major_of, fusion_of, memory_format_of
from perfmodel.validation.step_scope import FULL_STEP

DATA = Path(str(resources.files("perfmodel.data")))
FILE = DATA / "hopper_runs.csv"
#: Uncalibrated throughput MAPE (%) and mean signed error (%, + = predicted too fast) per profile and
#: precision, as computed on branch ``answers`` when the set was added (``python tools/gpu_rows.py
#: perfmodel/data/hopper_runs.csv``); a change that makes a MAPE worse by more than MARGIN points fails.
RECORDED_ALL = 12.0
RECORDED = {("h100-80gb-dgx", "amp"): 23.9, ("h100-80gb-dgx", "tf32"): 0.6,
            ("h100-80gb-pcie", "amp"): 8.2, ("h100-80gb-pcie", "tf32"): 6.8,
            ("h200-141gb-dgx", "amp"): 39.6, ("h200-141gb-dgx", "tf32"): 1.3}
RECORDED_SPEEDUP = 0.7
MARGIN = 2.0
#: The published runs: H100 SXM5 (a8e6d619, Feb 2023) and H100 PCIe Gen5 (c49a0e19, Nov 2022) at
#: 1, 2, 4 and 8 GPUs, AMP at batch 1280 and FP32 (TF32 tensor cores) at 640 per GPU; H200 SXM
#: (93929353 / 45c007f3, Aug 2024) at 1 and 8 GPUs, batch 2560 and 1280.
GPUS = {"h100-80gb-dgx": (1, 2, 4, 8), "h100-80gb-pcie": (1, 2, 4, 8), "h200-141gb-dgx": (1, 8)}
BATCH = {"h100-80gb-dgx": {"amp": 1280, "tf32": 640}, "h100-80gb-pcie": {"amp": 1280, "tf32": 640},
         "h200-141gb-dgx": {"amp": 2560, "tf32": 1280}}
COMMIT = {"h100-80gb-dgx": "a8e6d619", "h100-80gb-pcie": "c49a0e19", "h200-141gb-dgx": "93929353"}
#: cuDNN major of the container each set names: NGC PyTorch 22.09/22.10 ship cuDNN 8.6, 24.03 cuDNN 9.0
#: (NGC PyTorch container release notes).
CUDNN = {"h100-80gb-dgx": 8, "h100-80gb-pcie": 8, "h200-141gb-dgx": 9}


@pytest.fixture(scope="module")
def rows() -> tuple[Measurement, ...]:
    return load_measurements([str(FILE)]).rows


def test_rows_are_sourced_and_keep_the_published_figure(rows: tuple[Measurement, ...]) -> None:
    assert {(m.hardware, m.precision, m.gpus) for m in rows} == {
        (h, p, n) for h, counts in GPUS.items() for p in ("amp", "tf32") for n in counts}
    for m in rows:
        assert m.model == "resnet50" and m.image_size == 224
        assert m.source.startswith(f"lambdal/deeplearning-benchmark @ {COMMIT[m.hardware]}")
        assert m.columns["precision_as_published"] == ("AMP" if m.precision == "amp" else "FP32")
        assert m.batch_per_gpu == BATCH[m.hardware][m.precision] and m.strategy.dp == m.gpus
        # Lambda's CSV publishes the logs' Summary compute_ips (H200: the mean of three runs), cut to an
        # integer (compile_results_pytorch*.py: int(round(x, 2)))
        assert 0 <= m.measured_throughput - float(m.columns["published_csv_value"]) < 1
        log = m.columns["log"]
        assert log.startswith(("pytorch/results/", "pytorch/results_v2/"))
        assert ("AMP" if m.precision == "amp" else "FP32") in log
        assert m.columns["input"] == "synthetic"


def test_rows_are_priced_as_the_benchmark_ran(rows: tuple[Measurement, ...]) -> None:
    """Whole training steps (SGD update included), the container's cuDNN, NCHW at every precision
    (the logs' memory_format : nchw), eager PyTorch (no fused batch-norm chains)."""
    for m in rows:
        assert m.step == FULL_STEP
        assert cudnn_major_of(m) == CUDNN[m.hardware]
        assert memory_format_of(m) == "nchw"
        assert fusion_of(m) == "eager"


def test_no_other_set_uses_hopper_profiles() -> None:
    """The set is a hold-out: no other shipped measurement file has a Hopper row."""
    used = {m.hardware for m in other_sets_rows(FILE)}
    assert not {h for h in used if h.startswith(("h100", "h200"))}


def test_recorded_error_per_gpu_and_precision() -> None:
    assert_within_recorded(hold_out_errors(FILE), RECORDED_ALL, RECORDED, RECORDED_SPEEDUP, 14, MARGIN)

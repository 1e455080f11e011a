"""Throughput and speedup MAPE per CNN family over measured-run files (the README's family table).

Usage: ``python scripts/family_report.py [FILE ...]`` (default: the shipped published runs, the
hold-out set, the two family files, the one-GPU forward + backward hold-outs jcjohnson_runs.csv and
u39kun_runs.csv, the Hopper hold-out hopper_runs.csv, and the 3-D U-Net hold-outs unet3d_runs.csv
(PyTorch) and unet3d_tf_runs.csv (TensorFlow)).
Prints, per family, over the rows perfmodel predicts:
the throughput MAPE without calibration; with the pooled single-GPU calibration
(``--calibrate single-gpu``: compute efficiencies fitted per profile and precision to the
1-GPU rows of every network in the file, multi-GPU rows scored); with the per-group
single-GPU calibration (``--calibrate single-gpu-per-group``: each network's compute seconds
scaled to its own 1-GPU rows, per model, hardware, precision, framework, source and batch,
multi-GPU rows scored); and the speedup MAPE without calibration.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from importlib import resources
from pathlib import Path

import numpy as np

from perfmodel.errors import PerfmodelError
from perfmodel.validation import Validation, load_measurements, validate

FAMILIES = (
    ("ResNet/ResNeXt", ("resnet", "resnext", "se_resnext", "wide_resnet")),
    ("VGG", ("vgg",)),
    ("AlexNet", ("alexnet",)),
    ("Inception/GoogLeNet", ("inception", "googlenet")),
    ("EfficientNet/MobileNet", ("efficientnet", "mobilenet")),
    ("DenseNet", ("densenet",)),
    ("U-Net/3-D", ("unet", "cosmoflow")),
)


def family(model: str) -> str:
    for name, prefixes in FAMILIES:
        if model.startswith(prefixes):
            return name
    return "other"


Row = tuple[str, int, float, float | None, float | None, float | None]


def _scored(v: Validation) -> dict[str, list[float]]:
    """|error| % of the multi-GPU rows a calibration scores, per family and 'all'."""
    out: dict[str, list[float]] = defaultdict(list)
    for r in v.rows:
        if r.error_pct is not None and r.role != "calibration":
            for key in (family(r.measurement.model), "all"):
                out[key].append(abs(r.error_pct))
    return out


def _mean(xs: list[float]) -> float | None:
    return float(np.mean(xs)) if xs else None


def report(files: list[str]) -> list[Row]:
    """(family, rows, throughput MAPE %, pooled calibrated MAPE %, per-group calibrated MAPE %,
    speedup MAPE %) per family, then 'all'."""
    none = validate(load_measurements(files), "none")
    pooled = _scored(validate(load_measurements(files), "single-gpu"))
    group = _scored(validate(load_measurements(files), "single-gpu-per-group"))
    err: dict[str, list[float]] = defaultdict(list)
    spd: dict[str, list[float]] = defaultdict(list)
    for r in none.rows:
        if r.error_pct is None:
            continue
        for key in (family(r.measurement.model), "all"):
            err[key].append(abs(r.error_pct))
            if r.speedup_error_pct is not None:
                spd[key].append(abs(r.speedup_error_pct))
    out: list[Row] = []
    for key in [f for f, _ in FAMILIES] + ["other", "all"]:
        if err[key]:
            out.append((key, len(err[key]), float(np.mean(err[key])), _mean(pooled[key]), _mean(group[key]),
                        _mean(spd[key])))
    return out


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("files", nargs="*", metavar="FILE", help="measured-run CSV files (default: the shipped sets)")
    args = ap.parse_args(argv)
    data = Path(str(resources.files("perfmodel.data")))
    files = args.files or [str(data / f) for f in ("published_runs.csv", "holdout_runs.csv", "families_runs.csv",
                                                  "families_holdout_runs.csv", "jcjohnson_runs.csv",
                                                  "u39kun_runs.csv", "hopper_runs.csv", "unet3d_runs.csv",
                                                  "unet3d_tf_runs.csv")]
    for f in files:
        try:
            rows = report([f])
        except PerfmodelError as e:
            sys.exit(f"error: {e}")
        print(f"== {Path(f).name}")
        print(f"{'family':<24}{'rows':>6}{'throughput MAPE %':>19}{'pooled cal. %':>15}{'per-group cal. %':>18}"
              f"{'speedup %':>11}")
        for fam, n, e, c, g, s in rows:
            cells = ["-" if x is None else f"{x:.1f}" for x in (c, g, s)]
            print(f"{fam:<24}{n:>6}{e:>19.1f}{cells[0]:>15}{cells[1]:>18}{cells[2]:>11}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Throughput and speedup MAPE per CNN family over measured-run files (the README's family table).

Usage: ``python scripts/family_report.py [FILE ...]`` (default: the shipped published runs, the
hold-out set and the two family files). Prints, per family, the throughput MAPE without
calibration, with single-GPU calibration (multi-GPU rows, fitted on each group's 1-GPU rows)
and the speedup MAPE, over the rows perfmodel predicts.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from importlib import resources
from pathlib import Path

import numpy as np

from perfmodel.validation import load_measurements, validate

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


def report(files: list[str]) -> list[tuple[str, int, float, float | None, float | None]]:
    """(family, rows, throughput MAPE %, calibrated MAPE %, speedup MAPE %) per family, then 'all'."""
    none = validate(load_measurements(files), "none")
    single = validate(load_measurements(files), "single-gpu")
    err: dict[str, list[float]] = defaultdict(list)
    cal: dict[str, list[float]] = defaultdict(list)
    spd: dict[str, list[float]] = defaultdict(list)
    for r in none.rows:
        if r.error_pct is None:
            continue
        for key in (family(r.measurement.model), "all"):
            err[key].append(abs(r.error_pct))
            if r.speedup_error_pct is not None:
                spd[key].append(abs(r.speedup_error_pct))
    for r in single.rows:
        if r.error_pct is not None and r.role != "calibration":
            for key in (family(r.measurement.model), "all"):
                cal[key].append(abs(r.error_pct))
    out = []
    for key in [f for f, _ in FAMILIES] + ["other", "all"]:
        if err[key]:
            out.append((key, len(err[key]), float(np.mean(err[key])),
                        float(np.mean(cal[key])) if cal[key] else None,
                        float(np.mean(spd[key])) if spd[key] else None))
    return out


def main(argv: list[str]) -> None:
    data = Path(str(resources.files("perfmodel.data")))
    files = argv or [str(data / f) for f in ("published_runs.csv", "holdout_runs.csv", "families_runs.csv",
                                            "families_holdout_runs.csv")]
    for f in files:
        print(f"== {Path(f).name}")
        print(f"{'family':<24}{'rows':>6}{'throughput MAPE %':>19}{'calibrated %':>14}{'speedup %':>11}")
        for fam, n, e, c, s in report([f]):
            cs = "-" if c is None else f"{c:.1f}"
            ss = "-" if s is None else f"{s:.1f}"
            print(f"{fam:<24}{n:>6}{e:>19.1f}{cs:>14}{ss:>11}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Signed throughput error of every measured run on chosen GPUs (default: Ampere and Hopper profiles).

Usage: ``python tools/gpu_rows.py [--hardware PREFIX,...] [FILE ...]`` (default: the four shipped
sets and the Hopper hold-out, hardware ``a100,h100,h200``). Prints, per row with a prediction (no calibration), the
file, model, hardware, precision, GPUs, batch, measured and predicted throughput (samples/s)
and the signed error ``(predicted - measured) / measured`` in %: positive = predicted too
fast. The summary gives the mean signed and mean absolute error per hardware and precision.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from importlib import resources
from pathlib import Path

import numpy as np

from perfmodel.validation import load_measurements, validate

__all__ = ["signed_rows", "main"]

SETS = ("published_runs.csv", "holdout_runs.csv", "families_runs.csv", "families_holdout_runs.csv",
        "hopper_runs.csv")


def signed_rows(files: list[str], prefixes: tuple[str, ...]) -> list[tuple[str, str, str, str, int, str,
                                                                           float, float, float]]:
    """(file, model, hardware, precision, gpus, batch, measured/s, predicted/s, signed error %)."""
    out = []
    for f in files:
        for r in validate(load_measurements([f]), "none").rows:
            m = r.measurement
            if r.error_pct is None or r.predicted_throughput is None or not m.hardware.startswith(prefixes):
                continue
            out.append((Path(f).name, m.model, m.hardware, m.precision, m.gpus, m.batch_key,
                        m.measured_throughput, r.predicted_throughput, r.error_pct))
    return out


def main(argv: list[str]) -> None:
    prefixes: tuple[str, ...] = ("a100", "h100", "h200")
    if argv[:1] == ["--hardware"] and len(argv) > 1:
        prefixes, argv = tuple(argv[1].split(",")), argv[2:]
    data = Path(str(resources.files("perfmodel.data")))
    files = argv or [str(data / f) for f in SETS]
    rows = signed_rows(files, prefixes)
    print(f"{'file':<28}{'model':<22}{'hardware':<16}{'prec':<6}{'gpus':>5} {'batch':<8}"
          f"{'measured /s':>12}{'predicted /s':>13}{'signed err %':>13}")
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for f, model, hw, prec, gpus, batch, meas, pred, err in rows:
        print(f"{f:<28}{model:<22}{hw:<16}{prec:<6}{gpus:>5} {batch:<8}{meas:>12.1f}{pred:>13.1f}{err:>+13.1f}")
        groups[(hw, prec)].append(err)
    print("\nhardware        prec   rows  mean signed %  MAPE %  (no calibration; + = predicted too fast)")
    for (hw, prec), e in sorted(groups.items()):
        print(f"{hw:<16}{prec:<6}{len(e):>5}{np.mean(e):>+15.1f}{np.mean(np.abs(e)):>8.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])

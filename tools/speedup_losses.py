"""Seconds per step that multi-GPU runs lose beyond the model's prediction, per row and by input pipeline.

Usage: ``python tools/speedup_losses.py [--rows] [FILE ...]`` (default: the four shipped sets).
For every multi-GPU row with a 1-GPU row in its speedup group it prints the measured and
predicted step time per GPU (data parallelism; a pipeline's time per global batch), the
seconds lost per step against the 1-GPU run, measured and predicted, and the excess (measured
loss minus predicted loss) in ms and as a share of the measured 1-GPU step. The summary groups
the rows by the ``input`` column (how the run fed its data, from the source), framework and
precision: the evidence in ``perfmodel/data/MEASUREMENTS.md`` ("Speedup excess").
"""

from __future__ import annotations

import sys
from collections import defaultdict
from importlib import resources
from pathlib import Path

from perfmodel.validation import RowResult, load_measurements, validate

SETS = ("published_runs.csv", "holdout_runs.csv", "families_runs.csv", "families_holdout_runs.csv")


def step_times(r: RowResult, base: RowResult) -> tuple[float, float, float, float]:
    """(measured 1-GPU, predicted 1-GPU, measured N-GPU, predicted N-GPU) seconds for the same
    samples per GPU (data parallelism) or the same global batch (pipelines, N-GPU time x N)."""
    m, b = r.measurement, base.measurement
    assert r.predicted_throughput is not None and base.predicted_throughput is not None
    if m.batch_per_gpu is not None:
        n = m.batch_per_gpu
        return (n / b.measured_throughput, n / base.predicted_throughput,
                n * m.gpus / m.measured_throughput, n * m.gpus / r.predicted_throughput)
    g = float(m.global_batch or 0)
    return (g / b.measured_throughput, g / base.predicted_throughput,
            g * m.gpus / m.measured_throughput, g * m.gpus / r.predicted_throughput)


def rows_of(files: list[str]) -> list[tuple[str, ...]]:
    out = []
    for f in files:
        v = validate(load_measurements([f]), "none")
        by_row = {r.measurement.row: r for r in v.rows}
        for r in v.rows:
            if r.speedup_error_pct is None or r.speedup_baseline_row is None:
                continue
            m = r.measurement
            t1m, t1p, tnm, tnp = step_times(r, by_row[r.speedup_baseline_row])
            excess = (tnm - t1m) - (tnp - t1p)
            out.append((Path(f).name, m.columns.get("input", "") or "not stated", m.framework, m.model,
                        m.hardware, m.precision, str(m.gpus), m.batch_key, f"{t1m * 1e3:.1f}", f"{tnm * 1e3:.1f}",
                        f"{(tnm - t1m) * 1e3:.1f}", f"{(tnp - t1p) * 1e3:.1f}", f"{excess * 1e3:.1f}",
                        f"{100 * excess / t1m:.1f}", f"{r.speedup_error_pct:.1f}"))
    return out


HEAD = ("set", "input", "framework", "model", "hardware", "precision", "gpus", "batch", "1-GPU step ms",
        "N-GPU step ms", "measured loss ms", "predicted loss ms", "excess ms", "excess % of 1-GPU step",
        "speedup error %")


def main(argv: list[str]) -> None:
    show_rows = "--rows" in argv
    data = Path(str(resources.files("perfmodel.data")))
    files = [a for a in argv if a != "--rows"] or [str(data / f) for f in SETS]
    rows = rows_of(files)
    if show_rows:
        print(" | ".join(HEAD))
        for row in rows:
            print(" | ".join(row))
        print()
    groups: dict[tuple[str, str, str], list[tuple[str, ...]]] = defaultdict(list)
    for row in rows:
        groups[(row[1], row[2], row[5])].append(row)
    print("input | framework | precision | rows | gpus | excess ms (min..max) | excess % of 1-GPU step (min..max) "
          "| mean speedup error %")
    for (inp, fw, prec), rs in sorted(groups.items()):
        ms = [float(r[12]) for r in rs]
        pc = [float(r[13]) for r in rs]
        se = [float(r[14]) for r in rs]
        gpus = ",".join(sorted({r[6] for r in rs}, key=int))
        print(f"{inp} | {fw} | {prec} | {len(rs)} | {gpus} | {min(ms):.1f}..{max(ms):.1f} | "
              f"{min(pc):.1f}..{max(pc):.1f} | {sum(se) / len(se):+.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])

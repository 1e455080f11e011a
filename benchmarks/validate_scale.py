"""Scale of ``perfmodel validate``: wall time and peak memory on a large measurement CSV.

Writes a CSV of N rows (default 1,000,000) made of the shipped published runs repeated with
their measured throughputs jittered, then runs ``perfmodel validate FILE --format F`` in a
subprocess for each format, output to /dev/null, and prints wall and CPU seconds (CPU time
is the fair figure on a shared machine) and the child's peak resident memory. Prints
figures; asserts nothing (timed assertions flake).

Run: python benchmarks/validate_scale.py [ROWS] [FORMAT ...]
"""

from __future__ import annotations

import csv
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfmodel.validation import shipped_path


def write_csv(path: Path, n: int) -> int:
    """``n`` rows of the shipped runs (throughput x U(0.9, 1.1), seeded); returns the file's size."""
    with open(shipped_path(), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rng = random.Random(0)
    cols = ["model", "hardware", "gpus", "precision", "batch_per_gpu", "global_batch", "strategy",
            "measured_throughput", "framework"]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for i in range(n):
            r = rows[i % len(rows)]
            r = dict(r, measured_throughput=f"{float(r['measured_throughput']) * rng.uniform(0.9, 1.1):.1f}")
            w.writerow([r[c] for c in cols])
    return path.stat().st_size


def run(path: Path, fmt: str) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak MiB) of one ``perfmodel validate`` process."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu0 = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    t = time.perf_counter()
    with open("/dev/null", "w") as null:
        r = subprocess.run([sys.executable, "-m", "perfmodel", "validate", str(path), "--format", fmt],
                           stdout=null, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        print(f"  exit {r.returncode}: {r.stderr.strip()[:200]}")
    return dt, usage.ru_utime + usage.ru_stime - cpu0, max(usage.ru_maxrss, before) / 1024


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    formats = sys.argv[2:] or ["csv", "json", "table"]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "runs.csv"
        size = write_csv(path, n)
        print(f"{n:,} rows, {size / 1e6:.1f} MB")
        for fmt in formats:
            dt, cpu, mib = run(path, fmt)
            print(f"  validate --format {fmt:5}: {dt:6.1f} s wall, {cpu:6.1f} s CPU, "
                  f"peak {mib:,.0f} MiB (largest child so far)")


if __name__ == "__main__":
    main()

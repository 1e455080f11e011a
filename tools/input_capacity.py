"""Could the host's CPU cores have fed each measured multi-GPU run? Cited per-image costs against the rows.

Usage: ``python tools/input_capacity.py [--rows]``. For every multi-GPU row of the shipped sets
whose ``input`` column names a real-data pipeline, on a profile whose host CPU is cited below,
it prints the physical cores left per GPU (the server's cores less one per GPU for the
training process, shared evenly by the server's GPUs), the measured images per second per
GPU, and the largest CPU cost per image (seconds of one core) that this rate allows: a host
that feeds every GPU ``r`` images/s with ``k`` cores each spends at most ``k / r`` core-seconds
per image. Against that it sets the cost band of the PyTorch ``DataLoader`` path NVIDIA's
ConvNets scripts use (PIL decode, RandomResizedCrop, flip, uint8 collate; normalisation runs
on the GPU), priced from the cited single-thread benchmarks in :data:`STAGES`, and shows what
a host ceiling (a GPU's step no shorter than its share of the cores takes to prepare its
batch) would do to each row's speedup error, at the band's low and high ends.
The evidence in ``perfmodel/data/MEASUREMENTS.md`` ("Input pipeline: what a host ceiling
would explain"); it changes no prediction.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from perfmodel.hardware import load_hardware
from perfmodel.validation import RowResult, load_measurements, validate

SETS = ("published_runs.csv", "holdout_runs.csv", "families_runs.csv", "families_holdout_runs.csv")

#: Physical CPU cores per server (SMT threads not counted), with the source.
HOST_CORES = {
    "v100-16gb-dgx1": (40, "DGX-1: dual 20-core Xeon E5-2698 v4 2.2 GHz (run.ai 'NVIDIA DGX' guide, DGX-1 spec table)"),
    "v100-32gb-dgx1": (40, "as v100-16gb-dgx1"),
    "v100-32gb-dgx2": (48, "DGX-2: dual Xeon Platinum 8168 2.7 GHz (Wikipedia 'Nvidia DGX'), 24 cores each "
                           "(Intel ARK, Xeon Platinum 8168)"),
    "a100-80gb-dgx": (128, "DGX A100: two 64-core AMD EPYC 7742 (Wikipedia 'Nvidia DGX'; hardwaretimes.com, "
                           "2020-05-14: 'total core count of 128')"),
    "a100-40gb-dgx": (128, "as a100-80gb-dgx"),
}


@dataclass(frozen=True)
class Stage:
    """One step of the CPU pipeline: seconds of one core per image, low and high, and the source."""

    name: str
    low_s: float
    high_s: float
    source: str


#: Single-thread costs per image. #7497's medians are per sample over 1,000 ImageNet-like
#: samples, torchvision transforms v2 (uint8 resize) and v1 (float resize); decode is
#: measured on whole JPEG files.
STAGES = (
    Stage("JPEG decode", 1.573e-3, 2.541e-3,
          "low: torchvision decode_jpeg, 480p 138 KB JPEG, 1 thread (meta-pytorch/torchcodec PR #1620; PIL 2.229 ms "
          "there); high: torchvision decode_jpeg, 1,000 images of mean 551x676, 1 thread, 2,541,465 us "
          "(pytorch/vision PR #8468)"),
    Stage("RandomResizedCrop (crop + resize to 224)", 0.110e-3 + 0.402e-3, 0.110e-3 + 1.230e-3,
          "pytorch/vision issue #7497, 'classification-complex', 1 thread: crop 110 us, resize 402 us (v2 uint8) / "
          "1,230 us (v1 float)"),
    Stage("horizontal flip", 0.047e-3, 0.066e-3, "pytorch/vision issue #7497 (v1 47 us, v2 66 us)"),
    Stage("to a uint8 array", 0.255e-3, 0.270e-3, "pytorch/vision issue #7497, PILToTensor (v1 255 us, v2 270 us)"),
)
AUTOAUGMENT = Stage("AutoAugment", 0.996e-3, 1.269e-3, "pytorch/vision issue #7497 (v2 996 us, v1 1,269 us)")


def cost_band(autoaugment: bool) -> tuple[float, float]:
    """(low, high) core-seconds per image of the DataLoader path, with AutoAugment or without."""
    stages = STAGES + ((AUTOAUGMENT,) if autoaugment else ())
    return sum(s.low_s for s in stages), sum(s.high_s for s in stages)


def cores_per_gpu(cores: int, gpus_on_node: int) -> float:
    """Physical cores each GPU's loader gets: the server's cores less one per training process, shared evenly."""
    return (cores - gpus_on_node) / gpus_on_node


def ceiling_step_s(batch: int, cost_s: float, cores: float) -> float:
    """The shortest step a GPU can take when ``cores`` cores prepare its ``batch`` images at ``cost_s`` each."""
    return batch * cost_s / cores


def uses_autoaugment(r: RowResult) -> bool:
    return "autoaugment" in r.measurement.columns.get("notes", "").lower()


def row_figures(r: RowResult, base: RowResult) -> dict[str, float]:
    """One multi-GPU data-parallel row against its 1-GPU row: the cost bound and the ceiling's what-if."""
    m = r.measurement
    assert m.batch_per_gpu is not None and r.predicted_throughput is not None
    assert base.predicted_throughput is not None and r.measured_speedup is not None
    cores, _ = HOST_CORES[m.hardware]
    node = min(m.gpus, load_hardware(m.hardware).gpus_per_node)
    k_n = cores_per_gpu(cores, node)
    rate = m.measured_throughput / m.gpus
    out = {"cores_per_gpu": k_n, "rate": rate, "max_cost_s": k_n / rate,
           "error": 100.0 * (r.predicted_speedup or 0.0) / r.measured_speedup - 100.0}
    for end, cost in zip(("low", "high"), cost_band(uses_autoaugment(r)), strict=True):
        out[f"ceiling_{end}"] = k_n / cost
        out[f"error_{end}"] = error_with_ceiling(r, base, cost)
        out[f"cal_{end}"] = error_with_ceiling(r, base, cost, calibrated=True)
    return out


def error_with_ceiling(r: RowResult, base: RowResult, cost_s: float, calibrated: bool = False) -> float:
    """The row's speedup error (%) when its step and its 1-GPU row's are no shorter than the host
    ceiling at ``cost_s`` core-seconds per image; ``calibrated``: its throughput error (%) after
    scaling its predicted step by the 1-GPU row's measured/predicted ratio (the per-group
    single-GPU calibration, which today makes the two errors equal), then the ceiling."""
    m = r.measurement
    assert m.batch_per_gpu is not None and r.predicted_throughput is not None
    assert base.predicted_throughput is not None and r.measured_speedup is not None
    cores, _ = HOST_CORES[m.hardware]
    node = min(m.gpus, load_hardware(m.hardware).gpus_per_node)
    b = m.batch_per_gpu
    t1p, tnp = b / base.predicted_throughput, b * m.gpus / r.predicted_throughput
    ceil_1 = ceiling_step_s(b, cost_s, cores_per_gpu(cores, 1))
    ceil_n = ceiling_step_s(b, cost_s, cores_per_gpu(cores, node))
    if calibrated:
        t1m, tnm = b / base.measurement.measured_throughput, b * m.gpus / m.measured_throughput
        return 100.0 * tnm / max(tnp * max(t1m, ceil_1) / t1p, ceil_n) - 100.0
    return 100.0 * (m.gpus * max(t1p, ceil_1) / max(tnp, ceil_n)) / r.measured_speedup - 100.0


def rows_of(files: list[str]) -> list[tuple[str, RowResult, RowResult, dict[str, float]]]:
    out = []
    for f in files:
        v = validate(load_measurements([f]), "none")
        by_row = {r.measurement.row: r for r in v.rows}
        for r in v.rows:
            m = r.measurement
            if (r.speedup_error_pct is None or r.speedup_baseline_row is None or m.batch_per_gpu is None
                    or m.hardware not in HOST_CORES or m.columns.get("input", "") in ("", "synthetic")):
                continue
            base = by_row[r.speedup_baseline_row]
            out.append((Path(f).name, r, base, row_figures(r, base)))
    return out


def main(argv: list[str]) -> None:
    data = Path(str(resources.files("perfmodel.data")))
    rows = rows_of([str(data / f) for f in SETS])
    for aa in (False, True):
        lo, hi = cost_band(aa)
        name = "DataLoader path" + (" + AutoAugment" if aa else "")
        print(f"{name}: {lo * 1e3:.2f}..{hi * 1e3:.2f} ms of one core per image")
    print()
    print("set | input | model | hardware | precision | gpus | cores per GPU | measured img/s per GPU | "
          "max cost ms/img/core | ceiling img/s per GPU (low..high cost) | speedup error % now | "
          "with ceiling at low cost | at high cost | calibrated error % with ceiling at low cost | at high cost")
    for name, r, _, x in rows:
        m = r.measurement
        priced = m.columns.get("input") == "pytorch-dataloader"
        ceil = f"{x['ceiling_high']:.0f}..{x['ceiling_low']:.0f}" if priced else "no cited cost"
        what_if = (f"{x['error_low']:+.1f} | {x['error_high']:+.1f} | {x['cal_low']:+.1f} | {x['cal_high']:+.1f}"
                   if priced else "- | - | - | -")
        print(f"{name} | {m.columns.get('input')}{' +AA' if uses_autoaugment(r) else ''} | {m.model} | {m.hardware} "
              f"| {m.precision} | {m.gpus} | {x['cores_per_gpu']:.1f} | {x['rate']:.0f} | {x['max_cost_s'] * 1e3:.2f} "
              f"| {ceil} | {x['error']:+.1f} | {what_if}")
    print()
    for name in SETS:
        dl = [x for n, r, _, x in rows if n == name and r.measurement.columns.get("input") == "pytorch-dataloader"]
        if dl:
            mean = {k: sum(abs(x[k]) for x in dl) / len(dl)
                    for k in ("error", "error_low", "error_high", "cal_low", "cal_high")}
            print(f"{name}: {len(dl)} DataLoader rows, mean |speedup error| now {mean['error']:.1f}%, with the "
                  f"ceiling {mean['error_low']:.1f}% (low cost) / {mean['error_high']:.1f}% (high cost); "
                  f"calibrated {mean['cal_low']:.1f}% / {mean['cal_high']:.1f}%")
    print()
    print(scan(rows, calibrated=False))
    print(scan(rows, calibrated=True))


def scan(rows: list[tuple[str, RowResult, RowResult, dict[str, float]]], calibrated: bool) -> str:
    """One cost for every DataLoader row (AutoAugment or not), the best on the shipped set's rows
    on a 0.05 ms grid by mean |speedup error| (``calibrated``: |calibrated error|), and what it
    gives on the other sets: a what-if, not a fitted model."""
    dl = [(n, r, b) for n, r, b, _ in rows if r.measurement.columns.get("input") == "pytorch-dataloader"]

    def mean_abs(cost: float, names: set[str], cal: bool = False) -> float:
        errs = [abs(error_with_ceiling(r, b, cost, cal)) for n, r, b in dl if n in names]
        return sum(errs) / len(errs)

    grid = [k * 0.05e-3 for k in range(20, 201)]
    best = min(grid, key=lambda c: (mean_abs(c, {SETS[0]}, calibrated), c))
    parts = [f"{n}: {mean_abs(best, {n}):.1f}% / {mean_abs(best, {n}, True):.1f}% (no ceiling: "
             f"{mean_abs(1e-9, {n}):.1f}% / {mean_abs(1e-9, {n}, True):.1f}%)"
             for n in SETS if any(x == n for x, _, _ in dl)]
    by = "calibrated error" if calibrated else "speedup error"
    return (f"one cost for all DataLoader rows, best on {SETS[0]}'s {by}: {best * 1e3:.2f} ms of one core per image; "
            "mean |speedup error| / |calibrated error| " + "; ".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])

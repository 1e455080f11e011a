"""Residuals of the kernel model on PipeDream's per-layer V100 times, and the profiler-cost check.

Usage: ``python scripts/pipedream_residuals.py [--lomo]``

Prints, per op kind and phase (PipeDream rows as ``perfmodel validate --kernels`` scores them):

* MAPE and the median of predicted / measured, then the median ratio and MAPE by size
  (output bytes of the whole batch, in quintiles) and by model: a size trend says a fixed
  cost or a bandwidth is missing, a model trend says the rows of one profile differ;
* the profiler-cost check: a robust straight line ``raw ms = a + b x output MB`` over every row
  of a layer type (scored or not, before any subtraction). ``a`` is the time of an empty layer
  of that type, i.e. what the profiler's hooks, ``torch.cuda.synchronize()`` and the module's
  host work cost; ``1 / b`` the rate per output byte. The scorer removes 0.26 ms forward /
  0.02 ms backward from every row (``perfmodel.validation.kernel_rows``);
* the small-layer floor: raw forward times of batch norm and ReLU by size (flat below ~20 MB:
  host work in the window, not a GPU effect);
* the prologue check: forward rows whose window also holds untimed ops (residual adds,
  concatenations, dropout) exceed the model, when that work is priced in full, by at most about
  0.12 ms: what runs hidden behind the window's host work before the module's first launch
  (``PIPEDREAM_FWD_PROLOGUE_S``);
* with ``--lomo``: leave-one-model-out. For each of PipeDream's models, the memory-side
  parameters PipeDream's rows inform (the memory efficiency of ``v100-16gb-dgx1`` fp32, and the
  window kernels' memory latency and sector slots per SM, fitted on the pooling rows) are
  fitted by ``scripts/fit_kernel_params.py``'s loss on the other models' rows, and the left-out
  model is scored with them; the table compares that MAPE per op kind with the in-sample one.
"""

from __future__ import annotations

import csv
import dataclasses
import sys
from collections import defaultdict
from collections.abc import Sequence
from importlib import resources

import numpy as np
from scipy.optimize import minimize, minimize_scalar

from perfmodel.hardware import Hardware, load_hardware
from perfmodel.validation.kernel_rows import KernelRow, load_rows
from perfmodel.validation.kernels import price_rows

PROFILE = "v100-16gb-dgx1"
#: layer type in the profiles -> op name the scorer uses
TYPES = {"ReLU": "relu", "BatchNorm2d": "batchnorm", "MaxPool2d": "maxpool", "AvgPool2d": "avgpool",
         "Linear": "linear", "Conv2d": "conv"}


def _with_memory(hw: Hardware, memory: float) -> Hardware:
    comp = dict(hw.compute)
    comp["fp32"] = dataclasses.replace(comp["fp32"], memory=memory)
    return dataclasses.replace(hw, compute=comp)


def _op(r: KernelRow) -> str:
    return r.op.split(" ")[0] + " " + r.what[6:]


def _mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - meas) / meas) * 100)


def residual_tables(rows: Sequence[KernelRow], pred: np.ndarray) -> None:
    meas = np.array([r.measured_s for r in rows])
    ratio = pred / meas
    by_op: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_op[_op(r)].append(i)
    for op, idx in sorted(by_op.items()):
        ix = np.array(idx)
        print(f"\n{op}: {len(ix)} rows, MAPE {_mape(pred[ix], meas[ix]):.1f}%, "
              f"median pred/meas {np.median(ratio[ix]):.2f}")
        size = np.array([rows[i].layer.out_elems * rows[i].batch * 4 for i in ix])
        edges = np.unique(np.quantile(size, np.linspace(0, 1, 6)))
        print("  output MB (whole batch)   rows  median pred/meas  MAPE %")
        for lo, hi in zip(edges[:-1], edges[1:], strict=True):
            sel = ix[(size >= lo) & (size <= hi)]
            if len(sel):
                print(f"  {lo / 1e6:9.1f} - {hi / 1e6:9.1f}  {len(sel):6d}  {np.median(ratio[sel]):16.2f}  "
                      f"{_mape(pred[sel], meas[sel]):6.1f}")
        models = sorted({rows[i].model for i in ix})
        print("  " + "  ".join(f"{m}:{np.median(ratio[[i for i in ix if rows[i].model == m]]):.2f}" for m in models))


def _robust_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least absolute deviations line by iteratively reweighted least squares."""
    a = np.vstack([np.ones_like(x), x]).T
    w = np.ones_like(y)
    coef = np.zeros(2)
    for _ in range(50):
        coef = np.linalg.lstsq(a * w[:, None], y * w, rcond=None)[0]
        w = 1 / np.sqrt(np.maximum(np.abs(y - a @ coef), 1e-4))
    return float(coef[0]), float(coef[1])


def _rate(slope_ms_per_mb: float) -> str:
    return f"{1 / slope_ms_per_mb:24.0f}" if slope_ms_per_mb > 0 else f"{'-':>24s}"


def hook_check() -> None:
    text = resources.files("perfmodel.data").joinpath("kernels_pipedream_layers.csv").read_text(encoding="utf-8")
    data: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for d in csv.DictReader(text.splitlines()):
        if d["layer_type"] in TYPES and float(d["fwd_ms"]) > 0:
            data[d["layer_type"]].append((float(d["output_activation_bytes"]) / 1e6, float(d["fwd_ms"]),
                                          float(d["bwd_ms"])))
    print("\nprofiler-cost check: raw ms = a + b x output MB, robust fit over every row of the type")
    print("layer type     rows   a fwd ms  a bwd ms  fwd GB/s per output byte  bwd GB/s per output byte")
    for t, vals in data.items():
        v = np.array(vals)
        af, bf = _robust_line(v[:, 0], v[:, 1])
        ab, bb = _robust_line(v[:, 0], v[:, 2])
        print(f"{t:12s} {len(v):6d} {af:10.3f} {ab:9.3f}  {_rate(bf)}  {_rate(bb)}")


def floor_check() -> None:
    """Raw forward times of small batch-norm and ReLU layers by size: a floor that does not move
    with the bytes is host work inside the window (not GPU parallelism, which Little's law shows
    saturates a V100 from ~1 MB: 80 SMs x 2048 threads x 16 bytes each = 2.6 MB in flight)."""
    text = resources.files("perfmodel.data").joinpath("kernels_pipedream_layers.csv").read_text(encoding="utf-8")
    data: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for d in csv.DictReader(text.splitlines()):
        if d["layer_type"] in ("BatchNorm2d", "ReLU") and float(d["fwd_ms"]) > 0:
            data[d["layer_type"]].append((float(d["output_activation_bytes"]) / 1e6, float(d["fwd_ms"])))
    print("\nsmall-layer floor: raw forward ms (before any subtraction) by output size")
    print("layer type   output MB      rows  10th pct ms  median ms")
    for t, vals in sorted(data.items()):
        v = np.array(vals)
        for lo, hi in ((0, 2), (2, 5), (5, 10), (10, 20), (20, 50)):
            m = (v[:, 0] >= lo) & (v[:, 0] < hi)
            if m.any():
                print(f"{t:12s} {lo:3d} - {hi:3d}  {int(m.sum()):8d}  {np.quantile(v[m, 1], 0.1):11.3f}  "
                      f"{np.median(v[m, 1]):9.3f}")


def overlap_check(rows: Sequence[KernelRow]) -> None:
    """How far forward rows with untimed work in their window exceed the model, by that work's time,
    priced as if none of it hid behind the window's host prologue (the prologue's estimate)."""
    fwd = [r for r in rows if r.what == "layer_fwd" and r.extra]
    serial = [dataclasses.replace(r, extra_hidden_s=0.0) for r in fwd]
    bare = [dataclasses.replace(r, extra=()) for r in fwd]
    p, _ = price_rows(serial, before=False)
    p0, _ = price_rows(bare, before=False)
    extra, excess = p - p0, p - np.array([r.measured_s for r in fwd])
    print("\nforward rows with untimed work in their window: excess of the serial price over the measured")
    print("untimed work ms   rows  median excess ms")
    for lo, hi in ((0, 0.05e-3), (0.05e-3, 0.1e-3), (0.1e-3, 0.2e-3), (0.2e-3, 0.4e-3), (0.4e-3, 1.0)):
        m = (extra >= lo) & (extra < hi)
        if m.any():
            med = float(np.median(excess[m]))
            print(f"{lo * 1e3:5.2f} - {min(hi, 9.99e-3) * 1e3:5.2f}  {int(m.sum()):6d}  {med * 1e3:16.3f}")


def fit_memory(rows: Sequence[KernelRow], hw: Hardware) -> float:
    """The memory efficiency minimising mean |log(pred / meas)| over ``rows`` (the fitting script's loss)."""
    meas = np.array([r.measured_s for r in rows])

    def loss(x: float) -> float:
        pred, _ = price_rows(rows, {PROFILE: _with_memory(hw, x)}, before=False)
        return float(np.mean(np.abs(np.log(pred / meas))))

    return float(minimize_scalar(loss, bounds=(0.4, 1.0), method="bounded", options={"xatol": 1e-3}).x)


def _with_latency(hw: Hardware, latency_s: float, slots: float) -> Hardware:
    return dataclasses.replace(hw, kernels=dataclasses.replace(hw.kernels, memory_latency_s=latency_s,
                                                               sector_slots_per_sm=slots))


def fit_latency(rows: Sequence[KernelRow], hw: Hardware) -> tuple[float, float]:
    """The window kernels' memory latency and sector slots per SM minimising the fitting script's loss
    over the pooling rows of ``rows`` (no other row depends on them)."""
    pool = [r for r in rows if r.layer.kind in ("avgpool", "maxpool")]
    meas = np.array([r.measured_s for r in pool])

    def loss(x: np.ndarray) -> float:
        lat, slots = float(np.clip(x[0], 0.1, 2.0)) * 1e-6, float(np.clip(x[1], 0.32, 40.96)) * 100
        pred, _ = price_rows(pool, {PROFILE: _with_latency(hw, lat, slots)}, before=False)
        return float(np.mean(np.abs(np.log(pred / meas))))

    x0 = np.array([hw.kernels.memory_latency_s * 1e6, hw.kernels.sector_slots_per_sm / 100])
    sol = minimize(loss, x0, method="Nelder-Mead", options={"maxiter": 200, "xatol": 1e-3, "fatol": 1e-4})
    return float(np.clip(sol.x[0], 0.1, 2.0)) * 1e-6, float(np.clip(sol.x[1], 0.32, 40.96)) * 100


def lomo(rows: Sequence[KernelRow], hw: Hardware) -> None:
    meas = np.array([r.measured_s for r in rows])
    pred_in, _ = price_rows(rows, before=False)
    pred_out = np.zeros(len(rows))
    models = sorted({r.model for r in rows})
    print("\nleave-one-model-out (memory efficiency, memory latency and sector slots refitted without the model)")
    for m in models:
        train = [r for r in rows if r.model != m]
        eff = fit_memory(train, hw)
        lat, slots = fit_latency(train, hw)
        idx = [i for i, r in enumerate(rows) if r.model == m]
        p, _ = price_rows([rows[i] for i in idx], {PROFILE: _with_latency(_with_memory(hw, eff), lat, slots)},
                          before=False)
        pred_out[idx] = p
        print(f"  {m:15s} memory efficiency {eff:.3f}, memory latency {lat * 1e9:.0f} ns, sector slots {slots:.0f}")
    ops = sorted({_op(r) for r in rows})
    print("op kind          rows  in-sample MAPE %  left-out MAPE %")
    for op in [*ops, "all"]:
        ix = np.array([i for i, r in enumerate(rows) if op in ("all", _op(r))])
        print(f"{op:15s} {len(ix):5d}  {_mape(pred_in[ix], meas[ix]):16.1f}  {_mape(pred_out[ix], meas[ix]):15.1f}")


def main(argv: list[str]) -> None:
    rows = load_rows(("pipedream",))
    pred, _ = price_rows(rows, before=False)
    residual_tables(rows, pred)
    hook_check()
    floor_check()
    overlap_check(rows)
    if "--lomo" in argv:
        lomo(rows, load_hardware(PROFILE))


if __name__ == "__main__":
    main(sys.argv[1:])

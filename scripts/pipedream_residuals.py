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
  0.02 ms backward from every row (``perfmodel.validation.kernel_rows``), and prices each forward
  row's module host work beyond a one-op module's as its type's ``a`` less 0.26 ms
  (:func:`perfmodel.validation.kernel_rows.module_host_s`);
* the small-layer floor: raw forward times of batch norm and ReLU by size (flat below ~20 MB:
  host work in the window, not a GPU effect);
* the prologue check: forward rows whose window also holds untimed ops (residual adds,
  concatenations, dropout) exceed the model, when that work is priced in full, by a plateau: what
  runs hidden behind the window's host work before the module's first launch
  (``PIPEDREAM_FWD_PROLOGUE_S``, printed beside the value of
  :func:`perfmodel.validation.pipedream_lomo.prologue_rule` at the shipped numbers);
* with ``--lomo``: leave-one-model-out (``perfmodel validate --kernels``' ``MAPE_out`` column).
  For each of PipeDream's models, the numbers only PipeDream's rows inform (the memory efficiency
  of ``v100-16gb-dgx1`` fp32, the window kernels' memory latency and sector slots per SM, the
  depthwise numbers, the forward prologue) are derived from the other models' rows
  (:func:`perfmodel.validation.pipedream_lomo.derive`), and the left-out model is scored with
  them; the table compares that MAPE per op kind with the in-sample one.
"""

from __future__ import annotations

import csv
import dataclasses
import sys
from collections import defaultdict
from collections.abc import Sequence
from importlib import resources

import numpy as np

from perfmodel.hardware import load_hardware
from perfmodel.validation.kernel_rows import PIPEDREAM_FWD_PROLOGUE_S, KernelRow, load_rows, module_host_s
from perfmodel.validation.kernels import price_rows
from perfmodel.validation.pipedream_lomo import PipeDreamNumbers, held_out_prices, prologue_rule
from perfmodel.validation.robust_line import robust_line

PROFILE = "v100-16gb-dgx1"
#: layer type in the profiles -> op name the scorer uses
TYPES = {"ReLU": "relu", "BatchNorm2d": "batchnorm", "MaxPool2d": "maxpool", "AvgPool2d": "avgpool",
         "Linear": "linear", "Conv2d": "conv"}


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
        af, bf = robust_line(v[:, 0], v[:, 1])
        ab, bb = robust_line(v[:, 0], v[:, 2])
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
    hw = load_hardware(PROFILE)
    n = PipeDreamNumbers.of(hw, 0.0, tuple(sorted(module_host_s().items())))
    print(f"prologue rule (least absolute deviations fit of excess = min(untimed work, P + module host work)): "
          f"P = {prologue_rule(rows, hw, n) * 1e3:.3f} ms; PIPEDREAM_FWD_PROLOGUE_S = "
          f"{PIPEDREAM_FWD_PROLOGUE_S * 1e3:.3f} ms")


def lomo(rows: Sequence[KernelRow]) -> None:
    meas = np.array([r.measured_s for r in rows])
    pred_in, _ = price_rows(rows, before=False)
    pred_out, used = held_out_prices(rows)
    print("\nleave-one-model-out: the numbers only PipeDream's rows inform, derived without the model")
    print("left-out model   memory eff  latency ns  sector slots  depthwise eff, output FLOPs, wgrad FLOPs"
          "  prologue ms  host ms linear, BN")
    for m, n in used.items():
        host = dict(n.host_s)
        print(f"  {m:15s} {n.memory:9.3f}  {n.memory_latency_s * 1e9:10.0f}  {n.sector_slots_per_sm:12.0f}  "
              f"{n.depthwise_efficiency:13.4f}, {n.depthwise_output_flops:6.0f}, {n.depthwise_wgrad_flops:5.1f}"
              f"  {n.prologue_s * 1e3:11.3f}  "
              f"{host.get('linear', 0) * 1e3:.3f}, {host.get('batchnorm', 0) * 1e3:.3f}")
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
        lomo(rows)


if __name__ == "__main__":
    main(sys.argv[1:])

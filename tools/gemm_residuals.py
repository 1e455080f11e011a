"""Residuals of the kernel model on DeepBench GEMMs, grouped by shape features.

Usage: ``python tools/gemm_residuals.py [--gpu P100|V100] [--precision fp32|amp] [--by FEATURE ...] [--rows]``

For every DeepBench GEMM row priced by ``perfmodel validate --kernels`` (``C = op(A) op(B)``, ``M x N``
over a reduction of ``K``) this prints ``log(predicted / measured)`` grouped by a shape feature:
the transpose flags (``tt``: NN, NT, TN), the workload (``app``), the narrow side ``N`` (exact),
``M`` and ``K`` (power-of-two buckets), the FLOPs (``flops``: power-of-ten buckets); per GPU and
precision: rows, mean and spread of the log ratio and each group's share of the set's MAPE (sum
of |pred/meas - 1| over its rows, per row of the set), largest first. ``--rows`` lists the rows,
worst first, with the measured and predicted TFLOP/s.
"""

from __future__ import annotations

import argparse
import csv
import math
from importlib import resources

import numpy as np
import pandas as pd

from perfmodel.validation.kernel_rows import load_rows
from perfmodel.validation.kernels import price_rows

FEATURES = ("tt", "app", "N", "M", "K", "flops")


def _bucket(x: float) -> str:
    """Power-of-two bucket of a positive number: '<=2^j'."""
    return f"<=2^{max(0, math.ceil(math.log2(max(x, 1.0))))}"


def frame() -> pd.DataFrame:
    """One record per DeepBench GEMM row (the CSV's rows in order, those load_rows keeps)."""
    rows = [r for r in load_rows(("deepbench",)) if r.op == "gemm"]
    pred, _ = price_rows(rows, before=False)
    text = resources.files("perfmodel.data").joinpath("kernels_deepbench_gemm.csv").read_text(encoding="utf-8")
    prec = {"fp32": "fp32", "fp16_tensorcore": "amp"}
    src = [d for d in csv.DictReader(text.splitlines()) if d["precision"] in prec]
    recs = []
    for r, p, d in zip(rows, pred, src, strict=True):
        m, n, k = int(d["M"]), int(d["N"]), int(d["K"])
        if abs(float(d["time_ms"]) * 1e-3 - r.measured_s) > 1e-12:
            raise SystemExit("DeepBench GEMM rows and kernels_deepbench_gemm.csv are out of step")
        flops = 2.0 * m * n * k
        recs.append(dict(
            gpu=d["gpu"][:4], prec=prec[d["precision"]], app=d["application"], tt=d["a_transpose"] + d["b_transpose"],
            N=n, M=_bucket(m), K=_bucket(k), flops=f"1e{int(math.floor(math.log10(flops)))}",
            shape=f"{m}x{n}x{k} {d['a_transpose']}{d['b_transpose']}", meas_ms=r.measured_s * 1e3, pred_ms=p * 1e3,
            meas_tflops=flops / r.measured_s / 1e12, pred_tflops=flops / p / 1e12,
        ))
    df = pd.DataFrame(recs)
    df["lr"] = np.log(df.pred_ms / df.meas_ms)
    df["ape"] = np.abs(df.pred_ms / df.meas_ms - 1)
    return df


def report(df: pd.DataFrame, by: list[str], rows: bool) -> None:
    for (gpu, prec), d in df.groupby(["gpu", "prec"], sort=True):
        print(f"\n== {gpu} {prec} GEMM: {len(d)} rows, MAPE {100 * d.ape.mean():.1f}%, "
              f"mean log ratio {d.lr.mean():+.2f}")
        for f in by:
            g = d.groupby(f).agg(rows=("lr", "size"), mean_lr=("lr", "mean"), sd_lr=("lr", "std"),
                                 ape_sum=("ape", "sum"))
            g["mape_share_pct"] = 100 * g.pop("ape_sum") / len(d)
            print(g.sort_values("mape_share_pct", ascending=False).round(2).to_string())
        if rows:
            cols = ["shape", "app", "meas_ms", "pred_ms", "meas_tflops", "pred_tflops", "lr"]
            print(d.sort_values("lr")[cols].round(3).to_string(index=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu")
    ap.add_argument("--precision")
    ap.add_argument("--by", nargs="*", default=["tt", "N", "flops"], choices=FEATURES)
    ap.add_argument("--rows", action="store_true")
    a = ap.parse_args()
    df = frame()
    for col, val in (("gpu", a.gpu), ("prec", a.precision)):
        if val:
            df = df[df[col] == val]
    pd.set_option("display.width", 200)
    report(df, a.by, a.rows)


if __name__ == "__main__":
    main()

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

import csv
import math
from importlib import resources

import numpy as np
import pandas as pd
from conv_residuals import bucket, run_cli  # tools/, beside this file

from perfmodel.validation.kernel_rows import load_rows
from perfmodel.validation.kernels import price_rows

FEATURES = ("tt", "app", "N", "M", "K", "flops")


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
            gpu=d["gpu"][:4], prec=prec[d["precision"]], what="GEMM", app=d["application"],
            tt=d["a_transpose"] + d["b_transpose"],
            N=n, M=bucket(m), K=bucket(k), flops=f"1e{int(math.floor(math.log10(flops)))}",
            shape=f"{m}x{n}x{k} {d['a_transpose']}{d['b_transpose']}", meas_ms=r.measured_s * 1e3, pred_ms=p * 1e3,
            meas_tflops=flops / r.measured_s / 1e12, pred_tflops=flops / p / 1e12,
        ))
    df = pd.DataFrame(recs)
    df["lr"] = np.log(df.pred_ms / df.meas_ms)
    df["ape"] = np.abs(df.pred_ms / df.meas_ms - 1)
    return df


def main() -> None:
    run_cli(__doc__ or "", frame, FEATURES, ["tt", "N", "flops"],
            ("shape", "app", "meas_ms", "pred_ms", "meas_tflops", "pred_tflops", "lr"), False)


if __name__ == "__main__":
    main()

"""Residuals of the kernel model on DeepBench convolutions, grouped by shape features.

Usage: ``python tools/conv_residuals.py [--gpu P100|V100] [--precision fp32|amp] [--what fwd|dgrad|wgrad]
[--by FEATURE ...] [--rows]``

For every DeepBench convolution row priced by ``perfmodel validate --kernels`` this prints
``log(predicted / measured)`` grouped by a shape feature (filter class, stride, C, K, N,
output pixels, the weight gradient's output K*C*R*S, output tiles per SM wave, the forward
algorithm cuDNN reported), per GPU, precision and kernel: rows, mean and spread of the log
ratio, and each group's share of the category's MAPE (sum of |pred/meas - 1| over the rows of
the category), so the groups that cost the most come first. ``--rows`` lists the rows themselves, worst first.
"""

from __future__ import annotations

import argparse
import csv
import math
from collections.abc import Callable
from importlib import resources

import numpy as np
import pandas as pd

from perfmodel.validation.kernel_rows import load_rows
from perfmodel.validation.kernels import price_rows

FEATURES = ("filt", "stride", "C", "K", "N", "PQ", "NPQ", "KCRS", "algo", "wave")


def bucket(x: float) -> str:
    """Power-of-two bucket of a positive number: '<=2^j'."""
    return f"<=2^{max(0, math.ceil(math.log2(max(x, 1.0))))}"


def _algos() -> dict[tuple[str, str, tuple[int, ...]], str]:
    text = resources.files("perfmodel.data").joinpath("kernels_deepbench_conv.csv").read_text(encoding="utf-8")
    out = {}
    for d in csv.DictReader(text.splitlines()):
        key = tuple(int(d[k]) for k in ("N", "C", "H", "W", "K", "R", "S", "pad_h", "stride_h"))
        out[(d["gpu"][:4], d["precision"], key)] = d["fwd_algo"]
    return out


def frame() -> pd.DataFrame:
    """One record per DeepBench convolution kernel row with its features and log ratio."""
    rows = [r for r in load_rows(("deepbench",)) if r.op != "gemm"]
    pred, _ = price_rows(rows, before=False)
    algos = _algos()
    recs = []
    for r, p in zip(rows, pred, strict=True):
        lay = r.layer
        c, h, w = lay.in_shapes[0]
        k, pp, qq = lay.out_shape
        rr, ss = lay.kernel
        st = lay.stride[0]
        n = int(r.batch)
        prec = "fp16_tensorcore" if r.precision == "amp" else r.precision
        key = (n, c, h, w, k, rr, ss, lay.padding[0], st)
        filt = "first C<=4" if c <= 4 else f"{rr}x{ss}" + ("" if st == 1 else f"/s{st}")
        tiles_128 = math.ceil(n * pp * qq / 128) * math.ceil(k / 128)
        recs.append(dict(
            gpu=r.gpu[:4], prec=r.precision, what=r.what, filt=filt, stride=st, C=bucket(c), K=bucket(k),
            N=n, PQ=bucket(pp * qq), NPQ=bucket(n * pp * qq), KCRS=bucket(k * c * rr * ss),
            algo=algos.get((r.gpu[:4], prec, key), "?"),
            wave=bucket(tiles_128), shape=f"N{n} C{c} {h}x{w} K{k} {rr}x{ss}/{st}",
            meas_ms=r.measured_s * 1e3, pred_ms=p * 1e3,
        ))
    df = pd.DataFrame(recs)
    df["lr"] = np.log(df.pred_ms / df.meas_ms)
    df["ape"] = np.abs(df.pred_ms / df.meas_ms - 1)
    return df


def report(df: pd.DataFrame, by: list[str], rows: bool,
           cols: tuple[str, ...] = ("shape", "algo", "meas_ms", "pred_ms", "lr")) -> None:
    """Per GPU, precision and kernel (``what``) of ``df``: the log ratios grouped by each feature of
    ``by``, largest MAPE share first; with ``rows`` the rows themselves (``cols``), worst first."""
    for (gpu, prec, what), d in df.groupby(["gpu", "prec", "what"], sort=True):
        print(f"\n== {gpu} {prec} {what}: {len(d)} rows, MAPE {100 * d.ape.mean():.1f}%, "
              f"mean log ratio {d.lr.mean():+.2f}")
        for f in by:
            g = d.groupby(f).agg(rows=("lr", "size"), mean_lr=("lr", "mean"), sd_lr=("lr", "std"),
                                 ape_sum=("ape", "sum"))
            g["mape_share_pct"] = 100 * g.pop("ape_sum") / len(d)
            print(g.sort_values("mape_share_pct", ascending=False).round(2).to_string())
        if rows:
            print(d.sort_values("lr")[list(cols)].round(3).to_string(index=False))


def run_cli(doc: str, frame: Callable[[], pd.DataFrame], features: tuple[str, ...], default_by: list[str],
            cols: tuple[str, ...], kernel_filter: bool) -> None:
    """The command line of a residual tool: filters (``--gpu``, ``--precision``, and ``--what``
    where ``kernel_filter``), ``--by`` of ``features``, ``--rows`` (:func:`report`)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--gpu")
    ap.add_argument("--precision")
    if kernel_filter:
        ap.add_argument("--what")
    ap.add_argument("--by", nargs="*", default=default_by, choices=features)
    ap.add_argument("--rows", action="store_true")
    a = ap.parse_args()
    df = frame()
    for col, val in (("gpu", a.gpu), ("prec", a.precision), ("what", getattr(a, "what", None))):
        if val:
            df = df[df[col] == val]
    pd.set_option("display.width", 200)
    report(df, a.by, a.rows, cols)


def main() -> None:
    run_cli(__doc__ or "", frame, FEATURES, ["filt", "algo"], ("shape", "algo", "meas_ms", "pred_ms", "lr"), True)


if __name__ == "__main__":
    main()

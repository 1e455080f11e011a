"""The sweep chart: any column of a sweep frame against another, one line per value of a third."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..errors import UsageError
from .charts_base import new_figure, part_label, set_title

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AXIS_LABELS", "sweep_chart"]

#: Axis labels (with units) of the columns a sweep frame carries.
AXIS_LABELS = {
    "gpus": "GPUs (count)",
    "speedup_x": "predicted speedup over 1 GPU (x)",
    "efficiency_%": "parallel efficiency (%)",
    "samples_per_s": "predicted throughput (samples/s)",
    "step_s": "predicted step time (s)",
    "memory_per_gpu_bytes": "memory per GPU (bytes)",
    "batch_per_gpu": "samples per GPU (count)",
    "global_batch": "global batch (samples)",
    "inter_bandwidth_scale": "inter-node bandwidth (x the profile's)",
    "intra_bandwidth_scale": "intra-node bandwidth (x the profile's)",
    "peak_scale": "peak FLOP/s (x the profile's)",
    "gpus_per_node": "GPUs per node (count)",
}


def _axis_label(col: str) -> str:
    if col in AXIS_LABELS:
        return AXIS_LABELS[col]
    if col.startswith("breakdown_") and col.endswith("_s"):
        return f"{part_label(col[len('breakdown_') : -2])} (s per step)"
    return col.replace("_", " ")


def _values(df: pd.DataFrame, col: str) -> list[Any]:
    return list(dict.fromkeys(df[col])) if col in df.columns else []


def _batch_text(df: pd.DataFrame) -> str:
    if "global_batch" not in df.columns or "gpus" not in df.columns:
        return ""
    ok = df["global_batch"].notna()
    per = (df["global_batch"][ok] / df["gpus"][ok]).unique()
    if "batch_per_gpu" in df.columns and df["batch_per_gpu"].nunique() > 1:
        return "samples per GPU varied"
    if len(per) == 1:
        return f"{per[0]:g} samples per GPU"
    glob = df["global_batch"][ok].unique()
    return f"global batch {glob[0]:g}" if len(glob) == 1 else "batch varied"


def _geometric(values: np.ndarray) -> bool:
    """Whether GPU counts are spread geometrically (1, 2, 4, ...) over a wide range: log axis."""
    v = np.unique(values[np.isfinite(values) & (values > 0)])
    if len(v) < 2 or v[-1] / v[0] < 8:
        return False
    return bool(np.median(v[1:] / v[:-1]) >= 1.4)


def sweep_chart(
    df: pd.DataFrame,
    x: str = "gpus",
    y: str = "speedup_x",
    by: str | None = None,
    title: str | None = None,
) -> Figure:
    """Lines of column ``y`` against ``x``, one per value of ``by``, from a
    :func:`perfmodel.api.sweep` frame; with GPUs against speedup, the ideal line too."""
    missing = [c for c in (x, y, by) if c is not None and c not in df.columns]
    if missing:
        raise UsageError(f"sweep_chart: the frame has no column(s) {missing}")
    fig = new_figure(9.5, 5.6)
    ax = fig.add_subplot()
    groups = [(None, df)] if by is None else [(v, df[df[by] == v]) for v in _values(df, by)]
    xs_all = df[x].to_numpy(float)
    log = x == "gpus" and _geometric(xs_all)
    for value, sub in groups:
        sub = sub.sort_values(x)
        label = None if by is None else f"{value:g}" if isinstance(value, float) else str(value)
        ax.plot(sub[x].to_numpy(float), sub[y].to_numpy(float), marker="o", ms=4, lw=1.8, label=label)
    if x == "gpus" and y == "speedup_x":
        g = np.unique(xs_all[np.isfinite(xs_all)])
        ax.plot(g, g, color="black", ls="--", lw=1.1, label="ideal (linear)")
    if log:
        ax.set_xscale("log", base=2)
        ticks = sorted({int(v) for v in xs_all if np.isfinite(v)})
        ax.xaxis.set_major_locator(FixedLocator(ticks[:: max(1, math.ceil(len(ticks) / 12))]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        if y in ("speedup_x", "samples_per_s"):
            ax.set_yscale("log", base=2 if y == "speedup_x" else 10)
    if y == "efficiency_%":
        ax.set_ylim(0, 105)
    elif y in ("speedup_x", "samples_per_s"):
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.set_xlabel(_axis_label(x) + (", log scale" if log else ""))
    ax.set_ylabel(_axis_label(y) + (", log scale" if ax.get_yscale() == "log" else ""))
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(title=None if by is None else _axis_label(by), fontsize=8.5, title_fontsize=9)
    models = ", ".join(map(str, _values(df, "model"))) or "?"
    hws = ", ".join(dict.fromkeys(str(h).split(" (what-if")[0] for h in _values(df, "hardware")))
    what = [
        k
        for k in (
            "inter_bandwidth_scale",
            "intra_bandwidth_scale",
            "peak_scale",
            "gpus_per_node",
            "memory_bandwidth_scale",
        )
        if k in df.columns
    ]
    hw_text = hws + (f" (what-if: {', '.join(what)} varied)" if what else "")
    precisions = ", ".join(map(str, _values(df, "precision")))
    head = title or f"{_axis_label(y).split(' (')[0]} against {_axis_label(x).split(' (')[0]}"
    sub_line = ", ".join(t for t in (f"{models} on {hw_text}", precisions, _batch_text(df)) if t)
    per = _axis_label(by).split(" (")[0] if by else ""
    set_title(fig, head, sub_line + (f"; one line per {per}" if by else ""))
    return fig

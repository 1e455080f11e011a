"""The scaling chart: predicted speedup and parallel efficiency against GPU count per strategy."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..errors import UsageError
from .charts_base import new_figure, set_title

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = ["STRATEGY_STYLE", "scale_chart"]

#: Colours and long names of the strategies a scaling chart can show.
STRATEGY_STYLE = {
    "dp": ("#1f77b4", "data parallel"),
    "ps": ("#8c564b", "parameter server"),
    "sp": ("#2ca02c", "spatial"),
    "pp": ("#ff7f0e", "pipeline"),
    "hybrid": ("#9467bd", "hybrid (pipeline or spatial, x data)"),
    "mp": ("#bcbd22", "model parallel (hypergraph)"),
    "filter": ("#17becf", "filter split"),
    "channel": ("#e377c2", "channel split"),
    "best": ("#d62728", "best plan of any kind"),
}


def scale_chart(df: pd.DataFrame) -> Figure:
    """Predicted speedup against GPU count per strategy, the ideal linear line, and the
    parallel efficiency on a second axis, from a :func:`perfmodel.api.scale` frame."""
    need = {"strategy", "gpus", "speedup_x", "efficiency_%"}
    missing = need - set(df.columns)
    if missing:
        raise UsageError(f"scale_chart needs a frame from perfmodel.api.scale (missing {sorted(missing)})")
    order = list(dict.fromkeys(df["strategy"]))
    fig, top = _figure_with_notes(df, order)
    ax = top.add_subplot()
    ax2 = ax.twinx()
    gpus = sorted({int(g) for g in df["gpus"]})
    lo, hi = gpus[0], gpus[-1]
    log = hi / lo >= 8
    xs = np.array(gpus, dtype=float)
    ax.plot(xs, xs / lo * (1.0 if lo == 1 else _first_speedup(df, lo)), color="black", ls="--", lw=1.2)
    handles: list[Any] = [Line2D([], [], color="black", ls="--", lw=1.2, label="ideal (linear speedup)")]
    for name in order:
        handles.append(_draw_strategy(ax, ax2, name, df[df["strategy"] == name].sort_values("gpus")))
    _scale_axes(ax, ax2, gpus, log)
    handles += [
        Line2D([], [], color="gray", lw=2, marker="o", ms=4, label="solid: speedup (left axis)"),
        Line2D([], [], color="gray", lw=1.2, ls=":", marker="^", ms=3, label="dotted: efficiency (right axis)"),
    ]
    _fit_legend(fig, top, handles)
    _scale_title(fig, df.attrs)
    return fig


def _fit_legend(fig: Figure, top: Figure | SubFigure, handles: list[Any]) -> None:
    """The legend below the chart in the most columns (4 at most) whose width fits the figure's: long
    labels ('... (no feasible plan)' on every strategy) in 4 columns ran off both edges."""
    for ncol in range(4, 0, -1):
        legend = top.legend(handles=handles, loc="outside lower center", ncol=ncol, fontsize=8.5)
        if ncol == 1 or legend.get_window_extent().width <= 0.98 * fig.bbox.width:
            return
        legend.remove()


def _figure_with_notes(df: pd.DataFrame, order: Sequence[str]) -> tuple[Figure, Figure | SubFigure]:
    """The figure, and where the chart goes: all of it, or above the notes on GPU counts
    where a strategy has no plan."""
    notes = []
    for name in order:
        sub = df[df["strategy"] == name].sort_values("gpus")
        gaps = sub[~np.isfinite(sub["speedup_x"].to_numpy(float))]
        if len(gaps):
            notes.append(_gap_note(name, gaps))
    note_text = "\n".join(textwrap.fill(n, 170) for n in notes)
    note_h = (note_text.count("\n") + 1) * 7.5 * 1.3 / 72 + 0.1 if notes else 0.0
    fig = new_figure(11, 7.0 + note_h)
    top: Figure | SubFigure = fig
    if notes:
        sfs = np.asarray(fig.subfigures(2, 1, height_ratios=(7.0, note_h), hspace=0)).ravel()
        top, bottom = sfs[0], sfs[1]
        bottom.text(0.01, 0.5, note_text, fontsize=7.5, va="center", ha="left", color="#444444")
    return fig, top


def _draw_strategy(ax: Axes, ax2: Axes, name: str, sub: pd.DataFrame) -> Line2D:
    """One strategy's speedup (left axis) and efficiency (right axis); returns its legend entry."""
    colour, long = STRATEGY_STYLE.get(name, ("#444444", name))
    best = name == "best"
    x = sub["gpus"].to_numpy(float)
    y = sub["speedup_x"].to_numpy(float)
    eff = sub["efficiency_%"].to_numpy(float)
    if np.isfinite(y).any():
        lw, alpha, marker = (5, 0.35, None) if best else (2, 1.0, "o")
        ax.plot(x, y, color=colour, lw=lw, alpha=alpha, marker=marker, ms=4, zorder=2 if best else 3)
        ax2.plot(x, eff, color=colour, lw=1.2, ls=":", alpha=0.6 if best else 0.9, marker=None if best else "^", ms=3)
        handle = Line2D([], [], color=colour, lw=lw, alpha=alpha, marker=marker, ms=4, label=f"{name}: {long}")
    else:
        handle = Line2D([], [], color=colour, lw=2, alpha=0.3, label=f"{name}: {long} (no feasible plan)")
    if best and "plan_kind" in sub:
        _mark_switches(ax, sub)
    return handle


def _scale_axes(ax: Axes, ax2: Axes, gpus: list[int], log: bool) -> None:
    """Log-2 axes over a wide range of counts, the labels with their units, the grid."""
    if log:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(gpus if len(gpus) <= 12 else gpus[:: math.ceil(len(gpus) / 12)]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    elif len(gpus) <= 12:  # ticks at the counts priced, not at fractions of a GPU (0.96 ... 1.04 for one count)
        ax.xaxis.set_major_locator(FixedLocator(gpus))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("GPUs (count" + (", log scale)" if log else ")"))
    ax.set_ylabel("predicted speedup over 1 GPU (x" + (", log scale)" if log else ")"))
    ax2.set_ylabel("parallel efficiency (%, dotted lines)")
    ax2.set_ylim(0, 105)
    ax.grid(True, which="major", alpha=0.3)


def _scale_title(fig: Figure, a: Mapping[Any, Any]) -> None:
    """Model, hardware and precision; weak or strong scaling and the speedup's baseline."""
    model = a.get("model", "?")
    size = f" ({a['image_size']} px)" if a.get("image_size") else ""
    if a.get("scaling") == "strong":
        batch = f"strong scaling: global batch fixed at {a.get('global_batch')} samples"
    else:
        batch = f"weak scaling: {a.get('batch_per_gpu')} samples per GPU"
    set_title(
        fig,
        f"{model}{size} on {a.get('hardware', '?')}, {a.get('precision', '?')}: predicted speedup against GPU count",
        f"{batch}; baseline {a.get('baseline', '1 GPU')}",
    )


def _first_speedup(df: pd.DataFrame, g: int) -> float:
    """The ideal line starts at the best speedup at the smallest count (1 when that is 1 GPU)."""
    vals = df[df["gpus"] == g]["speedup_x"].to_numpy(float)
    vals = vals[np.isfinite(vals)]
    return float(vals.max()) if len(vals) else float(g)


def _gap_note(name: str, gaps: pd.DataFrame) -> str:
    groups: dict[str, list[int]] = {}
    for g, why in zip(gaps["gpus"], gaps["reason"], strict=True):
        groups.setdefault(str(why) if why is not None else "no plan", []).append(int(g))
    parts = [f"{_counts(v)}: {_short(k)}" for k, v in groups.items()]
    return f"gaps in {name}: " + "; ".join(parts[:3]) + ("; ..." if len(parts) > 3 else "")


def _short(reason: str) -> str:
    """A reason without the per-count numbers that repeat across a range of counts."""
    return reason if len(reason) < 90 else reason[:87] + "..."


def _counts(values: Sequence[int]) -> str:
    unit = "GPU" if values == [1] else "GPUs"
    if len(values) <= 4:
        return f"{', '.join(map(str, values))} {unit}"
    return f"{values[0]} to {values[-1]} {unit} ({len(values)} counts)"


def _mark_switches(ax: Axes, best: pd.DataFrame) -> None:
    """Label the best plan where its kind changes along the GPU axis (text kept inside the axes)."""
    gs = best["gpus"].to_numpy(float)
    lo, hi = np.log(gs.min()), np.log(max(gs.max(), gs.min() * 1.0001))
    prev = None
    for g, kind, plan, y in zip(best["gpus"], best["plan_kind"], best["plan"], best["speedup_x"], strict=True):
        if not isinstance(kind, str) or not np.isfinite(y):
            continue
        if kind != prev:
            where = "best" if prev is None else f"best from {g} GPUs"
            right = (np.log(g) - lo) / (hi - lo) > 0.5
            ax.plot([g], [y], marker="*", ms=9, color=STRATEGY_STYLE["best"][0], zorder=4)
            ax.annotate(
                f"{where}: {kind}\n({plan})" if right else f"{where}: {kind} ({plan})",
                (g, y),
                xytext=(-10, 10) if right else (10, -4),
                textcoords="offset points",
                ha="right" if right else "left",
                va="bottom" if right else "top",
                fontsize=7.5,
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
                color=STRATEGY_STYLE["best"][0],
                arrowprops={"arrowstyle": "-", "color": STRATEGY_STYLE["best"][0], "lw": 0.6},
            )
            prev = kind


"""Charts of results as matplotlib Figures: scaling curves, plan breakdowns, pipeline Gantt."""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from ..errors import UsageError
from ..io import atomic_write_bytes, check_target
from ..strategies.pipeline import PipelineTask
from ..units import GIB

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

    from ..search.plan import PlanResult
    from ..strategies.predict import Prediction

__all__ = [
    "CHART_SUFFIXES",
    "scale_chart",
    "plan_chart",
    "pipeline_gantt",
    "save_chart",
    "sweep_chart",
]

#: File types a chart can be saved as (by the file's extension).
CHART_SUFFIXES = (".png", ".svg", ".pdf")
#: Resolution of saved raster charts.
DPI = 150

#: Colours of step-time parts (breakdown keys) and memory parts; unknown keys get the palette.
PART_COLOURS = {
    "compute": "#4C72B0",
    "recompute": "#8DA0CB",
    "gradient_exchange_exposed": "#C44E52",
    "halo_exchange": "#55A868",
    "redistribution": "#A6D854",
    "pipeline_p2p": "#8172B3",
    "pipeline_bubble": "#C7C7C7",
    "optimizer_step": "#937860",
    "weights": "#264653",
    "gradients": "#E76F51",
    "optimizer_state": "#F4A261",
    "gradient_buckets": "#E9C46A",
    "input_batch": "#A8DADC",
    "activations": "#2A9D8F",
    "workspace": "#8D99AE",
}
_PALETTE = ("#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD", "#C44E52", "#1B9E77", "#7570B3")
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


def _colour(key: str, seen: dict[str, str]) -> str:
    if key not in seen:
        seen[key] = PART_COLOURS.get(key, _PALETTE[len([k for k in seen if k not in PART_COLOURS]) % len(_PALETTE)])
    return seen[key]


def _label(key: str) -> str:
    return key.replace("_", " ")


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _title(fig: Figure, head: str, sub: str) -> None:
    """The headline (what, which model, which hardware) and the setting, wrapped to the width."""
    chars = int(fig.get_figwidth() * 11)
    lines = textwrap.wrap(head, int(chars * 0.9)) + textwrap.wrap(sub, chars)
    fig.suptitle("\n".join(lines), fontsize=11)


def save_chart(fig: Figure, path: str | Path) -> None:
    """Save ``fig`` as PNG, SVG or PDF by ``path``'s extension (:class:`UsageError` for others).

    The chart is drawn in memory and written atomically: an existing file is replaced only
    by a complete chart (a full disk leaves it as it was, never a 0-byte or cut file).
    """
    p = Path(path)
    if p.suffix.lower() not in CHART_SUFFIXES:
        raise UsageError(
            f"cannot draw a chart to '{p}': unknown extension '{p.suffix}' (use {', '.join(CHART_SUFFIXES)})"
        )
    check_target(p, CHART_SUFFIXES)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=DPI, format=p.suffix[1:].lower())
    atomic_write_bytes(p, buf.getvalue())  # a failed write leaves no partial chart


# -- scaling -------------------------------------------------------------------------------
def scale_chart(df: pd.DataFrame) -> Figure:
    """Predicted speedup against GPU count per strategy, the ideal linear line, and the
    parallel efficiency on a second axis, from a :func:`perfmodel.api.scale` frame."""
    need = {"strategy", "gpus", "speedup_x", "efficiency_%"}
    missing = need - set(df.columns)
    if missing:
        raise UsageError(f"scale_chart needs a frame from perfmodel.api.scale (missing {sorted(missing)})")
    a = df.attrs
    order = list(dict.fromkeys(df["strategy"]))
    notes = []
    for name in order:
        sub = df[df["strategy"] == name].sort_values("gpus")
        gaps = sub[~np.isfinite(sub["speedup_x"].to_numpy(float))]
        if len(gaps):
            notes.append(_gap_note(name, gaps))
    note_text = "\n".join(textwrap.fill(n, 170) for n in notes)
    note_h = (note_text.count("\n") + 1) * 7.5 * 1.3 / 72 + 0.1 if notes else 0.0
    fig = _figure(11, 7.0 + note_h)
    top: Figure | SubFigure = fig
    if notes:
        sfs = np.asarray(fig.subfigures(2, 1, height_ratios=(7.0, note_h), hspace=0)).ravel()
        top, bottom = sfs[0], sfs[1]
        bottom.text(0.01, 0.5, note_text, fontsize=7.5, va="center", ha="left", color="#444444")
    ax = top.add_subplot()
    ax2 = ax.twinx()
    gpus = sorted({int(g) for g in df["gpus"]})
    lo, hi = gpus[0], gpus[-1]
    log = hi / lo >= 8
    xs = np.array(gpus, dtype=float)
    ax.plot(xs, xs / lo * (1.0 if lo == 1 else _first_speedup(df, lo)), color="black", ls="--", lw=1.2)
    handles: list[Any] = [Line2D([], [], color="black", ls="--", lw=1.2, label="ideal (linear speedup)")]
    for name in order:
        sub = df[df["strategy"] == name].sort_values("gpus")
        colour, long = STRATEGY_STYLE.get(name, ("#444444", name))
        best = name == "best"
        x = sub["gpus"].to_numpy(float)
        y = sub["speedup_x"].to_numpy(float)
        eff = sub["efficiency_%"].to_numpy(float)
        if np.isfinite(y).any():
            ax.plot(
                x,
                y,
                color=colour,
                lw=5 if best else 2,
                alpha=0.35 if best else 1.0,
                marker=None if best else "o",
                ms=4,
                zorder=2 if best else 3,
            )
            ax2.plot(
                x,
                eff,
                color=colour,
                lw=1.2,
                ls=":",
                alpha=0.6 if best else 0.9,
                marker=None if best else "^",
                ms=3,
            )
            handles.append(
                Line2D(
                    [],
                    [],
                    color=colour,
                    lw=5 if best else 2,
                    alpha=0.35 if best else 1.0,
                    marker=None if best else "o",
                    ms=4,
                    label=f"{name}: {long}",
                )
            )
        else:
            handles.append(
                Line2D(
                    [],
                    [],
                    color=colour,
                    lw=2,
                    alpha=0.3,
                    label=f"{name}: {long} (no feasible plan)",
                )
            )
        if best and "plan_kind" in sub:
            _mark_switches(ax, sub)
    if log:
        for axis in (ax,):
            axis.set_xscale("log", base=2)
            axis.set_yscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(gpus if len(gpus) <= 12 else gpus[:: math.ceil(len(gpus) / 12)]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("GPUs (count" + (", log scale)" if log else ")"))
    ax.set_ylabel("predicted speedup over 1 GPU (x" + (", log scale)" if log else ")"))
    ax2.set_ylabel("parallel efficiency (%, dotted lines)")
    ax2.set_ylim(0, 105)
    ax.grid(True, which="major", alpha=0.3)
    handles += [
        Line2D([], [], color="gray", lw=2, marker="o", ms=4, label="solid: speedup (left axis)"),
        Line2D(
            [],
            [],
            color="gray",
            lw=1.2,
            ls=":",
            marker="^",
            ms=3,
            label="dotted: efficiency (right axis)",
        ),
    ]
    top.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=8.5)
    model = a.get("model", "?")
    size = f" ({a['image_size']} px)" if a.get("image_size") else ""
    if a.get("scaling") == "strong":
        batch = f"strong scaling: global batch fixed at {a.get('global_batch')} samples"
    else:
        batch = f"weak scaling: {a.get('batch_per_gpu')} samples per GPU"
    _title(
        fig,
        f"{model}{size} on {a.get('hardware', '?')}, {a.get('precision', '?')}: predicted speedup against GPU count",
        f"{batch}; baseline {a.get('baseline', '1 GPU')}",
    )
    return fig


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


# -- sweeps --------------------------------------------------------------------------------
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
        return f"{_label(col[len('breakdown_') : -2])} (s per step)"
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
    fig = _figure(9.5, 5.6)
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
    _title(fig, head, sub_line + (f"; one line per {per}" if by else ""))
    return fig


# -- plan search ---------------------------------------------------------------------------
def plan_chart(r: PlanResult) -> Figure:
    """The top plans' step time by part (left), memory per GPU against capacity (right)."""
    preds = list(r.plans) + list(r.infeasible)
    n_fit = len(r.plans)
    labels = [f"{i + 1}. {p.strategy.spec()}" for i, p in enumerate(r.plans)]
    labels += [f"{p.strategy.spec()}\n(fastest that does not fit)" for p in r.infeasible]
    fig = _figure(13, 2.9 + 0.5 * len(preds))
    sfs = fig.subfigures(1, 2, width_ratios=(1.75, 1), wspace=0.02)
    sf_left, sf_right = np.asarray(sfs).ravel()
    left = sf_left.add_subplot()
    right = sf_right.add_subplot(sharey=left)
    y = np.arange(len(preds))[::-1]
    over = [i >= n_fit for i in range(len(preds))]
    colours: dict[str, str] = {}
    time_keys = _keys(p.breakdown for p in preds)
    _stacked(
        left,
        y,
        [{k: v * 1e3 for k, v in p.breakdown.items()} for p in preds],
        time_keys,
        colours,
        over,
    )
    for yi, p in zip(y, preds, strict=True):
        left.text(
            p.iteration_time_s * 1e3,
            yi,
            f"  {p.iteration_time_s * 1e3:.1f} ms, {p.throughput_samples_per_s:,.0f} samples/s",
            va="center",
            fontsize=8.5,
        )
    left.set_xlim(0, max(p.iteration_time_s for p in preds) * 1e3 * 1.45)
    left.set_yticks(y, labels, fontsize=9)
    left.set_xlabel("step time (ms)")
    left.set_title("step time by part", fontsize=10)
    handles: list[Any] = [Patch(color=colours[k], label=_label(k)) for k in time_keys]
    if r.infeasible:
        handles.append(Patch(facecolor="white", hatch="//", edgecolor="#C44E52", label="does not fit in memory"))
    sf_left.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=8.5)
    mem_keys = _keys(p.memory for p in preds)
    _stacked(
        right,
        y,
        [{k: v / GIB for k, v in p.memory.items()} for p in preds],
        mem_keys,
        colours,
        over,
    )
    cap = preds[0].memory_capacity_bytes / GIB
    top = max(cap, max(p.memory_per_gpu_bytes for p in preds) / GIB)
    for yi, p in zip(y, preds, strict=True):
        right.text(
            p.memory_per_gpu_bytes / GIB,
            yi,
            f" {p.memory_per_gpu_bytes / GIB:.1f} GiB",
            va="center",
            fontsize=8.5,
        )
    right.axvline(cap, color="#C44E52", ls="--", lw=1.5)
    right.set_xlim(0, top * 1.18)
    right.set_ylim(-0.6, len(preds) - 0.4)
    right.tick_params(labelleft=False)
    right.set_xlabel("memory per GPU (GiB)")
    right.set_title(f"memory of the busiest GPU (capacity {cap:.0f} GiB)", fontsize=10)
    sf_right.legend(
        handles=[Patch(color=colours[k], label=_label(k)) for k in mem_keys]
        + [Line2D([], [], color="#C44E52", ls="--", label="GPU capacity")],
        loc="outside lower center",
        ncol=3,
        fontsize=8.5,
    )
    for ax in (left, right):
        ax.grid(True, axis="x", alpha=0.3)
    best = r.plans[0]
    size = f" ({best.image_size} px)" if best.image_size else ""
    _title(
        fig,
        f"{best.model}{size}: the {n_fit} fastest plans on {best.gpus} x {best.hardware}, "
        f"{best.precision}, global batch {r.global_batch}",
        f"{r.priced} plans priced in {r.seconds:.2f} s; speedup baseline: {best.speedup_baseline}",
    )
    return fig


def _keys(dicts: Iterable[dict[str, float]]) -> list[str]:
    out: dict[str, None] = {}
    for d in dicts:
        for k, v in d.items():
            if v > 0:
                out[k] = None
    return list(out) or ["compute"]


def _stacked(
    ax: Axes,
    y: np.ndarray,
    parts: list[dict[str, float]],
    keys: list[str],
    colours: dict[str, str],
    hatched: list[bool],
) -> None:
    left = np.zeros(len(parts))
    for k in keys:
        w = np.array([d.get(k, 0.0) for d in parts])
        bars = ax.barh(y, w, left=left, color=_colour(k, colours), height=0.62, edgecolor="white", lw=0.5)
        for bar, h in zip(bars, hatched, strict=True):
            if h:
                bar.set_hatch("//")
                bar.set_edgecolor("#C44E52")
        left += w


# -- pipeline schedule ---------------------------------------------------------------------
def pipeline_gantt(p: Prediction) -> Figure:
    """A pipeline plan's step as a Gantt chart (stages against time, forward and backward
    micro-batches, the idle bubble, then the exposed gradient exchange and the optimizer step);
    any other plan's step breakdown as one stacked bar."""
    stages = p.details.get("stages") if isinstance(p.details, dict) else None
    ok = (
        p.strategy.pp > 1
        and isinstance(stages, list)
        and len(stages) > 1
        and all(isinstance(s, dict) and "forward_s" in s and "backward_s" in s for s in stages)
    )
    size = f" ({p.image_size} px)" if p.image_size else ""
    head = (
        f"{p.model}{size}, plan {p.strategy.spec()} on {p.gpus} x {p.hardware}, {p.precision}, "
        f"global batch {p.global_batch}"
    )
    if not ok:
        return _breakdown_bar(p, head)
    assert isinstance(stages, list)
    send_f = [float(s.get("send_forward_s", 0.0)) for s in stages]
    m = p.strategy.mb
    schedule = str(p.details.get("schedule", p.strategy.schedule))
    ops = p.pipeline_schedule()  # the priced step's tasks
    n = len(stages)
    fig = _figure(12, 2.2 + 0.5 * n + 0.8)
    ax = fig.add_subplot()
    t = _draw_tasks(ax, ops, n, m)
    handles = _gantt_handles(p, ax, n, t)
    t += sum(d for d in (p.breakdown.get(k, 0.0) for k in _GANTT_TAIL) if d > 0)
    ms = 1e3
    ax.set_yticks(range(n), [_stage_label(i, s) for i, s in enumerate(stages)], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("time since the start of the step (ms)")
    ax.set_ylabel("pipeline stage (one GPU each, per replica)")
    ax.set_xlim(0, t * ms * 1.01)
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8.5)
    sched = "1F1B (one forward, one backward)" if schedule == "1f1b" else "GPipe (all forwards, then all backwards)"
    sends = [x for x in send_f if x > 0]
    xfer = ""
    if sends:
        xfer = f"; sends between stages {min(sends) * 1e6:.0f}-{max(sends) * 1e6:.0f} \u00b5s (in the passes)"
    _title(
        fig,
        head,
        f"{m} micro-batches of {p.details.get('micro_batch', '?')} samples, {sched} schedule"
        f"{xfer}; model step time {p.iteration_time_s * ms:.2f} ms, drawn schedule {t * ms:.2f} ms",
    )
    return fig


#: The step's parts after the pipeline, drawn on every stage: (breakdown key, words).
_GANTT_TAIL = {"gradient_exchange_exposed": "exposed gradient exchange", "optimizer_step": "optimizer step"}
_FWD_COLOUR, _BWD_COLOUR = "#4C72B0", "#DD8452"


def _draw_tasks(ax: Axes, ops: Sequence[PipelineTask], n: int, m: int) -> float:
    """The idle background and every task of the schedule; returns when the last task ends."""
    t_pipe = max(o.end_s for o in ops)
    ms = 1e3
    ax.barh(range(n), [t_pipe * ms] * n, color="#EEEEEE", hatch="..", edgecolor="#BBBBBB", height=0.8, lw=0)
    for o in ops:
        w = (o.end_s - o.start_s) * ms
        colour = _BWD_COLOUR if o.backward else _FWD_COLOUR
        ax.barh(o.stage, w, left=o.start_s * ms, color=colour, height=0.8, edgecolor="white", lw=0.6)
        if m <= 16 and w > 0.018 * t_pipe * ms:
            mid = (o.start_s + o.end_s) / 2 * ms
            ax.text(mid, o.stage, str(o.micro_batch), ha="center", va="center", fontsize=7, color="white")
    return t_pipe


def _gantt_handles(p: Prediction, ax: Axes, n: int, t_pipe: float) -> list[Any]:
    """The legend of the tasks and the bubble; draws the parts after the pipeline (with theirs)."""
    ms = 1e3
    handles: list[Any] = [
        Patch(color=_FWD_COLOUR, label="forward pass of a micro-batch (number inside)"),
        Patch(
            color=_BWD_COLOUR,
            label="backward pass" + (" (with recomputation)" if p.strategy.recompute else ""),
        ),
        Patch(
            facecolor="#EEEEEE",
            hatch="..",
            edgecolor="#BBBBBB",
            label=f"idle: pipeline bubble ({p.breakdown.get('pipeline_bubble', 0) * ms:.1f} ms on the critical stage)",
        ),
    ]
    colours: dict[str, str] = {}
    t = t_pipe
    for key, text in _GANTT_TAIL.items():
        d = p.breakdown.get(key, 0.0)
        if d > 0:
            c = _colour(key, colours)
            ax.barh(range(n), [d * ms] * n, left=t * ms, color=c, height=0.8, edgecolor="white", lw=0.6)
            handles.append(Patch(color=c, label=f"{text} ({d * ms:.2f} ms, all stages)"))
            t += d
    return handles


def _stage_label(i: int, stage: dict[str, Any]) -> str:
    n = len(stage.get("links", []))
    return f"stage {i} ({n} link{'' if n == 1 else 's'})"


def _breakdown_bar(p: Prediction, head: str) -> Figure:
    """The step of a plan without a pipeline: one horizontal bar stacked by part."""
    fig = _figure(11, 3.4)
    ax = fig.add_subplot()
    colours: dict[str, str] = {}
    keys = _keys([p.breakdown])
    _stacked(ax, np.array([0]), [{k: v * 1e3 for k, v in p.breakdown.items()}], keys, colours, [False])
    ax.set_ylim(-0.7, 0.7)
    ax.set_yticks([0], [p.strategy.spec()])
    ax.set_xlabel("step time (ms)")
    ax.set_xlim(0, p.iteration_time_s * 1e3 * 1.02)
    ax.grid(True, axis="x", alpha=0.3)
    total = p.iteration_time_s
    fig.legend(
        handles=[
            Patch(
                color=colours[k],
                label=f"{_label(k)} ({p.breakdown[k] * 1e3:.2f} ms, {100 * p.breakdown[k] / total:.0f}%)",
            )
            for k in keys
        ],
        loc="outside lower center",
        ncol=3,
        fontsize=8.5,
    )
    _title(
        fig,
        head,
        f"step {total * 1e3:.2f} ms, {p.throughput_samples_per_s:,.0f} samples/s, memory "
        f"{p.memory_per_gpu_bytes / GIB:.1f} of {p.memory_capacity_bytes / GIB:.0f} GiB per GPU "
        "(no pipeline: the step by part)",
    )
    return fig

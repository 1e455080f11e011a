"""Chart of a validation: predicted against measured throughput, log axes, error bands."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from ..validation.compare import Validation

__all__ = ["validation_chart"]

_MARKERS = {"data": "o", "pipeline": "s", "spatial": "^", "hybrid": "D", "model": "v"}


def validation_chart(v: Validation, title: str = "") -> Figure:
    """Predicted against measured throughput (samples/s) for every predicted row.

    Log axes, the y = x line, shaded bands of +-10% and +-25% error, one colour per model,
    one marker per strategy kind; rows used to fit a calibration are drawn hollow.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    rows = [r for r in v.rows if r.predicted_throughput is not None]
    fig = Figure(figsize=(8.0, 6.5), layout="constrained")
    ax = fig.add_subplot()
    models = sorted({r.measurement.model for r in rows})
    cmap = matplotlib.colormaps["tab10"]
    colour = {m: cmap(i % 10) for i, m in enumerate(models)}
    xs = [r.measurement.measured_throughput for r in rows]
    ys = [float(r.predicted_throughput or 0.0) for r in rows]
    lo = min([*xs, *ys], default=1.0) / 1.5
    hi = max([*xs, *ys], default=10.0) * 1.5
    line = [lo, hi]
    ax.fill_between(
        line, [lo * 0.75, hi * 0.75], [lo * 1.25, hi * 1.25], color="0.92", label="±25%"
    )
    ax.fill_between(line, [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.82", label="±10%")
    ax.plot(line, line, color="0.3", lw=1.0, label="predicted = measured")
    for r, x, y in zip(rows, xs, ys, strict=True):
        kind = r.measurement.strategy_kind
        c = colour[r.measurement.model]
        hollow = r.role == "calibration"
        ax.scatter(
            [x],
            [y],
            s=36,
            marker=_MARKERS.get(kind, "o"),
            facecolors="none" if hollow else [c],
            edgecolors=[c],
            linewidths=1.2,
            zorder=3,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured throughput (samples/s, all GPUs)")
    ax.set_ylabel("predicted throughput (samples/s, all GPUs)")
    s = v.summary
    mode = "no calibration" if s.mode == "none" else "compute fitted on 1-GPU runs (hollow)"
    thr = "-" if s.throughput_mape_pct is None else f"{s.throughput_mape_pct:.1f}%"
    sp = "-" if s.speedup_mape_pct is None else f"{s.speedup_mape_pct:.1f}%"
    ax.set_title(
        title
        or f"perfmodel: predicted vs measured training throughput, {len(rows)} runs, {mode}\n"
        f"throughput MAPE {thr} over {s.scored} scored runs, speedup MAPE {sp} "
        f"over {s.speedup_pairs} multi-GPU runs",
        fontsize=10,
    )
    handles = [
        Line2D([], [], marker="o", ls="", color=colour[m], label=m, markersize=7) for m in models
    ]
    kinds = sorted({r.measurement.strategy_kind for r in rows})
    handles += [
        Line2D([], [], marker=_MARKERS.get(k, "o"), ls="", color="0.4", label=f"{k} parallel")
        for k in kinds
    ]
    band_handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=band_handles + handles, loc="upper left", fontsize=8, frameon=True)
    ax.grid(True, which="both", color="0.88", lw=0.5)
    return fig

"""The plan chart: the top plans' step time by part and memory per GPU against capacity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..units import GIB, fmt_rate
from .charts_base import new_figure, part_label, positive_keys, set_title, stacked_bars

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import SubFigure

    from ..search.plan import PlanResult
    from ..strategies.predict import Prediction

__all__ = ["plan_chart"]


def plan_chart(r: PlanResult) -> Figure:
    """The top plans' step time by part (left), memory per GPU against capacity (right)."""
    preds = list(r.plans) + list(r.infeasible)
    n_fit = len(r.plans)
    labels = [f"{i + 1}. {p.strategy.spec()}" for i, p in enumerate(r.plans)]
    labels += [f"{p.strategy.spec()}\n(fastest that does not fit)" for p in r.infeasible]
    fig = new_figure(13, 2.9 + 0.5 * len(preds))
    sfs = fig.subfigures(1, 2, width_ratios=(1.75, 1), wspace=0.02)
    sf_left, sf_right = np.asarray(sfs).ravel()
    left = sf_left.add_subplot()
    right = sf_right.add_subplot(sharey=left)
    y = np.arange(len(preds))[::-1]
    over = [i >= n_fit for i in range(len(preds))]
    colours: dict[str, str] = {}
    time_keys = positive_keys(p.breakdown for p in preds)
    stacked_bars(
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
            f"  {p.iteration_time_s * 1e3:.1f} ms, {fmt_rate(p.throughput_samples_per_s)} samples/s",
            va="center",
            fontsize=8.5,
        )
    left.set_xlim(0, max(p.iteration_time_s for p in preds) * 1e3 * 1.45)
    left.set_yticks(y, labels, fontsize=9)
    left.set_xlabel("step time (ms)")
    left.set_title("step time by part", fontsize=10)
    handles: list[Any] = [Patch(color=colours[k], label=part_label(k)) for k in time_keys]
    if r.infeasible:
        handles.append(Patch(facecolor="white", hatch="//", edgecolor="#C44E52", label="does not fit in memory"))
    sf_left.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=8.5)
    _memory_panel(sf_right, right, preds, y, colours, over)
    for ax in (left, right):
        ax.grid(True, axis="x", alpha=0.3)
    best = r.plans[0]
    size = f" ({best.image_size} px)" if best.image_size else ""
    set_title(
        fig,
        f"{best.model}{size}: the {n_fit} fastest plans on {best.gpus} x {best.hardware}, "
        f"{best.precision}, global batch {r.global_batch}",
        f"{r.priced} plans priced in {r.seconds:.2f} s; speedup baseline: {best.speedup_baseline}",
    )
    return fig


def _memory_panel(
    sf: SubFigure,
    ax: Axes,
    preds: list[Prediction],
    y: np.ndarray,
    colours: dict[str, str],
    over: list[bool],
) -> None:
    """The busiest GPU's memory of each plan by part, against the GPU's capacity, with a legend."""
    mem_keys = positive_keys(p.memory for p in preds)
    stacked_bars(
        ax,
        y,
        [{k: v / GIB for k, v in p.memory.items()} for p in preds],
        mem_keys,
        colours,
        over,
    )
    cap = preds[0].memory_capacity_bytes / GIB
    top = max(cap, max(p.memory_per_gpu_bytes for p in preds) / GIB)
    for yi, p in zip(y, preds, strict=True):
        ax.text(
            p.memory_per_gpu_bytes / GIB,
            yi,
            f" {p.memory_per_gpu_bytes / GIB:.1f} GiB",
            va="center",
            fontsize=8.5,
        )
    ax.axvline(cap, color="#C44E52", ls="--", lw=1.5)
    ax.set_xlim(0, top * 1.18)
    ax.set_ylim(-0.6, len(preds) - 0.4)
    ax.tick_params(labelleft=False)
    ax.set_xlabel("memory per GPU (GiB)")
    ax.set_title(f"memory of the busiest GPU (capacity {cap:.0f} GiB)", fontsize=10)
    sf.legend(
        handles=[Patch(color=colours[k], label=part_label(k)) for k in mem_keys]
        + [Line2D([], [], color="#C44E52", ls="--", label="GPU capacity")],
        loc="outside lower center",
        ncol=3,
        fontsize=8.5,
    )

"""The schedule chart: a pipeline plan's step as a Gantt chart, any other plan's as a stacked bar."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from ..strategies.pipeline import PipelineTask
from ..units import GIB, fmt_rate
from .charts_base import new_figure, part_colour, part_label, positive_keys, set_title, stacked_bars

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from ..strategies.predict import Prediction

__all__ = ["pipeline_gantt"]


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
    fig = new_figure(12, 2.2 + 0.5 * n + 0.8)
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
    set_title(
        fig,
        head,
        f"{m} micro-batches of {p.details.get('micro_batch', '?')} samples, {sched} schedule"
        f"{xfer}; model step time {p.iteration_time_s * ms:.2f} ms, drawn schedule {t * ms:.2f} ms",
    )
    return fig


#: The step's parts after the pipeline, drawn on every stage: (breakdown key, words).
_GANTT_TAIL = {"gradient_exchange_exposed": "exposed gradient exchange", "amp_casts": "autocast's weight casts",
               "optimizer_step": "optimizer step"}
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
            c = part_colour(key, colours)
            ax.barh(range(n), [d * ms] * n, left=t * ms, color=c, height=0.8, edgecolor="white", lw=0.6)
            handles.append(Patch(color=c, label=f"{text} ({d * ms:.2f} ms, all stages)"))
            t += d
    return handles


def _stage_label(i: int, stage: dict[str, Any]) -> str:
    n = len(stage.get("links", []))
    return f"stage {i} ({n} link{'' if n == 1 else 's'})"


def _breakdown_bar(p: Prediction, head: str) -> Figure:
    """The step of a plan without a pipeline: one horizontal bar stacked by part."""
    fig = new_figure(11, 3.4)
    ax = fig.add_subplot()
    colours: dict[str, str] = {}
    keys = positive_keys([p.breakdown])
    stacked_bars(ax, np.array([0]), [{k: v * 1e3 for k, v in p.breakdown.items()}], keys, colours, [False])
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
                label=f"{part_label(k)} ({p.breakdown[k] * 1e3:.2f} ms, {100 * p.breakdown[k] / total:.0f}%)",
            )
            for k in keys
        ],
        loc="outside lower center",
        ncol=3,
        fontsize=8.5,
    )
    set_title(
        fig,
        head,
        f"step {total * 1e3:.2f} ms, {fmt_rate(p.throughput_samples_per_s)} samples/s, memory "
        f"{p.memory_per_gpu_bytes / GIB:.1f} of {p.memory_capacity_bytes / GIB:.0f} GiB per GPU "
        "(no pipeline: the step by part)",
    )
    return fig

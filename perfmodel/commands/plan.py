"""``perfmodel plan``: search every strategy and print the best plans, ranked by throughput."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..report import render_frame, to_json
from ..search import KINDS, PlanResult, plan
from ..search.plan import DEFAULT_BATCH_PER_GPU
from ..units import GIB
from .common import (
    chart_option,
    check_writable,
    emit,
    format_option,
    gpus_option,
    hardware_option,
    image_size_option,
    model_input_options,
    optimizer_option,
    precision_option,
)
from .export import PROGRAM_SUFFIXES, export_best

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["plan_cmd", "plan_frame", "plan_rows", "render_plan"]


def plan_frame(r: PlanResult) -> pd.DataFrame:
    """The ranked plans as a DataFrame (one row per plan, the table's columns)."""
    import pandas as pd

    return pd.DataFrame(plan_rows(r))


def plan_rows(r: PlanResult) -> list[dict[str, Any]]:
    """The ranked plans as rows (dicts), the columns of the printed table."""
    rows = []
    alts = r.alternatives or tuple(() for _ in r.plans)
    for i, (p, why, alt) in enumerate(zip(r.plans, r.reasons, alts, strict=True), 1):
        rows.append(
            {
                "rank": i,
                "strategy": p.strategy.spec(),
                "kind": p.strategy.kind,
                "collective": p.strategy.comm,
                "alternatives_samples/s": ", ".join(f"{c} {t:,.0f}" for c, t in alt) or "-",
                "step_ms": p.iteration_time_s * 1e3,
                "samples/s": p.throughput_samples_per_s,
                "speedup_x": p.speedup_vs_1gpu,
                "efficiency_%": None if p.parallel_efficiency is None else 100 * p.parallel_efficiency,
                "mem_GiB": p.memory_per_gpu_bytes / GIB,
                "cap_GiB": p.memory_capacity_bytes / GIB,
                "dominant": p.dominant,
                "why": why,
            }
        )
    return rows


def render_plan(r: PlanResult) -> str:
    best = r.plans[0]
    lines = [
        f"{best.model} on {best.gpus} x {best.hardware}, {best.precision}, global batch {r.global_batch}: "
        f"{len(r.plans)} best of {r.priced} priced plans ({r.candidates} candidates, {r.seconds:.2f} s)",
        "",
        render_frame(plan_rows(r)),
        "",
        f"speedup and efficiency of every row: {best.speedup_baseline}",
    ]
    for p in r.infeasible:
        lines.append(
            f"fastest plan that does not fit: {p.strategy.spec()} "
            f"({p.throughput_samples_per_s:,.0f} samples/s, needs {p.memory_per_gpu_bytes / GIB:.1f} GiB "
            f"> {p.memory_capacity_bytes / GIB:.1f} GiB)"
        )
    lines.append("")
    lines.append("assumptions:")
    lines += [f"  {k}: {v}" for k, v in r.assumptions.items()]
    return "\n".join(lines)


@click.command("plan")
@click.argument("model")
@gpus_option
@hardware_option
@precision_option
@click.option(
    "--global-batch",
    "-B",
    type=int,
    default=None,
    help=f"Samples per step over all GPUs (default: {DEFAULT_BATCH_PER_GPU} x GPUs, as Goyal et al. 2017, "
    "halved until some plan fits).",
)
@optimizer_option
@image_size_option
@model_input_options
@click.option(
    "--top", type=click.IntRange(min=1, max=100), default=5, show_default=True, help="How many plans to show."
)
@click.option(
    "--strategies",
    default=",".join(KINDS),
    show_default=True,
    help=f"Comma list of strategy kinds to search ({', '.join(KINDS)}).",
)
@click.option("--export", "export_to", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the best plan as a torchrun program (.py; see `perfmodel export`).")
@format_option
@chart_option
def plan_cmd(
    model: str,
    gpus: int,
    hardware: str,
    precision: str,
    global_batch: int | None,
    optimizer: str,
    image_size: int | None,
    top: int,
    strategies: str,
    fmt: str,
    chart: Path | None,
    export_to: Path | None = None,
) -> None:
    """Search data, spatial, pipeline, hybrid, filter/channel and model-parallel plans of MODEL on GPUS GPUs.

    Plans are ranked by throughput at the global batch; the table says why each runner-up
    loses. If no plan fits in memory the command says how much the smallest needs and exits 1.
    """
    check_writable(chart)
    check_writable(export_to, PROGRAM_SUFFIXES)
    kinds = tuple(k.strip() for k in strategies.split(",") if k.strip())
    r = plan(model, gpus, hardware, precision, global_batch, optimizer, image_size, top, kinds)
    if chart is not None:
        from ..report.charts import plan_chart, save_chart

        save_chart(plan_chart(r), chart)
    exported = export_best(r.plans, hardware, export_to, model) if export_to is not None else ""
    if fmt == "json":
        emit(to_json(r.to_dict()))
    elif fmt == "csv":
        emit(render_frame(plan_frame(r), "csv"))
    else:
        emit(render_plan(r) + exported)

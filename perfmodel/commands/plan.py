"""``perfmodel plan``: search every strategy and print the best plans, ranked by throughput."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..export.plan import check_model_exportable
from ..hardware import load_hardware
from ..network import get_model
from ..report import fmt_rate, render_frame, to_json
from ..report.answers import Answers, answers_for, interval_notes, standalone_columns
from ..search import KINDS, PlanResult, plan
from ..search.plan import DEFAULT_BATCH_PER_GPU
from ..units import GIB
from .answer_options import RANK_BY, rank, training_options, training_request
from .common import (
    Choice,
    amp_runtime_option,
    chart_option,
    check_writable,
    cudnn_option,
    emit,
    format_option,
    fusion_option,
    gpus_option,
    hardware_option,
    image_size_option,
    memory_format_option,
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
                "alternatives_samples/s": ", ".join(f"{c} {fmt_rate(t)}" for c, t in alt) or "-",
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


def render_plan(r: PlanResult, rows: list[dict[str, Any]] | None = None) -> str:
    best = r.plans[0]
    lines = [
        f"{best.model} on {best.gpus} x {best.hardware}, {best.precision}, global batch {r.global_batch}: "
        f"{len(r.plans)} best of {r.priced} priced plans ({r.candidates} candidates, {r.seconds:.2f} s)",
        "",
        render_frame(plan_rows(r) if rows is None else rows),
        "",
        f"speedup and efficiency of every row: {best.speedup_baseline}",
    ]
    for p in r.infeasible:
        lines.append(
            f"fastest plan that does not fit: {p.strategy.spec()} "
            f"({fmt_rate(p.throughput_samples_per_s)} samples/s, needs {p.memory_per_gpu_bytes / GIB:.1f} GiB "
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
@cudnn_option
@memory_format_option
@fusion_option
@amp_runtime_option
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
@training_options
@click.option("--rank-by", type=Choice(RANK_BY), default="throughput", show_default=True,
              help="Order of the plans: throughput, time to train or its cost (at one GPU count and "
              "global batch these agree; `scale` shows where more GPUs stop paying).")
def plan_cmd(
    model: str,
    gpus: int,
    hardware: str,
    precision: str,
    global_batch: int | None,
    optimizer: str,
    cudnn_major: int,
    memory_format: str,
    fusion: str,
    amp_runtime: str,
    image_size: int | None,
    top: int,
    strategies: str,
    fmt: str,
    chart: Path | None,
    epochs: float | None,
    dataset_size: int | None,
    price_per_gpu_hour: float | None,
    currency: str | None,
    rank_by: str,
    export_to: Path | None = None,
) -> None:
    """Search data, spatial, pipeline, hybrid, filter/channel and model-parallel plans of MODEL on GPUS GPUs.

    Plans are ranked by throughput at the global batch; the table says why each runner-up
    loses. If no plan fits in memory the command says how much the smallest needs and exits 1.
    """
    check_writable(chart)
    check_writable(export_to, PROGRAM_SUFFIXES)
    if export_to is not None:
        check_model_exportable(model)  # before the search: say what is missing first
    kinds = tuple(k.strip() for k in strategies.split(",") if k.strip())
    r = plan(model, gpus, hardware, precision, global_batch, optimizer, image_size, top, kinds, cudnn_major,
             memory_format, fusion, amp_runtime)
    req = training_request(epochs, dataset_size, price_per_gpu_hour, currency)
    hw = load_hardware(hardware)
    net = get_model(model, image_size)  # an imported model's file path is relative to here
    # the table shows no largest batch (JSON and CSV do): a few prices per plan not spent on it
    largest = fmt != "table"
    r, answers = rank(r, [answers_for(p, hw, req, net=net, largest=largest) for p in r.plans], rank_by)
    if chart is not None:
        from ..report.charts import plan_chart, save_chart

        save_chart(plan_chart(r), chart)
    exported = export_best(r.plans, hardware, export_to, model) if export_to is not None else ""
    if fmt == "json":
        d = r.to_dict()
        for row, a in zip(d["plans"], answers, strict=True):
            row.update(a.fields())
        d["search"]["rank_by"] = rank_by
        emit(to_json(d))
    elif fmt == "csv":
        rows = _with_answers(plan_rows(r), answers, flat=True)
        emit(render_frame([{**row, **standalone_columns(p)} for row, p in zip(rows, r.plans, strict=True)], "csv"))
    else:
        emit(render_plan(r, _with_answers(plan_rows(r), answers)) + exported)
        notes = [(f"rank {i}", a.interval.group, a.interval.runs) for i, a in enumerate(answers, 1)]
        emit("\n".join(interval_notes(notes)))


def _with_answers(rows: list[dict[str, Any]], answers: list[Answers], flat: bool = False) -> list[dict[str, Any]]:
    """Plan rows with each plan's interval, headroom (and time, cost) before the 'why' column."""
    out = []
    for row, a in zip(rows, answers, strict=True):
        extra = a.flat_fields() if flat else a.row()
        out.append({**{k: v for k, v in row.items() if k != "why"}, **extra, "why": row["why"]})
    return out

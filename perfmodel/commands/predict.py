"""``perfmodel predict``: price one parallel plan and show its breakdown."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from ..hardware import load_hardware
from ..network import get_model
from ..report import assumption_columns, render_frame, to_json
from ..report.answers import answers_for
from ..search.plan import DEFAULT_BATCH_PER_GPU
from ..strategies import Prediction, predict
from ..strategies.predict import default_batch_said
from ..units import GIB, fmt_rate
from .answer_options import training_options, training_request
from .common import (
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

__all__ = ["predict_cmd", "render_prediction"]


def render_prediction(p: Prediction) -> str:
    """A prediction as text: headline, breakdown (ms), memory (GiB), assumptions."""
    sp = "-" if p.speedup_vs_1gpu is None else f"{p.speedup_vs_1gpu:.2f}x"
    eff = "-" if p.parallel_efficiency is None else f"{100 * p.parallel_efficiency:.0f}%"
    lines = [
        f"{p.model} on {p.gpus} x {p.hardware}, strategy {p.strategy.spec()} ({p.strategy.kind}), "
        f"{p.precision}, global batch {p.global_batch}",
        f"step {p.iteration_time_s * 1e3:.2f} ms   throughput {fmt_rate(p.throughput_samples_per_s)} samples/s   "
        f"speedup {sp} (efficiency {eff})",
        f"memory per GPU {p.memory_per_gpu_bytes / GIB:.2f} GiB of {p.memory_capacity_bytes / GIB:.2f} GiB: "
        + ("fits" if p.fits_in_memory else "DOES NOT FIT"),
        "",
    ]
    total = p.iteration_time_s
    bd = [{"step part": k, "time_ms": v * 1e3, "share_%": 100 * v / total} for k, v in p.breakdown.items()]
    lines.append(render_frame(bd))
    lines.append("")
    mem = [{"memory part": k, "GiB": v / GIB} for k, v in p.memory.items()]
    lines.append(render_frame(mem))
    lines.append("")
    lines.append("assumptions:")
    lines += [f"  {k}: {v}" for k, v in p.assumptions.items()]
    return "\n".join(lines)


def prediction_row(p: Prediction) -> dict[str, object]:
    """One flat row for CSV output."""
    row: dict[str, object] = {k: v for k, v in p.to_dict().items() if not isinstance(v, dict)}
    row.update({f"breakdown_{k}_s": v for k, v in p.breakdown.items()})
    row.update({f"memory_{k}_bytes": v for k, v in p.memory.items()})
    return row


@click.command("predict")
@click.argument("model")
@gpus_option
@click.option("--strategy", "-s", required=True,
              help="Plan spec, e.g. dp=8 | pp=4,dp=2,mb=8 | sp=2x2,dp=2 | dp=8,comm=ps-central. "
                   "Keys: dp sp pp mp filter channel mb schedule comm recompute balance decomp overlap "
                   "(decomp=auto: spatial or sample decomposition chosen per link).")
@hardware_option
@precision_option
@click.option("--batch-per-gpu", "-b", type=int, default=None,
              help=f"Samples per GPU (global batch = this x GPUs; default {DEFAULT_BATCH_PER_GPU}).")
@click.option("--global-batch", "-B", type=int, default=None, help="Samples per step over all GPUs.")
@optimizer_option
@cudnn_option
@memory_format_option
@fusion_option
@amp_runtime_option
@image_size_option
@model_input_options
@format_option
@chart_option
@training_options
@click.option("--trace", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the priced step as a Chrome trace (.json: chrome://tracing, ui.perfetto.dev).")
def predict_cmd(model: str, gpus: int, strategy: str, hardware: str, precision: str, batch_per_gpu: int | None,
                global_batch: int | None, optimizer: str, cudnn_major: int, memory_format: str, fusion: str,
                amp_runtime: str, image_size: int | None, fmt: str,
                chart: Path | None, epochs: float | None, dataset_size: int | None,
                price_per_gpu_hour: float | None, currency: str | None, trace: Path | None) -> None:
    """Predict step time, throughput, speedup and memory of MODEL under one plan.

    Every answer carries an 80% interval from the measured runs closest to it, the memory
    verdict with the largest batch that fits, and with --epochs the time (and cost) to train.
    """
    check_writable(chart)
    check_writable(trace, (".json",))
    p = predict(model, gpus, strategy, hardware, precision, batch_per_gpu, global_batch, optimizer, image_size,
                cudnn_major, memory_format, fusion, amp_runtime)  # neither batch: the default, said
    if batch_per_gpu is None and global_batch is None:
        p = default_batch_said(p, "-b or -B")  # in the command line's words
    ones = _unit_splits(strategy)
    if ones:  # review 8b #13: 'mp=1' was priced as dp without a word
        said = f"{', '.join(ones)} split{'s' if len(ones) == 1 else ''} nothing: priced as {p.strategy.spec()}"
        p = replace(p, assumptions={**p.assumptions, "strategy": said})
    req = training_request(epochs, dataset_size, price_per_gpu_hour, currency)
    ans = answers_for(p, load_hardware(hardware), req, net=get_model(model, image_size))
    if chart is not None:
        from ..report.charts import pipeline_gantt, save_chart

        save_chart(pipeline_gantt(p), chart)
    if trace is not None:
        from ..report.trace import write_trace

        write_trace(p, trace)
    if fmt == "json":
        emit(to_json({**p.to_dict(), **ans.fields()}))
    elif fmt == "csv":
        emit(render_frame([{**prediction_row(p), **ans.flat_fields(), **assumption_columns(p.assumptions)}], "csv"))
    else:
        text = render_prediction(p).split("\n")
        emit("\n".join(text[:3] + ans.lines() + text[3:]))


def _unit_splits(spec: str) -> list[str]:
    """The model-splitting degrees of 1 written in ``spec`` ('mp=1', 'sp=1x1'): they split nothing."""
    out = []
    for part in spec.replace(" ", "").lower().split(","):
        key, _, value = part.partition("=")
        if key in ("mp", "pp", "filter", "channel", "sp") and value and set(value.split("x")) == {"1"}:
            out.append(part)
    return out

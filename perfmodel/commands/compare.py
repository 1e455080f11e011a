"""``perfmodel compare``: one model on several hardware profiles (and precisions), side by side."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..cost.fusion import DEFAULT_FUSION
from ..cost.grouped import DEFAULT_CUDNN_MAJOR
from ..cost.layout import DEFAULT_MEMORY_FORMAT
from ..errors import UsageError
from ..hardware import PRECISIONS, load_hardware
from ..network import get_model
from ..report import render_frame, to_json
from ..report.answers import answers_for, interval_notes
from ..search import plan
from ..search.plan import default_global_batch
from ..strategies import Prediction, predict
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME
from ..units import GIB
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
    image_size_option,
    memory_format_option,
    optimizer_option,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["compare_cmd", "Comparison", "compare", "compare_rows", "compare_chart"]


@dataclass(frozen=True)
class Comparison:
    """One prediction per (hardware, precision), in the order asked; ratios are to the first."""

    model: str
    gpus: int
    strategy: str
    predictions: tuple[Prediction, ...]

    def ratios(self) -> list[float]:
        first = self.predictions[0].throughput_samples_per_s
        return [p.throughput_samples_per_s / first for p in self.predictions]

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for p, r in zip(self.predictions, self.ratios(), strict=True):
            d = p.to_dict()
            d["ratio_to_first"] = r
            rows.append(d)
        return {"model": self.model, "gpus": self.gpus, "strategy": self.strategy,
                "ratio_to": f"{self.predictions[0].hardware} {self.predictions[0].precision}", "rows": rows}


def compare(
    model: str, gpus: int, hardware: list[str], precisions: list[str], strategy: str = "best",
    batch_per_gpu: int | None = None, global_batch: int | None = None, optimizer: str = "sgd",
    image_size: int | None = None, cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT, fusion: str = DEFAULT_FUSION,
    amp_runtime: str = DEFAULT_AMP_RUNTIME,
) -> Comparison:
    """Price ``model`` on ``gpus`` GPUs of every profile in ``hardware`` at every precision:
    ``strategy`` (a spec) or ``best`` (the first row of :func:`~perfmodel.search.plan` on each),
    with grouped convolutions as cuDNN ``cudnn_major`` runs them (:mod:`perfmodel.cost.grouped`),
    the activations in ``memory_format`` (:mod:`perfmodel.cost.layout`) and the batch-norm/add/ReLU
    chains ``fusion`` fuses (:mod:`perfmodel.cost.fusion`), under the mixed-precision runtime
    ``amp_runtime`` at amp and bf16 (:mod:`perfmodel.strategies.amp_runtime`)."""
    if not hardware:
        raise UsageError("compare needs at least one --hardware profile (e.g. -H a100-80gb-dgx,h100-80gb-dgx)")
    if batch_per_gpu is not None and global_batch is not None:
        raise UsageError("give at most one of --batch-per-gpu and --global-batch")
    B = global_batch if batch_per_gpu is None else batch_per_gpu * gpus
    preds = []
    for hw in hardware:
        for prec in precisions:
            if strategy == "best":
                preds.append(plan(model, gpus, hw, prec, B, optimizer, image_size, top=1,
                                  cudnn_major=cudnn_major, memory_format=memory_format, fusion=fusion,
                                  amp_runtime=amp_runtime).plans[0])
            else:
                preds.append(predict(model, gpus, strategy, hw, prec, None, B or default_global_batch(gpus),
                                     optimizer, image_size, cudnn_major, memory_format, fusion, amp_runtime))
    return Comparison(preds[0].model, gpus, strategy, tuple(preds))


def compare_rows(c: Comparison) -> list[dict[str, Any]]:
    """The table's rows: one per (hardware, precision)."""
    return [
        {
            "hardware": p.hardware,
            "precision": p.precision,
            "strategy": p.strategy.spec(),
            "global_batch": p.global_batch,
            "step_ms": p.iteration_time_s * 1e3,
            "samples/s": p.throughput_samples_per_s,
            "ratio_to_first": r,
            "speedup_x": p.speedup_vs_1gpu,
            "mem_GiB": p.memory_per_gpu_bytes / GIB,
            "cap_GiB": p.memory_capacity_bytes / GIB,
            "fits": "yes" if p.fits_in_memory else "no",
        }
        for p, r in zip(c.predictions, c.ratios(), strict=True)
    ]


def compare_chart(c: Comparison) -> Figure:
    """Throughput per (hardware, precision) as bars, each labelled with its ratio to the first."""
    from matplotlib.figure import Figure

    labels = [f"{p.hardware}\n{p.precision}" for p in c.predictions]
    thr = [p.throughput_samples_per_s for p in c.predictions]
    fig = Figure(figsize=(max(5.0, 1.4 * len(labels) + 2), 4.0), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    bars = ax.bar(range(len(thr)), thr, color="#4c72b0")
    for b, r in zip(bars, c.ratios(), strict=True):
        ax.annotate(f"{r:.2f}x", (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("throughput (samples/s)")
    ax.margins(y=0.12)  # room for the ratio labels
    ax.set_title(f"{c.model} on {c.gpus} GPUs, {c.strategy} plan; ratio to the first", fontsize=10)
    return fig


def render_compare(c: Comparison, rows: list[dict[str, Any]] | None = None) -> str:
    lines = [f"{c.model} on {c.gpus} GPUs ({'best plan on each' if c.strategy == 'best' else c.strategy}), "
             f"ratio to {c.predictions[0].hardware} {c.predictions[0].precision}", "",
             render_frame(compare_rows(c) if rows is None else rows), "",
             "speedup baselines (one per profile and precision):"]
    lines += [f"  {p.hardware} {p.precision}: {p.speedup_baseline}" for p in c.predictions]
    lines += ["", "assumptions:"] + [f"  {k}: {v}" for k, v in c.predictions[0].assumptions.items()
                                     if k not in ("hardware", "hardware_source", "precision", "memory_capacity")]
    return "\n".join(lines)


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


@click.command("compare")
@click.argument("model")
@gpus_option
@click.option("--hardware", "-H", required=True, help="Comma list of profiles, e.g. a100-80gb-dgx,h100-80gb-dgx.")
@click.option("--strategy", "-s", default="best", show_default=True,
              help="A plan spec priced on every profile, or 'best' (each profile's best plan).")
@click.option("--precision", "precisions", multiple=True,
              help=f"Precision(s), repeatable or a comma list ({', '.join(PRECISIONS)}; default amp).")
@click.option("--batch-per-gpu", "-b", type=click.IntRange(min=1), default=None, help="Samples per GPU.")
@click.option("--global-batch", "-B", type=click.IntRange(min=1), default=None, help="Samples per step.")
@optimizer_option
@cudnn_option
@memory_format_option
@fusion_option
@amp_runtime_option
@image_size_option
@format_option
@chart_option
@training_options
def compare_cmd(model: str, gpus: int, hardware: str, strategy: str, precisions: tuple[str, ...],
                batch_per_gpu: int | None, global_batch: int | None, optimizer: str, cudnn_major: int,
                memory_format: str, fusion: str, amp_runtime: str, image_size: int | None, fmt: str, chart: Path | None,
                epochs: float | None, dataset_size: int | None, price_per_gpu_hour: float | None,
                currency: str | None) -> None:
    """Compare MODEL on GPUS GPUs of several hardware profiles (and precisions), side by side.

    Each row is one profile at one precision, with its throughput's ratio to the first row's.
    """
    check_writable(chart)
    precs = [p for x in (precisions or ("amp",)) for p in _split(x)]
    bad = [p for p in precs if p not in PRECISIONS]
    if bad:
        raise UsageError(f"unknown precision {bad[0]!r} (valid: {', '.join(PRECISIONS)})")
    c = compare(model, gpus, _split(hardware), precs, strategy.strip(), batch_per_gpu, global_batch, optimizer,
                image_size, cudnn_major, memory_format, fusion, amp_runtime)
    if chart is not None:
        from ..report.charts import save_chart

        save_chart(compare_chart(c), chart)
    req = training_request(epochs, dataset_size, price_per_gpu_hour, currency)
    hws = [load_hardware(h) for h in _split(hardware) for _ in precs]
    net = get_model(model, image_size)  # an imported model's file path is relative to here
    answers = [answers_for(p, hw, req, net=net) for p, hw in zip(c.predictions, hws, strict=True)]
    if fmt == "json":
        d = c.to_dict()
        for row, a in zip(d["rows"], answers, strict=True):
            row.update(a.fields())
        emit(to_json(d))
    elif fmt == "csv":
        emit(render_frame([{**r, **a.flat_fields()} for r, a in zip(compare_rows(c), answers, strict=True)], "csv"))
    else:
        emit(render_compare(c, [{**r, **a.row()} for r, a in zip(compare_rows(c), answers, strict=True)]))
        notes = [(f"{p.hardware} {p.precision}", a.interval.group, a.interval.runs)
                 for p, a in zip(c.predictions, answers, strict=True)]
        emit("\n".join(interval_notes(notes)))

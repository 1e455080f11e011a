"""``perfmodel compare``: one model on several hardware profiles (and precisions), side by side."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..cost.fusion import DEFAULT_FUSION
from ..cost.grouped import DEFAULT_CUDNN_MAJOR
from ..cost.layout import DEFAULT_MEMORY_FORMAT
from ..errors import NoFeasiblePlanError, PerfmodelError, UsageError
from ..hardware import PRECISIONS, check_precision, load_hardware
from ..network import get_model
from ..report import render_frame, to_json
from ..report.answers import answers_for, interval_notes, standalone_columns
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
    model_input_options,
    optimizer_option,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["compare_cmd", "Comparison", "NoPlan", "compare", "compare_rows", "compare_chart", "assumption_lines",
           "with_gaps"]


@dataclass(frozen=True)
class NoPlan:
    """A (hardware, precision) with no plan that fits: where it was asked and why (the search's one line)."""

    position: int  # its index among the (hardware, precision) pairs asked
    hardware: str
    precision: str
    reason: str
    global_batch: int  # the batch the smallest need is for (the last tried: 1 when none was given)
    min_memory_bytes: float  # the smallest memory per GPU any plan needs there
    memory_capacity_bytes: float  # one GPU's memory there

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "precision": self.precision, "reason": self.reason,
                "global_batch": self.global_batch, "min_memory_bytes": self.min_memory_bytes,
                "memory_capacity_bytes": self.memory_capacity_bytes}


@dataclass(frozen=True)
class Comparison:
    """One prediction per (hardware, precision) that has a plan, in the order asked; ratios are to the first.
    ``no_plan`` holds the pairs where no plan fits (best-plan comparisons only)."""

    model: str
    gpus: int
    strategy: str
    predictions: tuple[Prediction, ...]
    no_plan: tuple[NoPlan, ...] = ()

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
                "ratio_to": f"{self.predictions[0].hardware} {self.predictions[0].precision}", "rows": rows,
                "no_plan": [g.to_dict() for g in self.no_plan]}

    def priced(self) -> list[int]:
        """The positions (among the pairs asked) of the predictions, in order."""
        gaps = {g.position for g in self.no_plan}
        return [i for i in range(len(self.predictions) + len(self.no_plan)) if i not in gaps]


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
    preds: list[Prediction] = []
    gaps: list[tuple[NoPlan, PerfmodelError]] = []
    for i, (hw, prec) in enumerate((hw, prec) for hw in hardware for prec in precisions):
        prof = load_hardware(hw)
        if gpus > prof.max_gpus:  # a row saying so; the profiles that hold them still compared
            e = UsageError(f"{gpus} GPUs exceed {hw}'s {prof.max_gpus} ({prof.gpus_per_node} per node x "
                           f"{prof.max_nodes} nodes)")
            gaps.append((NoPlan(i, hw, prec, str(e), B or default_global_batch(gpus), math.nan,
                                prof.device.memory_bytes), e))
            continue
        if strategy != "best":
            preds.append(predict(model, gpus, strategy, hw, prec, None, B or default_global_batch(gpus),
                                 optimizer, image_size, cudnn_major, memory_format, fusion, amp_runtime))
            continue
        try:
            preds.append(plan(model, gpus, hw, prec, B, optimizer, image_size, top=1, cudnn_major=cudnn_major,
                              memory_format=memory_format, fusion=fusion, amp_runtime=amp_runtime).plans[0])
        except NoFeasiblePlanError as e:  # a row saying so; the others still compared
            gaps.append((NoPlan(i, hw, prec, str(e), B or 1, e.min_memory_bytes, prof.device.memory_bytes), e))
    if not preds:
        raise gaps[0][1]  # nothing to compare: the first profile's one line, as for one profile
    return Comparison(preds[0].model, gpus, strategy, tuple(preds), tuple(g for g, _ in gaps))


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


def with_gaps(c: Comparison, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (one per prediction) with a row for each pair that has no plan, where it was asked: its
    hardware and precision, ``no plan fits`` as its strategy, the smallest need as its memory, the rest empty."""
    out = list(rows)
    for g in c.no_plan:
        row: dict[str, Any] = dict.fromkeys(rows[0])
        row.update(hardware=g.hardware, precision=g.precision, fits="no", global_batch=g.global_batch,
                   strategy="no plan fits" if math.isfinite(g.min_memory_bytes) else "too few GPUs",
                   mem_GiB=g.min_memory_bytes / GIB, cap_GiB=g.memory_capacity_bytes / GIB)
        known = {"model": c.model, "gpus": c.gpus, "image_size": c.predictions[0].image_size,
                 "memory_per_gpu_bytes": g.min_memory_bytes,
                 "memory_capacity_bytes": g.memory_capacity_bytes}
        row.update({k: v for k, v in known.items() if k in row})
        out.insert(g.position, row)
    return out


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
             render_frame(with_gaps(c, compare_rows(c) if rows is None else rows)), "",
             "speedup baselines (one per profile and precision):"]
    lines += [f"  {p.hardware} {p.precision}: {p.speedup_baseline}" for p in c.predictions]
    if c.no_plan:
        lines += ["", "no plan (where one would fit, mem_GiB is the smallest memory any plan needs):"]
        lines += [f"  {g.hardware} {g.precision}: {g.reason}" for g in c.no_plan]
    lines += ["", "assumptions:", *assumption_lines(c)]
    return "\n".join(lines)


def assumption_lines(c: Comparison) -> list[str]:
    """Every row's assumptions: once where all rows share one, else each value with the rows it holds for
    (the profile and its source, the precision, a pipeline's stage split differ by row)."""
    labels = [f"{p.hardware} {p.precision}" for p in c.predictions]
    keys = dict.fromkeys(k for p in c.predictions for k in p.assumptions if k != "speedup_baseline")
    lines = []
    for k in keys:
        vals = [p.assumptions.get(k) for p in c.predictions]
        if all(v == vals[0] for v in vals):
            lines.append(f"  {k}: {vals[0]}")
            continue
        lines.append(f"  {k}:")
        rows: dict[str, list[str]] = {}
        for label, v in zip(labels, vals, strict=True):
            if v is not None:
                rows.setdefault(v, []).append(label)
        lines += [f"    {', '.join(who)}: {v}" for v, who in rows.items()]
    return lines


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


@click.command("compare")
@click.argument("model")
@gpus_option
@click.option("--hardware", "-H", "hardware", multiple=True, required=True,
              help="Profiles, repeatable or a comma list, e.g. -H a100-80gb-dgx,h100-80gb-dgx.")
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
@model_input_options
@format_option
@chart_option
@training_options
def compare_cmd(model: str, gpus: int, hardware: tuple[str, ...], strategy: str, precisions: tuple[str, ...],
                batch_per_gpu: int | None, global_batch: int | None, optimizer: str, cudnn_major: int,
                memory_format: str, fusion: str, amp_runtime: str, image_size: int | None, fmt: str, chart: Path | None,
                epochs: float | None, dataset_size: int | None, price_per_gpu_hour: float | None,
                currency: str | None) -> None:
    """Compare MODEL on GPUS GPUs of several hardware profiles (and precisions), side by side.

    Each row is one profile at one precision, with its throughput's ratio to the first row's.
    """
    check_writable(chart)
    precs = [p for x in (precisions or ("amp",)) for p in _split(x)]
    if not precs:  # --precision "" or ",": an empty list priced nothing (IndexError)
        raise UsageError(f"--precision needs at least one precision (valid: {', '.join(PRECISIONS)})")
    profiles = [h for x in hardware for h in _split(x)]  # -H a -H b and -H a,b alike
    for p in precs:
        check_precision(p)
    c = compare(model, gpus, profiles, precs, strategy.strip(), batch_per_gpu, global_batch, optimizer,
                image_size, cudnn_major, memory_format, fusion, amp_runtime)
    if chart is not None:
        from ..report.charts import save_chart

        save_chart(compare_chart(c), chart)
    req = training_request(epochs, dataset_size, price_per_gpu_hour, currency)
    asked = [load_hardware(h) for h in profiles for _ in precs]
    hws = [asked[i] for i in c.priced()]
    net = get_model(model, image_size)  # an imported model's file path is relative to here
    largest = fmt != "table"  # the table shows no largest batch (JSON and CSV do)
    answers = [answers_for(p, hw, req, net=net, largest=largest) for p, hw in zip(c.predictions, hws, strict=True)]
    if fmt == "json":
        d = c.to_dict()
        for row, a in zip(d["rows"], answers, strict=True):
            row.update(a.fields())
        emit(to_json(d))
    elif fmt == "csv":
        emit(render_frame(with_gaps(c, [{**r, **a.flat_fields(), **standalone_columns(p)}
                                        for r, a, p in zip(compare_rows(c), answers, c.predictions, strict=True)]),
                          "csv"))
    else:
        emit(render_compare(c, [{**r, **a.row()} for r, a in zip(compare_rows(c), answers, strict=True)]))
        notes = [(f"{p.hardware} {p.precision}", a.interval.group, a.interval.runs)
                 for p, a in zip(c.predictions, answers, strict=True)]
        emit("\n".join(interval_notes(notes)))

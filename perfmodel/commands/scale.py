"""``perfmodel scale``: predicted speedup against GPU count per strategy, as a table or a chart."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click
import pandas as pd

from ..api import SCALE_STRATEGIES, load_hardware, load_model, parse_gpu_list, scale
from ..errors import UsageError
from ..report import assumption_columns, render_frame, to_json
from ..report.answers import interval_notes
from ..search.plan import DEFAULT_BATCH_PER_GPU
from ..strategies.amp_step import amp_assumption
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
    hardware_option,
    image_size_option,
    memory_format_option,
    model_input_options,
    optimizer_option,
    precision_option,
)

__all__ = ["scale_cmd", "scale_table", "GpuList", "baseline_object"]


class GpuList(click.ParamType):  # type: ignore[type-arg]
    """A click type for GPU lists: ``1,2,4,8``, ``1-64``, ``8-64:8``, ``1-1024:log2``."""

    name = "LIST"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> list[int]:
        if isinstance(value, list):
            return value
        try:
            return parse_gpu_list(str(value))
        except UsageError as e:
            self.fail(str(e), param, ctx)


def baseline_object(attrs: Mapping[Any, Any]) -> dict[str, Any] | None:
    """The sweep's baseline, as plan's and predict's JSON carry it: every row's under strong scaling,
    data parallelism's under weak scaling (each row says its own in ``baseline_batch``)."""
    if not attrs.get("baseline_micro_batches"):
        return None
    return {
        "gpus": 1,
        "hardware": attrs["hardware"],
        "batch": attrs["baseline_batch"],
        "micro_batches": attrs["baseline_micro_batches"],
        "step_time_s": attrs["baseline_step_s"],
        "throughput_samples_per_s": attrs["baseline_samples_per_s"],
    }


def scale_table(df: pd.DataFrame) -> pd.DataFrame:
    """The scaling frame in table units (ms, GiB), a '-' where a strategy has no plan."""
    return pd.DataFrame(
        {
            "strategy": df["strategy"],
            "gpus": df["gpus"],
            "global_batch": df["global_batch"],
            "plan": df["plan"],
            "step_ms": df["step_s"] * 1e3,
            "samples/s": df["samples_per_s"],
            "speedup_x": df["speedup_x"],
            "ideal_x": df["ideal_x"],
            "efficiency_%": df["efficiency_%"],
            **({"baseline_samples": df["baseline_batch"]} if _own_baselines(df) else {}),
            "mem_GiB": df["memory_per_gpu_bytes"] / GIB,
            "headroom_GiB": df["memory_headroom_bytes"] / GIB,
            "80%_low_samples/s": df["samples_per_s_low"],
            "80%_high_samples/s": df["samples_per_s_high"],
            **({"train_h": df["time_to_train_s"] / 3600} if "time_to_train_s" in df else {}),
            **({f"cost_{df.attrs.get('currency', 'USD')}": df["cost"]} if "cost" in df else {}),
            "note": df["reason"],
        }
    )


def _own_baselines(df: pd.DataFrame) -> bool:
    """Whether some row's speedup is against one GPU at another batch than the baseline line's
    (weak scaling's plans whose GPUs share samples: one replica's batch, global / dp)."""
    a = df.attrs
    rows = df[df["reason"].isna()] if "reason" in df else df
    return "baseline_batch" in df and bool((rows["baseline_batch"] != a.get("baseline_batch")).any())


def _progress() -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    """A progress bar on stderr when stderr is a terminal (nothing otherwise)."""
    if not sys.stderr.isatty():
        return None, lambda: None
    width = 30

    def show(done: int, total: int) -> None:
        k = width * done // max(total, 1)
        sys.stderr.write(f"\rscaling sweep [{'#' * k}{'.' * (width - k)}] {done}/{total}")
        sys.stderr.flush()

    def close() -> None:
        sys.stderr.write("\r" + " " * (width + 40) + "\r")
        sys.stderr.flush()

    return show, close


@click.command("scale")
@click.argument("model")
@click.option(
    "--gpus",
    "-n",
    "gpus",
    type=GpuList(),
    required=True,
    help="GPU counts: 1,2,4,8 | 1-64 | 8-64:8 | 1-1024:log2 (doubling from 1 to 1024).",
)
@hardware_option
@precision_option
@click.option(
    "--global-batch",
    "-B",
    type=click.IntRange(min=1),
    default=None,
    help="Strong scaling: this many samples per step at every GPU count.",
)
@click.option(
    "--batch-per-gpu",
    "-b",
    type=click.IntRange(min=1),
    default=None,
    help=f"Weak scaling: this many samples per GPU (default {DEFAULT_BATCH_PER_GPU}).",
)
@click.option(
    "--strategies",
    default="dp,pp,hybrid,best",
    show_default=True,
    help=f"Comma list of strategy kinds, one curve each ({', '.join(SCALE_STRATEGIES)}; "
    "best = the best plan of any kind).",
)
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
@click.option("--cost-chart", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With --epochs: draw time to train and its cost against GPU count (.png, .svg, .pdf).")
def scale_cmd(
    model: str,
    gpus: list[int],
    hardware: str,
    precision: str,
    global_batch: int | None,
    batch_per_gpu: int | None,
    strategies: str,
    optimizer: str,
    cudnn_major: int,
    memory_format: str,
    fusion: str,
    amp_runtime: str,
    image_size: int | None,
    fmt: str,
    chart: Path | None,
    epochs: float | None,
    dataset_size: int | None,
    price_per_gpu_hour: float | None,
    currency: str | None,
    cost_chart: Path | None,
) -> None:
    """Predicted speedup of MODEL against GPU count: the best plan of each strategy kind.

    Weak scaling (--batch-per-gpu, the default) keeps the samples per GPU; strong scaling
    (--global-batch) keeps the samples per step. The speedup is over one GPU of the same
    profile (see the baseline line); a strategy with no feasible plan at a count shows '-'
    and the reason. With --chart, also draws the curves with the ideal line and the
    parallel efficiency (.png, .svg or .pdf).
    """
    if global_batch is not None and batch_per_gpu is not None:
        raise UsageError(
            "give at most one of --global-batch (strong scaling) and --batch-per-gpu (weak scaling)"
        )
    check_writable(chart)  # the extension too (CHART_SUFFIXES)
    check_writable(cost_chart)
    req = training_request(epochs, dataset_size, price_per_gpu_hour, currency)
    if cost_chart is not None and not req.asked:
        raise UsageError("--cost-chart needs --epochs (time to train) and a price for the cost panel")
    show, close = _progress()
    try:
        df = scale(
            model,
            gpus,
            hardware,
            precision,
            batch_per_gpu=batch_per_gpu,
            global_batch=global_batch,
            strategies=[s for s in strategies.split(",")],
            optimizer=optimizer,
            image_size=image_size,
            progress=show,
            cudnn_major=cudnn_major,
            memory_format=memory_format,
            fusion=fusion,
            amp_runtime=amp_runtime,
        )
    finally:
        close()
    if req.asked:
        from ..report.charts_cost import add_training_columns, time_cost_chart

        df = add_training_columns(df, load_model(model, image_size), load_hardware(hardware), req)
        if cost_chart is not None:
            from ..report.charts import save_chart

            save_chart(time_cost_chart(df), cost_chart)
    if chart is not None:
        from ..report.charts import save_chart, scale_chart

        save_chart(scale_chart(df), chart)
    _emit_scale(df, fmt)


def _emit_scale(df: pd.DataFrame, fmt: str) -> None:
    """The scale frame as JSON, CSV, or a table with its setting, baseline and interval notes."""
    a = df.attrs
    if fmt == "json":
        emit(to_json({"setting": {k: v for k, v in a.items()}, "baseline": baseline_object(a),
                      "rows": df.to_dict(orient="records")}))
    elif fmt == "csv":  # every row carries the software its plans were priced for
        keys = ("model", "hardware", "image_size", "precision", "optimizer", "cudnn_major", "memory_format",
                "fusion", "amp_runtime")
        setting = {k: a[k] for k in keys}
        emit(render_frame(df.assign(**setting, **assumption_columns(a["assumptions"])), "csv"))
    else:
        batch = (
            f"global batch {a['global_batch']} (strong scaling)"
            if a["scaling"] == "strong"
            else f"{a['batch_per_gpu']} samples per GPU (weak scaling)"
        )
        emit(f"{a['model']} on {a['hardware']}, {a['precision']}, {batch}")
        emit("")
        emit(render_frame(scale_table(df)))
        emit("")
        emit(f"speedup baseline: {a['baseline']}")
        if _own_baselines(df):
            emit("  plans whose GPUs share samples (dp < GPUs): 1 GPU at one replica's batch, global / dp "
                 "(column baseline_samples), so that a larger batch per kernel is not counted as parallelism")
        said = ("cudnn", "memory_format", "fusion", "mixed_precision", "kernels")  # the lines below
        emit("\n".join(f"{k}: {v}" for k, v in a["assumptions"].items() if k not in said))
        emit(f"cudnn: {a['cudnn']}")
        emit(a['memory_format_assumption'])
        emit(a['fusion_assumption'])
        emit("mixed precision: " + amp_assumption(a['precision'], a['amp_runtime']))
        emit("kernels: " + a["kernels"])
        ok = df[df["interval_group"].notna()]
        labels = [f"{s} at {g}" for s, g in zip(ok["strategy"], ok["gpus"], strict=True)]
        runs = [int(n) for n in ok["interval_runs"].to_numpy(float)]
        emit("\n".join(interval_notes(list(zip(labels, map(str, ok["interval_group"]), runs, strict=True)))))

"""``perfmodel measure``: time a zoo model's training on the local device (needs torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pandas as pd

from ..cost.grouped import CUDNN_MAJORS
from ..cost.layout import memory_format_assumption
from ..errors import UsageError
from ..hardware import PRECISIONS, load_hardware
from ..io import atomic_write_text, check_target
from ..report import render_frame, to_json
from ..strategies.wording import kernels_assumption
from ..validation.measure import DEVICES, MeasureResult, measure
from ..validation.measure_env import pricing_cudnn
from .common import Choice, emit, format_option, image_size_option, memory_format_option

__all__ = ["measure_cmd", "layers_frame", "predicted_times", "cpu_timed_gpu_profile"]


def cpu_timed_gpu_profile(device: str, hardware: str | None) -> str:
    """A warning when a CPU was timed but the row is labelled with a (GPU) hardware profile."""
    if hardware is None or device != "cpu":
        return ""
    return (
        f"timed on the CPU but labelled {hardware} (a GPU profile): the row does not measure that "
        f"GPU; run on the GPU (--device cuda) or leave out --hardware"
    )


def predicted_times(
    r: MeasureResult, hardware: str, cudnn_major: int | None = None
) -> tuple[list[tuple[float, float]], float]:
    """The compute model's per-layer (forward, backward) seconds and step seconds for ``r``, with
    grouped convolutions as cuDNN ``cudnn_major`` runs them (:mod:`perfmodel.cost.grouped`;
    None: the cuDNN ``r``'s torch loaded, the default without one, :func:`pricing_cudnn`) and
    the activations in the memory format ``r`` ran in (:mod:`perfmodel.cost.layout`)."""
    cudnn_major = pricing_cudnn(r.environment.get("cudnn"), cudnn_major)[0]
    fmt = r.memory_format
    from ..cost.compute import layer_times
    from ..network import compile_counts, get_model
    from ..strategies.predict import context, price
    from ..strategies.spec import Strategy

    hw = load_hardware(hardware)
    net = get_model(r.model, r.image_size)
    lt = layer_times(compile_counts(net), hw, r.precision, r.batch, cudnn_major=cudnn_major, memory_format=fmt)
    ctx = context(net, hw, r.precision, "sgd", cudnn_major=cudnn_major, memory_format=fmt)
    step = price(ctx, Strategy(), r.batch).time_s
    return [(float(f), float(b)) for f, b in zip(lt.fwd, lt.bwd, strict=True)], step


def _assumptions(r: MeasureResult, cudnn_note: str) -> dict[str, str]:
    """What the predictions beside the measurement assume: the cuDNN, the run's memory format and
    the kernels each layer is priced as (a forked tensor's gradient sums in its producer's backward)."""
    return {"cudnn": cudnn_note, "memory_format": memory_format_assumption(r.memory_format),
            "kernels": kernels_assumption()}


def layers_frame(r: MeasureResult, predicted: list[tuple[float, float]] | None = None) -> pd.DataFrame:
    recs: list[dict[str, Any]] = []
    for i, lt in enumerate(r.layers):
        rec: dict[str, Any] = {
            "layer": lt.name,
            "kind": lt.kind,
            "forward_ms": lt.forward_s * 1e3,
            "backward_ms": lt.backward_s * 1e3,
        }
        if predicted is not None:
            pf, pb = predicted[i]
            rec["predicted_forward_ms"] = pf * 1e3
            rec["predicted_backward_ms"] = pb * 1e3
            meas = lt.forward_s + lt.backward_s
            rec["error_%"] = 100.0 * ((pf + pb) - meas) / meas if meas > 0 else None
        recs.append(rec)
    return pd.DataFrame(recs)


@click.command("measure")
@click.argument("model")
@click.option(
    "--batch",
    "-b",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Samples per step.",
)
@click.option(
    "--precision",
    type=Choice(PRECISIONS),
    default="fp32",
    show_default=True,
    help="fp32, tf32 (GPU), amp (fp16 autocast, GPU) or bf16 (autocast).",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Timed steps (and repetitions per layer); the median is reported.",
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="Untimed steps first.",
)
@click.option(
    "--device",
    type=Choice(DEVICES),
    default=None,
    help="cpu or cuda (default: cuda when torch sees a GPU).",
)
@click.option(
    "--hardware",
    "-H",
    default=None,
    help="Profile of this machine: written in the row's hardware column, and the "
    "model's per-layer and per-step predictions are shown beside the measurements.",
)
@click.option(
    "--cudnn",
    "cudnn_major",
    type=Choice([str(m) for m in CUDNN_MAJORS]),
    default=None,
    callback=lambda _c, _p, v: None if v is None else int(v),
    help="cuDNN major version the predictions assume (default: the one torch loaded; "
    "before 8, grouped convolutions run one kernel per group).",
)
@memory_format_option
@click.option("--no-layers", is_flag=True, help="Time only the whole step.")
@image_size_option
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the run as a measurement row to this CSV, and per-layer timings to <name>.layers.csv beside it.",
)
@format_option
def measure_cmd(
    model: str,
    batch: int,
    precision: str,
    steps: int,
    warmup: int,
    device: str | None,
    hardware: str | None,
    cudnn_major: int | None,
    memory_format: str,
    no_layers: bool,
    image_size: int | None,
    output: Path | None,
    fmt: str,
) -> None:
    """Time forward and backward of MODEL, per layer and per training step, on this machine.

    Needs torch (pip install torch; from a checkout pip install -e ".[torch]"). The network is
    built from perfmodel's own layer IR, so what is timed is exactly what the cost model prices;
    --memory-format nhwc runs it channels-last (model and inputs), and the row says so.
    """
    if output is not None and output.suffix.lower() != ".csv":
        raise UsageError(f"cannot write '{output}': measurements are written as .csv")
    if output is not None:
        check_target(output, (".csv",))
    if hardware is not None:
        load_hardware(hardware)  # fail on a bad name before timing anything
    try:
        r = measure(model, batch, precision, steps, device, image_size, warmup, not no_layers,
                    memory_format=memory_format)
    except RuntimeError as e:  # torch's own failures: out of memory, unsupported kernel
        first = (str(e).strip().splitlines() or ["unknown error"])[0]
        hint = " (try a smaller --batch)" if "out of memory" in first.lower() else ""
        raise UsageError(f"measure: torch failed on {model} at batch {batch}: {first}{hint}") from None
    cpu_warning = cpu_timed_gpu_profile(r.device, hardware)
    if cpu_warning:
        click.echo(f"warning: {cpu_warning}", err=True)
    priced_major, cudnn_note = pricing_cudnn(r.environment.get("cudnn"), cudnn_major)
    predicted, step_pred = predicted_times(r, hardware, priced_major) if hardware else (None, None)
    row = r.measurement_row(hardware or "unspecified")
    if step_pred is not None:
        row["predicted_step_time_s"] = step_pred
    layers = layers_frame(r, predicted)
    if output is not None:
        atomic_write_text(output, pd.DataFrame([row]).to_csv(index=False))
        atomic_write_text(output.with_suffix(".layers.csv"), layers.to_csv(index=False))
    if fmt == "json":
        d = r.to_dict()
        d["measurement_row"] = row
        if predicted is not None:
            d["cudnn_major"] = priced_major
            d["assumptions"] = _assumptions(r, cudnn_note)
            d["predicted_step_time_s"] = step_pred
            for lt, (pf, pb) in zip(d["layers"], predicted, strict=True):
                lt["predicted_forward_s"], lt["predicted_backward_s"] = pf, pb
        emit(to_json(d))
        return
    if fmt == "csv":
        emit(render_frame(pd.DataFrame([row]), "csv"))
        return
    lines = [render_frame(layers, floatfmt="{:,.3f}"), ""] if not no_layers else []
    env = ", ".join(f"{k} {v}" for k, v in r.environment.items() if v)
    lines += [
        f"{r.model} (image {r.image_size}) batch {r.batch} {r.precision} on {r.device_name} ({r.device})",
        f"step {r.step_time_s * 1e3:.3f} ms (median of {r.steps} after {r.warmup} warm-up)   "
        f"throughput {r.throughput_samples_per_s:,.1f} samples/s",
    ]
    if step_pred is not None:
        err = 100.0 * (step_pred - r.step_time_s) / r.step_time_s
        lines.append(f"model ({hardware}): step {step_pred * 1e3:.3f} ms, error {err:+.1f}% of the measured step")
    if cpu_warning:
        lines.append(f"warning: {cpu_warning}")
    if not hardware:
        lines.append("hardware column: 'unspecified' (give --hardware NAME to make the row validatable)")
    lines.append(f"environment: {env}")
    if step_pred is not None:
        lines += ["assumptions:", *(f"  {k}: {v}" for k, v in _assumptions(r, cudnn_note).items())]
    if output is not None:
        lines.append(f"wrote {output} and {output.with_suffix('.layers.csv')}")
    emit("\n".join(lines))

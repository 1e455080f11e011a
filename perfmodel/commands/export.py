"""``perfmodel export``: write one priced plan as a torchrun program that measures it."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import click

from ..export import ExportPlan, check_exportable, export_plan, write_program
from ..export.plan import EXPORTABLE, NotExportableError, check_model_exportable, refusal, user_module
from ..hardware import profile_names
from ..network import get_model
from ..report import to_json
from ..strategies import Prediction, predict
from ..strategies.predict import default_batch_said
from ..strategies.spec import parse_strategy
from ..validation.measure import TORCH_MISSING
from .common import (
    check_writable,
    cudnn_option,
    emit,
    gpus_option,
    hardware_option,
    image_size_option,
    memory_format_option,
    model_input_options,
    optimizer_option,
    precision_option,
    report_format_option,
)

__all__ = ["export_cmd", "export_prediction", "export_best", "export_lines", "PROGRAM_SUFFIXES"]

#: What an exported program can be written as.
PROGRAM_SUFFIXES = (".py",)


def export_prediction(p: Prediction, hardware: str, output: Path, model: str = "") -> ExportPlan:
    """Write prediction ``p`` (priced on ``hardware``, a profile name or path) as a program;
    ``model`` as the user typed it (a ``file.py:Name`` model trains the user's own module)."""
    check_writable(output, PROGRAM_SUFFIXES)
    # a profile file is named by its absolute path: the row must find it from where it is read
    label = hardware if hardware in profile_names() else str(Path(hardware).resolve())
    module = user_module(model)
    check_model_exportable(model, get_model(model, p.image_size).input_shape if module else ())
    e = export_plan(p, label, module)
    write_program(e, output)
    return e


def export_best(plans: Sequence[Prediction], hardware: str, output: Path, model: str = "") -> str:
    """Write the fastest exportable plan of ``plans`` (ranked); the text says which, and why faster
    ones were passed over. Raises :class:`NotExportableError` naming the first plan's reason if none can be."""
    ok = [i for i, p in enumerate(plans) if not refusal(p.strategy)]
    if not ok:
        first = plans[0].strategy
        raise NotExportableError(
            f"export: none of the {len(plans)} ranked plan{'s' if len(plans) > 1 else ''} can be exported yet "
            f"(rank 1, {first.spec()}: {refusal(first)}); rank more with --top, or search exportable kinds "
            f"only (--strategies dp,pp; exportable: {EXPORTABLE})")
    skipped = [
        f"note: rank {i + 1} ({p.strategy.spec()}) not exported: {refusal(p.strategy)}"
        for i, p in enumerate(plans[: ok[0]])
    ]
    e = export_prediction(plans[ok[0]], hardware, output, model)
    return "\n\n" + "\n".join([*export_lines(e, output), *skipped])


def export_lines(e: ExportPlan, output: Path) -> list[str]:
    """What was written and how to run it, measure it and score it."""
    out = str(output)
    lines = [
        f"wrote {out}: {e.model} {e.strategy} on {e.gpus} x {e.hardware}, {e.precision}, "
        f"global batch {e.global_batch}; predicted {e.predicted_throughput:,.1f} samples/s "
        f"(step {e.predicted_step_time_s * 1e3:.2f} ms)",
        f"run:      torchrun --nproc-per-node {e.gpus} {out} --output measured.csv   "
        f"(on the CPU: add --device cpu --backend gloo)",
        "score:    perfmodel validate measured.csv",
        f"calibrate: perfmodel calibrate measured.csv --hardware {e.hardware} -o calibrated.toml",
    ]
    lines += [f"note: {n}" for n in e.notes]
    if importlib.util.find_spec("torch") is None:
        lines.append(f"note: running it needs torch, which this Python lacks ({TORCH_MISSING.split(': ')[-1]})")
    return lines


@click.command("export")
@click.argument("model")
@gpus_option
@click.option("--strategy", "-s", required=True,
              help="Plan spec: dp=N, pp=S, mb=M, schedule=gpipe|1f1b, recompute=true, balance=a:b, "
                   "comm=ring|tree (e.g. pp=2,dp=4,mb=8).")
@hardware_option
@precision_option
@click.option("--batch-per-gpu", "-b", type=int, default=None, help="Samples per GPU (global batch = this x GPUs).")
@click.option("--global-batch", "-B", type=int, default=None, help="Samples per step over all GPUs.")
@optimizer_option
@cudnn_option
@memory_format_option
@image_size_option
@model_input_options
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The program to write (.py); run it with torchrun.")
@report_format_option
def export_cmd(model: str, gpus: int, strategy: str, hardware: str, precision: str, batch_per_gpu: int | None,
               global_batch: int | None, optimizer: str, cudnn_major: int, memory_format: str,
               image_size: int | None, output: Path,
               fmt: str) -> None:
    """Write MODEL's plan as a PyTorch program (DDP, torch.distributed.pipelining) that trains it on
    synthetic data under torchrun, times it and writes the measured row for `perfmodel validate`.

    The program imports torch and perfmodel only; the stage split is the one the plan was priced
    with. Spatial, filter/channel, mp and parameter-server plans cannot be exported yet (exit 1).
    """
    check_writable(output, PROGRAM_SUFFIXES)
    check_exportable(parse_strategy(strategy, gpus))  # before pricing: say what is missing first
    check_model_exportable(model)
    p = predict(model, gpus, strategy, hardware, precision, batch_per_gpu, global_batch, optimizer, image_size,
                cudnn_major, memory_format)
    if batch_per_gpu is None and global_batch is None:  # the default, said in the command line's words
        p = default_batch_said(p, "-b or -B")
    e = export_prediction(p, hardware, output, model)
    if fmt == "json":
        emit(to_json({"output": str(output), "plan": e.to_dict(), "assumptions": p.assumptions}))
    else:
        # all the JSON's assumptions (profile and source, optimizer, exclusions...), as predict words them
        emit("\n".join([*export_lines(e, output), "assumptions:", *(f"  {k}: {v}" for k, v in p.assumptions.items())]))

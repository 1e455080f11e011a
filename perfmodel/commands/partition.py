"""``perfmodel partition``: split a network over K devices with a hypergraph partitioner."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import click
import pandas as pd

from ..hardware import Hardware, load_hardware
from ..limits import MAX_BATCH, MAX_SEED
from ..partition import (
    DEFAULT_EPSILON,
    DEFAULT_SEED,
    GRANULARITIES,
    PartitionReport,
    partition_report,
)
from ..partition.compare import SplitSummary
from ..report import render_frame, to_json
from ..strategies.wording import kernels_assumption, precision_assumption
from ..units import GB
from .common import (
    Choice,
    chart_option,
    check_writable,
    cudnn_option,
    emit,
    format_option,
    hardware_option,
    image_size_option,
    memory_format_option,
    model_input_options,
    precision_option,
)

__all__ = ["partition_cmd", "render_partition", "partition_rows", "profile_assumptions"]


@dataclass(frozen=True)
class _Row:
    """One split in SI units (None where it does not apply)."""

    split: str
    volume: float | None
    per_device: float | None
    max_device: float | None
    reduction_vs_dp: float | None
    imbalance: float | None
    slowest_part_s: float | None


def _rows(r: PartitionReport) -> list[_Row]:
    dp = r.data_parallel_volume_bytes

    def row(name: str, sp: SplitSummary | None) -> _Row:
        if sp is None:
            return _Row(name, None, None, None, None, None, None)
        return _Row(
            name,
            sp.comm_volume_bytes,
            sp.comm_volume_per_device_bytes,
            sp.max_device_sent_bytes,
            1.0 - sp.comm_volume_bytes / dp if dp > 0 else None,
            sp.imbalance,
            max(sp.part_loads_s),
        )

    per = r.data_parallel_per_device_bytes
    return [
        row("hypergraph", r.hypergraph),
        row("contiguous", r.contiguous),
        _Row("data_parallel", dp, per, per, 0.0, 0.0, None),
    ]


def partition_rows(r: PartitionReport) -> list[dict[str, object]]:
    """One row per split (hypergraph, contiguous, data parallel), in SI units, for CSV."""
    return [
        {
            "split": x.split,
            "comm_volume_bytes": x.volume,
            "comm_volume_per_device_bytes": x.per_device,
            "max_device_sent_bytes": x.max_device,
            "reduction_vs_data_parallel": x.reduction_vs_dp,
            "imbalance": x.imbalance,
            "slowest_part_s": x.slowest_part_s,
            "global_batch": r.global_batch,
            "parts": r.parts,
            "model": r.model,
            "granularity": r.granularity,
            "cudnn_major": r.cudnn_major,
            "memory_format": r.memory_format,
        }
        for x in _rows(r)
    ]


@contextlib.contextmanager
def _working(what: str) -> Iterator[None]:
    """``what`` on stderr while the block runs, erased after it, when stderr is a terminal (nothing
    otherwise: a redirected stderr gets errors only)."""
    shown = sys.stderr.isatty()
    if shown:
        sys.stderr.write(f"{what} ...")
        sys.stderr.flush()
    try:
        yield
    finally:
        if shown:
            sys.stderr.write("\r" + " " * (len(what) + 4) + "\r")
            sys.stderr.flush()


def _scaled(x: float | None, factor: float) -> float | None:
    return None if x is None else x * factor


def _versus_dp(r: PartitionReport) -> str:
    if r.data_parallel_volume_bytes <= 0:  # no parameters: data parallelism has nothing to allreduce
        sent = r.hypergraph.comm_volume_bytes
        if sent <= 0:
            return "neither the partition nor data parallelism sends anything"
        return f"data parallelism sends nothing ({r.model} has no parameters); the partition sends {sent / GB:,.3g} GB"
    red = r.reduction_vs_data_parallel
    how = f"{100 * red:.1f}% less" if red >= 0 else f"{-100 * red:.1f}% more"
    even = r.break_even_batch
    if not math.isfinite(even):  # nothing crosses the cut
        when = "less at every global batch"
    elif even < 1:  # the cut's activations at one sample already outweigh the gradients
        when = f"more at every global batch ({1 / even:,.1f}x at global batch 1)"
    else:
        when = f"the same at global batch {even:,.0f}"
    return f"the partition sends {how} than data parallelism's gradient allreduce; {when}"


def profile_assumptions(hw: Hardware, precision: str) -> dict[str, str]:
    """What the units' weights (predicted seconds) were priced on, as predict states it: the profile and
    its source, the precision's meaning on it, the kernels a layer is priced as."""
    return {"hardware": f"{hw.name}: {hw.description}",
            "hardware_source": hw.sources.get("profile", "") + (f" (file {hw.path})" if hw.path else ""),
            "precision": precision_assumption(hw, precision), "kernels": kernels_assumption()}


def render_partition(r: PartitionReport, profile: Mapping[str, str] | None = None) -> str:
    """The partition as text: headline, the splits compared, the parts, the definitions, the assumptions
    (then ``profile``'s, from :func:`profile_assumptions`)."""
    lines = [
        f"{r.model} split into {r.parts} parts at {r.granularity} granularity "
        f"({r.units} units, {r.nets} tensors), "
        f"{r.precision} on {r.hardware}, global batch {r.global_batch}",
        f"KaHyPar km1, epsilon {r.epsilon}, seed {r.seed}: "
        + (f"{r.partition_seconds * 1e3:.1f} ms" if r.partition_seconds > 0 else "cached")
        + f"; the parts' quotient graph {'is acyclic' if r.acyclic else 'has cycles'}",
        _versus_dp(r),
    ]
    if not r.balanced:
        lines.append(
            "warning: the balance bound is not met (heaviest part "
            f"{r.heaviest_part_over_bound:.2f} x the bound; heaviest unit "
            f"{r.heaviest_unit_over_bound:.2f} x): try --granularity channel or a larger --epsilon"
        )
    lines.append("")
    table = pd.DataFrame(
        [
            {
                "split": x.split,
                "volume_GB": _scaled(x.volume, 1 / GB),
                "per_device_GB": _scaled(x.per_device, 1 / GB),
                "max_device_GB": _scaled(x.max_device, 1 / GB),
                "reduction_vs_dp_%": _scaled(x.reduction_vs_dp, 100.0),
                "imbalance_%": _scaled(x.imbalance, 100.0),
                "slowest_part_ms": _scaled(x.slowest_part_s, 1e3),
            }
            for x in _rows(r)
        ]
    )
    lines.append(render_frame(table, floatfmt="{:,.3f}"))
    if r.contiguous is None:
        lines.append(f"(no contiguous split: the chain has fewer than {r.parts} links)")
    lines.append("")
    counts = [0] * r.parts
    for p in r.assignment.values():
        counts[p] += 1
    c = r.contiguous
    parts = pd.DataFrame(
        [
            {
                "part": i,
                "units": counts[i],
                "params": int(round(r.hypergraph.part_params[i])),
                "load_ms": r.hypergraph.part_loads_s[i] * 1e3,
                "contiguous_load_ms": None if c is None else c.part_loads_s[i] * 1e3,
            }
            for i in range(r.parts)
        ]
    )
    lines.append(render_frame(parts))
    lines.append("")
    lines.append("definitions:")
    lines += [f"  {k}: {v}" for k, v in r.notes.items()]
    lines.append("  assignment: every unit's part is in the JSON output (--format json)")
    lines.append("assumptions:")
    lines += [f"  {k}: {v}" for k, v in {**r.assumptions, **(profile or {})}.items()]
    return "\n".join(lines)


@click.command("partition")
@click.argument("model")
@click.option(
    "--parts",
    "-k",
    type=int,
    required=True,
    help="Number of devices K to split the network over (>= 2).",
)
@click.option(
    "--granularity",
    type=Choice(GRANULARITIES),
    default="layer",
    show_default=True,
    help="layer: one unit per layer; channel: convolution/linear layers cut into groups of "
    "output channels (2 per part), so a layer can be split.",
)
@click.option(
    "--epsilon",
    type=float,
    default=DEFAULT_EPSILON,
    show_default=True,
    help="Allowed imbalance: max part weight <= (1 + epsilon) x ceil(total / K).",
)
@click.option(
    "--global-batch",
    "-B",
    type=click.IntRange(min=1, max=MAX_BATCH),
    default=256,
    show_default=True,
    help="Samples per training step: scales the activation volume (not the gradients).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=MAX_SEED),
    default=DEFAULT_SEED,
    show_default=True,
    help="KaHyPar's random seed (a C int).",
)
@hardware_option
@precision_option
@cudnn_option
@memory_format_option
@image_size_option
@model_input_options
@format_option
@chart_option
def partition_cmd(
    model: str,
    parts: int,
    granularity: str,
    epsilon: float,
    global_batch: int,
    seed: int,
    hardware: str,
    precision: str,
    cudnn_major: int,
    memory_format: str,
    image_size: int | None,
    fmt: str,
    chart: Path | None,
) -> None:
    """Split MODEL over K devices by partitioning its computation hypergraph with KaHyPar.

    Compares the communication volume and load imbalance with the best contiguous
    (pipeline) split and with data parallelism's gradient allreduce on K devices.
    """
    check_writable(chart)
    with _working(f"partitioning {model} into {parts} parts at {granularity} granularity with KaHyPar "
                  f"(a channel-level hypergraph of a large network takes tens of seconds)"):
        r = partition_report(
            model, parts, granularity, epsilon, global_batch, hardware, precision, image_size, seed, cudnn_major,
            memory_format,
        )
    if chart is not None:
        from ..report.charts import save_chart
        from ..report.charts_partition import partition_chart

        save_chart(partition_chart(r), chart)
    profile = profile_assumptions(load_hardware(hardware), precision)
    if fmt == "json":
        d = r.to_dict()
        emit(to_json({**d, "assumptions": {**profile, **d["assumptions"]}}))
    elif fmt == "csv":
        emit(render_frame(pd.DataFrame(partition_rows(r)), "csv"))
    else:
        emit(render_partition(r, profile))

"""The measured row of an exported run, in the format ``perfmodel validate`` reads, written atomically."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..validation.measure_result import framework_text
from .plan import ExportPlan

__all__ = ["RunResult", "measurement_row", "append_rows", "SOURCE"]

#: The ``source`` column of every exported run: rows of one export share a speedup group.
SOURCE = "perfmodel export"


@dataclass(frozen=True)
class RunResult:
    """What one run of an exported program measured (step seconds: per step, the slowest rank)."""

    device: str
    device_name: str
    backend: str
    torch_version: str
    date: str
    warmup: int
    step_times_s: tuple[float, ...]
    losses: tuple[float, ...]
    peak_memory_per_gpu_bytes: float | None
    #: the cuDNN torch loaded ("8.9.2"; empty on the CPU or without one): validate prices the
    #: row's grouped convolutions with its major (perfmodel/validation/software_era.py)
    cudnn_version: str = ""

    @property
    def step_time_s(self) -> float:
        """The median step."""
        ts = sorted(self.step_times_s)
        n = len(ts)
        return ts[n // 2] if n % 2 else 0.5 * (ts[n // 2 - 1] + ts[n // 2])


def measurement_row(plan: ExportPlan, r: RunResult) -> dict[str, object]:
    """One row: the plan as priced, the measured throughput over all processes, and how it ran.

    ``hardware`` is the profile the plan was priced on. ``device`` says where it really ran:
    ``perfmodel validate`` shows a ``cpu`` row with its prediction but does not score it
    (a CPU is not the GPU the profile describes).
    """
    per_replica_only = plan.kind == "data"
    throughput = plan.global_batch / r.step_time_s
    where = f"{r.device_name} ({r.device}, {r.backend})"
    notes = [f"ran on {where}, {r.date}; median of {len(r.step_times_s)} steps after {r.warmup} warm-up"]
    if r.device == "cpu":
        notes.append(f"CPU run: not a measurement of {plan.hardware}")
    notes += list(plan.notes)
    return {
        "model": plan.model,
        "hardware": plan.hardware,
        "gpus": plan.gpus,
        "precision": plan.precision,
        "batch_per_gpu": plan.global_batch // plan.gpus if per_replica_only else "",
        "global_batch": "" if per_replica_only else plan.global_batch,
        "strategy": plan.strategy,
        "measured_throughput": throughput,
        "image_size": plan.image_size,
        "optimizer": plan.optimizer,
        "memory_format": plan.memory_format,
        # the cuDNN and the layout, which validate prices the row with (software_era.py, rule 1 of each)
        "framework": framework_text(r.torch_version, r.cudnn_version, plan.memory_format),
        "source": SOURCE,
        "notes": "; ".join(notes),
        "device": r.device,
        "device_name": r.device_name,
        "backend": r.backend,
        "step_time_s": r.step_time_s,
        "steps": len(r.step_times_s),
        "peak_memory_per_gpu_bytes": "" if r.peak_memory_per_gpu_bytes is None else r.peak_memory_per_gpu_bytes,
        "predicted_throughput": plan.predicted_throughput,
        "predicted_step_time_s": plan.predicted_step_time_s,
        "predicted_memory_per_gpu_bytes": plan.predicted_memory_per_gpu_bytes,
        "first_loss": r.losses[0] if r.losses else "",
        "last_loss": r.losses[-1] if r.losses else "",
    }


def append_rows(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    """Add ``rows`` to the CSV at ``path`` (created if missing; columns are the union, in first-seen
    order), replacing the file in one rename so a reader never sees half a file."""
    old: list[dict[str, str]] = []
    header: list[str] = []
    if path.exists():
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            old = list(reader)
    for r in rows:
        header += [k for k in r if k not in header]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(old)
    w.writerows(rows)
    parent = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(buf.getvalue())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

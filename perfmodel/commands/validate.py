"""``perfmodel validate``: predicted against measured throughput and speedup, MAPE summaries."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import click
import pandas as pd

from ..errors import DataError, UsageError
from ..report import render_frame, to_json
from ..validation import CALIBRATION_MODES, Validation, load_measurements, validate
from ..validation.compare import DEFINITIONS, RowResult
from .common import Choice, chart_option, check_writable, format_option

__all__ = ["validate_cmd", "render_validation", "render_summary", "rows_frame", "groups_frame"]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def rows_frame(v: Validation, rows: Sequence[RowResult] | None = None) -> pd.DataFrame:
    """One line per input row (``rows``: a slice of ``v.rows``), in input order, units in the headers."""
    return _numeric(pd.DataFrame(_records(v, v.rows if rows is None else rows)))


def _records(v: Validation, rows: Sequence[RowResult]) -> list[dict[str, object]]:
    """The rows table as dicts (what :func:`rows_frame` holds, without pandas)."""
    many = len(v.files) > 1
    recs = []
    for r in rows:
        m = r.measurement
        rec: dict[str, object] = {}
        if many:
            rec["file"] = Path(m.file).name
        rec.update(
            {
                "row": m.row,
                "model": m.model,
                "hardware": m.hardware,
                "gpus": m.gpus,
                "precision": m.precision,
                "batch": m.batch_key,
                "strategy": m.strategy_text,
                "measured_samples/s": m.measured_throughput,
                "predicted_samples/s": r.predicted_throughput,
                "error_%": r.error_pct,
                "measured_speedup_x": r.measured_speedup,
                "predicted_speedup_x": r.predicted_speedup,
                "speedup_error_%": r.speedup_error_pct,
                "role": r.role,
                "reason": r.reason,
            }
        )
        recs.append(rec)
    return recs


def _numeric(df: pd.DataFrame) -> pd.DataFrame:
    """Columns whose header carries a unit are numbers (None becomes NaN, printed as '-')."""
    for c in df.columns:
        if c.endswith(("_%", "_x", "samples/s")):
            df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    return df


def groups_frame(v: Validation) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": g.model,
                "hardware": g.hardware,
                "strategy_kind": g.strategy_kind,
                "rows": g.rows,
                "scored": g.scored,
                "throughput_MAPE_%": g.throughput_mape_pct,
                "speedup_MAPE_%": g.speedup_mape_pct,
                "speedup_runs": g.speedup_pairs,
                "max_|error|_%": g.max_abs_error_pct,
            }
            for g in v.summary.groups
        ]
    )


def render_validation(v: Validation) -> str:
    """Rows, the summary, per-group figures and what calibration fitted, as text."""
    return "\n".join([*_table_chunks(v), render_summary(v)])


def _table_chunks(v: Validation) -> Iterator[str]:
    """The rows table, :data:`CHUNK_ROWS` rows at a time (each chunk aligned on its own)."""
    for i in range(0, max(len(v.rows), 1), CHUNK_ROWS):
        yield render_frame(_records(v, v.rows[i : i + CHUNK_ROWS]))


def render_summary(v: Validation) -> str:
    """The summary, per-group figures and what calibration fitted, as text."""
    s = v.summary
    mode = {
        "none": "none (profile values as shipped)",
        "single-gpu": "single-gpu (compute fitted per profile and precision on all networks' 1-GPU rows; "
        "multi-GPU rows scored)",
        "single-gpu-per-group": "single-gpu-per-group (each network's compute scaled to its own 1-GPU "
        "rows, communication not; multi-GPU rows scored)",
    }[s.mode]
    lines = ["", f"calibration: {mode}"]
    if v.calibration is not None:
        lines += [
            f"  fitted {line}" if not line.startswith("not fitted") else f"  {line}" for line in v.calibration.lines()
        ]
    lines += [
        "",
        f"rows {s.rows}: predicted {s.predicted}, without prediction {s.unpredictable}, scored {s.scored}"
        + (f", repeats {s.repeats} (equal to an earlier row in every column: not scored)" if s.repeats else ""),
        f"throughput MAPE {_pct(s.throughput_mape_pct)} over {s.scored} scored rows "
        f"(multi-GPU rows only: {_pct(s.throughput_mape_multi_gpu_pct)})",
    ]
    if s.fit_mape_pct is not None:
        lines.append(f"in-sample error of the fitted 1-GPU rows: {_pct(s.fit_mape_pct)} MAPE")
    lines += [
        f"speedup MAPE {_pct(s.speedup_mape_pct)} over {s.speedup_pairs} multi-GPU rows "
        "(against the 1-GPU row of the same model, hardware, precision, batch, framework, source)",
        f"max |error| {_pct(s.max_abs_error_pct)} ({s.worst_row or '-'})",
        f"cudnn: {DEFINITIONS['cudnn']}",
        f"memory format: {DEFINITIONS['memory_format']}",
        f"step: {DEFINITIONS['step']}",
        "",
        "per group (model, hardware, strategy kind):",
        render_frame(groups_frame(v)),
    ]
    return "\n".join(lines)


@click.command("validate")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))  # folders: refused by the reader (exit 1)
@click.option(
    "--calibrate",
    "calibrate",
    type=Choice(CALIBRATION_MODES),
    default="none",
    show_default=True,
    help="none: profiles as shipped. single-gpu: fit compute efficiencies per profile and "
    "precision on the 1-GPU rows of all networks (pooled), then score the multi-GPU rows (which "
    "the fit never sees). single-gpu-per-group: scale each network's compute seconds to its own "
    "1-GPU rows (per model, hardware, precision, framework, source and batch), then score its "
    "multi-GPU rows.",
)
@click.option("--kernels", is_flag=True, help="Score the compute model against the shipped per-kernel "
              "(DeepBench, NeuSight) and per-layer (PipeDream) measurements instead: MAPE per source, "
              "GPU and op kind, before (per-layer roofline) and after (kernel model); see "
              "perfmodel/data/KERNELS.md.")
@format_option
@chart_option
def validate_cmd(files: tuple[Path, ...], calibrate: str, kernels: bool, fmt: str, chart: Path | None) -> None:
    """Compare predictions with measured runs in FILES (CSV; default: the shipped published runs).

    \b
    Columns: model, hardware, gpus, precision, batch_per_gpu, global_batch, strategy,
    measured_throughput (samples/s over all GPUs); optional image_size, optimizer,
    framework, source. Prints measured, predicted and error % per row, then MAPE of
    throughput and of speedup overall and per (model, hardware, strategy kind).
    """
    check_writable(chart)
    seen: dict[Path, Path] = {}
    for f in files:  # the same runs twice would count twice in every MAPE and group
        if f.resolve() in seen:
            raise UsageError(f"validate: '{f}' is given twice (as '{seen[f.resolve()]}' too): give each file once")
        seen[f.resolve()] = f
    if kernels:
        from .validate_kernels import emit_kernel_scores

        emit_kernel_scores(files, calibrate, fmt, chart)
        return
    v = validate(load_measurements(list(files)), calibrate)
    if v.summary.predicted == 0:
        reasons = sorted({r.reason for r in v.rows if r.reason})
        raise DataError(
            f"validate: 0 of {v.summary.rows} row(s) could be predicted, nothing to compare "
            f"({'; '.join(shown_reason(x) for x in reasons[:3])})"
        )
    if chart is not None:
        from ..report.charts import save_chart
        from ..report.charts_validation import validation_chart

        save_chart(validation_chart(v), chart)
    # streamed: a million rows are written as they are formatted, never held as one string
    chunks = {"json": _json_chunks, "csv": _csv_chunks}.get(fmt, _text_chunks)
    for text in chunks(v):
        click.echo(text, nl=False)


#: Rows formatted per piece of streamed output (and per aligned block of the table).
CHUNK_ROWS = 10_000


def shown_reason(reason: str) -> str:
    """A row's reason cut to one short clause for the error line."""
    return reason if len(reason) <= 160 else reason[:156] + "..."


def _text_chunks(v: Validation) -> Iterator[str]:
    for chunk in _table_chunks(v):
        yield chunk + "\n"
    yield render_summary(v) + "\n"


def _json_chunks(v: Validation) -> Iterator[str]:
    """``{"rows": [...], "summary": {...}}`` with one row per line (json's C encoder)."""
    yield '{\n"rows": ['
    for i in range(0, len(v.rows), CHUNK_ROWS):
        part = ",\n".join(json.dumps(_finite(r.to_dict()), allow_nan=False) for r in v.rows[i : i + CHUNK_ROWS])
        yield ("\n" if i == 0 else ",\n") + part
    summary = v.to_dict(rows=False)["summary"]
    yield f"],\n\"summary\": {to_json(summary)}\n}}\n"


def _finite(row: dict[str, object]) -> dict[str, object]:
    """Non-finite numbers as None (the output never carries NaN or inf)."""
    return {k: None if isinstance(x, float) and not math.isfinite(x) else x for k, x in row.items()}


def _csv_chunks(v: Validation) -> Iterator[str]:
    columns: list[str] = []
    first_of_file: dict[str, RowResult] = {}
    for r in v.rows:
        first_of_file.setdefault(r.measurement.file, r)
    for r in first_of_file.values():
        columns += [c for c in r.to_dict() if c not in columns]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for i, r in enumerate(v.rows, 1):
        d = _finite(r.to_dict())
        w.writerow(["" if (x := d.get(c)) is None else x for c in columns])
        if i % CHUNK_ROWS == 0:
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue()

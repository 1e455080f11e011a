"""Measurement files: CSV rows of measured training throughput, read and checked strictly."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import MeasurementError, PerfmodelError, closest_names
from ..hardware import PRECISIONS, Hardware, load_hardware, profile_names
from ..network import model_names
from ..strategies.spec import Strategy, parse_strategy

__all__ = [
    "REQUIRED_COLUMNS",
    "OPTIONAL_COLUMNS",
    "Measurement",
    "MeasurementSet",
    "load_measurements",
    "parse_measurements",
    "shipped_path",
    "holdout_path",
    "resolve_hardware",
    "rows_by",
]

#: Columns every measurement file must have (an empty cell is allowed only in one batch column).
REQUIRED_COLUMNS = (
    "model",
    "hardware",
    "gpus",
    "precision",
    "batch_per_gpu",
    "global_batch",
    "strategy",
    "measured_throughput",
)
#: Columns read when present; any other column is kept (and shown) but not interpreted.
OPTIONAL_COLUMNS = ("image_size", "optimizer", "framework", "source", "notes")
_OPTIMIZERS = ("sgd", "sgd-plain", "adam")

#: Builds the error for (column, message) of one row.
_Fail = Callable[[str, str], MeasurementError]


@dataclass(frozen=True)
class Measurement:
    """One measured run: what ran, on what, and its throughput in samples/s over all GPUs.

    ``batch_per_gpu`` and ``global_batch`` are both ``None`` only for a published run whose
    source does not state its batch; such a row is kept but cannot be predicted.
    """

    file: str
    row: int
    model: str
    hardware: str
    gpus: int
    precision: str
    batch_per_gpu: int | None
    global_batch: int | None
    strategy: Strategy
    strategy_text: str
    measured_throughput: float
    image_size: int | None = None
    optimizer: str = "sgd"
    framework: str = ""
    source: str = ""
    columns: Mapping[str, str] = field(default_factory=dict)

    @property
    def has_batch(self) -> bool:
        return self.batch_per_gpu is not None or self.global_batch is not None

    @property
    def batch_key(self) -> str:
        """The batch as it was given: ``b=N`` per GPU or ``B=N`` global (``?`` when unknown)."""
        if self.batch_per_gpu is not None:
            return f"b={self.batch_per_gpu}"
        if self.global_batch is not None:
            return f"B={self.global_batch}"
        return "?"

    @property
    def strategy_kind(self) -> str:
        return self.strategy.kind

    def where(self, column: str = "") -> str:
        """``file: row N`` (and the column) for messages."""
        return f"{self.file}: row {self.row}" + (f", column '{column}'" if column else "")


@dataclass(frozen=True)
class MeasurementSet:
    """Rows of one or more measurement files, in input order, with the union of their columns."""

    files: tuple[str, ...]
    rows: tuple[Measurement, ...]
    columns: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.rows)


def shipped_path() -> Path:
    """The shipped validation set (published runs with their sources)."""
    return Path(str(resources.files("perfmodel.data").joinpath("published_runs.csv")))


def holdout_path() -> Path:
    """Published runs kept apart from the shipped set: other frameworks, models and GPU counts."""
    return Path(str(resources.files("perfmodel.data").joinpath("holdout_runs.csv")))


def load_measurements(paths: Iterable[str | Path] | None = None) -> MeasurementSet:
    """Read and check measurement CSV files (the shipped set when ``paths`` is empty or None)."""
    files = [Path(p) for p in paths] if paths else [shipped_path()]
    rows: list[Measurement] = []
    columns: list[str] = []
    for f in files:
        text = _read_text(f)
        one = parse_measurements(text, str(f), base=f.parent)
        rows.extend(one.rows)
        columns.extend(c for c in one.columns if c not in columns)
    return MeasurementSet(tuple(str(f) for f in files), tuple(rows), tuple(columns))


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise MeasurementError(f"{path}: is a folder, expected a CSV measurement file") from None
    except OSError as e:
        raise MeasurementError(
            f"{path}: cannot read measurement file ({e.strerror or e})"
        ) from None
    if not raw.strip():
        raise MeasurementError(
            f"{path}: empty file; expected a CSV header with columns {', '.join(REQUIRED_COLUMNS)}"
        )
    if b"\x00" in raw:
        raise MeasurementError(f"{path}: not a text CSV file (contains NUL bytes)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise MeasurementError(
            f"{path}: not a text CSV file (byte {e.start} is not UTF-8)"
        ) from None


def parse_measurements(text: str, file: str = "<text>", base: Path | None = None) -> MeasurementSet:
    """Parse CSV ``text``; every error names ``file``, the row (1 = first data row) and column."""
    try:
        reader = csv.reader(io.StringIO(text, newline=""))
        table = [r for r in reader]
    except csv.Error as e:
        raise MeasurementError(f"{file}: not valid CSV ({e})") from None
    lines = [r for r in table if any(c.strip() for c in r)]
    if not lines:
        raise MeasurementError(f"{file}: no CSV header found")
    header = [c.strip() for c in lines[0]]
    if any(not c for c in header):
        raise MeasurementError(
            f"{file}: header has an empty column name (column {header.index('') + 1})"
        )
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise MeasurementError(f"{file}: header names column '{dup[0]}' twice")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        close = closest_names(missing[0], [c for c in header if c not in REQUIRED_COLUMNS])
        hint = f" (is '{close[0]}' meant to be '{missing[0]}'?)" if close else ""
        raise MeasurementError(
            f"{file}: missing required column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(m) for m in missing)}{hint}; a measurement file needs "
            f"{', '.join(REQUIRED_COLUMNS)}"
        )
    if len(lines) == 1:
        raise MeasurementError(f"{file}: header only, no measurement rows")
    rows: list[Measurement] = []
    hw_cache: dict[str, str] = {}
    for i, cells in enumerate(lines[1:], start=1):
        if len(cells) > len(header):
            raise MeasurementError(
                f"{file}: row {i}: {len(cells)} cells but the header has {len(header)} columns"
            )
        values = {h: (cells[j].strip() if j < len(cells) else "") for j, h in enumerate(header)}
        rows.append(_row(values, file, i, base, hw_cache))
    return MeasurementSet((file,), tuple(rows), tuple(header))


def _row(
    v: Mapping[str, str], file: str, row: int, base: Path | None, hw_cache: dict[str, str]
) -> Measurement:
    def fail(column: str, message: str) -> MeasurementError:
        return MeasurementError(f"{file}: row {row}, column '{column}': {message}")

    model = v["model"]
    models = model_names()
    if model not in models:
        close = closest_names(model, models)
        hint = f"did you mean {', '.join(close)}?" if close else "see `perfmodel models`"
        raise fail("model", f"unknown model '{model}'; {hint}")
    hardware = _hardware(v["hardware"], base, hw_cache, fail)
    gpus = _int(v["gpus"], "gpus", fail, required=True)
    assert gpus is not None
    precision = v["precision"].lower()
    if precision not in PRECISIONS:
        raise fail("precision", f"'{v['precision']}' is not one of {', '.join(PRECISIONS)}")
    bpg = _int(v["batch_per_gpu"], "batch_per_gpu", fail)
    gb = _int(v["global_batch"], "global_batch", fail)
    if bpg is not None and gb is not None:
        raise fail("global_batch", "give exactly one of batch_per_gpu and global_batch, not both")
    text = v["strategy"]
    if not text:
        raise fail("strategy", "empty; give a plan spec such as dp=8 or pp=4,mb=8")
    try:
        strategy = parse_strategy(text, gpus)
    except PerfmodelError as e:
        raise fail("strategy", str(e)) from None
    thr = _float(v["measured_throughput"], "measured_throughput", fail)
    image_size = _int(v.get("image_size", ""), "image_size", fail)
    optimizer = (v.get("optimizer", "") or "sgd").lower()
    if optimizer not in _OPTIMIZERS:
        raise fail("optimizer", f"'{optimizer}' is not one of {', '.join(_OPTIMIZERS)}")
    return Measurement(
        file=file,
        row=row,
        model=model,
        hardware=hardware,
        gpus=gpus,
        precision=precision,
        batch_per_gpu=bpg,
        global_batch=gb,
        strategy=strategy,
        strategy_text=text,
        measured_throughput=thr,
        image_size=image_size,
        optimizer=optimizer,
        framework=v.get("framework", ""),
        source=v.get("source", ""),
        columns=dict(v),
    )


def _hardware(name: str, base: Path | None, cache: dict[str, str], fail: _Fail) -> str:
    """A shipped profile name, or a TOML path (relative to the file's folder, else the cwd)."""
    if not name:
        raise fail(
            "hardware", "empty; give a profile name (see `perfmodel hardware`) or a .toml path"
        )
    if name in cache:
        return cache[name]
    shipped = profile_names()
    if name in shipped:
        cache[name] = name
        return name
    if name.endswith(".toml") or "/" in name:
        candidates = [base / name] if base is not None else []
        candidates.append(Path(name))
        for c in candidates:
            if c.is_file():
                try:
                    load_hardware(str(c))
                except PerfmodelError as e:
                    raise fail("hardware", f"profile '{name}' does not load: {e}") from None
                cache[name] = str(c)
                return str(c)
        raise fail("hardware", f"profile file '{name}' not found")
    close = closest_names(name, shipped)
    hint = f"did you mean {', '.join(close)}?" if close else f"valid: {', '.join(shipped)}"
    raise fail("hardware", f"unknown hardware '{name}'; {hint}")


def _number(text: str, column: str, fail: _Fail) -> float:
    try:
        x = float(text.replace("_", ""))
    except ValueError:
        raise fail(column, f"'{text}' is not a number") from None
    if not math.isfinite(x):
        raise fail(column, f"'{text}' is not a finite number")
    return x


def _int(text: str, column: str, fail: _Fail, required: bool = False) -> int | None:
    """A positive integer (``256`` or ``256.0``); empty gives None unless ``required``."""
    if not text:
        if required:
            raise fail(column, "empty; expected a positive integer")
        return None
    x = _number(text, column, fail)
    if x != int(x) or x < 1:
        raise fail(column, f"'{text}' is not a positive integer")
    return int(x)


def _float(text: str, column: str, fail: _Fail) -> float:
    if not text:
        raise fail(column, "empty; expected a positive number (samples/s over all GPUs)")
    x = _number(text, column, fail)
    if x <= 0:
        raise fail(column, f"'{text}' must be > 0 (samples/s over all GPUs)")
    return x


def resolve_hardware(m: Measurement, overrides: Mapping[str, Hardware] | None = None) -> Hardware:
    """The profile a row names (or its override, e.g. a calibrated copy)."""
    if overrides and m.hardware in overrides:
        return overrides[m.hardware]
    return load_hardware(m.hardware)


def rows_by(rows: Sequence[Measurement], *keys: str) -> dict[tuple[object, ...], list[Measurement]]:
    """Rows grouped by attribute values, groups in first-seen order."""
    out: dict[tuple[object, ...], list[Measurement]] = {}
    for r in rows:
        out.setdefault(tuple(getattr(r, k) for k in keys), []).append(r)
    return out

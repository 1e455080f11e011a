"""Measurement files: CSV rows of measured training throughput, read and checked strictly."""

from __future__ import annotations

import csv
import io
import math
import sys
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import MeasurementError, PerfmodelError, closest_names, suggestion
from ..hardware import PRECISIONS, Hardware, load_hardware, profile_names
from ..io import MAX_CSV_BYTES, open_bounded_text
from ..limits import MAX_BATCH, MAX_GPUS, MAX_IMAGE_SIZE, shown
from ..network import model_names
from ..network.importers import is_import_spec
from ..strategies.spec import Strategy, parse_strategy
from .step_scope import FULL_STEP, STEP_SCOPES, step_scope

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
OPTIONAL_COLUMNS = ("image_size", "optimizer", "framework", "source", "notes", "step")
_OPTIMIZERS = ("sgd", "sgd-plain", "adam")

#: Builds the error for (column, message) of one row.
_Fail = Callable[[str, str], MeasurementError]


@dataclass(frozen=True, slots=True)
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
    #: what the measured time covers (:mod:`.step_scope`): ``full`` or ``forward-backward``
    step: str = FULL_STEP
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
    """Read and check measurement CSV files (the shipped set when ``paths`` is empty or None).

    Each file must be a regular file of at most :data:`~perfmodel.io.MAX_CSV_BYTES`; it is
    read line by line (a million rows take seconds, not the whole file in memory twice).
    """
    files = [Path(p) for p in paths] if paths else [shipped_path()]
    rows: list[Measurement] = []
    columns: list[str] = []
    for f in files:
        with open_bounded_text(f, MAX_CSV_BYTES, "measurement file", MeasurementError) as lines:
            one = _parse(_checked_lines(lines, f), str(f), f.parent)
        rows.extend(one.rows)
        columns.extend(c for c in one.columns if c not in columns)
    return MeasurementSet(tuple(str(f) for f in files), tuple(rows), tuple(columns))


def _checked_lines(lines: Iterable[str], path: Path) -> Iterator[str]:
    """The file's lines; NUL bytes or bytes that are not UTF-8 are a :class:`MeasurementError`."""
    try:
        for line in lines:
            if "\x00" in line:
                raise MeasurementError(f"{path}: not a text CSV file (contains NUL bytes)")
            yield line
    except UnicodeDecodeError as e:
        raise MeasurementError(f"{path}: not a text CSV file (byte {e.start} of a block is not UTF-8)") from None


def parse_measurements(text: str, file: str = "<text>", base: Path | None = None) -> MeasurementSet:
    """Parse CSV ``text``; every error names ``file``, the row (1 = first data row) and column."""
    return _parse(io.StringIO(text.removeprefix("\ufeff"), newline=""), file, base)


class _Cells(Mapping[str, str]):
    """One row's cells by column name (the header is shared by every row of a file)."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: Mapping[str, int], values: tuple[str, ...]) -> None:
        self._index, self._values = index, values

    def __getitem__(self, key: str) -> str:
        return self._values[self._index[key]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def items(self) -> ItemsView[str, str]:
        return _Items(self)


class _Items(ItemsView[str, str]):
    """Pairs of a row's cells, zipped in C (``dict(cells.items())`` is fast for a million rows)."""

    def __iter__(self) -> Iterator[tuple[str, str]]:
        cells = self._mapping  # type: ignore[attr-defined]
        assert isinstance(cells, _Cells)
        return zip(cells._index, cells._values, strict=True)


def _parse(lines: Iterable[str], file: str, base: Path | None) -> MeasurementSet:
    """Rows of CSV ``lines`` (blank lines skipped); see :func:`parse_measurements`."""
    reader = csv.reader(lines)
    try:
        header = _header(reader, file)
        parser = _RowParser(file, base, header)
        rows = [parser.row(cells) for cells in reader if any(c.strip() for c in cells)]
    except csv.Error as e:
        raise MeasurementError(f"{file}: not valid CSV ({str(e)[:200]})") from None
    if not rows:
        raise MeasurementError(f"{file}: header only, no measurement rows")
    return MeasurementSet((file,), tuple(rows), tuple(header))


def _header(reader: Iterator[list[str]], file: str) -> list[str]:
    """The first non-blank line as checked column names."""
    first = next((r for r in reader if any(c.strip() for c in r)), None)
    if first is None:
        raise MeasurementError(
            f"{file}: empty file; expected a CSV header with columns {', '.join(REQUIRED_COLUMNS)}"
        )
    header = [c.strip() for c in first]
    if any(not c for c in header):
        raise MeasurementError(
            f"{file}: header has an empty column name (column {header.index('') + 1})"
        )
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise MeasurementError(f"{file}: header names column {shown(dup[0], 60)} twice")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        close = closest_names(missing[0], [c for c in header if c not in REQUIRED_COLUMNS])
        hint = f" (is '{close[0]}' meant to be '{missing[0]}'?)" if close else ""
        raise MeasurementError(
            f"{file}: missing required column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(m) for m in missing)}{hint}; a measurement file needs "
            f"{', '.join(REQUIRED_COLUMNS)}"
        )
    return header


class _RowParser:
    """Checks rows of one file; what a row's cells mean (all but the throughput) is parsed once
    per distinct combination, so a file that repeats runs is read at the speed of the CSV."""

    def __init__(self, file: str, base: Path | None, header: list[str]) -> None:
        self.file, self.base, self.header = file, base, header
        self.index = {h: j for j, h in enumerate(header)}
        self.meaning = [self.index.get(c) for c in _MEANING]
        self.thr = self.index["measured_throughput"]
        self.framework, self.source = self.index.get("framework"), self.index.get("source")
        self.models = set(model_names())
        self.hw_cache: dict[str, str] = {}
        self.done: dict[tuple[str, ...], dict[str, Any]] = {}
        self.count = 0

    def row(self, cells: list[str]) -> Measurement:
        """The next non-blank row's cells as a checked :class:`Measurement`."""
        self.count += 1
        i, n = self.count, len(self.header)
        if len(cells) > n:
            raise MeasurementError(f"{self.file}: row {i}: {len(cells)} cells but the header has {n} columns")
        # one string object per distinct cell value (a million rows share a few hundred)
        values = tuple(map(sys.intern, map(str.strip, cells)))
        if len(values) < n:
            values += ("",) * (n - len(values))

        def fail(column: str, message: str) -> MeasurementError:
            return MeasurementError(f"{self.file}: row {i}, column '{column}': {message}")

        key = tuple([values[j] if j is not None else "" for j in self.meaning])
        v = _Cells(self.index, values)
        fields = self.done.get(key)
        if fields is None:
            fields = _fields(v, self, fail)
            if len(self.done) < 100_000:
                self.done[key] = fields
        thr = _float(values[self.thr], "measured_throughput", fail)
        return Measurement(file=self.file, row=i, measured_throughput=thr,
                           framework=values[self.framework] if self.framework is not None else "",
                           source=values[self.source] if self.source is not None else "",
                           columns=v, **fields)


#: The columns that say what ran (everything but the measured throughput and free text).
_MEANING = ("model", "hardware", "gpus", "precision", "batch_per_gpu", "global_batch", "strategy",
            "image_size", "optimizer", "step")


def _fields(v: Mapping[str, str], p: _RowParser, fail: _Fail) -> dict[str, Any]:
    """The checked meaning of a row's cells (every column but the throughput and free text)."""
    model = v["model"]
    if model not in p.models and not is_import_spec(model):  # a file or ONNX model is read when priced
        hint = suggestion(model, sorted(p.models), "see `perfmodel models`")
        raise fail("model", f"unknown model {shown(model, 60)}; {hint}")
    hardware = _hardware(v["hardware"], p.base, p.hw_cache, fail)
    gpus = _int(v["gpus"], "gpus", fail, required=True, maximum=MAX_GPUS)
    assert gpus is not None
    precision = v["precision"].lower()
    if precision not in PRECISIONS:
        raise fail("precision", f"{shown(v['precision'], 40)} is not one of {', '.join(PRECISIONS)}")
    bpg = _int(v["batch_per_gpu"], "batch_per_gpu", fail, maximum=MAX_BATCH)
    gb = _int(v["global_batch"], "global_batch", fail, maximum=MAX_BATCH)
    if bpg is not None and gb is not None:
        raise fail("global_batch", "give exactly one of batch_per_gpu and global_batch, not both")
    text = v["strategy"]
    if not text:
        raise fail("strategy", "empty; give a plan spec such as dp=8 or pp=4,mb=8")
    try:
        strategy = parse_strategy(text, gpus)
    except PerfmodelError as e:
        raise fail("strategy", str(e)) from None
    image_size = _int(v.get("image_size", ""), "image_size", fail, maximum=MAX_IMAGE_SIZE)
    optimizer = (v.get("optimizer", "") or "sgd").lower()
    if optimizer not in _OPTIMIZERS:
        raise fail("optimizer", f"{shown(optimizer, 40)} is not one of {', '.join(_OPTIMIZERS)}")
    step = step_scope(v.get("step", ""))
    if step is None:
        hint = suggestion(v["step"].strip().lower(), STEP_SCOPES)
        raise fail("step", f"{shown(v['step'], 40)} is not one of {', '.join(STEP_SCOPES)}"
                   + (f" ({hint})" if hint else ""))
    return dict(model=model, hardware=hardware, gpus=gpus, precision=precision, batch_per_gpu=bpg,
                global_batch=gb, strategy=strategy, strategy_text=text, image_size=image_size,
                optimizer=optimizer, step=step)


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
    raise fail("hardware", f"unknown hardware '{name}'; {suggestion(name, shipped, 'valid: ' + ', '.join(shipped))}")


def _number(text: str, column: str, fail: _Fail) -> float:
    try:
        x = float(text.replace("_", ""))
    except ValueError:
        raise fail(column, f"{shown(text, 40)} is not a number") from None
    if not math.isfinite(x):
        raise fail(column, f"{shown(text, 40)} is not a finite number")
    return x


def _int(text: str, column: str, fail: _Fail, required: bool = False, maximum: int = MAX_BATCH) -> int | None:
    """A positive integer ``<= maximum`` (``256`` or ``256.0``); empty gives None unless ``required``."""
    if not text:
        if required:
            raise fail(column, "empty; expected a positive integer")
        return None
    x = _number(text, column, fail)
    if x != int(x) or x < 1:
        raise fail(column, f"{shown(text, 40)} is not a positive integer")
    if x > maximum:
        raise fail(column, f"{shown(text, 40)} is out of range (valid: 1 to {maximum:,})")
    return int(x)


#: A measured throughput's range (samples/s over all GPUs): one sample in ~12 days to 10^6 per second
#: on each of :data:`~perfmodel.limits.MAX_GPUS` GPUs; beyond it the errors overflow what prints.
THROUGHPUT_RANGE = (1e-6, 1e12)


def _float(text: str, column: str, fail: _Fail) -> float:
    if not text:
        raise fail(column, "empty; expected a positive number (samples/s over all GPUs)")
    x = _number(text, column, fail)
    if x <= 0:
        raise fail(column, f"{shown(text, 40)} must be > 0 (samples/s over all GPUs)")
    lo, hi = THROUGHPUT_RANGE
    if not lo <= x <= hi:
        raise fail(column, f"{shown(text, 40)} is out of range (valid: {lo:g} to {hi:g} samples/s over all GPUs)")
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

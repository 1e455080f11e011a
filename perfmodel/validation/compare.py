"""Predicted against measured: error per row, speedup error per group, MAPE summaries."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import PerfmodelError, UsageError
from ..hardware import Hardware
from ..units import GIB
from .amp_runtime_of import amp_runtime_of
from .calibrate import Calibration, calibrate_single_gpu
from .calibrate_group import GroupCalibration, calibrate_per_group, row_id, speedup_key
from .devices import CPU_REASON, CPU_ROLE, ran_on_cpu
from .measurements import Measurement, MeasurementSet, resolve_hardware
from .pricing import RowPrice, price_row
from .repeats import REPEAT_ROLE, exact_repeats, repeat_reason, without_repeats
from .software_era import cudnn_major_of, cudnn_release_of, fusion_of, memory_format_of

__all__ = [
    "CALIBRATION_MODES",
    "RowResult",
    "GroupSummary",
    "Summary",
    "Validation",
    "validate",
    "compare_rows",
    "mape",
    "DEFINITIONS",
    "speedup_key",
    "UNPRICED_ROLE",
]

#: ``single-gpu``: one fit per (profile, precision) pooled over every network's 1-GPU rows;
#: ``single-gpu-per-group``: one fit per speedup group to that network's own 1-GPU rows.
CALIBRATION_MODES = ("none", "single-gpu", "single-gpu-per-group")

#: What the summary figures mean (carried in every JSON summary).
DEFINITIONS = {
    "error_pct": (
        "100 x (predicted - measured) / measured throughput; positive = the model is optimistic"
    ),
    "throughput_mape_pct": (
        "mean |error_pct| over the scored rows (all predicted rows without calibration; the "
        "multi-GPU rows with either single-GPU calibration, whose 1-GPU rows were fitted)"
    ),
    "calibration": (
        "single-gpu: compute efficiencies fitted per (profile, precision) to the 1-GPU rows of all "
        "models in the file (pooled); single-gpu-per-group: one factor on each network's per-layer "
        "compute seconds fitted per speedup group to that group's own 1-GPU rows, communication, "
        "optimizer step and step overhead not scaled"
    ),
    "speedup": (
        "throughput of a multi-GPU row over the 1-GPU row of its speedup group (same model, "
        "hardware, precision, framework, source, per-GPU batch and step scope: one table's 1-GPU run is not "
        "another's baseline; rows given by global batch, as pipeline benchmarks are, are grouped "
        "across batches, each configuration at its own batch, against the plain data-parallel "
        "1-GPU row)"
    ),
    "speedup_mape_pct": (
        "mean |100 x (predicted speedup - measured speedup) / measured speedup| over the "
        "multi-GPU rows that have a 1-GPU row in their speedup group"
    ),
    "groups": "per (model, hardware, strategy kind)",
    "cudnn": (
        "each row's grouped convolutions priced as the cuDNN its framework, source or notes state runs "
        "them (one kernel per group before cuDNN 8: perfmodel.validation.software_era; unstated: the default); "
        "a row stating cuDNN 7.0 on a Volta GPU in fp32 with its convolutions 1.162x slower, as DeepBench's "
        "2017 V100 kernels were against its 2019 ones (perfmodel.cost.cudnn_release)"
    ),
    "memory_format": (
        "each row's activations in the layout its source ran (NVIDIA DeepLearningExamples: AMP NHWC, "
        "FP32/TF32 NCHW; else NCHW, PyTorch's default: perfmodel.validation.software_era); under NCHW "
        "cuDNN transposes the tensors of every tensor-core convolution"
    ),
    "step": (
        "each row's time as its 'step' column says: full (default) or forward-backward, priced without "
        "the optimizer's update and state (perfmodel.validation.step_scope)"
    ),
}


#: the role of a row the model cannot price (no batch stated, or an error): counted as "without prediction"
UNPRICED_ROLE = "not priced"


@dataclass(frozen=True)
class RowResult:
    """One measured row with the model's prediction (or the reason it has none)."""

    measurement: Measurement
    predicted_throughput: float | None
    reason: str = ""
    role: str = "scored"
    calibrated: bool = False
    fits_in_memory: bool | None = None
    measured_speedup: float | None = None
    predicted_speedup: float | None = None
    speedup_baseline_row: int | None = None

    @property
    def error_pct(self) -> float | None:
        if self.predicted_throughput is None:
            return None
        m = self.measurement.measured_throughput
        return 100.0 * (self.predicted_throughput - m) / m

    @property
    def speedup_error_pct(self) -> float | None:
        if self.predicted_speedup is None or self.measured_speedup is None:
            return None
        return 100.0 * (self.predicted_speedup - self.measured_speedup) / self.measured_speedup

    @property
    def scored(self) -> bool:
        return self.role == "scored" and self.predicted_throughput is not None

    def to_dict(self) -> dict[str, Any]:
        """Input columns (typed where known) then the prediction, error and speedup."""
        m = self.measurement
        out: dict[str, Any] = dict(m.columns.items())
        out.update(
            row=m.row,
            file=m.file,
            model=m.model,
            hardware=m.hardware,
            gpus=m.gpus,
            precision=m.precision,
            batch_per_gpu=m.batch_per_gpu,
            global_batch=m.global_batch,
            strategy=m.strategy_text,
            strategy_kind=m.strategy_kind,
            measured_throughput=m.measured_throughput,
            predicted_throughput=self.predicted_throughput,
            error_pct=self.error_pct,
            reason=self.reason or None,
            role=self.role,
            calibrated=self.calibrated,
            fits_in_memory=self.fits_in_memory,
            measured_speedup=self.measured_speedup,
            predicted_speedup=self.predicted_speedup,
            speedup_error_pct=self.speedup_error_pct,
            speedup_baseline_row=self.speedup_baseline_row,
        )
        if "image_size" in m.columns:
            out["image_size"] = m.image_size
        return out


def mape(values: Sequence[float | None]) -> float | None:
    """Mean absolute percentage of the given signed percentages (None if there are none)."""
    xs = [abs(v) for v in values if v is not None and math.isfinite(v)]
    return sum(xs) / len(xs) if xs else None


def _max_abs(values: Sequence[float | None]) -> float | None:
    xs = [abs(v) for v in values if v is not None]
    return max(xs) if xs else None


@dataclass(frozen=True)
class GroupSummary:
    """Figures of one (model, hardware, strategy kind) group."""

    model: str
    hardware: str
    strategy_kind: str
    rows: int
    scored: int
    throughput_mape_pct: float | None
    speedup_mape_pct: float | None
    speedup_pairs: int
    max_abs_error_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Summary:
    """Whole-set figures: MAPE of throughput and of speedup, worst row, and the same per group."""

    mode: str
    rows: int
    predicted: int
    unpredictable: int
    scored: int
    throughput_mape_pct: float | None
    throughput_mape_multi_gpu_pct: float | None
    fit_mape_pct: float | None
    speedup_mape_pct: float | None
    speedup_pairs: int
    max_abs_error_pct: float | None
    worst_row: str | None
    groups: tuple[GroupSummary, ...]
    #: rows equal to an earlier row in every column (shown, neither scored nor fitted)
    repeats: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k != "groups"}
        d["groups"] = [g.to_dict() for g in self.groups]
        d["definitions"] = dict(DEFINITIONS)
        return d


@dataclass(frozen=True)
class Validation:
    """Result of :func:`validate`: rows in input order, the summary, and what was fitted."""

    files: tuple[str, ...]
    rows: tuple[RowResult, ...]
    summary: Summary
    calibration: Calibration | GroupCalibration | None = None
    columns: tuple[str, ...] = field(default=())

    def to_dict(self, rows: bool = True) -> dict[str, Any]:
        """Rows (left out when ``rows`` is False, for streamed output) and the summary."""
        summary = self.summary.to_dict()
        summary["files"] = list(self.files)
        summary["calibration"] = None if self.calibration is None else self.calibration.to_dict()
        return {"rows": [r.to_dict() for r in self.rows] if rows else [], "summary": summary}


def validate(ms: MeasurementSet, calibrate: str = "none") -> Validation:
    """Predict every row of ``ms`` and compare, after the calibration ``calibrate`` asks for.

    ``single-gpu``: the compute efficiencies of each (hardware, precision) are fitted to its
    1-GPU rows of all models (pooled); ``single-gpu-per-group``: each speedup group's compute
    seconds are scaled to fit its own 1-GPU rows (:mod:`.calibrate_group`). Either way the
    fitted 1-GPU rows are marked ``calibration`` and the multi-GPU rows, which the fit never
    saw, are the scored predictions.
    """
    if calibrate not in CALIBRATION_MODES:
        raise UsageError(f"unknown calibration '{calibrate}' (valid: {', '.join(CALIBRATION_MODES)})")
    calibration: Calibration | GroupCalibration | None = None
    repeats = exact_repeats(ms.rows)  # found once: the fits and the comparison leave out the same rows
    if calibrate == "single-gpu":
        calibration = calibrate_single_gpu(without_repeats(ms.rows, repeats))
        rows = compare_rows(ms.rows, calibration.profiles, single_gpu_fit=True, repeats=repeats)
    elif calibrate == "single-gpu-per-group":
        calibration = calibrate_per_group(without_repeats(ms.rows, repeats))
        rows = compare_rows(ms.rows, single_gpu_fit=True, scales=calibration.scales, repeats=repeats)
    else:
        rows = compare_rows(ms.rows, repeats=repeats)
    return Validation(ms.files, rows, summarize(rows, calibrate), calibration, ms.columns)


def compare_rows(
    rows: Sequence[Measurement],
    profiles: Mapping[str, Hardware] | None = None,
    single_gpu_fit: bool = False,
    scales: Mapping[tuple[str, int], float] | None = None,
    repeats: Mapping[int, int] | None = None,
) -> tuple[RowResult, ...]:
    """Price each row (on ``profiles[row.hardware]`` when given, its compute seconds times
    ``scales[row_id(row)]`` when given) and attach speedups; a row equal to an earlier one in
    every column is shown with its price but neither scored nor fitted (:mod:`.repeats`; ``repeats``:
    their :func:`~.repeats.exact_repeats`, when the caller has found them)."""
    profiles = profiles or {}
    scales = scales or {}
    results: list[RowResult] = []
    priced: dict[tuple[Any, ...], RowPrice | str] = {}
    hws: dict[str, Hardware] = {}
    repeats = exact_repeats(rows) if repeats is None else repeats
    for n, m in enumerate(rows):
        if n in repeats:
            first = results[repeats[n]]
            results.append(RowResult(m, first.predicted_throughput, repeat_reason(first.measurement), REPEAT_ROLE,
                                     first.calibrated, first.fits_in_memory))
            continue
        role = "calibration" if single_gpu_fit and m.gpus == 1 else "scored"
        role = CPU_ROLE if ran_on_cpu(m) else role
        scale = scales.get(row_id(m), 1.0)
        calibrated = row_id(m) in scales or (m.hardware in profiles and _fitted(profiles[m.hardware], m.precision))
        if not m.has_batch:
            reason = "the source states no batch size for this run (see the row's notes)"
            results.append(RowResult(m, None, reason, _unpriced(role), calibrated))
            continue
        key = (m.model, m.image_size, m.hardware, m.precision, m.optimizer, m.strategy_text,
               m.gpus, m.batch_per_gpu, m.global_batch, scale, cudnn_major_of(m), memory_format_of(m), fusion_of(m),
               amp_runtime_of(m), m.step, cudnn_release_of(m))
        if key not in priced:  # a repeated run is priced once (a million rows, a few hundred runs)
            try:
                if m.hardware not in hws:
                    hws[m.hardware] = resolve_hardware(m, profiles)
                priced[key] = price_row(m, hws[m.hardware], scale)
            except PerfmodelError as e:
                priced[key] = f"cannot be priced: {e}"
        p = priced[key]
        if isinstance(p, str):
            results.append(RowResult(m, None, p, _unpriced(role), calibrated))
            continue
        reason = (
            (CPU_REASON if role == CPU_ROLE else "")
            if p.fits_in_memory
            else (
                f"note: the model puts {p.memory_per_gpu_bytes / GIB:.1f} GiB per GPU, over the "
                f"{p.memory_capacity_bytes / GIB:.1f} GiB capacity, for a run that was measured"
            )
        )
        results.append(
            RowResult(m, p.throughput_samples_per_s, reason, role, calibrated, p.fits_in_memory)
        )
    return _with_speedups(results)


def _unpriced(role: str) -> str:
    """A row without a price is neither scored nor fitted: its role says so (a CPU run stays one)."""
    return role if role == CPU_ROLE else UNPRICED_ROLE


def _fitted(hw: Hardware, precision: str) -> bool:
    return f"calibrated.{precision}" in hw.sources


def _with_speedups(results: list[RowResult]) -> tuple[RowResult, ...]:
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, r in enumerate(results):
        if r.predicted_throughput is not None and r.role not in (CPU_ROLE, REPEAT_ROLE):
            groups.setdefault(speedup_key(r.measurement), []).append(i)
    out = list(results)
    for idx in groups.values():
        ones = [i for i in idx if results[i].measurement.gpus == 1]
        if not ones:
            continue
        plain = [
            i
            for i in ones
            if results[i].measurement.strategy.kind == "data"
            and results[i].measurement.strategy.mb == 1
            and not results[i].measurement.strategy.recompute
        ]
        b = (plain or ones)[0]
        base = results[b]
        assert base.predicted_throughput is not None
        for i in idx:
            r = results[i]
            if r.measurement.gpus == 1 or r.predicted_throughput is None:
                continue
            out[i] = RowResult(
                r.measurement,
                r.predicted_throughput,
                r.reason,
                r.role,
                r.calibrated,
                r.fits_in_memory,
                measured_speedup=r.measurement.measured_throughput
                / base.measurement.measured_throughput,
                predicted_speedup=r.predicted_throughput / base.predicted_throughput,
                speedup_baseline_row=base.measurement.row,
            )
    return tuple(out)


def summarize(rows: Sequence[RowResult], mode: str = "none") -> Summary:
    """Whole-set and per-group figures of compared rows."""
    scored = [r for r in rows if r.scored]
    predicted = [r for r in rows if r.predicted_throughput is not None]
    fit = [r for r in predicted if r.role == "calibration"]
    multi = [r for r in scored if r.measurement.gpus > 1]
    pairs = [r for r in rows if r.speedup_error_pct is not None]
    worst = max(scored, key=lambda r: abs(r.error_pct or 0.0), default=None)
    groups: dict[tuple[str, str, str], list[RowResult]] = {}
    for r in rows:
        m = r.measurement
        groups.setdefault((m.model, m.hardware, m.strategy_kind), []).append(r)
    gs = []
    for (model, hw, kind), rs in groups.items():
        sc = [r for r in rs if r.scored]
        gs.append(
            GroupSummary(
                model,
                hw,
                kind,
                len(rs),
                len(sc),
                mape([r.error_pct for r in sc]),
                mape([r.speedup_error_pct for r in rs]),
                sum(r.speedup_error_pct is not None for r in rs),
                _max_abs([r.error_pct for r in sc]),
            )
        )
    return Summary(
        mode=mode,
        rows=len(rows),
        predicted=len(predicted),
        unpredictable=len(rows) - len(predicted),
        scored=len(scored),
        throughput_mape_pct=mape([r.error_pct for r in scored]),
        throughput_mape_multi_gpu_pct=mape([r.error_pct for r in multi]),
        fit_mape_pct=mape([r.error_pct for r in fit]) if fit else None,
        speedup_mape_pct=mape([r.speedup_error_pct for r in pairs]),
        speedup_pairs=len(pairs),
        max_abs_error_pct=_max_abs([r.error_pct for r in scored]),
        worst_row=None if worst is None else worst.measurement.where(),
        groups=tuple(gs),
        repeats=sum(r.role == REPEAT_ROLE for r in rows),
    )

"""Score the compute model against measured kernels and layers: error per source, GPU and op kind.

Each :class:`~perfmodel.validation.kernel_rows.KernelRow` is priced by the kernel-level model
(:mod:`perfmodel.cost.work` and :mod:`perfmodel.cost.kernel_model`, the functions
``predict`` uses, GPU time only: the measurements time kernels, not host dispatch) and, for
comparison, by the per-layer roofline perfmodel used before (``roofline``: one efficiency per
op kind, Hockney's n_1/2, no algorithm or shape rules). MAPE = mean(|pred - meas| / meas).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..cost.compute import HALF_PRECISIONS
from ..cost.formulas import kernel_time
from ..cost.kernel_model import ComputeValues, mm_time, phase_times, tensor_cores
from ..cost.kernels import LayerKernels, layer_kernels
from ..cost.work import kernel_work
from ..hardware import Hardware, load_hardware
from ..network.counts import COUNT_FIELDS, layer_coefficients
from ..network.layers import Layer
from ..units import BYTES_PER_ELEMENT
from .kernel_rows import KernelRow, load_rows

__all__ = ["KernelScore", "price_rows", "score_kernels", "kernel_report"]


@dataclass(frozen=True)
class KernelScore:
    """Errors of one group of rows (source, GPU, op kind)."""

    source: str
    gpu: str
    op: str
    rows: int
    mape_pct: float
    mape_before_pct: float
    median_ratio: float
    #: MAPE with the numbers only the source's rows inform derived without the scored rows' model
    #: (PipeDream: :func:`~perfmodel.validation.pipedream_lomo.held_out_prices`); None where not scored so
    mape_held_out_pct: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source, "gpu": self.gpu, "op": self.op, "rows": self.rows,
            "mape_pct": self.mape_pct, "mape_held_out_pct": self.mape_held_out_pct,
            "mape_before_pct": self.mape_before_pct, "median_pred_over_meas": self.median_ratio,
        }


def _roofline(rows: Sequence[KernelRow], precision: str, profile: str) -> np.ndarray:
    """The previous per-layer roofline (perfmodel <= 0.1.0) on each row: what ``before`` means."""
    hw = load_hardware(profile)
    eff = hw.compute[precision]
    peak, e = hw.device.peak(precision), BYTES_PER_ELEMENT[precision]
    bw = hw.device.memory_bandwidth_bytes_per_s * eff.memory
    i_mm, i_fm, i_bi = COUNT_FIELDS.index("fwd_matmul_flops"), COUNT_FIELDS.index("fwd_mem_elems"), \
        COUNT_FIELDS.index("bwd_mem_elems")
    out = np.zeros(len(rows))
    for j, r in enumerate(rows):
        c = layer_coefficients(r.layer, r.first, {}).sum(axis=1) * r.batch
        eta = eff.conv if r.layer.kind == "conv" else eff.linear
        f = c[i_mm]
        t_k = kernel_time(f, peak, eta, eff.half_work_flops) if f else 0.0
        w = r.layer.params
        if r.what in ("fwd", "dgrad", "wgrad") or r.what == "layer_fwd":
            out[j] = max(t_k, (c[i_fm] * e + w * e) / bw) + hw.kernel_launch_s
        else:
            n_mm = (0 if r.first else 1) + 1 if f else 0
            out[j] = max(n_mm * t_k, (c[i_bi] * e + w * (e + 4)) / bw) + max(n_mm, 1) * hw.kernel_launch_s
    return out


@functools.lru_cache(maxsize=16)
def _kernels_of(layers: tuple[Layer, ...], first: tuple[bool, ...]) -> LayerKernels:
    """:func:`layer_kernels`, kept for the last few row sets: the descriptors depend on the
    layers alone, and a fit or a leave-one-model-out score prices the same rows thousands of
    times at other numbers (read-only: nothing writes into a :class:`LayerKernels`)."""
    return layer_kernels(layers, first, one_network=False)  # each row its own problem


def _kernel_model(rows: Sequence[KernelRow], precision: str, hw: Hardware, cudnn_major: int) -> np.ndarray:
    lk = _kernels_of(tuple(r.layer for r in rows), tuple(r.first for r in rows))
    batch = np.array([r.batch for r in rows])
    params = np.array([float(r.layer.params) for r in rows])
    w = kernel_work(lk, hw.kernels, batch, tensor_cores(hw, precision), precision in HALF_PRECISIONS, cudnn_major)
    v = ComputeValues.of(hw, precision)
    eta = np.where(lk.conv, v.eta_conv, v.eta_linear)
    fwd, bwd = phase_times(w, params, v, eta, 0.0, 0.0, host=False)
    out = np.zeros(len(rows))
    for j, r in enumerate(rows):
        if r.what == "layer_fwd":
            out[j] = fwd[j]
        elif r.what == "layer_bwd":
            out[j] = bwd[j]
        else:
            out[j] = mm_time(w, r.what, params, v, eta)[j] + v.launch_s
    out = out + _extra_time(rows, precision, hw) + np.array([r.host_s for r in rows])
    return _with_window_floor(rows, out, precision, hw, cudnn_major)


def _with_window_floor(rows: Sequence[KernelRow], priced: np.ndarray, precision: str, hw: Hardware,
                       cudnn_major: int) -> np.ndarray:
    """``priced`` with each row's timing-window floor (``KernelRow.window_floor``): the floor's
    measured time less the model's time of its own problem is host work the window holds, added;
    no row below the floor (:mod:`.neusight_window`)."""
    idx = [j for j, r in enumerate(rows) if r.window_floor is not None]
    if not idx:
        return priced
    floors = [f for f in (rows[j].window_floor for j in idx) if f is not None]
    unique = list({id(f): f for f in floors}.values())  # a few floor rows, shared by many rows
    host = dict(zip(map(id, unique), np.array([f.measured_s for f in unique])
                    - _kernel_model(unique, precision, hw, cudnn_major), strict=True))
    measured = np.array([f.measured_s for f in floors])
    out = priced.copy()
    out[idx] = np.maximum(measured, priced[idx] + np.maximum([host[id(f)] for f in floors], 0.0))
    return out


def _extra_time(rows: Sequence[KernelRow], precision: str, hw: Hardware) -> np.ndarray:
    """GPU seconds of the work each row's measured window holds besides its layer (``KernelRow.extra``:
    a memory-bound layer's forward or backward kernels, priced by the same model), less what can
    hide behind the window's own host work (``KernelRow.extra_hidden_s``)."""
    owner = [j for j, r in enumerate(rows) for _ in r.extra]
    out = np.zeros(len(rows))
    if not owner:
        return out
    extra = [e for r in rows for e in r.extra]
    lk = _kernels_of(tuple(layer for _, layer in extra), (False,) * len(extra))
    w = kernel_work(lk, hw.kernels, np.array([rows[j].batch for j in owner]), tensor_cores(hw, precision),
                    precision in HALF_PRECISIONS)
    v = ComputeValues.of(hw, precision)
    fwd, bwd = phase_times(w, np.zeros(len(extra)), v, np.full(len(extra), v.eta_conv), 0.0, 0.0, host=False)
    np.add.at(out, owner, np.where([phase == "fwd" for phase, _ in extra], fwd, bwd))
    return np.asarray(np.maximum(out - np.array([r.extra_hidden_s for r in rows]), 0.0))


def price_rows(
    rows: Sequence[KernelRow], profiles: Mapping[str, Hardware] | None = None, before: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Predicted seconds of every row: (kernel model, previous roofline; zeros unless ``before``).
    ``profiles`` replaces shipped profiles by name (the fitting script's trial values). Each row
    is priced with the cuDNN it was measured with (``KernelRow.cudnn_major``)."""
    groups: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[(r.profile, r.precision, r.cudnn_major)].append(i)
    new, old = np.zeros(len(rows)), np.zeros(len(rows))
    for (profile, precision, major), idx in groups.items():
        sub = [rows[i] for i in idx]
        hw = (profiles or {}).get(profile) or load_hardware(profile)
        new[idx] = _kernel_model(sub, precision, hw, major)
        if before:
            old[idx] = _roofline(sub, precision, profile)
    return new, old


#: sources whose rows are grouped by GPU and precision, and by kernel phase (fwd/dgrad/wgrad) or GEMM
_TENSOR_SOURCES = ("deepbench", "ampere_gemm", "ladder_conv")


def _group_key(r: KernelRow, detail: bool) -> tuple[str, str, str]:
    gpu = f"{r.gpu} {r.precision}" if r.source in _TENSOR_SOURCES else r.gpu
    if detail:
        return r.source, gpu, r.op
    op = r.op if r.source == "neusight" else r.op.split(" ")[0] + " " + r.what[6:]
    if r.source in _TENSOR_SOURCES:
        op = "gemm" if r.op == "gemm" else f"conv {r.what}"
    return r.source, gpu, op


def score_kernels(
    rows: Sequence[KernelRow] | None = None, detail: bool = False, held_out: np.ndarray | None = None
) -> list[KernelScore]:
    """MAPE per (source, GPU, op kind) of the kernel model and of the previous roofline, and of
    ``held_out`` (out-of-sample prices of ``rows``, NaN where none) for groups priced in full."""
    rows = list(load_rows()) if rows is None else list(rows)
    out_of = np.full(len(rows), np.nan) if held_out is None else held_out
    new, old = price_rows(rows)
    meas = np.array([r.measured_s for r in rows])
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        groups[_group_key(r, detail)].append(i)
        groups[(r.source, "all", "all")].append(i)
    out = []
    for (src, gpu, op), idx in sorted(groups.items()):
        m, h = meas[idx], out_of[idx]
        out.append(KernelScore(
            src, gpu, op, len(idx),
            float(np.mean(np.abs(new[idx] - m) / m) * 100),
            float(np.mean(np.abs(old[idx] - m) / m) * 100),
            float(np.median(new[idx] / m)),
            float(np.mean(np.abs(h - m) / m) * 100) if np.all(np.isfinite(h)) else None,
        ))
    return out


def kernel_report(detail: bool = False) -> list[dict[str, object]]:
    """:func:`score_kernels` as records (the ``validate --kernels`` table)."""
    return [s.to_dict() for s in score_kernels(detail=detail)]

"""Calibration: fit a profile's compute (and link) efficiencies to measured runs with scipy."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import PerfmodelError
from ..hardware import PRECISIONS, ComputeEfficiency, Hardware
from .devices import ran_on_cpu
from .measurements import Measurement, resolve_hardware
from .pricing import price_row

__all__ = [
    "ComputeFit",
    "LinkFit",
    "Calibration",
    "calibrate_single_gpu",
    "calibrate_profile",
    "fit_compute",
    "fit_link",
    "profile_toml",
    "EFFICIENCY_BOUNDS",
    "HALF_WORK_DECADES",
    "LINK_EFFICIENCY_BOUNDS",
]

#: Every fitted efficiency stays a fraction of peak in this range.
EFFICIENCY_BOUNDS = (0.02, 1.0)
#: A fitted link efficiency stays in this range; a fit that wants less than its lower end is
#: refused: no plausible link explains the loss (measured NCCL bus bandwidths are 60-90% of
#: line rate), which then lies elsewhere (input pipeline, synchronisation, stragglers).
LINK_EFFICIENCY_BOUNDS = (0.1, 1.0)
#: ``half_work_flops`` may move this many decades either way from the profile's value: the
#: profiles derive it from a ~10 us fixed cost per kernel, and 1 to 100 us spans the kernel
#: launch, tail and synchronisation overheads seen in practice.
HALF_WORK_DECADES = 1.0


@dataclass(frozen=True)
class ComputeFit:
    """Compute efficiencies of one (hardware, precision) fitted to measured rows."""

    hardware: str
    precision: str
    rows: tuple[int, ...]
    parameters: tuple[str, ...]
    before: ComputeEfficiency
    after: ComputeEfficiency
    mape_before_pct: float
    mape_after_pct: float
    at_bound: tuple[str, ...] = ()
    note: str = ""

    def describe(self) -> str:
        changes = ", ".join(
            f"{p} {_fmt(getattr(self.before, p))} -> {_fmt(getattr(self.after, p))}"
            for p in self.parameters
        )
        if "conv" in self.parameters:
            lin = f"{_fmt(self.before.linear)} -> {_fmt(self.after.linear)}"
            changes += f" (linear scaled with conv: {lin})"
        bound = f"; at bound: {', '.join(self.at_bound)}" if self.at_bound else ""
        return (
            f"{self.hardware} {self.precision}: {changes} from {len(self.rows)} run(s); "
            f"their error {self.mape_before_pct:.1f}% -> {self.mape_after_pct:.1f}% MAPE{bound}"
            + (f"; {self.note}" if self.note else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware,
            "precision": self.precision,
            "rows": list(self.rows),
            "parameters": list(self.parameters),
            "before": dataclasses.asdict(self.before),
            "after": dataclasses.asdict(self.after),
            "mape_before_pct": self.mape_before_pct,
            "mape_after_pct": self.mape_after_pct,
            "at_bound": list(self.at_bound),
            "note": self.note,
        }


@dataclass(frozen=True)
class LinkFit:
    """Efficiency of one link tier (``intra`` or ``inter`` node) fitted to multi-GPU rows."""

    hardware: str
    tier: str
    rows: tuple[int, ...]
    before: float
    after: float
    mape_before_pct: float
    mape_after_pct: float
    fitted: bool
    note: str = ""

    def describe(self) -> str:
        if not self.fitted:
            kept = _fmt(self.before)
            return f"{self.hardware} {self.tier}-node link efficiency kept at {kept}: {self.note}"
        return (
            f"{self.hardware} {self.tier}-node link efficiency "
            f"{_fmt(self.before)} -> {_fmt(self.after)} "
            f"from {len(self.rows)} multi-GPU run(s); their error {self.mape_before_pct:.1f}% -> "
            f"{self.mape_after_pct:.1f}% MAPE" + (f"; {self.note}" if self.note else "")
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, rows=list(self.rows))


@dataclass(frozen=True)
class Calibration:
    """Calibrated copies of profiles (by the name rows use) and what was fitted, for reports."""

    mode: str
    profiles: Mapping[str, Hardware]
    compute: tuple[ComputeFit, ...]
    links: tuple[LinkFit, ...] = ()
    skipped: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        out = [f.describe() for f in self.compute] + [f.describe() for f in self.links]
        return out + [f"not fitted: {s}" for s in self.skipped]

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "compute": [f.to_dict() for f in self.compute],
            "links": [f.to_dict() for f in self.links],
            "skipped": list(self.skipped),
        }


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _log_errors(rows: Sequence[Measurement], hw: Hardware) -> np.ndarray:
    return np.array(
        [math.log(price_row(m, hw).throughput_samples_per_s / m.measured_throughput) for m in rows]
    )


def _mape(res: np.ndarray) -> float:
    return float(np.mean(np.abs(np.expm1(res)))) * 100.0


def with_compute(hw: Hardware, precision: str, eff: ComputeEfficiency, note: str = "") -> Hardware:
    """A copy of ``hw`` whose ``precision`` efficiencies are ``eff`` (the source records it)."""
    compute = dict(hw.compute)
    compute[precision] = eff
    sources = dict(hw.sources)
    sources[f"calibrated.{precision}"] = note or "fitted"
    return dataclasses.replace(hw, compute=compute, sources=sources)


def _priceable(rows: Sequence[Measurement], hw: Hardware) -> list[Measurement]:
    ok = []
    for m in rows:
        if not m.has_batch:
            continue
        try:
            price_row(m, hw)
        except PerfmodelError:
            continue
        ok.append(m)
    return ok


def fit_compute(
    rows: Sequence[Measurement], hw: Hardware, precision: str
) -> tuple[ComputeFit, Hardware]:
    """Fit ``precision``'s compute efficiencies of ``hw`` to ``rows`` (log least squares).

    The number of free parameters grows with the data, leaving at least one degree of
    freedom: 1 or 2 rows fit ``conv`` (``linear`` scales with it: CNN runs cannot tell
    them apart); 3 rows add ``memory`` (bandwidth-bound layers); 4 or more add
    ``half_work_flops`` (how fast small kernels fall off peak: grouped convolutions and
    small micro-batches), within :data:`HALF_WORK_DECADES` of its prior value.
    Efficiencies stay in :data:`EFFICIENCY_BOUNDS`.
    """
    from scipy.optimize import least_squares

    before = hw.compute[precision]
    n = len(rows)
    names: tuple[str, ...] = ("conv",) if n < 3 else ("conv", "memory")
    if n >= 4:
        names = (*names, "half_work_flops")
    h0 = before.half_work_flops if before.half_work_flops > 0 else 1e8
    lo_e, hi_e = EFFICIENCY_BOUNDS

    def build(x: np.ndarray) -> ComputeEfficiency:
        conv = float(x[0])
        linear = min(hi_e, before.linear * conv / before.conv)
        memory = float(x[1]) if len(x) > 1 else before.memory
        half = float(10 ** x[2]) if len(x) > 2 else before.half_work_flops
        return ComputeEfficiency(
            conv=conv, linear=max(lo_e, linear), memory=memory, half_work_flops=half
        )

    x0 = [min(hi_e, max(lo_e, before.conv)), min(hi_e, max(lo_e, before.memory)), math.log10(h0)][
        : len(names)
    ]
    lower = [lo_e, lo_e, math.log10(h0) - HALF_WORK_DECADES][: len(names)]
    upper = [hi_e, hi_e, math.log10(h0) + HALF_WORK_DECADES][: len(names)]

    def residuals(x: np.ndarray) -> np.ndarray:
        return _log_errors(rows, with_compute(hw, precision, build(x)))

    r0 = _log_errors(rows, hw)
    note = ""
    try:
        sol = least_squares(
            residuals, np.array(x0), bounds=(lower, upper), diff_step=1e-3, method="trf"
        )
        x = sol.x
    except (ValueError, PerfmodelError, FloatingPointError) as e:  # pragma: no cover - defensive
        x, note = np.array(x0), f"fit failed ({e}); profile values kept"
    after = build(x)
    r1 = _log_errors(rows, with_compute(hw, precision, after))
    at_bound = tuple(
        nm
        for nm, v, lo, hi in zip(names, x, lower, upper, strict=True)
        if math.isclose(v, lo, rel_tol=1e-3) or math.isclose(v, hi, rel_tol=1e-3)
    )
    fit = ComputeFit(
        hw.name,
        precision,
        tuple(m.row for m in rows),
        names,
        before,
        after,
        _mape(r0),
        _mape(r1),
        at_bound,
        note,
    )
    src = (
        f"{', '.join(names)} fitted to {n} measured run(s) "
        f"(rows {', '.join(str(m.row) for m in rows)}): "
        f"MAPE {fit.mape_before_pct:.1f}% -> {fit.mape_after_pct:.1f}%"
    )
    return fit, with_compute(hw, precision, after, src)


def fit_link(rows: Sequence[Measurement], hw: Hardware, tier: str) -> tuple[LinkFit, Hardware]:
    """Fit the ``tier`` (``intra``/``inter``) link efficiency of ``hw`` to multi-GPU ``rows``.

    Left unchanged, with a note, when the rows' predicted times do not depend on it (the
    gradient exchange hides behind the backward pass), or when the fit runs into the lower
    end of :data:`LINK_EFFICIENCY_BOUNDS` (the runs lose time the link cannot explain).
    """
    from scipy.optimize import least_squares

    link = getattr(hw, tier)
    lo_e, hi_e = LINK_EFFICIENCY_BOUNDS
    row_ids = tuple(m.row for m in rows)

    def at(eff: float) -> Hardware:
        return dataclasses.replace(hw, **{tier: dataclasses.replace(link, efficiency=float(eff))})

    r0 = _log_errors(rows, hw)
    kept = _mape(r0)
    spread = np.max(np.abs(_log_errors(rows, at(hi_e)) - _log_errors(rows, at(lo_e))))
    if spread < 1e-3:
        note = (
            "not identifiable: the predicted communication of these runs is hidden behind compute"
        )
        return LinkFit(
            hw.name, tier, row_ids, link.efficiency, link.efficiency, kept, kept, False, note
        ), hw

    def residuals(x: np.ndarray) -> np.ndarray:
        return _log_errors(rows, at(float(x[0])))

    x0 = min(hi_e, max(lo_e, link.efficiency))
    sol = least_squares(residuals, np.array([x0]), bounds=([lo_e], [hi_e]), diff_step=1e-3)
    eff = float(sol.x[0])
    if math.isclose(eff, lo_e, rel_tol=1e-3):
        note = (
            f"the fit runs into the lower bound {lo_e:g}: these runs lose more time than any "
            "plausible link explains (input pipeline, synchronisation), so the link keeps its value"
        )
        return LinkFit(
            hw.name, tier, row_ids, link.efficiency, link.efficiency, kept, kept, False, note
        ), hw
    new = at(eff)
    r1 = _log_errors(rows, new)
    note = "at upper bound" if math.isclose(eff, hi_e, rel_tol=1e-3) else ""
    return LinkFit(hw.name, tier, row_ids, link.efficiency, eff, kept, _mape(r1), True, note), new


def _by_hardware(rows: Sequence[Measurement]) -> dict[str, list[Measurement]]:
    out: dict[str, list[Measurement]] = {}
    for m in rows:
        if not ran_on_cpu(m):  # a CPU run says nothing about the GPU profile it names
            out.setdefault(m.hardware, []).append(m)
    return out


def calibrate_single_gpu(rows: Sequence[Measurement]) -> Calibration:
    """Fit compute efficiencies per (hardware, precision) on the 1-GPU rows only.

    Multi-GPU rows are never looked at: they stay unseen data to score the fit on.
    """
    profiles: dict[str, Hardware] = {}
    fits: list[ComputeFit] = []
    skipped: list[str] = []
    for key, hw_rows in _by_hardware(rows).items():
        base = resolve_hardware(hw_rows[0])
        hw = base
        for precision in PRECISIONS:
            prec_rows = [m for m in hw_rows if m.precision == precision]
            if not prec_rows:
                continue
            ones = _priceable([m for m in prec_rows if m.gpus == 1], base)
            if not ones:
                skipped.append(f"{key} {precision}: no 1-GPU run with a batch; profile values kept")
                continue
            fit, hw = fit_compute(ones, hw, precision)
            fits.append(fit)
        if hw is not base:
            profiles[key] = hw
    return Calibration("single-gpu", profiles, tuple(fits), (), tuple(skipped))


def calibrate_profile(rows: Sequence[Measurement], hw: Hardware, key: str) -> Calibration:
    """Fit ``hw`` to every row: compute per precision (1-GPU rows when there are any, else all
    its rows), then the link tiers on the multi-GPU rows, compute held at its fit."""
    fits: list[ComputeFit] = []
    links: list[LinkFit] = []
    skipped: list[str] = []
    usable = _priceable(rows, hw)
    for precision in PRECISIONS:
        prec_rows = [m for m in usable if m.precision == precision]
        if not prec_rows:
            continue
        ones = [m for m in prec_rows if m.gpus == 1]
        fit, hw = fit_compute(ones or prec_rows, hw, precision)
        if not ones:
            fit = dataclasses.replace(
                fit, note="no 1-GPU run: fitted to multi-GPU runs, communication included"
            )
        fits.append(fit)
    g = hw.gpus_per_node
    for tier in ("intra", "inter"):
        tier_rows = [m for m in usable if (1 < m.gpus <= g if tier == "intra" else m.gpus > g)]
        if not tier_rows:
            skipped.append(
                f"{key} {tier}-node link: no run of "
                f"{'2 to ' + str(g) if tier == 'intra' else 'more than ' + str(g)} GPUs"
            )
            continue
        lf, hw = fit_link(tier_rows, hw, tier)
        links.append(lf)
    if not usable:
        skipped.append(f"{key}: no row could be priced")
    return Calibration("all-rows", {key: hw}, tuple(fits), tuple(links), tuple(skipped))


# -- writing a profile -----------------------------------------------------------------------
def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "0.0"
    # JSON string escapes are TOML basic-string escapes; TOML also refuses a raw DEL
    return json.dumps(str(v), ensure_ascii=False).replace("\x7f", "\\u007f")


def _comment(text: str) -> str:
    """``text`` as one TOML comment line: no line breaks or control characters."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def _table(name: str, items: Sequence[tuple[str, object]]) -> list[str]:
    return [f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in items] + [""]


def profile_toml(
    hw: Hardware, name: str, description: str, source: str, notes: Mapping[str, str] | None = None
) -> str:
    """``hw`` as a TOML profile of the shipped schema (loadable with ``load_profile``).

    ``notes`` maps a precision to the ``source`` line written in its compute table.
    """
    notes = notes or {}
    s = hw.sources
    d = hw.device
    lines = [
        f"# {_comment(description)}",
        "schema_version = 1",
        f"name = {_toml_value(name)}",
        f"description = {_toml_value(description)}",
        f"source = {_toml_value(source)}",
        "",
    ]
    lines += _table(
        "device",
        [
            ("name", d.name),
            ("memory_bytes", float(d.memory_bytes)),
            ("memory_bandwidth_bytes_per_s", float(d.memory_bandwidth_bytes_per_s)),
            ("source", s.get("device", "from the base profile")),
        ],
    )
    peaks: list[tuple[str, object]] = [(k, float(v)) for k, v in d.peak_flops_per_s.items()]
    if "peak_flops_per_s" in s:
        peaks.append(("source", s["peak_flops_per_s"]))
    lines += _table("device.peak_flops_per_s", peaks)
    lines += _table(
        "node",
        [("gpus_per_node", hw.gpus_per_node), ("source", s.get("node", "from the base profile"))],
    )
    lines += _table("node.link", _link_items(hw.intra, s.get("link")))
    net = _link_items(hw.inter, None) + [
        ("max_nodes", hw.max_nodes),
        ("source", s.get("network", "from the base profile")),
    ]
    lines += _table("network", net)
    coll = hw.collectives
    lines += _table("collectives", [
        ("channels_intra", coll.channels_intra), ("channels_net", coll.channels_net),
        ("base_latency_s", float(coll.base_latency_s)), ("memory_passes", float(coll.memory_passes)),
        ("source", s.get("collectives", "from the base profile"))])
    lines += _table(
        "efficiency",
        [
            ("kernel_launch_s", float(hw.kernel_launch_s)),
            ("framework_reserve_bytes", float(hw.framework_reserve_bytes)),
            ("source", s.get("efficiency", "from the base profile")),
        ],
    )
    for p in PRECISIONS:
        c = hw.compute[p]
        items: list[tuple[str, object]] = [
            ("conv", float(c.conv)),
            ("linear", float(c.linear)),
            ("memory", float(c.memory)),
            ("half_work_flops", float(c.half_work_flops)),
        ]
        if p in notes:
            items.append(("source", notes[p]))
        lines += _table(f"efficiency.compute.{p}", items)
    if hw.price_per_gpu_hour is not None:
        lines += _table(
            "price",
            [("per_gpu_hour", float(hw.price_per_gpu_hour)), ("currency", hw.price_currency),
             ("date", s.get("price_date", "unknown")), ("source", s.get("price", "from the base profile"))],
        )
    return "\n".join(lines)


def _link_items(link: Any, source: str | None) -> list[tuple[str, object]]:
    items: list[tuple[str, object]] = [
        ("bandwidth_bytes_per_s", float(link.bandwidth_bytes_per_s)),
        ("latency_s", float(link.latency_s)),
        ("efficiency", float(link.efficiency)),
        ("topology", link.topology),
    ]
    if source:
        items.append(("source", source))
    return items

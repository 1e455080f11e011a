"""Notebook API: models, hardware what-ifs, predictions, plans, scaling and sweeps as DataFrames."""

from __future__ import annotations

import importlib.util
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from .errors import NoFeasiblePlanError, PerfmodelError, UsageError, closest_names
from .hardware import DEFAULT_HARDWARE, PRECISIONS, Hardware
from .hardware import load_hardware as _load_hardware
from .network import Network, get_model
from .report.answers import FRAME_COLUMNS, answers_for, frame_columns
from .search.enumerate import KINDS, candidates
from .search.plan import DEFAULT_BATCH_PER_GPU, plan
from .strategies.predict import Context, baseline_text, context, one_gpu_step, price
from .strategies.spec import Strategy, parse_strategy

__all__ = [
    "load_model",
    "load_hardware",
    "available_kinds",
    "parse_gpu_list",
    "predict_frame",
    "plan_frame",
    "scale",
    "scale_chart",
    "sweep",
    "sweep_chart",
    "one_gpu_step",
    "SCALE_STRATEGIES",
    "MAX_GPU_POINTS",
    "MAX_BATCH",
]

#: Names ``scale`` accepts: the plan search's strategy kinds, and ``best`` (all of them).
SCALE_STRATEGIES = (*KINDS, "best")
#: The most GPU counts one sweep may ask for (a guard against ``1-1000000``).
MAX_GPU_POINTS = 4096
#: The largest batch (samples per step or per GPU) a sweep accepts.
MAX_BATCH = 10**9
#: The largest GPU count a list may name (the CLI's ``--gpus`` bound).
_MAX_GPUS = 1_000_000

#: Strategy kinds priced by modules that may not be installed yet, and those modules.
_KIND_MODULES = {
    "mp": "perfmodel.strategies.model_parallel",
    "filter": "perfmodel.strategies.channels",
    "channel": "perfmodel.strategies.channels",
}

Progress = Callable[[int, int], None]


# -- loading -------------------------------------------------------------------------------
def load_model(name: str | Network, image_size: int | None = None) -> Network:
    """The zoo network ``name`` at ``image_size`` pixels (default: its evaluation size)."""
    if isinstance(name, Network):
        return name
    return get_model(name, image_size)


def load_hardware(name_or_path: str | Hardware = DEFAULT_HARDWARE, **what_if: Any) -> Hardware:
    """A hardware profile by name or path, changed in memory by ``what_if`` (nothing is written).

    ``what_if`` takes the keys of :meth:`~perfmodel.hardware.Hardware.what_if`, e.g.
    ``inter_bandwidth_scale=2`` (a twice faster inter-node network), ``gpus_per_node=16``,
    ``peak_scale=1.5`` or ``intra={"latency_s": 1e-6}``.
    """
    hw = _load_hardware(name_or_path)
    return hw.what_if(**what_if) if what_if else hw


def available_kinds() -> tuple[str, ...]:
    """The plan search's strategy kinds whose pricing modules are installed."""
    return tuple(k for k in KINDS if k not in _KIND_MODULES or importlib.util.find_spec(_KIND_MODULES[k]) is not None)


# -- GPU lists -----------------------------------------------------------------------------
def parse_gpu_list(spec: str | int | Iterable[int]) -> list[int]:
    """GPU counts from ``1,2,4,8``, ``1-8`` (every count), ``8-64:8`` (step 8) or ``1-1024:log2``.

    ``A-B:log2`` doubles from ``A`` while the count stays <= ``B``. Items combine with commas;
    the result is sorted with duplicates removed. Raises :class:`UsageError` naming the bad item.
    """
    if isinstance(spec, bool):
        raise UsageError(f"GPU list must be counts like 1,2,4,8 or 1-1024:log2, got {spec!r}")
    if isinstance(spec, int):
        spec = [spec]
    if not isinstance(spec, str):
        values = list(spec)
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= _MAX_GPUS:
                raise UsageError(f"GPU counts must be integers from 1 to {_MAX_GPUS:,}, got {v!r}")
        if not values:
            raise UsageError("GPU list is empty (example: 1,2,4,8 or 1-1024:log2)")
        return sorted(set(values))
    text = spec.strip()
    if not text:
        raise UsageError("GPU list is empty (example: 1,2,4,8 or 1-1024:log2)")
    out: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise UsageError(f"GPU list '{text}' has an empty item (example: 1,2,4,8)")
        out.update(_gpu_item(item, text))
        if len(out) > MAX_GPU_POINTS:
            raise UsageError(
                f"GPU list '{text}' names more than {MAX_GPU_POINTS} counts (use a step, e.g. 1-1024:log2 or 8-512:8)"
            )
    return sorted(out)


def _count(word: str, item: str, text: str) -> int:
    try:
        v = int(word)
    except ValueError:
        raise UsageError(
            f"GPU list '{text}': '{item}' is not a count, a range A-B, A-B:STEP or A-B:log2 (example: 1-1024:log2)"
        ) from None
    if not 1 <= v <= _MAX_GPUS:
        raise UsageError(f"GPU list '{text}': {v} is not a GPU count from 1 to {_MAX_GPUS:,}")
    return v


def _gpu_item(item: str, text: str) -> list[int]:
    body, _, step = item.partition(":")
    if "-" not in body:
        if step:
            raise UsageError(f"GPU list '{text}': a step needs a range, e.g. 1-64:{step} (got '{item}')")
        return [_count(body.strip(), item, text)]
    lo_s, _, hi_s = body.partition("-")
    lo, hi = _count(lo_s.strip(), item, text), _count(hi_s.strip(), item, text)
    if lo > hi:
        raise UsageError(f"GPU list '{text}': range '{item}' runs backwards (write {hi}-{lo})")
    step = step.strip().lower()
    if step == "log2":
        n = int(math.floor(math.log2(hi / lo))) + 1
        if n > MAX_GPU_POINTS:
            raise UsageError(f"GPU list '{text}': '{item}' names too many counts")
        vals = [lo * 2**k for k in range(n)]
        return [v for v in vals if v <= hi]
    k = 1 if not step else _step(step, item, text)
    if (hi - lo) // k + 1 > MAX_GPU_POINTS:
        raise UsageError(
            f"GPU list '{text}': '{item}' names more than {MAX_GPU_POINTS} counts "
            "(use a step, e.g. 1-1024:log2 or 8-512:8)"
        )
    return list(range(lo, hi + 1, k))


def _step(step: str, item: str, text: str) -> int:
    try:
        k = int(step)
    except ValueError:
        raise UsageError(
            f"GPU list '{text}': step '{step}' in '{item}' is not an integer or 'log2' (examples: 8-64:8, 1-1024:log2)"
        ) from None
    if k < 1:
        raise UsageError(f"GPU list '{text}': step {k} in '{item}' must be >= 1")
    return k


# -- one-GPU baseline ----------------------------------------------------------------------
class _Baselines:
    """One-GPU baselines, shared by every point that changes nothing a single GPU sees."""

    def __init__(self) -> None:
        self._memo: dict[tuple[Any, ...], tuple[float, int] | None] = {}

    def get(self, ctx: Context, batch: int) -> tuple[float, int] | None:
        hw = ctx.hw
        key = (
            id(ctx.net),
            repr(hw.device),
            repr(dict(hw.compute)),
            hw.kernel_launch_s,
            hw.framework_reserve_bytes,
            ctx.precision,
            ctx.optimizer,
            batch,
        )
        if key not in self._memo:
            self._memo[key] = one_gpu_step(ctx, batch)
        return self._memo[key]


# -- single plans --------------------------------------------------------------------------
def _resolve(batch_per_gpu: int | None, global_batch: int | None) -> tuple[int | None, int | None]:
    if batch_per_gpu is not None and global_batch is not None:
        raise UsageError("give at most one of batch_per_gpu and global_batch")
    if batch_per_gpu is None and global_batch is None:
        return DEFAULT_BATCH_PER_GPU, None
    for name, v in (("batch_per_gpu", batch_per_gpu), ("global_batch", global_batch)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise UsageError(f"{name} must be a positive integer, got {v!r}")
        if v is not None and v > MAX_BATCH:
            shown = f"{v:,}" if v.bit_length() <= 64 else "with more than 19 digits"
            raise UsageError(f"{name} {shown} is too large (at most {MAX_BATCH:,} samples)")
    return batch_per_gpu, global_batch


def _row(
    ctx: Context,
    s: Strategy,
    gpus: int,
    batch_per_gpu: int | None,
    global_batch: int | None,
    base: _Baselines,
) -> dict[str, Any]:
    """Price ``s`` and say everything a frame row needs (SI units)."""
    B = batch_per_gpu * gpus if batch_per_gpu is not None else global_batch
    assert B is not None
    r = price(ctx, s, B)
    b1 = batch_per_gpu if batch_per_gpu is not None else B
    one = base.get(ctx, b1)
    thr = B / r.time_s
    speedup = math.nan if one is None else thr / (b1 / one[0])
    mem = float(sum(r.memory.values()))
    row: dict[str, Any] = {
        "plan": s.spec(),
        "plan_kind": s.kind,
        "global_batch": B,
        "step_s": r.time_s,
        "samples_per_s": thr,
        "speedup_x": speedup,
        "efficiency_%": 100 * speedup / gpus,
        "memory_per_gpu_bytes": mem,
        "memory_capacity_bytes": float(ctx.hw.device.memory_bytes),
        "fits": mem <= ctx.hw.device.memory_bytes,
        "dominant": max(r.breakdown, key=lambda k: r.breakdown[k]),
        "reason": None,
    }
    row.update(frame_columns(ctx.net.name, ctx.hw, ctx.precision, s.kind, r.time_s, thr, mem))
    row.update({f"breakdown_{k}_s": v for k, v in r.breakdown.items()})
    return row


def _gap(reason: str) -> dict[str, Any]:
    return {
        "plan": None,
        "plan_kind": None,
        "step_s": math.nan,
        "samples_per_s": math.nan,
        "speedup_x": math.nan,
        "efficiency_%": math.nan,
        "memory_per_gpu_bytes": math.nan,
        "fits": False,
        "dominant": None,
        "reason": reason,
    }


def _text_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Missing text (no plan, no reason) as None rather than NaN, in every text column."""
    for c in ("plan", "plan_kind", "dominant", "reason"):
        if c in df.columns:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


def _as_list(x: Any) -> list[Any] | None:
    """``x`` as a list if it is a sweep axis (a list, tuple or range), else None."""
    return list(x) if isinstance(x, (list, tuple, range)) else None


def sweep(
    model: str | Network,
    gpus: int | Sequence[int],
    strategy: str | Strategy | Sequence[str] | None = None,
    hardware: str | Hardware | Sequence[str | Hardware] = DEFAULT_HARDWARE,
    precision: str | Sequence[str] = "amp",
    *,
    batch_per_gpu: int | Sequence[int] | None = None,
    global_batch: int | Sequence[int] | None = None,
    what_if: Mapping[str, Any] | None = None,
    optimizer: str = "sgd",
    image_size: int | None = None,
    kinds: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Price plans over the grid of every argument given as a list; one row per point.

    ``gpus``, ``strategy``, ``hardware``, ``precision``, ``batch_per_gpu``, ``global_batch`` and
    each value of ``what_if`` (keys of :meth:`Hardware.what_if`, e.g.
    ``{"inter_bandwidth_scale": [0.5, 1, 2]}``) may be a list: the sweep is their product, in
    that order, and each list becomes a column. Hardware what-ifs change the profile in memory.

    With ``strategy`` a spec (``"dp=8"``; ``"pp=4,mb=8"`` whose missing ``dp`` fills the GPU
    count; ``"dp"`` for pure data parallelism on every count) a point costs about a
    millisecond (``benchmarks/whatif_speed.py``); with ``strategy=None`` each point searches
    for the best plan of ``kinds`` (default: every installed kind), which takes a full
    :func:`~perfmodel.search.plan`. Points that cannot run get NaN and a
    ``reason``; a fixed plan that does not fit in memory is still priced (``fits`` False).
    ``speedup_x`` is against one GPU of the same (what-if) profile at ``batch_per_gpu``
    samples, or at the global batch when ``global_batch`` is given (strong scaling), with
    gradient accumulation when that does not fit.
    """
    net = model if isinstance(model, Network) else load_model(model, image_size)
    what_if = dict(what_if or {})
    if batch_per_gpu is None and global_batch is None:
        batch_per_gpu = DEFAULT_BATCH_PER_GPU
    if batch_per_gpu is not None and global_batch is not None:
        raise UsageError("give at most one of batch_per_gpu and global_batch")
    axes: dict[str, list[Any]] = {}
    fixed: dict[str, Any] = {}
    named = {
        "gpus": gpus,
        "strategy": strategy,
        "hardware": hardware,
        "precision": precision,
        "batch_per_gpu": batch_per_gpu,
        "global_batch": global_batch,
    }
    for key, value in [*named.items(), *what_if.items()]:
        lst = _as_list(value)
        if lst is None:
            fixed[key] = value
        elif not lst:
            raise UsageError(f"sweep axis '{key}' is empty")
        else:
            axes[key] = lst
    for p in axes.get("precision", [fixed.get("precision")]):
        if p not in PRECISIONS:
            raise UsageError(f"unknown precision '{p}' (valid: {', '.join(PRECISIONS)})")
    search_kinds = tuple(kinds) if kinds is not None else available_kinds()
    base = _Baselines()
    contexts: dict[tuple[int, str], Context] = {}
    hw_cache: dict[tuple[Any, ...], Hardware] = {}
    points = list(itertools.product(*axes.values()))
    rows = []
    for i, combo in enumerate(points):
        pt = {**fixed, **dict(zip(axes, combo, strict=True))}
        changes = {k: pt[k] for k in what_if}
        hkey = (
            id(pt["hardware"]) if isinstance(pt["hardware"], Hardware) else pt["hardware"],
            repr(sorted(changes.items())),
        )
        if hkey not in hw_cache:
            hw_cache[hkey] = load_hardware(pt["hardware"], **changes)
        hw = hw_cache[hkey]
        ckey = (id(hw), pt["precision"])
        if ckey not in contexts:
            contexts[ckey] = context(net, hw, pt["precision"], optimizer)
        ctx = contexts[ckey]
        row: dict[str, Any] = {k: pt[k] for k in axes}
        row.update(model=net.name, hardware=hw.name, gpus=pt["gpus"], precision=pt["precision"])
        row.update(_point(ctx, net, pt, optimizer, search_kinds, base))
        rows.append(row)
        if progress is not None:
            progress(i + 1, len(points))
    df = _text_columns(pd.DataFrame(rows))
    df.attrs.update(
        model=net.name,
        image_size=net.image_size,
        optimizer=optimizer,
        scaling="weak" if global_batch is None else "strong",
    )
    return df


def _point(
    ctx: Context,
    net: Network,
    pt: Mapping[str, Any],
    optimizer: str,
    kinds: tuple[str, ...],
    base: _Baselines,
) -> dict[str, Any]:
    g, spec = pt["gpus"], pt["strategy"]
    bpg, gb = _resolve(pt.get("batch_per_gpu"), pt.get("global_batch"))
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        raise UsageError(f"GPU count must be a positive integer, got {g!r}")
    B = bpg * g if bpg is not None else gb
    try:
        if spec is None:
            r = plan(net, g, ctx.hw, ctx.precision, B, optimizer, top=1, kinds=kinds)
            s = r.plans[0].strategy
        else:
            if isinstance(spec, str) and spec.strip().lower() == "dp":
                spec = f"dp={g}"
            s = spec if isinstance(spec, Strategy) else parse_strategy(spec, g)
            if s.gpus != g:
                return _gap(f"plan {s.spec()} uses {s.gpus} GPUs, not {g}")
        return _row(ctx, s, g, bpg, gb, base)
    except NoFeasiblePlanError as e:
        return _gap(f"no plan fits in memory (smallest needs {e.min_memory_bytes / 2**30:.1f} GiB)")
    except PerfmodelError as e:
        return _gap(str(e))


def predict_frame(
    model: str | Network,
    gpus: int,
    strategy: str | Strategy | Sequence[str],
    hardware: str | Hardware = DEFAULT_HARDWARE,
    precision: str = "amp",
    batch_per_gpu: int | None = None,
    global_batch: int | None = None,
    optimizer: str = "sgd",
    image_size: int | None = None,
    **what_if: Any,
) -> pd.DataFrame:
    """One row per plan in ``strategy`` (a spec or a list of specs): step, throughput, speedup,
    memory and the step by part (``breakdown_compute_s``, ...), in SI units.

    ``what_if`` keys change the hardware profile in memory (see :func:`load_hardware`).
    """
    specs = _as_list(strategy)
    return sweep(
        model,
        gpus,
        specs if specs is not None else strategy,
        load_hardware(hardware, **what_if),
        precision,
        batch_per_gpu=batch_per_gpu,
        global_batch=global_batch,
        optimizer=optimizer,
        image_size=image_size,
    )


def plan_frame(
    model: str | Network,
    gpus: int,
    hardware: str | Hardware = DEFAULT_HARDWARE,
    precision: str = "amp",
    global_batch: int | None = None,
    optimizer: str = "sgd",
    image_size: int | None = None,
    top: int = 5,
    kinds: Sequence[str] | None = None,
    **what_if: Any,
) -> pd.DataFrame:
    """The ``top`` plans of a search, fastest first, with why each runner-up loses (SI units).

    ``kinds`` restricts the search (default: every installed kind); ``what_if`` keys change
    the hardware profile in memory. ``speedup_x`` is the plan's own
    (:attr:`~perfmodel.strategies.Prediction.speedup_baseline`).
    """
    hw = load_hardware(hardware, **what_if)
    r = plan(
        model,
        gpus,
        hw,
        precision,
        global_batch,
        optimizer,
        image_size,
        top,
        tuple(kinds) if kinds is not None else available_kinds(),
    )
    rows = []
    for i, (p, why) in enumerate(zip(r.plans, r.reasons, strict=True), 1):
        row: dict[str, Any] = {
            "rank": i,
            "plan": p.strategy.spec(),
            "plan_kind": p.strategy.kind,
            "step_s": p.iteration_time_s,
            "samples_per_s": p.throughput_samples_per_s,
            "speedup_x": math.nan if p.speedup_vs_1gpu is None else p.speedup_vs_1gpu,
            "efficiency_%": math.nan if p.parallel_efficiency is None else 100 * p.parallel_efficiency,
            "memory_per_gpu_bytes": p.memory_per_gpu_bytes,
            "memory_capacity_bytes": p.memory_capacity_bytes,
            "dominant": p.dominant,
            "why": why,
        }
        row.update(answers_for(p, hw, net=load_model(model, image_size)).frame_row())
        row.update({f"breakdown_{k}_s": v for k, v in p.breakdown.items()})
        rows.append(row)
    df = _text_columns(pd.DataFrame(rows))
    best = r.plans[0]
    df.attrs.update(
        model=best.model,
        hardware=best.hardware,
        precision=best.precision,
        global_batch=r.global_batch,
        gpus=gpus,
        baseline=best.speedup_baseline,
    )
    return df


# -- scaling -------------------------------------------------------------------------------
def scale(
    model: str | Network,
    gpus_list: str | Iterable[int],
    hardware: str | Hardware = DEFAULT_HARDWARE,
    precision: str = "amp",
    *,
    batch_per_gpu: int | None = None,
    global_batch: int | None = None,
    strategies: Sequence[str] = ("dp", "pp", "hybrid", "best"),
    optimizer: str = "sgd",
    image_size: int | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Predicted speedup against GPU count: for each strategy kind and count, its best plan.

    Weak scaling with ``batch_per_gpu`` (the default, 32 samples per GPU): the global batch
    grows with the GPUs and the baseline is one GPU at that per-GPU batch. Strong scaling
    with ``global_batch``: the batch is fixed and the baseline is one GPU training on all of
    it (accumulating gradients if it does not fit). ``best`` searches every installed kind.
    A kind with no feasible plan at a count leaves a gap: NaN, with the ``reason``.
    Returns one row per (strategy, gpus); ``df.attrs`` holds the setting and the baseline.
    """
    counts = parse_gpu_list(gpus_list)
    bpg, gb = _resolve(batch_per_gpu, global_batch)
    names = [s.strip() for s in strategies if s.strip()]
    if not names:
        raise UsageError(f"no strategies given (valid: {', '.join(SCALE_STRATEGIES)})")
    for s in names:
        if s not in SCALE_STRATEGIES:
            close = closest_names(s, SCALE_STRATEGIES)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(f"unknown strategy '{s}' (valid: {', '.join(SCALE_STRATEGIES)}){hint}")
    names = list(dict.fromkeys(names))
    if precision not in PRECISIONS:
        raise UsageError(f"unknown precision '{precision}' (valid: {', '.join(PRECISIONS)})")
    net = load_model(model, image_size)
    hw = load_hardware(hardware)
    ctx = context(net, hw, precision, optimizer)
    b1 = bpg if bpg is not None else gb
    assert b1 is not None
    one = one_gpu_step(ctx, b1)
    installed = available_kinds()
    rows: list[dict[str, Any]] = []
    total, done = len(names) * len(counts), 0
    for name in names:
        kinds = installed if name == "best" else (name,)
        for g in counts:
            B = bpg * g if bpg is not None else gb
            assert B is not None
            row: dict[str, Any] = {
                "strategy": name,
                "gpus": g,
                "global_batch": B,
                "batch_per_gpu": B / g,
                "ideal_x": float(g),
            }
            if name not in installed and name != "best":
                row.update(_gap(f"{name} plans need {_KIND_MODULES[name]}, which is not installed"))
            else:
                row.update(_best_of(ctx, net, g, B, kinds, name, optimizer, one, b1))
            rows.append(row)
            done += 1
            if progress is not None:
                progress(done, total)
    df = _text_columns(pd.DataFrame(rows))
    cols = [
        "strategy",
        "gpus",
        "plan",
        "plan_kind",
        "global_batch",
        "batch_per_gpu",
        "step_s",
        "samples_per_s",
        "speedup_x",
        "ideal_x",
        "efficiency_%",
        "memory_per_gpu_bytes",
        "dominant",
        "reason",
        *FRAME_COLUMNS,
    ]
    df = df.reindex(columns=cols)
    df.attrs.update(
        model=net.name,
        image_size=net.image_size,
        hardware=hw.name,
        precision=precision,
        optimizer=optimizer,
        scaling="weak" if bpg is not None else "strong",
        batch_per_gpu=bpg,
        global_batch=gb,
        strategies=names,
        baseline=(
            "none: one sample does not fit one GPU"
            if one is None
            else baseline_text(hw.name, b1, one[1], bpg is not None)
        ),
        baseline_batch=b1,
        baseline_micro_batches=0 if one is None else one[1],
        baseline_step_s=math.nan if one is None else one[0],
        baseline_samples_per_s=math.nan if one is None else b1 / one[0],
    )
    return df


def _best_of(
    ctx: Context,
    net: Network,
    g: int,
    B: int,
    kinds: tuple[str, ...],
    name: str,
    optimizer: str,
    one: tuple[float, int] | None,
    b1: int,
) -> dict[str, Any]:
    """The best plan of ``kinds`` on ``g`` GPUs at global batch ``B``, or a gap with the reason."""
    hw = ctx.hw
    if g > hw.max_gpus:
        return _gap(f"{g} GPUs exceed {hw.name}'s {hw.max_gpus} ({hw.gpus_per_node} per node x {hw.max_nodes} nodes)")
    if g > B and name in ("dp", "ps"):
        return _gap(f"global batch {B} < {g} GPUs: data parallelism needs a sample per GPU")
    try:
        r = plan(net, g, hw, ctx.precision, B, optimizer, top=1, kinds=kinds)
    except NoFeasiblePlanError as e:
        return _gap(
            f"no {name} plan fits in {hw.device.memory_bytes / 2**30:.0f} GiB "
            f"(smallest needs {e.min_memory_bytes / 2**30:.1f} GiB)"
        )
    except UsageError as e:
        return _gap(_why_none(net, g, B, hw, kinds, name, str(e)))
    p = r.plans[0]
    thr = p.throughput_samples_per_s
    speedup = math.nan if one is None else thr / (b1 / one[0])
    mem = p.memory_per_gpu_bytes
    return {
        **frame_columns(net.name, hw, ctx.precision, p.strategy.kind, p.iteration_time_s, thr, mem),
        "plan": p.strategy.spec(),
        "plan_kind": p.strategy.kind,
        "step_s": p.iteration_time_s,
        "samples_per_s": thr,
        "speedup_x": speedup,
        "efficiency_%": 100 * speedup / g,
        "memory_per_gpu_bytes": p.memory_per_gpu_bytes,
        "dominant": p.dominant,
        "reason": None,
    }


def _why_none(net: Network, g: int, B: int, hw: Hardware, kinds: tuple[str, ...], name: str, fallback: str) -> str:
    """Why the search found no ``name`` plan at all on ``g`` GPUs (not a memory problem)."""
    n = sum(1 for _ in candidates(net, g, B, hw.gpus_per_node, kinds))
    if n == 0:
        if name == "pp" and g > len(net.links):
            return (
                f"more GPUs than the {len(net.links)} chain links of {net.name} (a pure pipeline has a stage per GPU)"
            )
        if g == 1 and name not in ("dp", "best"):
            return "nothing to split over one GPU"
        if name == "sp":
            return f"no spatial grid of {g} tiles is searched for {net.name} at {net.image_size} px"
        if B % g and name in ("dp", "ps"):
            return f"global batch {B} does not split over {g} GPUs"
        return f"no {name} plan for {g} GPUs at global batch {B}"
    if name == "sp":
        return f"no spatial split beats splitting samples on {net.name} at {net.image_size} px"
    return f"all {n} {name} candidates were rejected ({fallback})"


def scale_chart(df: pd.DataFrame) -> Figure:
    """Speedup against GPU count per strategy, the ideal line, and parallel efficiency."""
    from .report.charts import scale_chart as _chart

    return _chart(df)


def sweep_chart(
    df: pd.DataFrame,
    x: str = "gpus",
    y: str = "speedup_x",
    by: str | None = None,
    title: str | None = None,
) -> Figure:
    """Column ``y`` against ``x`` of a :func:`sweep` frame, one line per value of ``by``."""
    from .report.charts import sweep_chart as _chart

    return _chart(df, x, y, by, title)

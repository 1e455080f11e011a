"""Sweeps: price plans over the grid of every argument given as a list, one row per point."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..cost.fusion import DEFAULT_FUSION, check_fusion_setting
from ..cost.grouped import DEFAULT_CUDNN_MAJOR, check_cudnn_major
from ..cost.layout import DEFAULT_MEMORY_FORMAT, check_memory_format
from ..errors import NoFeasiblePlanError, PerfmodelError, UsageError, did_you_mean
from ..hardware import DEFAULT_HARDWARE, Hardware
from ..limits import shown
from ..network import Network
from ..search.plan import DEFAULT_BATCH_PER_GPU, plan
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME, check_amp_runtime
from ..strategies.predict import Context, assumptions, context
from ..strategies.spec import Strategy, parse_strategy
from .args import (
    check_batches,
    check_gpus,
    check_hardware,
    check_kinds,
    check_optimizer,
    check_precision,
    check_progress,
    check_strategy,
)
from .cache import Baselines
from .loading import available_kinds, load_hardware, load_model
from .rows import as_list, gap_row, price_row, resolve_batches, software_attrs, text_columns

__all__ = ["sweep", "Progress"]

Progress = Callable[[int, int], None]


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
    kinds: Sequence[str] | str | None = None,
    progress: Progress | None = None,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    fusion: str = DEFAULT_FUSION,
    amp_runtime: str = DEFAULT_AMP_RUNTIME,
    speedup_against: str | None = None,
) -> pd.DataFrame:
    """Price plans over the grid of every argument given as a list; one row per point.

    Accepts: ``model`` a zoo name or :class:`Network`; ``gpus`` integers from 1 to 1,000,000 (Python
    or NumPy, not bools or floats, as every count); ``strategy`` spec strings (each parsed up front: a
    typo raises) or :class:`Strategy` objects (None: search); ``hardware`` profile names, ``.toml``
    paths or :class:`Hardware`; ``precision`` one of fp32, tf32, amp, bf16; batches integers from 1
    to 1e9 (at most one of the two); ``optimizer`` sgd or adam; ``kinds`` strategy kinds as a list
    or a comma list; the run's software (in ``df.attrs``): ``cudnn_major`` one of
    :data:`~perfmodel.cost.grouped.CUDNN_MAJORS`, ``memory_format`` nchw or nhwc, ``fusion`` one of
    :data:`~perfmodel.cost.fusion.FUSIONS` whose kernels run at every precision asked, ``amp_runtime``
    one of :data:`~perfmodel.strategies.amp_runtime.AMP_RUNTIMES`; ``progress`` None or a callable
    taking (points done, points in all). Anything else raises :class:`~perfmodel.errors.UsageError`
    (a what-if value out of range: :class:`~perfmodel.errors.ProfileError`) before any point is priced.

    ``gpus``, ``strategy``, ``hardware``, ``precision``, ``batch_per_gpu``, ``global_batch`` and
    each value of ``what_if`` (keys of :meth:`Hardware.what_if`, e.g.
    ``{"inter_bandwidth_scale": [0.5, 1, 2]}``) may be a list (tuple, range, 1-D NumPy array): the
    sweep is their product, in that order, and each list becomes a column. Hardware what-ifs change
    the profile in memory; every one is built (and checked) before any point is priced.

    With ``strategy`` a spec (``"dp=8"``; ``"pp=4,mb=8"`` whose missing ``dp`` fills the GPU
    count; ``"dp"`` for pure data parallelism on every count) a point costs about a
    millisecond (``benchmarks/whatif_speed.py``); with ``strategy=None`` each point searches
    for the best plan of ``kinds`` (default: every installed kind), which takes a full
    :func:`~perfmodel.search.plan`. Points that cannot run get NaN and a
    ``reason``; a fixed plan that does not fit in memory is still priced (``fits`` False).
    ``speedup_x`` is against one GPU of the same (what-if) profile at one replica's batch (weak
    scaling: ``batch_per_gpu`` samples for data parallelism, global / ``dp`` for plans whose GPUs share
    samples; column ``baseline_batch``), or at the global batch when ``global_batch`` is given (strong
    scaling), accumulating when that does not fit; ``speedup_against="global-batch"`` takes the global batch always, as
    :func:`~perfmodel.strategies.predict` does (``"per-gpu-batch"``: the default's weak baseline
    where ``batch_per_gpu`` is given). Said in ``df.attrs["speedup_against"]``.
    """
    net = load_model(model, image_size)
    what_if = _check_what_if(what_if)
    optimizer = check_optimizer(optimizer)
    search_kinds = check_kinds(kinds) or available_kinds()
    progress = check_progress(progress)
    if batch_per_gpu is not None and global_batch is not None:
        raise UsageError("give at most one of batch_per_gpu and global_batch")
    per_gpu_baseline = _check_speedup_against(speedup_against)
    bpg = DEFAULT_BATCH_PER_GPU if batch_per_gpu is None and global_batch is None else batch_per_gpu
    named = list(zip(_NAMED, (gpus, strategy, hardware, precision, bpg, global_batch), strict=True))
    software = (cudnn_major, memory_format, fusion, amp_runtime)
    axes, fixed = _check_values(*_grid([*named, *what_if.items()]), software)
    hws = _profiles(axes, fixed, list(what_if))  # every what-if built (and checked) before any point is priced
    base, contexts = Baselines(), dict[tuple[int, str], Context]()
    rows: list[dict[str, Any]] = []
    points = list(itertools.product(*axes.values()))
    for i, combo in enumerate(points):
        pt = {**fixed, **dict(zip(axes, combo, strict=True))}
        hw = hws[_profile_key(pt["hardware"], {k: pt[k] for k in what_if})]
        ctx = _context_of(hw, pt["precision"], net, optimizer, software, contexts)
        row: dict[str, Any] = {k: pt[k] for k in axes}
        row.update(model=net.name, hardware=ctx.hw.name, gpus=pt["gpus"], precision=pt["precision"])
        row.update(_point(ctx, net, pt, optimizer, search_kinds, base, per_gpu_baseline))
        rows.append(row)
        if progress is not None:
            progress(i + 1, len(points))
    return _frame(rows, net, optimizer, software, contexts, global_batch is None, per_gpu_baseline)


def _frame(rows: list[dict[str, Any]], net: Network, optimizer: str, software: tuple[int, str, str, str],
           contexts: dict[tuple[int, str], Context], weak: bool, per_gpu_baseline: bool) -> pd.DataFrame:
    """The sweep's frame with its setting in ``attrs`` (``weak``: no global batch was given)."""
    df = text_columns(pd.DataFrame(rows))
    said = {f"{c.hw.name} {c.precision}": assumptions(c) for c in contexts.values()}  # per 'profile precision'
    df.attrs.update(model=net.name, image_size=net.image_size, optimizer=optimizer, **software_attrs(*software),
                    scaling="weak" if weak else "strong", assumptions=said,
                    speedup_against="per-gpu-batch" if weak and per_gpu_baseline else "global-batch")
    return df


#: The arguments of :func:`sweep` that may be axes besides the what-if keys.
_NAMED = ("gpus", "strategy", "hardware", "precision", "batch_per_gpu", "global_batch")


def _check_what_if(what_if: object) -> dict[str, Any]:
    """The what-ifs as a dict of :meth:`Hardware.what_if` keys (their values are checked when each
    profile is built, :func:`_profiles`)."""
    if what_if is None:
        return {}
    if not isinstance(what_if, Mapping):
        raise UsageError(f"what_if must be a dict of Hardware.what_if keys, got {type(what_if).__name__}")
    for key in what_if:
        if not isinstance(key, str) or key in _NAMED:
            raise UsageError(f"what_if keys must be Hardware.what_if keys such as 'inter_bandwidth_scale', got "
                             f"{shown(key, 40)}" + (f" (an argument of sweep: pass {key}=... itself)"
                                                    if key in _NAMED else ""))
    return dict(what_if)


def _axis(value: Any) -> Any:
    """``value`` with NumPy made Python: a 1-D array a list of Python scalars, a NumPy scalar a Python one."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value.tolist()
    return value.item() if isinstance(value, np.generic) else value


def _grid(args: Sequence[tuple[str, Any]]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The sweep's axes (arguments given as lists, tuples, ranges or 1-D NumPy arrays, in order)
    and its fixed arguments."""
    axes: dict[str, list[Any]] = {}
    fixed: dict[str, Any] = {}
    for key, value in args:
        value = _axis(value)
        lst = as_list(value)
        if lst is None:
            fixed[key] = value
        elif not lst:
            raise UsageError(f"sweep axis '{key}' is empty")
        else:
            axes[key] = lst
    return axes, fixed


def _profile_key(hardware: Any, changes: Mapping[str, Any]) -> tuple[Any, ...]:
    return id(hardware) if isinstance(hardware, Hardware) else hardware, repr(sorted(changes.items()))


def _profiles(axes: Mapping[str, list[Any]], fixed: Mapping[str, Any],
              keys: list[str]) -> dict[tuple[Any, ...], Hardware]:
    """Every profile of the sweep: each hardware with each combination of the what-if ``keys``' values,
    built once; a what-if out of range raises its :class:`~perfmodel.errors.ProfileError` (naming
    the key and value) here, before any point is priced."""
    values = [axes.get(k, [fixed.get(k)]) for k in ("hardware", *keys)]
    out: dict[tuple[Any, ...], Hardware] = {}
    for hardware, *combo in itertools.product(*values):
        changes = dict(zip(keys, combo, strict=True))
        key = _profile_key(hardware, changes)
        if key not in out:
            out[key] = load_hardware(hardware, **changes)
    return out


def _context_of(
    hw: Hardware,
    precision: str,
    net: Network,
    optimizer: str,
    software: tuple[int, str, str, str],
    contexts: dict[tuple[int, str], Context],
) -> Context:
    """The pricing context of a point: its (what-if) profile ``hw`` and ``precision``, with ``optimizer``
    and the ``software`` (cuDNN major, memory format, fusion, mixed-precision runtime), each built once
    per sweep (``contexts``)."""
    ckey = (id(hw), precision)
    if ckey not in contexts:
        major, fmt, fusion, runtime = software
        contexts[ckey] = context(net, hw, precision, optimizer, cudnn_major=major, memory_format=fmt,
                                 fusion=fusion, amp_runtime=runtime)
    return contexts[ckey]


#: Values of ``speedup_against`` (:func:`sweep`).
SPEEDUP_AGAINST = ("per-gpu-batch", "global-batch")


def _check_speedup_against(value: object) -> bool:
    """Whether the speedup is against one GPU at the batch per GPU (weak scaling, where given)."""
    if value is None:
        return True
    if value not in SPEEDUP_AGAINST:
        raise UsageError(f"speedup_against must be one of {', '.join(SPEEDUP_AGAINST)}, got {value!r}"
                         f"{did_you_mean(str(value), SPEEDUP_AGAINST)}")
    return value == "per-gpu-batch"


def _check_spec(spec: object) -> str | Strategy | None:
    """A plan of the sweep: None (search), ``"dp"``, a :class:`Strategy` or a spec that parses (a
    typo raises here, before any point is priced; whether its degrees fit a point's GPU count is
    that point's, a ``reason`` where they do not)."""
    checked = check_strategy(spec, optional=True)
    if isinstance(checked, str) and checked.strip().lower() != "dp":
        parse_strategy(checked)
    return checked


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "gpus": check_gpus,
    "strategy": _check_spec,
    "hardware": check_hardware,
    "precision": check_precision,
    "batch_per_gpu": lambda b: check_batches(b, None)[0],
    "global_batch": lambda b: check_batches(None, b)[1],
}


def _check_values(axes: Mapping[str, list[Any]], fixed: Mapping[str, Any], software: tuple[int, str, str, str]
                  ) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The axes and fixed arguments with every value of every named one checked (counts as Python
    ints), and the ``software`` (cuDNN major, memory format, fusion, mixed-precision runtime) one
    that runs at every precision."""
    checked_axes = {k: [_CHECKS[k](v) for v in vs] if k in _CHECKS else vs for k, vs in axes.items()}
    checked_fixed = {k: _CHECKS[k](v) if k in _CHECKS else v for k, v in fixed.items()}
    major, fmt, fusion, runtime = software
    check_cudnn_major(major)
    check_amp_runtime(runtime)
    for prec in checked_axes.get("precision", [checked_fixed.get("precision")]):
        check_fusion_setting(fusion, prec, check_memory_format(fmt))
    return checked_axes, checked_fixed


def _point(
    ctx: Context,
    net: Network,
    pt: Mapping[str, Any],
    optimizer: str,
    kinds: tuple[str, ...],
    base: Baselines,
    per_gpu_baseline: bool,
) -> dict[str, Any]:
    g, spec = pt["gpus"], pt["strategy"]
    bpg, gb = resolve_batches(pt.get("batch_per_gpu"), pt.get("global_batch"))
    B = bpg * g if bpg is not None else gb
    try:
        if spec is None:
            r = plan(net, g, ctx.hw, ctx.precision, B, optimizer, top=1, kinds=kinds, cudnn_major=ctx.cudnn_major,
                     memory_format=ctx.memory_format, fusion=ctx.fusion, amp_runtime=ctx.amp_runtime)
            s = r.plans[0].strategy
        else:
            if isinstance(spec, str) and spec.strip().lower() == "dp":
                spec = f"dp={g}"
            s = spec if isinstance(spec, Strategy) else parse_strategy(spec, g)
            if s.gpus != g:
                return gap_row(f"plan {s.spec()} uses {s.gpus} GPUs, not {g}")
        return price_row(ctx, s, g, bpg, gb, base, per_gpu_baseline)
    except NoFeasiblePlanError as e:
        return gap_row(f"no plan fits in memory (smallest needs {e.min_memory_bytes / 2**30:.1f} GiB)")
    except PerfmodelError as e:
        return gap_row(str(e))

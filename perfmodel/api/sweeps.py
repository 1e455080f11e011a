"""Sweeps: price plans over the grid of every argument given as a list, one row per point."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from ..cost.fusion import DEFAULT_FUSION, check_fusion_setting
from ..cost.grouped import DEFAULT_CUDNN_MAJOR, check_cudnn_major
from ..cost.layout import DEFAULT_MEMORY_FORMAT, check_memory_format
from ..errors import NoFeasiblePlanError, PerfmodelError, UsageError, did_you_mean
from ..hardware import DEFAULT_HARDWARE, Hardware
from ..network import Network
from ..search.plan import DEFAULT_BATCH_PER_GPU, plan
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME, check_amp_runtime
from ..strategies.predict import Context, assumptions, context
from ..strategies.spec import Strategy, parse_strategy
from .args import check_gpus, check_hardware, check_kinds, check_optimizer, check_precision, check_strategy
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

    Accepts: ``model`` a zoo name or :class:`Network`; ``gpus`` integers from 1 to 1,000,000;
    ``strategy`` spec strings or :class:`Strategy` objects (None: search); ``hardware`` profile
    names, ``.toml`` paths or :class:`Hardware`; ``precision`` one of fp32, tf32, amp, bf16;
    batches integers from 1 to 1e9 (at most one of the two); ``optimizer`` sgd or adam;
    ``kinds`` strategy kinds as a list or a comma list; the run's software (in ``df.attrs``):
    ``cudnn_major`` one of :data:`~perfmodel.cost.grouped.CUDNN_MAJORS`, ``memory_format`` nchw or
    nhwc, ``fusion`` one of :data:`~perfmodel.cost.fusion.FUSIONS` whose kernels run at every
    precision asked, ``amp_runtime`` one of :data:`~perfmodel.strategies.amp_runtime.AMP_RUNTIMES`.
    Anything else raises :class:`~perfmodel.errors.UsageError` (a what-if value out of range:
    :class:`~perfmodel.errors.ProfileError`) before any point is priced.

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
    ``speedup_x`` is against one GPU of the same (what-if) profile at ``batch_per_gpu`` samples (weak
    scaling), or at the global batch when ``global_batch`` is given (strong scaling), accumulating when
    that does not fit; ``speedup_against="global-batch"`` takes the global batch always, as
    :func:`~perfmodel.strategies.predict` does (``"per-gpu-batch"``: the default's weak baseline
    where ``batch_per_gpu`` is given). Said in ``df.attrs["speedup_against"]``.
    """
    net = load_model(model, image_size)
    if what_if is not None and not isinstance(what_if, Mapping):
        raise UsageError(f"what_if must be a dict of Hardware.what_if keys, got {type(what_if).__name__}")
    what_if = dict(what_if or {})
    optimizer = check_optimizer(optimizer)
    search_kinds = check_kinds(kinds) or available_kinds()
    if batch_per_gpu is None and global_batch is None:
        batch_per_gpu = DEFAULT_BATCH_PER_GPU
    if batch_per_gpu is not None and global_batch is not None:
        raise UsageError("give at most one of batch_per_gpu and global_batch")
    per_gpu_baseline = _check_speedup_against(speedup_against)
    named = [("gpus", gpus), ("strategy", strategy), ("hardware", hardware), ("precision", precision)]
    named += [("batch_per_gpu", batch_per_gpu), ("global_batch", global_batch)]
    axes, fixed = _grid([*named, *what_if.items()])
    software = (cudnn_major, memory_format, fusion, amp_runtime)
    _check_values(axes, fixed, software)
    base = Baselines()
    contexts: dict[tuple[int, str], Context] = {}
    hws: dict[tuple[Any, ...], Hardware] = {}
    points = list(itertools.product(*axes.values()))
    rows = []
    for i, combo in enumerate(points):
        pt = {**fixed, **dict(zip(axes, combo, strict=True))}
        ctx = _context_of(pt, {k: pt[k] for k in what_if}, net, optimizer, software, hws, contexts)
        row: dict[str, Any] = {k: pt[k] for k in axes}
        row.update(model=net.name, hardware=ctx.hw.name, gpus=pt["gpus"], precision=pt["precision"])
        row.update(_point(ctx, net, pt, optimizer, search_kinds, base, per_gpu_baseline))
        rows.append(row)
        if progress is not None:
            progress(i + 1, len(points))
    df = text_columns(pd.DataFrame(rows))
    said = {f"{c.hw.name} {c.precision}": assumptions(c) for c in contexts.values()}  # per 'profile precision'
    df.attrs.update(model=net.name, image_size=net.image_size, optimizer=optimizer, **software_attrs(*software),
                    scaling="weak" if global_batch is None else "strong", assumptions=said,
                    speedup_against="per-gpu-batch" if global_batch is None and per_gpu_baseline else "global-batch")
    return df


def _grid(args: Sequence[tuple[str, Any]]) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The sweep's axes (arguments given as lists, in order) and its fixed arguments."""
    axes: dict[str, list[Any]] = {}
    fixed: dict[str, Any] = {}
    for key, value in args:
        lst = as_list(value)
        if lst is None:
            fixed[key] = value
        elif not lst:
            raise UsageError(f"sweep axis '{key}' is empty")
        else:
            axes[key] = lst
    return axes, fixed


def _context_of(
    pt: Mapping[str, Any],
    changes: dict[str, Any],
    net: Network,
    optimizer: str,
    software: tuple[int, str, str, str],
    hw_cache: dict[tuple[Any, ...], Hardware],
    contexts: dict[tuple[int, str], Context],
) -> Context:
    """The pricing context of a point: its profile with the what-if ``changes`` and its
    precision, with ``optimizer`` and the ``software`` (cuDNN major, memory format, fusion, mixed-precision
    runtime), each built
    once per sweep (the caches)."""
    hkey = (
        id(pt["hardware"]) if isinstance(pt["hardware"], Hardware) else pt["hardware"],
        repr(sorted(changes.items())),
    )
    if hkey not in hw_cache:
        hw_cache[hkey] = load_hardware(pt["hardware"], **changes)
    hw = hw_cache[hkey]
    ckey = (id(hw), pt["precision"])
    if ckey not in contexts:
        major, fmt, fusion, runtime = software
        contexts[ckey] = context(net, hw, pt["precision"], optimizer, cudnn_major=major, memory_format=fmt,
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


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "gpus": check_gpus,
    "strategy": lambda s: check_strategy(s, optional=True),
    "hardware": check_hardware,
    "precision": check_precision,
    "batch_per_gpu": lambda b: resolve_batches(b, None),
    "global_batch": lambda b: b is None or resolve_batches(None, b),
}


def _check_values(axes: Mapping[str, list[Any]], fixed: Mapping[str, Any], software: tuple[int, str, str, str]) -> None:
    """Every value of every named axis (or fixed argument) is of the kind it must be, and the
    ``software`` (cuDNN major, memory format, fusion, mixed-precision runtime) one that runs at every precision."""
    for key, check in _CHECKS.items():
        for value in axes.get(key, [fixed.get(key)]):
            check(value)
    major, fmt, fusion, runtime = software
    check_cudnn_major(major)
    check_amp_runtime(runtime)
    for prec in axes.get("precision", [fixed.get("precision")]):
        check_fusion_setting(fusion, prec, check_memory_format(fmt))


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

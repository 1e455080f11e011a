"""Scaling curves: for each strategy kind and GPU count, its best plan and speedup."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from ..cost.fusion import DEFAULT_FUSION
from ..cost.grouped import DEFAULT_CUDNN_MAJOR
from ..cost.layout import DEFAULT_MEMORY_FORMAT
from ..errors import NoFeasiblePlanError, UsageError
from ..hardware import DEFAULT_HARDWARE, Hardware
from ..network import Network
from ..report.answers import FRAME_COLUMNS, frame_columns
from ..search.enumerate import KINDS, candidates, no_candidate_reasons
from ..search.plan import plan_in
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME
from ..strategies.predict import (
    Context,
    assumptions,
    baseline_text,
    context,
    data_plan_counts,
    one_gpu_step,
    predict_in,
    replica_batch,
)
from ..strategies.prediction import Prediction
from ..strategies.spec import Strategy
from .args import check_optimizer, check_precision, check_progress, names
from .gpus import parse_gpu_list
from .loading import available_kinds, load_hardware, load_model
from .rows import gap_row, resolve_batches, software_attrs, text_columns
from .sweeps import Progress

__all__ = ["scale", "SCALE_COLUMNS", "SCALE_STRATEGIES"]

#: Names ``scale`` accepts: the plan search's strategy kinds, and ``best`` (all of them).
SCALE_STRATEGIES = (*KINDS, "best")
#: The columns of a scale frame, in order.
SCALE_COLUMNS = (
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
    "baseline_batch",
    "memory_per_gpu_bytes",
    "dominant",
    "reason",
    *FRAME_COLUMNS,
)


def scale(
    model: str | Network,
    gpus_list: str | Iterable[int],
    hardware: str | Hardware = DEFAULT_HARDWARE,
    precision: str = "amp",
    *,
    batch_per_gpu: int | None = None,
    global_batch: int | None = None,
    strategies: Sequence[str] | str = ("dp", "pp", "hybrid", "best"),
    optimizer: str = "sgd",
    image_size: int | None = None,
    progress: Progress | None = None,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    fusion: str = DEFAULT_FUSION,
    amp_runtime: str = DEFAULT_AMP_RUNTIME,
) -> pd.DataFrame:
    """Predicted speedup against GPU count: for each strategy kind and count, its best plan.

    Weak scaling with ``batch_per_gpu`` (the default, 32 samples per GPU): the global batch
    grows with the GPUs and the baseline is one GPU at one replica's batch: that per-GPU batch for
    data parallelism, global / ``dp`` for a plan whose GPUs share samples (column
    ``baseline_batch``; :func:`~perfmodel.strategies.predict.replica_batch`). Strong scaling
    with ``global_batch``: the batch is fixed and the baseline is one GPU training on all of
    it (accumulating gradients if it does not fit). ``best`` searches every kind.
    ``gpus_list`` is what :func:`parse_gpu_list` takes; ``strategies`` names from
    :data:`SCALE_STRATEGIES` (a list or a comma list); batches integers from 1 to 1e9 (at most
    one); ``cudnn_major`` the run's cuDNN (5 to 9), ``memory_format`` nchw or nhwc, ``fusion`` one of
    :data:`~perfmodel.cost.fusion.FUSIONS` (mxnet-bn-add-relu at amp in nhwc only),
    ``amp_runtime`` one of :data:`~perfmodel.strategies.amp_runtime.AMP_RUNTIMES`; wrong kinds of argument
    raise :class:`~perfmodel.errors.UsageError`. A kind with no feasible plan at a count leaves a gap: NaN,
    with the ``reason``. Returns one row per (strategy, gpus); ``df.attrs`` holds the setting and the baseline.
    """
    counts = parse_gpu_list(gpus_list)
    progress = check_progress(progress)
    bpg, gb = resolve_batches(batch_per_gpu, global_batch)
    kinds_asked = names(strategies, "strategies", SCALE_STRATEGIES, "strategy")
    precision = check_precision(precision)
    optimizer = check_optimizer(optimizer)
    net = load_model(model, image_size)
    hw = load_hardware(hardware)
    ctx = context(net, hw, precision, optimizer, cudnn_major=cudnn_major, memory_format=memory_format, fusion=fusion,
                  amp_runtime=amp_runtime)
    b1 = bpg if bpg is not None else gb
    assert b1 is not None
    rows, chosen = _plan_rows(ctx, counts, kinds_asked, bpg, gb, progress)
    one = _set_speedups(ctx, rows, chosen, b1, weak=bpg is not None)
    df = text_columns(pd.DataFrame(rows)).reindex(columns=list(SCALE_COLUMNS))
    df.attrs.update(
        model=net.name,
        image_size=net.image_size,
        hardware=hw.name,
        precision=precision,
        optimizer=optimizer, assumptions=assumptions(ctx),  # the profile and its source, what is excluded
        **software_attrs(ctx.cudnn_major, ctx.memory_format, ctx.fusion, ctx.amp_runtime),
        scaling="weak" if bpg is not None else "strong",
        batch_per_gpu=bpg,
        global_batch=gb,
        strategies=kinds_asked,
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


def _plan_rows(
    ctx: Context, counts: list[int], kinds_asked: list[str], bpg: int | None, gb: int | None,
    progress: Progress | None,
) -> tuple[list[dict[str, Any]], list[tuple[int, Strategy]]]:
    """Per strategy kind and GPU count, the best plan's row (no speedup yet), and the plans chosen
    with their rows' baseline batches."""
    rows: list[dict[str, Any]] = []
    chosen: list[tuple[int, Strategy]] = []
    total, done = len(kinds_asked) * len(counts), 0
    for name in kinds_asked:
        kinds = available_kinds() if name == "best" else (name,)
        for g in counts:
            B = bpg * g if bpg is not None else gb
            assert B is not None
            row: dict[str, Any] = {"strategy": name, "gpus": g, "global_batch": B, "batch_per_gpu": B / g,
                                   "ideal_x": float(g)}
            best, s = _best_of(ctx, ctx.net, g, B, kinds, name)
            row.update(best)
            row["baseline_batch"] = B if bpg is None else replica_batch(s, B) if s is not None else bpg
            rows.append(row)
            chosen += [(row["baseline_batch"], s)] if s is not None else []
            done += 1
            if progress is not None:
                progress(done, total)
    return rows, chosen


def _set_speedups(ctx: Context, rows: list[dict[str, Any]], chosen: list[tuple[int, Strategy]], b1: int,
                  weak: bool) -> tuple[float, int] | None:
    """The sweep's baselines, priced after the plans so that they also run their accumulation counts,
    and every row's speedup against its own (one GPU at the row's ``baseline_batch``: ``b1``, or under
    weak scaling one replica's batch of a plan whose GPUs share samples); a 1-GPU data row slower than
    its baseline becomes it (1 GPU = the serial run). Returns ``b1``'s; ``None``: one sample does not fit."""
    ones: dict[int, tuple[float, int] | None] = {}
    for b in sorted({int(row["baseline_batch"]) for row in rows} | {b1}):
        same = [s for batch, s in chosen if batch == b]
        ones[b] = one_gpu_step(ctx, b, also=data_plan_counts(same, per_replica=weak))
    for row in rows:
        b = int(row["baseline_batch"])
        one = ones[b]
        if one is not None and row["gpus"] == 1 and row["plan_kind"] == "data" and one[0] < row["step_s"]:
            row.update(_plan_row(ctx, predict_in(ctx, Strategy(mb=one[1]), b, baseline=False)))
        speedup = math.nan if one is None or row["reason"] is not None else row["samples_per_s"] / (b / one[0])
        row.update({"speedup_x": speedup, "efficiency_%": 100 * speedup / row["gpus"]})
    return ones[b1]


def _best_of(
    ctx: Context,
    net: Network,
    g: int,
    B: int,
    kinds: tuple[str, ...],
    name: str,
) -> tuple[dict[str, Any], Strategy | None]:
    """The best plan of ``kinds`` on ``g`` GPUs at global batch ``B`` (its row, without the speedup, and
    the plan), or a gap with the reason (and no plan)."""
    hw = ctx.hw
    if g > hw.max_gpus:
        return gap_row(
            f"{g} GPUs exceed {hw.name}'s {hw.max_gpus} ({hw.gpus_per_node} per node x {hw.max_nodes} nodes)"
        ), None
    if g > B and name in ("dp", "ps"):
        return gap_row(f"global batch {B} < {g} GPUs: data parallelism needs a sample per GPU"), None
    try:
        r = plan_in(ctx, g, B, kinds, top=1)  # one context: the kinds at a count share their priced plans
    except NoFeasiblePlanError as e:
        return gap_row(
            f"no {name} plan fits in {hw.device.memory_bytes / 2**30:.0f} GiB "
            f"(smallest needs {e.min_memory_bytes / 2**30:.1f} GiB)"
        ), None
    except UsageError as e:
        return gap_row(_why_none(net, g, B, hw, kinds, name, str(e))), None
    return _plan_row(ctx, r.plans[0]), r.plans[0].strategy


def _plan_row(ctx: Context, p: Prediction) -> dict[str, Any]:
    """The columns of plan ``p``'s row but the speedup (set against the sweep's one baseline)."""
    thr = p.throughput_samples_per_s
    return {
        **frame_columns(ctx.net.name, ctx.hw, ctx.precision, p.strategy.kind, p.iteration_time_s, thr,
                        p.memory_per_gpu_bytes),
        "plan": p.strategy.spec(),
        "plan_kind": p.strategy.kind,
        "step_s": p.iteration_time_s,
        "samples_per_s": thr,
        "memory_per_gpu_bytes": p.memory_per_gpu_bytes,
        "dominant": p.dominant,
        "reason": None,
    }


def _why_none(net: Network, g: int, B: int, hw: Hardware, kinds: tuple[str, ...], name: str, fallback: str) -> str:
    """Why the search found no ``name`` plan at all on ``g`` GPUs (not a memory problem): the
    enumerator's reasons (:func:`~perfmodel.search.enumerate.no_candidate_reasons`) where it has no
    candidate, else that every candidate was rejected."""
    n = sum(1 for _ in candidates(net, g, B, hw.gpus_per_node, kinds))
    if n == 0:
        if g == 1 and name not in ("dp", "best"):
            return "nothing to split over one GPU"
        return "; ".join(no_candidate_reasons(net, g, B, hw.gpus_per_node, kinds))
    if name == "sp":
        return f"no spatial split beats splitting samples on {net.name} at {net.image_size} px"
    return f"all {n} {name} candidates were rejected ({fallback})"

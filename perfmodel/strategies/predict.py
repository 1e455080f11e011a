"""``predict``: a plan's priced terms (:func:`.compose.price`) as a :class:`Prediction`, with
its speedup against one GPU training the same samples."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from ..cost.fusion import DEFAULT_FUSION
from ..cost.grouped import DEFAULT_CUDNN_MAJOR
from ..cost.layout import DEFAULT_MEMORY_FORMAT
from ..errors import BatchSplitError, StrategyError, UsageError
from ..hardware import Hardware
from ..limits import MAX_BATCH, MAX_GPUS, as_integer, check_count, shown
from ..network import Network
from .amp_runtime import DEFAULT_AMP_RUNTIME
from .baseline import Baseline
from .compose import price
from .context import Context, context, weight_group
from .dimension import OPTIMIZER_LAUNCHES
from .inputs import get_model, hardware_of, plan_of
from .prediction import EXCLUDED, Prediction, assumptions, baseline_text
from .priced import Priced
from .spec import Strategy
from .wording import exchange_assumption, stage_split_assumption

__all__ = [
    "Prediction",
    "Priced",
    "predict",
    "predict_in",
    "price",
    "Context",
    "context",
    "EXCLUDED",
    "OPTIMIZER_LAUNCHES",
    "assumptions",
    "baseline_text",
    "largest_batch_on_one_gpu",
    "one_gpu_baseline",
    "replica_batch",
    "one_gpu_step",
    "data_plan_counts",
    "is_own_baseline",
    "unbounded_count",
    "resolve_batch",
    "weight_group",
    "DEFAULT_BATCH_PER_GPU",
    "default_batch_said",
]

#: Default samples per GPU when no batch is given (``predict``, ``plan``, the CLI, the notebook
#: API): 32, the per-GPU batch of Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet
#: in 1 Hour" (2017), section 5.
DEFAULT_BATCH_PER_GPU = 32

#: Even accumulation counts the one-GPU baseline also prices, at most (:func:`_other_counts`).
EVEN_COUNTS = 4
#: Counts past the fewest below which the one-GPU baseline prices every count, even or not (64:
#: at about 2 ms a price, at most about 0.1 s; :func:`_other_counts`).
EVERY_COUNT = 64


# -- the public entry point ----------------------------------------------------------------
def resolve_batch(gpus: int, batch_per_gpu: int | None, global_batch: int | None) -> int:
    if (batch_per_gpu is None) == (global_batch is None):
        raise UsageError("give exactly one of batch_per_gpu (--batch-per-gpu) and global_batch (--global-batch)")
    if batch_per_gpu is not None:
        if batch_per_gpu < 1:
            raise BatchSplitError(f"batch per GPU must be >= 1, got {batch_per_gpu}")
        if batch_per_gpu * gpus > MAX_BATCH:
            raise BatchSplitError(
                f"batch per GPU {shown(batch_per_gpu)} x {gpus} GPUs is too large "
                f"(valid: up to {MAX_BATCH:,} samples per step, {max(1, MAX_BATCH // gpus):,} per GPU)"
            )
        return batch_per_gpu * gpus
    assert global_batch is not None
    if global_batch < 1:
        raise BatchSplitError(f"global batch must be >= 1, got {global_batch}")
    if global_batch > MAX_BATCH:
        raise BatchSplitError(
            f"global batch {shown(global_batch)} is too large (valid: 1 to {MAX_BATCH:,} samples per step)"
        )
    return global_batch


def _memory_per_sample(ctx: Context, s: Strategy, b: int) -> tuple[float, float]:
    """(fixed bytes, bytes per sample) of plan ``s``: memory is affine in the batch."""
    m1 = sum(price(ctx, s, b * s.dp).memory.values())
    m2 = sum(price(ctx, s, 2 * b * s.dp).memory.values())
    per = (m2 - m1) / b
    return m1 - per * b, per


def largest_batch_on_one_gpu(ctx: Context, limit: int) -> int:
    """The largest batch up to ``limit`` whose training fits one GPU (0 if even 1 does not)."""
    fixed, per = _memory_per_sample(ctx, Strategy(), 1)
    cap = ctx.hw.device.memory_bytes
    if fixed + per > cap:
        return 0
    return int(min(limit, (cap - fixed) // per)) if per > 0 else limit


def one_gpu_step(ctx: Context, batch: int, also: Iterable[int] = ()) -> tuple[float, int] | None:
    """(seconds, accumulation steps) for one GPU to train on ``batch`` samples.

    When the batch does not fit at once, the GPU accumulates gradients over the fewest
    micro-batches ``m0`` that fit, or over a count ``m0 < m <= 2 m0`` where that prices faster
    (:func:`_other_counts`), or, when it accumulates, over one of the counts ``also`` (those of the
    data plans it is compared with: ``dp=G,mb=k`` runs one GPU's ``G k`` micro-batches) where that
    fits and prices faster; ``None`` if not even one sample fits.
    """
    largest = largest_batch_on_one_gpu(ctx, batch)
    if largest < 1:
        return None
    steps = math.ceil(batch / largest)
    cap = ctx.hw.device.memory_bytes
    while steps <= batch:
        r = price(ctx, Strategy(mb=steps), batch)
        if sum(r.memory.values()) <= cap:
            break
        steps += 1  # the affine memory estimate was a little optimistic
    else:
        return None
    best = (r.time_s, steps)
    others = _other_counts(batch, steps)
    # without accumulation (one step fits) neither are the plans' counts priced
    plans = sorted({int(m) for m in also if steps < m <= batch and m not in others}) if steps > 1 else []
    for m in others + plans:
        e = price(ctx, Strategy(mb=m), batch)
        if e.time_s < best[0] and sum(e.memory.values()) <= cap:
            best = (e.time_s, m)
    return best


def _other_counts(batch: int, fewest: int) -> list[int]:
    """Accumulation counts ``fewest < m <= 2 fewest`` the baseline also prices (none without
    accumulation): every one of them where there are at most :data:`EVERY_COUNT`, else those that
    split ``batch`` evenly, at most :data:`EVEN_COUNTS` of them.

    A step's time per sample is not monotone in the micro-batch (tile and wave quantisation), and
    ``dp=G,mb=k`` runs on each GPU the micro-batches one GPU runs accumulating over ``G k`` of them,
    even or not: a baseline that skips that count lets such a plan exceed its GPU count (vgg16,
    V100 fp32, B 8192: 59 uneven micro-batches 35.05 s, 64 even ones 34.84 s, dp=16,mb=4 16.02x on
    16 GPUs; resnet50, V100 fp32, B 8192: 64 even micro-batches 23.65 s, dp=16,mb=5's 80 uneven ones
    23.34 s, 16.17x on 16 GPUs with even counts alone). Past :data:`EVERY_COUNT` counts (micro-batches
    of at most ``batch / 64`` samples) only the even ones are priced, and the counts of the data
    plans compared (:func:`one_gpu_step`'s ``also``).
    """
    if fewest <= 1:
        return []
    top = min(2 * fewest, batch)
    if top - fewest <= EVERY_COUNT:
        return list(range(fewest + 1, top + 1))
    small = [d for d in range(1, math.isqrt(batch) + 1) if batch % d == 0]
    divisors = sorted(set(small) | {batch // d for d in small})
    return [m for m in divisors if fewest < m <= top][:EVEN_COUNTS]


def one_gpu_baseline(ctx: Context, batch: int, s: Strategy | None = None, also: Iterable[int] = (),
                     plan_fits: bool = True, per_replica: bool = False) -> Baseline | None:
    """One GPU of the profile training ``batch`` samples per step (accumulating gradients as
    :func:`one_gpu_step` does, ``also`` the accumulation counts it prices besides); ``None`` if
    one sample does not fit. A one-GPU data plan ``s`` is its own baseline (one GPU is exactly
    1.0x); a data plan's own count is among those priced, so that it never exceeds its GPUs
    by running micro-batches the baseline did not try (:func:`data_plan_counts`).

    A plan ``s`` that does not fit (``plan_fits`` False) is priced without the memory bound, so one
    GPU also runs its micro-batches (:func:`unbounded_count` of them) without it, where that is faster:
    else the infeasible plan, skipping the accumulation the feasible baseline pays, shows a speedup
    above its GPU count (resnet50, dp=8, global batch 1e8: 8.06x against 56,755 micro-batches).
    ``per_replica``: ``batch`` is one replica's share of the plan's global batch (global / ``dp``:
    weak scaling's baseline), not the whole of it."""
    if s is not None and is_own_baseline(s):
        return Baseline(ctx.hw.name, batch, s.mb, price(ctx, s, batch).time_s)
    one = one_gpu_step(ctx, batch, [*also, *data_plan_counts([s] if s is not None else [], per_replica)])
    if s is not None and not plan_fits:
        same = unbounded_count(s, batch, per_replica)
        t = price(ctx, Strategy(mb=same), batch).time_s
        if one is None or t < one[0]:
            return Baseline(ctx.hw.name, batch, same, t, fits=False)
    return None if one is None else Baseline(ctx.hw.name, batch, one[1], one[0])


def is_own_baseline(s: Strategy) -> bool:
    """Whether plan ``s`` is its own one-GPU baseline: a data plan on one GPU (1.0x exactly)."""
    return s.gpus == 1 and s.kind == "data" and not s.recompute


def data_plan_counts(plans: Iterable[Strategy], per_replica: bool = False) -> list[int]:
    """The one-GPU accumulation count of each data plan (``dp=G,mb=k``: ``G k`` over the global batch,
    ``k`` over one replica's share of it with ``per_replica``, weak scaling's baseline) of ``plans``."""
    return [s.mb if per_replica else s.dp * s.mb for s in plans if s.kind == "data" and not s.recompute]


def unbounded_count(s: Strategy, batch: int, per_replica: bool = False) -> int:
    """Micro-batches of plan ``s``'s size in ``batch`` samples: its ``dp x mb`` over the global batch,
    its ``mb`` over one replica's share of it (``per_replica``); at most ``batch``."""
    return min(batch, s.mb if per_replica else s.dp * s.mb)


def replica_batch(s: Strategy, global_batch: int) -> int:
    """Samples one of plan ``s``'s replicas trains per step (``global_batch / dp``): weak scaling's
    one-GPU baseline batch. Data parallelism's is one GPU's share; a plan whose ``k`` GPUs share each
    sample's work (filter, channel, spatial, pipeline) is measured against one GPU training what its
    ``k`` GPUs train together, else the speedup counts the larger batch as parallelism (vgg16, A100
    amp, 1 sample per GPU: filter=4 on 4 GPUs 5.46x against one GPU at 1 sample, whose step is
    bound by the weights it reads and updates, which a filter split divides by 4)."""
    return max(1, global_batch // s.dp)


def predict(
    model: str | Network,
    gpus: int,
    strategy: str | Strategy,
    hardware: str | Hardware = "a100-80gb-dgx",
    precision: str = "amp",
    batch_per_gpu: int | None = None,
    global_batch: int | None = None,
    optimizer: str = "sgd",
    image_size: int | None = None,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    fusion: str = DEFAULT_FUSION,
    amp_runtime: str = DEFAULT_AMP_RUNTIME,
) -> Prediction:
    """Price plan ``strategy`` of ``model`` on ``gpus`` GPUs of ``hardware``.

    ``cudnn_major``: the cuDNN of the run's framework (before 8, grouped convolutions run one
    kernel per group: :mod:`perfmodel.cost.grouped`); ``memory_format``: the activations'
    layout, ``nchw`` (PyTorch's default) or ``nhwc`` (:mod:`perfmodel.cost.layout`); ``fusion``: the
    batch-norm/add/ReLU chains the run's framework fuses (:mod:`perfmodel.cost.fusion`; eager: none);
    ``amp_runtime``: the mixed-precision runtime of a 16-bit run (:mod:`.amp_runtime`).

    The batch is ``batch_per_gpu`` samples per GPU (global batch = that times ``gpus``) or
    ``global_batch``. The speedup is against one GPU of the same profile training the same
    global batch (:func:`one_gpu_baseline`, accumulating gradients when they do not fit it at
    once), whatever the plan's kind; a one-GPU data plan is its own baseline (1.0x). The
    baseline is :attr:`Prediction.baseline`. With neither batch given, the batch is
    :data:`DEFAULT_BATCH_PER_GPU` per GPU, said in the assumptions (``global_batch``).

    Counts (``gpus``, the batches, ``image_size``) are Python or NumPy integers, not bools or
    floats; every other argument is checked before the batches, each wrong one a
    :class:`~perfmodel.errors.UsageError` naming it.
    """
    gpus = check_count("gpus", gpus, MAX_GPUS)
    net = get_model(model, image_size)
    hw = hardware_of(hardware)
    s = plan_of(strategy, gpus)
    if s.gpus != gpus:
        raise StrategyError(f"strategy {s.spec()} uses {s.gpus} GPUs, not {gpus}")
    ctx = context(net, hw, precision, optimizer, cudnn_major=cudnn_major, memory_format=memory_format, fusion=fusion,
                  amp_runtime=amp_runtime)
    defaulted = batch_per_gpu is None and global_batch is None
    bpg = _optional_integer("batch_per_gpu", DEFAULT_BATCH_PER_GPU if defaulted else batch_per_gpu)
    p = predict_in(ctx, s, resolve_batch(gpus, bpg, _optional_integer("global_batch", global_batch)))
    return default_batch_said(p, "batch_per_gpu or global_batch") if defaulted else p


def default_batch_said(p: Prediction, options: str) -> Prediction:
    """``p`` with its assumptions saying its batch is the default, an assumption the caller did not
    state (``options``: how to set one, in the caller's words: ``-b or -B`` on the command line)."""
    said = f"{p.global_batch} samples per step (default: {DEFAULT_BATCH_PER_GPU} per GPU; set {options})"
    return replace(p, assumptions={**p.assumptions, "global_batch": said})


def _optional_integer(what: str, value: object) -> int | None:
    """None, or ``value`` as a Python ``int`` (:func:`~perfmodel.limits.as_integer`; its range is
    :func:`resolve_batch`'s to check)."""
    return None if value is None else as_integer(what, value)


def predict_in(
    ctx: Context, s: Strategy, B: int, baseline: bool = True, base: Baseline | None = None
) -> Prediction:
    """:func:`predict` in a pricing context (the search and ``explain`` reuse theirs); the
    speedup is over ``base`` (default: :func:`one_gpu_baseline` at ``B``)."""
    priced = price(ctx, s, B)
    hw = ctx.hw
    t = priced.time_s
    thr = B / t
    ratio: float | None = None
    mem = sum(priced.memory.values())
    if not baseline:
        base, text = None, "not computed"
    else:
        if base is None:
            base = one_gpu_baseline(ctx, B, s, plan_fits=mem <= hw.device.memory_bytes)
        text = f"none: one sample does not fit one GPU of {hw.name}" if base is None else base.text()
        ratio = None if base is None else base.speedup(thr)
    return Prediction(
        model=ctx.net.name,
        hardware=hw.name,
        gpus=s.gpus,
        strategy=s,
        precision=ctx.precision,
        optimizer=ctx.optimizer,
        global_batch=B,
        image_size=ctx.net.image_size,
        iteration_time_s=float(t),
        throughput_samples_per_s=float(thr),
        speedup_vs_1gpu=None if ratio is None else float(ratio),
        speedup_baseline=text,
        memory_per_gpu_bytes=float(mem),
        memory_capacity_bytes=hw.device.memory_bytes,
        breakdown=dict(priced.breakdown),  # copies: the priced plan stays in its context's memo
        memory=dict(priced.memory),
        assumptions={**assumptions(ctx, text), "gradient_exchange": exchange_assumption(s),
                     **({"stage_split": stage_split_assumption(s, priced.details, len(ctx.net.links))}
                        if s.pp > 1 else {}),
                     **({"mp_partition": priced.details["partition_choice"]["why"]} if s.mp > 1 else {})},
        details=dict(priced.details),
        baseline=base,
        cudnn_major=ctx.cudnn_major,
        memory_format=ctx.memory_format,
        fusion=ctx.fusion,
        amp_runtime=ctx.amp_runtime,
    )


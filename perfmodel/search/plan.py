"""``plan``: price every candidate plan and rank them by throughput, saying why runners-up lose."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ..cost.fusion import DEFAULT_FUSION
from ..cost.grouped import DEFAULT_CUDNN_MAJOR
from ..cost.layout import DEFAULT_MEMORY_FORMAT
from ..errors import NoFeasiblePlanError, PerfmodelError, UsageError
from ..hardware import Hardware
from ..limits import MAX_BATCH, MAX_GPUS, as_integer, check_count, shown
from ..network import Network
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME
from ..strategies.baseline import Baseline
from ..strategies.compose import tiles_and_fits
from ..strategies.inputs import check_top, get_model, hardware_of
from ..strategies.predict import (
    DEFAULT_BATCH_PER_GPU,
    Context,
    Prediction,
    assumptions,
    context,
    data_plan_counts,
    one_gpu_baseline,
    predict_in,
    price,
)
from ..strategies.spec import Strategy
from ..strategies.split_search import EXHAUSTIVE_SPLITS, LOCAL_MOVE_LINKS
from ..units import GIB
from .accumulate import fewest_micro_batches
from .enumerate import KINDS, candidates, check_kinds, no_candidate_reasons, variants
from .same_parts import SPARE_SHAPES, rank_distinct

__all__ = [
    "PlanResult", "plan", "default_global_batch", "default_batches", "DEFAULT_BATCH_PER_GPU", "distinct_shapes",
    "shape_key", "Pricer", "plan_in",
]

#: How many of the best structures get their allreduce algorithms and schedules tried.
VARIANT_LEADERS = 12


def default_global_batch(gpus: int) -> int:
    return DEFAULT_BATCH_PER_GPU * gpus


@dataclass(frozen=True)
class PlanResult:
    """Ranked plans (fitting ones, fastest first), why each runner-up loses, and search statistics."""

    plans: tuple[Prediction, ...]
    reasons: tuple[str, ...]
    candidates: int
    priced: int
    rejected: int
    seconds: float
    global_batch: int
    min_memory_bytes: float
    assumptions: dict[str, str]
    infeasible: tuple[Prediction, ...] = field(default=())
    #: per plan, the other allreduce algorithms for its shape and their throughputs
    alternatives: tuple[tuple[tuple[str, float], ...], ...] = field(default=())
    #: the one-GPU run every row's speedup and efficiency are measured against
    baseline: Baseline | None = None

    def to_dict(self) -> dict[str, Any]:
        plans = []
        alts = self.alternatives or tuple(() for _ in self.plans)
        for p, why, alt in zip(self.plans, self.reasons, alts, strict=True):
            d = p.to_dict()
            d["why"] = why
            d["collective"] = p.strategy.comm
            d["alternatives"] = [{"comm": c, "throughput_samples_per_s": t} for c, t in alt]
            plans.append(d)
        return {
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "plans": plans,
            "search": {
                "candidates": self.candidates,
                "priced": self.priced,
                "rejected": self.rejected,
                "seconds": self.seconds,
                "global_batch": self.global_batch,
                "min_memory_bytes": self.min_memory_bytes,
            },
            "assumptions": dict(self.assumptions),
        }


def _why(p: Prediction, best: Prediction) -> str:
    choice = p.details.get("partition_choice")  # mp plans: which candidate partition runs
    why = _why_slower(p, best)
    return f"{why}; {choice['short']}" if isinstance(choice, dict) else why


def _why_slower(p: Prediction, best: Prediction) -> str:
    if not p.fits_in_memory:
        return f"needs {p.memory_per_gpu_bytes / GIB:.1f} GiB > {p.memory_capacity_bytes / GIB:.1f} GiB"
    if p is best:
        return f"best: {p.dominant.replace('_', ' ')} {100 * p.breakdown[p.dominant] / p.iteration_time_s:.0f}% of step"
    overheads = {k: v for k, v in p.breakdown.items() if k != "compute"}
    k = max(overheads, key=lambda x: overheads[x] - best.breakdown.get(x, 0.0)) if overheads else "compute"
    excess = overheads.get(k, 0.0) - best.breakdown.get(k, 0.0)
    c_ratio = p.breakdown.get("compute", 0.0) / max(best.breakdown.get("compute", 1e-30), 1e-30)
    if (p.breakdown.get("compute", 0) - best.breakdown.get("compute", 0)) > max(excess, 0.0):  # most of the loss
        return f"compute x{c_ratio:.2f} of the best plan's (smaller or redundant kernels)"
    label = k.replace("_", " ")
    return f"{label} {100 * p.breakdown.get(k, 0.0) / p.iteration_time_s:.0f}% of step"


def plan(
    model: str | Network,
    gpus: int,
    hardware: str | Hardware = "a100-80gb-dgx",
    precision: str = "amp",
    global_batch: int | None = None,
    optimizer: str = "sgd",
    image_size: int | None = None,
    top: int = 5,
    kinds: tuple[str, ...] | str = KINDS,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    fusion: str = DEFAULT_FUSION,
    amp_runtime: str = DEFAULT_AMP_RUNTIME,
) -> PlanResult:
    """Search data, spatial, pipeline, hybrid, model-parallel and filter/channel plans for ``gpus`` GPUs.

    Every candidate from :func:`~perfmodel.search.enumerate.candidates` is priced (the per-link
    spatial/sample choice and the pipeline stage partition are themselves optimal dynamic
    programs, linear in the chain); plans that fit in memory are ranked by throughput.
    Raises :class:`NoFeasiblePlanError` with the smallest memory any plan needs if none fits.
    ``cudnn_major``: the cuDNN of the run's framework (:mod:`perfmodel.cost.grouped`);
    ``memory_format``: the activations' layout (:mod:`perfmodel.cost.layout`); ``fusion``: the
    batch-norm/add/ReLU chains the run's framework fuses (:mod:`perfmodel.cost.fusion`); ``amp_runtime``:
    the mixed-precision runtime of a 16-bit run (:mod:`perfmodel.strategies.amp_runtime`).
    ``kinds``: strategy kinds as a tuple (list, set) or a comma list (``"dp"``, ``"dp,pp"``); counts
    (``gpus``, ``global_batch``, ``top``, ``image_size``) Python or NumPy integers, not bools or floats.
    """
    t0 = time.perf_counter()
    gpus, top, kinds = check_count("gpus", gpus, MAX_GPUS), check_top(top), check_kinds(kinds)
    global_batch = None if global_batch is None else as_integer("global_batch", global_batch)
    net = get_model(model, image_size)
    hw = hardware_of(hardware)
    if gpus > hw.max_gpus:
        raise UsageError(
            f"{gpus} GPUs exceed {hw.name}'s {hw.max_gpus} ({hw.gpus_per_node} per node x {hw.max_nodes} nodes)"
        )
    ctx = context(net, hw, precision, optimizer, cudnn_major=cudnn_major, memory_format=memory_format, fusion=fusion,
                  amp_runtime=amp_runtime)
    if global_batch is not None:
        return _search(ctx, gpus, global_batch, top, kinds, t0, "")
    # the default batch: 32 per GPU, halved until some plan fits (said in the assumptions)
    batches = default_batches(gpus)
    last: NoFeasiblePlanError | None = None
    for B in batches:
        note = f" (default: {DEFAULT_BATCH_PER_GPU} per GPU)"
        if batches[0] != B:
            note = (f" (the default {DEFAULT_BATCH_PER_GPU} per GPU, {batches[0]}, fits no plan: the largest of "
                    f"{batches[0]}, {batches[1]}, ... samples that fits)")
        try:
            return _search(ctx, gpus, B, top, kinds, t0, note)
        except NoFeasiblePlanError as e:
            last = e
    assert last is not None
    raise NoFeasiblePlanError(
        f"{last} (no default batch fits either: {DEFAULT_BATCH_PER_GPU} per GPU halved down to 1 sample per step)",
        last.min_memory_bytes,
    )


def plan_in(ctx: Context, gpus: int, global_batch: int, kinds: tuple[str, ...] = KINDS, top: int = 5) -> PlanResult:
    """:func:`plan` on a built context at ``global_batch`` (``gpus`` within the profile's): the
    searches of one sweep share the context's priced plans (:func:`~perfmodel.strategies.compose.price`)."""
    return _search(ctx, gpus, global_batch, check_top(top), check_kinds(kinds), time.perf_counter(), "")


def default_batches(gpus: int) -> list[int]:
    """Global batches tried when none is given: 32 per GPU, then halved down to 1 sample per step."""
    out = [default_global_batch(gpus)]
    while out[-1] > 1:
        out.append(out[-1] // 2)
    return out


def _search(
    ctx: Context, gpus: int, B: int, top: int, kinds: tuple[str, ...], t0: float, default_note: str
) -> PlanResult:
    """The search at global batch ``B`` (see :func:`plan`)."""
    net, hw = ctx.net, ctx.hw
    if B < 1:
        raise UsageError(f"global batch must be >= 1, got {shown(B)}")
    if B > MAX_BATCH:
        raise UsageError(f"global batch {shown(B)} is too large (valid: 1 to {MAX_BATCH:,} samples per step)")
    pricer = Pricer(ctx, B)
    # phase 1: every structure with its default options (and the fewest micro-batches that
    # fit, when it does not); phase 2: the options of the best ones
    for s in candidates(net, gpus, B, hw.gpus_per_node, kinds):
        pricer.consider(s)
    leaders = sorted(pricer.priced, key=lambda x: (x[1] > hw.device.memory_bytes, -x[0]))[:VARIANT_LEADERS]
    for _, _, s, _ in leaders:
        for v in variants(s, gpus, hw.gpus_per_node):
            pricer.consider(v)
    # the one-GPU run prices the data plans' accumulation counts too (so none exceeds its GPU
    # count), and where its own count splits over the GPUs, that data plan is a candidate (so
    # on one GPU the best plan is the baseline)
    fit = [x[2] for x in pricer.priced if x[1] <= hw.device.memory_bytes]
    base = one_gpu_baseline(ctx, B, also=data_plan_counts(fit))
    if base is not None and "dp" in kinds and base.micro_batches % gpus == 0:
        pricer.consider(Strategy(dp=gpus, mb=base.micro_batches // gpus))
    priced = pricer.priced
    if not priced:
        if pricer.n_cand:
            why = f"{pricer.n_cand} candidates, all rejected" + (f": {pricer.errors[0]}" if pricer.errors else "")
        else:
            why = "; ".join(no_candidate_reasons(net, gpus, B, hw.gpus_per_node, kinds))
        advice = f"try a global batch that is a multiple of {gpus}, or more" if B % gpus else "try more"
        raise UsageError(
            f"no plan of kind{'s' if len(kinds) > 1 else ''} {','.join(kinds)} runs {net.name} on {gpus} "
            f"GPU{'s' if gpus > 1 else ''} at global batch {B} "
            f"({why}; {advice} strategy kinds)"
        )
    cap = hw.device.memory_bytes
    fitting = [x for x in priced if x[1] <= cap]
    min_mem = min(x[1] for x in priced)
    if not fitting:
        # a smaller batch cannot help: accumulation down to one sample per micro-batch was priced
        more = "more GPUs or " if gpus < hw.max_gpus else ""
        raise NoFeasiblePlanError(
            f"no plan of {net.name} fits in {cap / GIB:.1f} GiB per GPU on {gpus} x {hw.name} at global "
            f"batch {B}: the smallest needs {min_mem / GIB:.1f} GiB, with 1 sample per micro-batch (try {more}"
            f"a GPU with more memory)",
            min_mem,
        )
    chosen, alternatives = distinct_shapes(fitting, top + SPARE_SHAPES)
    preds, alternatives, merged = rank_distinct(chosen, alternatives, lambda s: predict_in(ctx, s, B, base=base), top)
    reasons = [_why(p, preds[0]) + (f"; {m}" if m else "") for p, m in zip(preds, merged, strict=True)]
    over = sorted((x for x in priced if x[1] > cap), key=lambda x: -x[0])[:1]
    infeasible = tuple(predict_in(ctx, x[2], B, baseline=False) for x in over)
    a = assumptions(ctx, preds[0].speedup_baseline)
    a["global_batch"] = f"{B} samples per step{default_note}"
    a["search"] = (
        "dp x sp x pp factorisations, spatial grids (below one sample per GPU too), gradient accumulation "
        "(the fewest micro-batches that fit, every kind), pipeline micro-batches, schedules, allreduce "
        "algorithms, parameter servers, filter/channel/mp splits; one row per plan shape (an mp plan running "
        "a pipeline's contiguous stages is one row with that pipeline, named in its why); a pipeline's stage "
        f"split is the fastest of its contiguous splits where it has at most {EXHAUSTIVE_SPLITS:,}, else of the "
        f"reference splits and every move of one of their cuts by up to {LOCAL_MOVE_LINKS} links (branch and "
        "bound; predict states each plan's)"
    )
    return PlanResult(
        tuple(preds), tuple(reasons), pricer.n_cand, len(priced), pricer.rejected, time.perf_counter() - t0, B,
        min_mem, a, infeasible, tuple(alternatives), base,
    )


Priced = tuple[float, float, Strategy, float]


class Pricer:
    """Prices candidates once each at one global batch and keeps (throughput, memory, plan, step)."""

    #: settle a spatial chain plan's fallback to samples before pricing it (:func:`tiles_and_fits`);
    #: off, every such plan is priced in full first (the same ranking, slower: tests/test_tiles_and_fits.py)
    early_check = True

    def __init__(self, ctx: Context, B: int) -> None:
        self.ctx, self.B = ctx, B
        self.cap = ctx.hw.device.memory_bytes
        self.priced: list[Priced] = []
        self.errors: list[str] = []
        self.seen: set[Strategy] = set()
        self.n_cand = self.rejected = 0

    def evaluate(self, s: Strategy) -> Priced | None:
        """Price ``s``; a spatial group below one sample per GPU tiles (``decomp=spatial``)
        when the per-link choice would leave GPUs idle; a pipeline over memory tries recompute."""
        if s in self.seen:
            return None
        self.seen.add(s)
        self.n_cand += 1
        ctx, B = self.ctx, self.B
        try:
            if self.early_check and s.sp_degree > 1 and s.filter == s.channel == 1:
                # settle the fallback before the price (a pipeline's split search is its dear part)
                tiles, fits = tiles_and_fits(ctx, s, B)
                if not tiles:
                    if not self._tiles_instead(s, not fits):
                        return None
                    s = s.with_(decomp="spatial")
                r = price(ctx, s, B)
            else:
                r = price(ctx, s, B)
                if s.sp_degree > 1 and not r.details.get("spatial_links"):
                    if not self._tiles_instead(s, sum(r.memory.values()) > self.cap):
                        return None
                    s = s.with_(decomp="spatial")
                    r = price(ctx, s, B)
        except PerfmodelError as e:
            self.rejected += 1
            self.errors.append(str(e))
            return None
        mem = sum(r.memory.values())
        if mem > self.cap and s.pp > 1 and not s.recompute:
            try:
                s2 = s.with_(recompute=True)
                r2 = price(ctx, s2, B)
                self.n_cand += 1
                if sum(r2.memory.values()) < mem:
                    s, r, mem = s2, r2, sum(r2.memory.values())
            except PerfmodelError:
                self.rejected += 1
        return B / r.time_s, mem, s, r.time_s

    def _tiles_instead(self, s: Strategy, over: bool) -> bool:
        """Whether spatial plan ``s``, whose every link fell back to sample decomposition (``over``:
        then over the GPU's memory), is priced tiled instead (``decomp=spatial``); else it is data
        parallelism, rejected: tiling is taken where GPUs would idle (below one sample each) or
        the plan does not fit (tiles hold less)."""
        below = math.ceil(self.B // s.dp / s.mb) < s.sp_degree
        if s.decomp == "auto" and (below or over):
            return True
        self.rejected += 1
        self.errors.append(f"{s.spec()} tiles no link: each splits samples instead, which is "
                           f"data parallelism (kind dp)")
        return False

    def consider(self, s: Strategy) -> None:
        """Price ``s``; if it does not fit, also the fewest micro-batches with which it does."""
        got = self.evaluate(s)
        if got is None:
            return
        self.priced.append(got)
        s, mem = got[2].with_(decomp=s.decomp), got[1]  # accumulate the candidate as enumerated
        per_replica = self.B // s.dp
        if mem <= self.cap or s.mp > 1 or per_replica <= s.mb:
            return
        one = self.evaluate(s.with_(mb=per_replica))
        if one is None:
            return
        self.priced.append(one)
        mb = fewest_micro_batches(per_replica, s.mb, mem, one[1], self.cap)
        for _ in range(4):  # the affine estimate is exact up to rounding; step on if it was not
            if mb is None or mb >= per_replica:
                return
            got = self.evaluate(s.with_(mb=mb))
            if got is None:
                return
            self.priced.append(got)
            if got[1] <= self.cap:
                return
            m = math.ceil(per_replica / mb)
            mb = math.ceil(per_replica / (m - 1)) if m > 1 else None


def shape_key(s: Strategy) -> Strategy:
    """The plan's shape: degrees, micro-batches, recompute, balance, decomposition; not how
    gradients are exchanged (allreduce algorithm or parameter server), the pipeline schedule
    (1F1B and GPipe tie on time) or the orientation of a spatial grid (sp=1x2 and sp=2x1 are
    one shape; the faster orientation stands for it)."""
    d, h, w = sorted(s.sp)
    return s.with_(comm="ring", schedule="gpipe", sp=(d, h, w))


def distinct_shapes(fitting: list[Priced], top: int) -> tuple[list[Strategy], list[tuple[tuple[str, float], ...]]]:
    """The ``top`` fastest distinct shapes (each as its fastest variant) and, per shape, the
    other allreduce algorithms' throughputs."""
    fitting = sorted(fitting, key=lambda x: (-x[0], x[1], x[2].spec()))
    groups: dict[Strategy, list[Priced]] = {}
    for x in fitting:
        groups.setdefault(shape_key(x[2]), []).append(x)
    chosen: list[Strategy] = []
    alternatives: list[tuple[tuple[str, float], ...]] = []
    for members in list(groups.values())[:top]:
        best = members[0][2]
        chosen.append(best)
        alts: dict[str, float] = {}
        for thr, _, s, _ in members[1:]:
            if s.comm != best.comm and s.comm not in alts:
                alts[s.comm] = thr
        alternatives.append(tuple(alts.items()))
    return chosen, alternatives

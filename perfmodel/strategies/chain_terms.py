"""A chain plan's step as named terms, built once on numbers (``predict``) or symbols (``explain``).

:func:`chain_terms` composes the dimensions of a plan over the layer chain from what one
GPU does per micro-batch (:class:`ChainStep`): the spatial dimension's compute, halo
exchanges and redistributions, the pipeline's stages, sends and fill-drain step, the data
dimension's gradient exchange (DDP buckets, a parameter server or
``torch.nn.DataParallel``) and the optimizer step. The plan's decisions (the stage split,
the critical stage, the tiled links) are taken on numbers beforehand and passed in, so the
same function gives ``predict``'s breakdown on a numeric :class:`~.dimension.Valuation` and
``explain``'s formula, term by term, on a symbolic one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cost.formulas import Num, ssum
from .amp_step import stage_amp_step
from .context import Context, weight_group
from .data import (
    Drain,
    ExchangeTerms,
    bucket_copies_s,
    buckets,
    drain_stage,
    gradient_exchange,
    stage_backward_s,
)
from .dataparallel import dataparallel_parts
from .dimension import Valuation, step_tail_terms
from .parameter_server import parameter_server_comm_s, parameter_server_links
from .pipeline import critical_stage, cut_sends, pipeline_parts, stage_ranges
from .spatial import SpatialExchanges, halo_exchange_s, held_samples, redistribution_s, spatial_tier
from .spec import Strategy

#: Per-layer seconds: a numpy array (numbers) or a list of expressions (symbols).
PerLayer = Sequence[Num] | np.ndarray

__all__ = ["ChainStep", "ChainTerms", "bucket_segments", "chain_terms"]


@dataclass(frozen=True)
class ChainStep:
    """One micro-batch of a chain plan on one GPU of a spatial group of ``p`` (1: none).

    Per layer, the compute alone (``compute_f``, ``compute_b``) and with half of the layer's
    halo exchange and redistribution in each pass (``fwd``, ``bwd``: what the gradient
    exchange overlaps with); the exchanges' volumes (``None`` without a spatial split); per
    link whether it is tiled; the values it is priced at. Per-layer seconds are numpy
    arrays on numbers, lists of expressions on symbols.
    """

    compute_f: PerLayer
    compute_b: PerLayer
    fwd: PerLayer
    bwd: PerLayer
    exchanges: SpatialExchanges | None
    tiled: Sequence[bool]
    p: int
    val: Valuation


@dataclass(frozen=True)
class ChainTerms:
    """The named terms (seconds, numbers or symbols) and what the details report of them."""

    terms: dict[str, Num]
    body_s: Num
    details: dict[str, Any]


def chain_terms(
    ctx: Context, s: Strategy, q: ChainStep, bounds: Sequence[int] | np.ndarray, crit: int | None = None,
    drain: int | None = None,
) -> ChainTerms:
    """The step's terms with stages ``bounds`` (in links; one stage without a pipeline) and,
    on symbols, the critical stage ``crit`` and the backward phase's bottleneck ``drain`` (see
    :class:`.data.Drain`) the numbers chose."""
    ranges = stage_ranges(ctx, bounds)
    if s.pp > 1:
        terms, body, ends, stages = _pipeline(ctx, s, q, bounds, ranges, crit, drain)
    else:
        terms, body, ends = _single_stage(ctx, s, q)
        stages = Drain()
    if s.dp * s.sp_degree > 1 and (s.is_ps or s.comm == "dataparallel"):
        terms["gradient_bucket_copies"] = bucket_copies_s(ctx, s, q.val.v)
    if s.dp * s.sp_degree > 1:  # the exchange's delays are measured from the body's end
        named = q.val.define("E_body", body, "when the step's body ends: the terms above the gradient exchange's, s")
        ends = [named if e is body else e for e in ends]
        body = named
    exposed, details, ddp = _gradient_exchange(ctx, s, q, ranges, ends, body, stages)
    if ddp is not None:
        terms["gradient_bucket_copies"] = ddp.copies
        terms["nccl_contention"] = ddp.contention
    if s.pp > 1:
        details["drain_stage"] = stages.stage
    terms["gradient_exchange_exposed"] = exposed
    link_params = ctx.link_sum(ctx.cc.params)
    largest = max(float(link_params[bounds[i] : bounds[i + 1]].sum()) for i in range(len(bounds) - 1))
    terms.update(step_tail_terms(largest, ctx.optimizer, q.val.v, stage_amp_step(ctx, ranges), q.val.M,
                                 ctx.param_bytes))
    return ChainTerms(terms, body, details)


def _exchanges(ctx: Context, q: ChainStep, a: int, z: int, suffix: str, where: str) -> tuple[Num, Num]:
    """(halo exchange, redistribution) seconds of layers ``[a, z)`` per micro-batch, both passes,
    with their elements per sample summed into one count each (``N_halo``, ``N_redist``)."""
    x = q.exchanges
    if x is None:
        return 0.0, 0.0
    val = q.val
    bw, alpha, in_node = spatial_tier(q.p, ctx.hw.gpus_per_node, val.lp)
    group = f" (spatial group of {q.p} GPUs {'in one node' if in_node else 'over the network'})"
    halo: Num = 0.0
    redist: Num = 0.0
    h = x.halo_elems[a:z]
    sel = h > 0
    if sel.any():
        k = int(sel.sum())
        n = val.count(f"N_halo{suffix}", float(h[sel].sum()),
                      f"halo elements per sample of the {k} tiled layer{'s' * (k > 1)}{where}{group}")
        halo = halo_exchange_s(n, int(x.supersteps[a:z][sel].sum()), val.b, val.e, bw, alpha)
    c = x.switch_elems[a:z]
    cuts = c > 0
    if cuts.any():
        k = int(cuts.sum())
        n = val.count(f"N_redist{suffix}", float(c[cuts].sum()),
                      f"elements per sample of the {k} tensor{'s' * (k > 1)} redistributed between spatial and "
                      f"sample decomposition{where}{group}")
        redist = redistribution_s(n, k, q.p, val.b, val.e, bw, alpha)
    return halo, redist


def _single_stage(ctx: Context, s: Strategy, q: ChainStep) -> tuple[dict[str, Num], Num, list[Num]]:
    """``M`` micro-batches in turn (the forward pass again before backward under recomputation)."""
    m = q.val.M
    f, b = ssum(q.compute_f), ssum(q.compute_b)
    halo, redist = _exchanges(ctx, q, 0, len(q.compute_f), "", "")
    terms: dict[str, Num] = {"compute": m * (f + b)}
    if s.recompute:
        terms["recompute"] = m * (f + (halo + redist) / 2)  # the forward pass with its exchanges
    if q.p > 1:
        terms["halo_exchange"] = m * halo
        terms["redistribution"] = m * redist
    body = ssum(list(terms.values()))
    return terms, body, [body]


def _pipeline(
    ctx: Context, s: Strategy, q: ChainStep, bounds: Sequence[int] | np.ndarray, ranges: list[tuple[int, int]],
    crit: int | None, drain: int | None,
) -> tuple[dict[str, Num], Num, list[Num], Drain]:
    """The pipeline's terms on its critical stage: compute, recomputation, sends, the bubble,
    and (spatial groups) that stage's halo exchanges and redistributions, each once; and its
    backward phase, for the data dimension's delays."""
    val = q.val
    cf, cb, st_f, st_b, ex = [], [], [], [], []
    for i, (a, z) in enumerate(ranges):
        halo, redist = _exchanges(ctx, q, a, z, f"_{i}", f" of stage {i}")
        cf.append(val.define(f"F_{i}", ssum(q.compute_f[a:z]), f"stage {i}'s forward compute per micro-batch, s"))
        cb.append(val.define(f"B_{i}", ssum(q.compute_b[a:z]), f"stage {i}'s backward compute per micro-batch, s"))
        st_f.append(cf[i] + (halo + redist) / 2)
        st_b.append(cb[i] + (halo + redist) / 2)
        ex.append((halo, redist))

    def held(link: int) -> Num:
        return held_samples(val.b, q.p, bool(q.tiled[link]))

    send_f, send_b = cut_sends(ctx, s, bounds, held, val.lp, val.e)
    if crit is None:
        crit = critical_stage(st_f, st_b, s.recompute)
    body, ends, parts = pipeline_parts(st_f, st_b, send_f, send_b, val.M, s.recompute, crit)
    terms: dict[str, Num] = {
        "compute": val.M * (cf[crit] + cb[crit]),
        "recompute": parts["recompute"],
        "pipeline_p2p": parts["p2p"],
        "pipeline_bubble": parts["bubble"],
    }
    if q.p > 1:
        terms["halo_exchange"] = val.M * ex[crit][0]
        terms["redistribution"] = val.M * ex[crit][1]
    rb = stage_backward_s(st_f, st_b, send_f, send_b, s.recompute)
    stage = drain_stage(rb, s.mb) if drain is None else drain
    return terms, body, ends, Drain(rb, val.M, stage)


def _gradient_exchange(
    ctx: Context, s: Strategy, q: ChainStep, ranges: list[tuple[int, int]], ends: list[Num], body: Num,
    stages: Drain,
) -> tuple[Num, dict[str, Any], ExchangeTerms | None]:
    """(exposed seconds, details, DDP's terms or None) of the data dimension: a parameter
    server's worst case (all workers at once, after compute), ``torch.nn.DataParallel``'s
    scatter/replicate/gather/reduce, or DDP's bucketed allreduce among the GPUs sharing each
    weight (the only one that runs beside backward: :func:`.data.gradient_exchange`)."""
    val = q.val
    params = float(ctx.cc.params.sum())
    if s.is_ps:
        if s.dp <= 1:
            return 0.0, {}, None
        server, worker, alpha = parameter_server_links(ctx, s.gpus, val.lp)
        grad = params * ctx.param_bytes
        return parameter_server_comm_s(grad, s.dp, server, worker, alpha, s.comm == "ps-sharded"), {}, None
    if s.comm == "dataparallel" and s.dp > 1:
        out_elems = float(ctx.cc.evaluate(1.0)["out_elems"][-1])
        parts = dataparallel_parts(
            q.fwd, params * ctx.param_bytes, params * ctx.param_bytes, ctx.input_bytes(val.b),
            val.b * out_elems * val.e, s.dp, val.lp.bw_intra, val.lp.alpha_intra, val.v.launch_s,
        )
        return val.M * ssum(list(parts.values())), {"dataparallel": {k: val.M * v for k, v in parts.items()}}, None
    lp = val.lp if val.symbolic else None
    bwd = bucket_segments(q.bwd, ctx.cc.params * ctx.param_bytes, ranges, val) if val.symbolic else q.bwd
    x = gradient_exchange(ctx, s, bwd, ranges, ends, body, stages, lp, val.v)
    if s.dp * s.sp_degree <= 1:
        return x.exposed, {}, None
    group = weight_group(s, ctx.hw.gpus_per_node)
    details = {
        "gradient_allreduce_s": x.total_comm,
        "gradient_group": {"gpus": group.size, "per_node": group.per_node, "algorithm": s.comm},
    }
    return x.exposed, details, x


def bucket_segments(bwd: PerLayer, grad_bytes: np.ndarray, ranges: Sequence[tuple[int, int]],
                    val: Valuation) -> list[Num]:
    """Per layer backward seconds with each DDP bucket's layers summed into one part (``explain``):
    ``G_<stage>_<k>``, the backward of the layers whose gradients (``grad_bytes`` per layer) fill
    the stage's bucket ``k`` (:func:`.data.buckets`), on one layer of them and 0 on the others
    (a split's one stage is stage 0). The exchange reads the layers only through those sums, so
    its value is the same and its formula names each sum once."""
    out: list[Num] = list(bwd)
    for st, (a, z) in enumerate(ranges):
        lo = 0  # backward order: index 0 is layer z - 1
        for k, (i, _) in enumerate(buckets(grad_bytes[a:z][::-1])):
            layers = range(z - 1 - i, z - lo)
            seg = ssum([bwd[j] for j in layers])
            for j in layers:
                out[j] = 0.0
            out[z - 1 - i] = val.define(f"G_{st}_{k}", seg,
                                        f"backward of the {len(layers)} layers whose gradients fill "
                                        f"bucket {k} of stage {st}, s")
            lo = i + 1
    return out

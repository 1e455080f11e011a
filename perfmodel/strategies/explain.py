"""``explain``: the step time of a plan as a sympy formula in named symbols, and its value.

The formula's terms are predict's breakdown, term by term: the function that builds the
breakdown on the profile's numbers is run on symbols (a symbolic
:class:`~perfmodel.strategies.dimension.Valuation`): :func:`.chain_terms.chain_terms` for
data, parameter-server, spatial, pipeline and hybrid plans, :func:`.split_terms.split_terms`
for filter/channel splits, :func:`.model_parallel.mp_terms` for ``mp=K``. Each layer is
:func:`perfmodel.cost.compute.layer_seconds` on ``ComputeValues.symbols()``, every exchange
a collective or point-to-point in the link symbols, and a count of the plan a term names
(halo elements, exchanged elements per sample) a symbol of its own (``N_halo_0``,
``N_ag_fwd``, ...). The plan's decisions (stage split, critical stage, tiled links, the mp
partition) are the ones ``predict`` took. Lambdified at the profile's values each term is
predict's entry (tests check it), and :meth:`StepFormula.evaluate` prices what-ifs.

Hypergraph model parallelism (``mp=K``) is priced by simulating a schedule: the busiest
GPU's compute, recomputation and sends are closed forms, its idle time (the bubble) and when
each segment's last backward begins come from the simulation, evaluated numerically and
re-run by :meth:`StepFormula.evaluate`. A breakdown entry with no symbolic form would enter
as predict's number, said in the output (:func:`.formula.finish`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sympy as sp

from ..cost.formulas import ceil
from .amp_step import AMP_CASTS_WORDS, amp_update_words
from .chain_terms import ChainStep, chain_terms
from .context import Context, weight_group
from .explain_split import explain_mp, explain_split
from .formula import (
    B_SYM,
    HARDWARE_SYMBOLS,
    LINK,
    SYMBOL_MEANING,
    E,
    M,
    StepFormula,
    SymbolValuation,
    finish,
    layer_exprs,
    symbol_valuation,
    symbol_values,
)
from .predict import predict_in
from .prediction import Prediction
from .spatial import layer_exchange_s, spatial_exchanges, spatial_tier
from .spec import Strategy
from .wording import contention_words, copies_words, param_dtype

__all__ = ["StepFormula", "explain_plan", "SYMBOL_MEANING", "HARDWARE_SYMBOLS"]


def explain_plan(ctx: Context, s: Strategy, global_batch: int) -> StepFormula:
    """The symbolic step formula of plan ``s`` (see the module docstring)."""
    pred = predict_in(ctx, s, global_batch)
    details = pred.details  # the plan's decisions, taken on numbers
    # uneven micro-batches: chain and channel plans are priced at their mean, mp plans (whose
    # schedule is simulated per micro-batch) at the largest, as predict prices them
    m = details["micro_batch"] if s.mp > 1 else details["samples_per_replica"] / s.mb
    values = symbol_values(ctx, weight_group(s, ctx.hw.gpus_per_node))
    values[B_SYM] = float(m)
    values[M] = float(s.mb)
    if s.mp > 1:
        return explain_mp(ctx, s, details, values, pred)
    if s.filter > 1 or s.channel > 1:
        return explain_split(ctx, s, values, pred)
    return _explain_chain(ctx, s, details, values, pred)


def _symbolic_step(ctx: Context, s: Strategy, details: dict[str, Any], val: SymbolValuation) -> ChainStep:
    """Each layer's seconds on one GPU as expressions: a tile of every sample on the links
    predict tiled, ``ceil(b/p)`` samples on the others, each layer with half of its halo
    exchange and redistribution in each pass (as :func:`.spatial.spatial_layers` on numbers)."""
    net, p = ctx.net, s.sp_degree
    b_value = val.values[B_SYM]
    spatial = set(details.get("spatial_links", []))
    tiled = [lk.name in spatial for lk in net.links]
    if p == 1:
        fwd, bwd = layer_exprs(ctx, B_SYM, (1, 1, 1), b_value)
        return ChainStep(fwd, bwd, fwd, bwd, None, tiled, 1, val)
    f_sp, b_sp = layer_exprs(ctx, B_SYM, s.sp, b_value)
    f_sa, b_sa = layer_exprs(ctx, ceil(B_SYM / p), (1, 1, 1), math.ceil(b_value / p))
    cf: list[Any] = []
    cb: list[Any] = []
    for lk, on in zip(net.links, tiled, strict=True):
        cf += (f_sp if on else f_sa)[lk.start : lk.stop]
        cb += (b_sp if on else b_sa)[lk.start : lk.stop]
    x = spatial_exchanges(ctx, s, tiled)
    bw, alpha, _ = spatial_tier(p, ctx.hw.gpus_per_node, LINK)
    halo, redist = layer_exchange_s(x, p, B_SYM, E, bw, alpha)
    half = [(h + r) / 2 for h, r in zip(halo, redist, strict=True)]
    fwd = [f + h for f, h in zip(cf, half, strict=True)]
    bwd = [b + h for b, h in zip(cb, half, strict=True)]
    return ChainStep(cf, cb, fwd, bwd, x, tiled, p, val)


def _explain_chain(
    ctx: Context, s: Strategy, details: dict[str, Any], values: dict[sp.Symbol, float], pred: Prediction
) -> StepFormula:
    """Data, spatial, pipeline and hybrid plans over the layer chain: :func:`.chain_terms.chain_terms`,
    the function that gives predict's breakdown, on symbols, with predict's stage split,
    critical stage and tiled links."""
    val = symbol_valuation(values)
    step = _symbolic_step(ctx, s, details, val)
    if s.pp > 1:
        bounds = np.concatenate([[0], np.cumsum(details["balance"])]).astype(int)
        terms = chain_terms(ctx, s, step, bounds, int(details["critical_stage"]), int(details["drain_stage"])).terms
    else:
        terms = chain_terms(ctx, s, step, np.array([0, len(ctx.net.links)])).terms
    return finish(terms, values, pred, legend=chain_legend(ctx, s, details), meaning=val.meaning,
                  definitions=val.definitions, definition_functions=val.definition_functions)


def chain_legend(ctx: Context, s: Strategy, details: dict[str, Any]) -> dict[str, str]:
    """What each term of a chain plan is, in words (the formula is the pricing's own)."""
    stage = f"stage {details['critical_stage']} of {s.pp} (the critical stage)" if s.pp > 1 else ""
    per = f"of {stage}" if stage else "of every layer"
    again = "every micro-batch but the last" if s.pp > 1 else "all M micro-batches"
    dtype = param_dtype(ctx.param_bytes)  # a 16-bit model's weights, gradients, state
    words = {
        "compute": f"forward and backward compute {per}, M micro-batches",
        "recompute": (
            f"the forward pass again before backward, {again}"
            + (" (with its halo exchanges and redistributions)" if s.sp_degree > 1 else "")
            if s.recompute else "no recomputation"
        ),
        "pipeline_p2p": f"point-to-point sends of {stage} after each pass, alpha + n/beta each, M micro-batches",
        "pipeline_bubble": (
            "the fill-drain step (sum_s F_s + (M - 1)*max_s F_s, likewise backward; Huang et al. 2019) minus "
            f"the busy time of {stage}, never negative"
        ),
        "halo_exchange": (
            f"halo exchanges {per}, forward and backward, one point-to-point superstep per tiled dimension and "
            "pass: supersteps*alpha + 2*b*N_halo*e/beta"
        ),
        "redistribution": (
            f"switches between spatial and sample decomposition {per}, forward and backward, every GPU sending "
            "(p - 1)/p of its 1/p share: 2*k*alpha + 2*(p - 1)/p**2 * b*N_redist*e/beta"
        ),
        "optimizer_step": f"the update of the largest stage's weights: {dtype} traffic over the memory bandwidth, "
        "launches and the step's fixed cost" + amp_update_words(ctx.precision, ctx.amp_runtime),
        "amp_casts": AMP_CASTS_WORDS,
    }
    if s.dp * s.sp_degree == 1:
        words["gradient_exchange_exposed"] = "one GPU holds each weight: no gradient exchange"
    elif s.is_ps:
        words["gradient_exchange_exposed"] = (
            f"parameter server ({s.comm}), worst case: all {s.dp} workers push G gradient bytes and pull G weight "
            f"bytes at once after compute, G = {float(ctx.cc.params.sum()) * ctx.param_bytes:,.0f} bytes"
        )
    elif s.comm == "dataparallel":
        words["gradient_exchange_exposed"] = (
            f"torch.nn.DataParallel on {s.dp} GPUs, per micro-batch: scatter (n - 1) input shares and gather (n - 1) "
            f"output shares through GPU 0's link, broadcast the {dtype} weights and reduce the {dtype} gradients onto "
            "GPU 0 after backward, each forward layer at least n x tau (one process launches for every GPU)"
        )
    else:
        when = "after the last backward pass" if s.overlap == "none" else "overlapped with the last backward pass"
        words["gradient_exchange_exposed"] = (
            f"{s.comm} allreduce of the gradients among the {s.dp * s.sp_degree} GPUs sharing each weight in 25 MiB "
            f"buckets, each once full and the previous one done, {when}; what sticks out past the step's body "
            "slowed by NCCL and the copies"
            + ("; or a stage above the backward bottleneck whose delays outgrow its slack (GPipe's backward grid)"
               if s.pp > 1 else "")
        )
        words["nccl_contention"] = contention_words(s.overlap)
    if s.dp * s.sp_degree > 1:
        words["gradient_bucket_copies"] = copies_words(ctx.param_bytes)
    return words

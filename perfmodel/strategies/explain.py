"""``explain``: the step time of a plan as a sympy formula in named symbols, and its value.

The formula is the pricing's own functions evaluated on symbols: each layer's roofline
(:func:`perfmodel.cost.compute.layer_seconds` on ``ComputeValues.symbols()``), the
collectives on the link symbols, the spatial dimension's halo and redistribution seconds,
the pipeline's cut sends and fill-drain step (:func:`~perfmodel.strategies.pipeline.pipeline_step`),
the bucketed overlap (:func:`~perfmodel.strategies.data.overlapped_exchange`), the
parameter server's worst case and the optimizer step; the plan's decisions (stage split,
tiled links, the mp partition) are the ones ``predict`` took. Lambdified at the profile's
values it gives the iteration time ``predict`` reports (tests check it), and
:meth:`StepFormula.evaluate` prices what-ifs (other hardware values) from the same formula.

Filter and channel splits are closed forms: each pass's exchanges are grouped by
collective, one term per collective with the summed elements per sample as a symbol
(``N_ag_fwd`` ...). Hypergraph model parallelism (``mp=K``) is priced by simulating a
schedule: compute, recomputation and point-to-point sends of the busiest GPU are closed
forms, its idle time and when each GPU's last backward ends come from the simulation
(re-run by :meth:`StepFormula.evaluate`). Spatial plans' halo exchanges and
redistributions (switching between spatial and sample decomposition at a cut) are
point-to-point closed forms on the spatial group's tier, grouped like the split exchanges
(``N_halo``, ``N_redist``: the summed elements per sample). Parameter-server exchanges are
the worst case ``predict`` reports, in the same link symbols (central: ``2*N*G/link +
2*N*alpha``; sharded: ``2*(N - 1)/N*G/beta + 2*(N - 1)*alpha``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.formulas import ceil
from .context import Context, weight_group
from .data import bucket_copies_s, gradient_exchange
from .dataparallel import dataparallel_parts
from .dimension import optimizer_step_s
from .explain_split import explain_mp, explain_split
from .formula import (
    B_SYM,
    HARDWARE_SYMBOLS,
    LINK,
    SYMBOL_MEANING,
    SYMBOLS,
    E,
    M,
    StepFormula,
    count_words,
    finish,
    layer_exprs,
    symbol_values,
)
from .memory import INPUT_BYTES_PER_ELEMENT
from .parameter_server import parameter_server_comm_s, parameter_server_links
from .pipeline import cut_sends, pipeline_step
from .predict import predict_in, price
from .prediction import Prediction
from .spatial import halo_exchange_s, held_samples, redistribution_s, spatial_exchanges, spatial_tier
from .spec import Strategy

__all__ = ["StepFormula", "explain_plan", "SYMBOL_MEANING", "HARDWARE_SYMBOLS"]


@dataclass(frozen=True)
class _SpatialComm:
    """A spatial plan's halo exchanges and redistributions per micro-batch, priced by the
    spatial dimension's own formulas (:func:`halo_exchange_s`, :func:`redistribution_s`).

    Per layer (:class:`SpatialExchanges`): the halo elements per sample (0 off the tiled
    links), the supersteps of its exchange, and the elements per sample of the tensor
    redistributed at its start. ``bw``/``alpha`` the group's tier.
    """

    p: int
    halo_elems: np.ndarray
    supersteps: np.ndarray
    switch_elems: np.ndarray
    bw: Any
    alpha: Any
    where: str

    def layer(self, j: int) -> Any:
        """Seconds of layer ``j``'s halo exchange and redistribution (both passes)."""
        h, c = float(self.halo_elems[j]), float(self.switch_elems[j])
        halo = halo_exchange_s(h, int(self.supersteps[j]), B_SYM, E, self.bw, self.alpha) if h > 0 else 0
        return halo + (redistribution_s(c, 1, self.p, B_SYM, E, self.bw, self.alpha) if c > 0 else 0)

    def grouped(
        self, a: int, z: int, suffix: str, values: dict[sp.Symbol, float], meaning: dict[str, str], where: str
    ) -> tuple[Any, Any, dict[str, str]]:
        """(halo seconds, redistribution seconds, their words by term) of layers ``a:z`` with their
        elements summed into symbols ``N_halo<suffix>`` and ``N_redist<suffix>``."""
        halo: Any = 0
        redist: Any = 0
        words: dict[str, str] = {}
        sel = [j for j in range(a, z) if self.halo_elems[j] > 0]
        if sel:
            n_sym = sp.Symbol(f"N_halo{suffix}", positive=True)
            values[n_sym] = float(sum(float(self.halo_elems[j]) for j in sel))
            meaning[str(n_sym)] = f"halo elements per sample of the {count_words(len(sel), 'tiled layer')}{where}"
            steps = int(sum(int(self.supersteps[j]) for j in sel))
            halo = halo_exchange_s(n_sym, steps, B_SYM, E, self.bw, self.alpha)
            words["halo_exchange"] = (
                f"halo exchange of {count_words(len(sel), 'layer')}, forward and backward, one point-to-point per "
                f"tiled dimension, alpha + n/beta each: {steps}*{self.alpha} + 2*b*{n_sym}*e/{self.bw}"
            )
        cuts = [j for j in range(a, z) if self.switch_elems[j] > 0]
        if cuts:
            r_sym = sp.Symbol(f"N_redist{suffix}", positive=True)
            values[r_sym] = float(sum(float(self.switch_elems[j]) for j in cuts))
            meaning[str(r_sym)] = (
                f"elements per sample of the {count_words(len(cuts), 'tensor')} redistributed between spatial "
                f"and sample decomposition{where}"
            )
            redist = redistribution_s(r_sym, len(cuts), sp.Integer(self.p), B_SYM, E, self.bw, self.alpha)
            words["redistribution"] = (
                f"{count_words(len(cuts), 'redistribution')}, forward and backward, every GPU sending (p - 1)/p of "
                f"its 1/p share: {2 * len(cuts)}*{self.alpha} + 2*(p - 1)/p**2 * b*{r_sym}*e/{self.bw}"
            )
        return halo, redist, words


def _spatial_comm(ctx: Context, s: Strategy, tiled: list[bool]) -> _SpatialComm:
    """The halo and redistribution pieces of the spatial dimension (:func:`spatial_exchanges`)."""
    x = spatial_exchanges(ctx, s, tiled)
    bw, alpha, in_node = spatial_tier(s.sp_degree, ctx.hw.gpus_per_node, LINK)
    where = "in one node" if in_node else "over the network"
    return _SpatialComm(s.sp_degree, x.halo_elems, x.supersteps, x.switch_elems, bw, alpha, where)


def explain_plan(ctx: Context, s: Strategy, global_batch: int) -> StepFormula:
    """The symbolic step formula of plan ``s`` (see the module docstring)."""
    pred = predict_in(ctx, s, global_batch)
    priced = price(ctx, s, global_batch)
    # the mean micro-batch: uneven micro-batches are priced at their mean (chain, channels)
    m = priced.details.get("samples_per_replica", priced.details.get("micro_batch", 1)) / s.mb
    values = symbol_values(ctx, weight_group(s, ctx.hw.gpus_per_node))
    values[B_SYM] = float(m)
    values[M] = float(s.mb)
    if s.mp > 1:
        return explain_mp(ctx, s, priced.details, values, pred)
    if s.filter > 1 or s.channel > 1:
        return explain_split(ctx, s, values, pred)
    return _explain_chain(ctx, s, priced.details, values, pred)


@dataclass
class _Chain:
    """A chain plan's layers as expressions, and what the formula collects while it is built."""

    fwd: list[Any]
    bwd: list[Any]
    tiled: list[bool]
    comm: _SpatialComm | None
    values: dict[sp.Symbol, float]
    terms: dict[str, Any]
    legend: dict[str, str]
    meaning: dict[str, str]

    def bwd_with_comm(self) -> list[Any]:
        """Backward seconds with half of each layer's halo exchange and redistribution (the
        gradient exchange overlaps with these, as in the spatial dimension's layers)."""
        if self.comm is None:
            return self.bwd
        return [x + self.comm.layer(j) / 2 for j, x in enumerate(self.bwd)]


def _chain_layers(ctx: Context, s: Strategy, details: dict[str, Any], values: dict[sp.Symbol, float]) -> _Chain:
    """Each layer's seconds on one GPU: a tile of every sample on tiled links, ``ceil(b/p)`` samples else."""
    net, p = ctx.net, s.sp_degree
    spatial = set(details.get("spatial_links", []))
    tiled = [lk.name in spatial for lk in net.links]
    if p == 1:
        fwd, bwd = layer_exprs(ctx, B_SYM, (1, 1, 1), values[B_SYM])
        return _Chain(fwd, bwd, tiled, None, values, {}, {}, {})
    f_sp, b_sp = layer_exprs(ctx, B_SYM, s.sp, values[B_SYM])
    f_sa, b_sa = layer_exprs(ctx, ceil(B_SYM / p), (1, 1, 1), math.ceil(values[B_SYM] / p))
    fwd, bwd = [], []
    for lk, t in zip(net.links, tiled, strict=True):
        fwd += (f_sp if t else f_sa)[lk.start : lk.stop]
        bwd += (b_sp if t else b_sa)[lk.start : lk.stop]
    return _Chain(fwd, bwd, tiled, _spatial_comm(ctx, s, tiled), values, {}, {}, {})


def _group_words(s: Strategy, c: _Chain) -> str:
    return f"p = {s.sp_degree} GPUs of the spatial group {c.comm.where}, per micro-batch" if c.comm else ""


def _pipeline(ctx: Context, s: Strategy, c: _Chain, balance: list[int]) -> tuple[Any, list[Any], list[tuple[int, int]]]:
    """(pipeline seconds, each stage's last backward end, its layers) of the priced split."""
    net = ctx.net
    bounds = np.concatenate([[0], np.cumsum(balance)]).astype(int)
    ranges = [(net.links[bounds[i]].start, net.links[bounds[i + 1] - 1].stop) for i in range(s.pp)]
    st_f, st_b = [], []
    stage_words: list[str] = []
    for i, (a, z) in enumerate(ranges):
        extra: Any = 0
        if c.comm is not None:
            halo, redist, words = c.comm.grouped(a, z, f"_{i}", c.values, c.meaning, f" of stage {i}")
            extra = (halo + redist) / 2
            if words:
                stage_words.append(f"stage {i}: " + "; ".join(words.values()))
        st_f.append(sp.Add(*c.fwd[a:z]) + extra)
        st_b.append(sp.Add(*c.bwd[a:z]) + extra)

    def held(link: int) -> Any:
        return held_samples(B_SYM, s.sp_degree, c.tiled[link])

    send_f, send_b = cut_sends(ctx, s, bounds, held, LINK, E)
    body, ends = pipeline_step(st_f, st_b, send_f, send_b, M, s.recompute)
    c.terms["pipeline"] = body
    if stage_words:
        c.legend["pipeline"] = (
            "each stage's forward and backward carry half of its halo exchanges and redistributions "
            f"({_group_words(s, c)}): " + " | ".join(stage_words)
        )
    return body, ends, ranges


def _single_stage(s: Strategy, c: _Chain) -> Any:
    """Compute of the ``M`` micro-batches in turn, and the spatial group's exchanges."""
    c.terms["compute"] = M * (sp.Add(*c.fwd) + sp.Add(*c.bwd)) + (M * sp.Add(*c.fwd) if s.recompute else 0)
    if c.comm is not None:
        halo, redist, words = c.comm.grouped(0, len(c.fwd), "", c.values, c.meaning, "")
        again = " (and the forward half again under recomputation)" if s.recompute else ""
        scale = sp.Rational(3, 2) if s.recompute else 1
        for key, t in (("halo_exchange", halo), ("redistribution", redist)):
            if key in words:
                c.terms[key] = M * scale * t
                c.legend[key] = f"{_group_words(s, c)}{again}; {words[key]}"
    return sp.Add(*c.terms.values())


def _parameter_server(ctx: Context, s: Strategy, c: _Chain) -> None:
    """The worst case predict reports: every worker pushes G gradient bytes and pulls G weight
    bytes at once, after compute (:func:`parameter_server_comm_s` on the link symbols)."""
    n, g_bytes = s.dp, float(ctx.cc.params.sum()) * GRAD_BYTES_PER_PARAM
    server, worker, alpha = parameter_server_links(ctx, s.gpus, LINK)
    sharded = s.comm == "ps-sharded"
    c.terms["gradient_exchange_exposed"] = parameter_server_comm_s(g_bytes, n, server, worker, alpha, sharded)
    where = "over the network" if alpha == LINK.alpha_net else "inside the node"
    how = (
        f"sharded over {n} workers: each pushes and pulls (N - 1)/N of G over its own link"
        if sharded
        else f"central: {n} workers push and pull G at once through the server's link"
    )
    c.legend["gradient_exchange_exposed"] = (
        f"parameter server, worst case (all workers at once) {where}; {how}; G = {g_bytes:,.0f} bytes"
    )


def _dataparallel(ctx: Context, s: Strategy, fwd: list[Any]) -> tuple[Any, str]:
    """torch.nn.DataParallel's exposed seconds: :func:`.dataparallel.dataparallel_parts` on symbols."""
    n, net = s.dp, ctx.net
    params = float(ctx.cc.params.sum())
    parts = dataparallel_parts(
        fwd, params * 4, params * GRAD_BYTES_PER_PARAM,
        B_SYM * float(np.prod(net.input_shape)) * INPUT_BYTES_PER_ELEMENT,
        B_SYM * float(ctx.cc.evaluate(1.0)["out_elems"][-1]) * E, n, LINK.bw_intra, LINK.alpha_intra,
        SYMBOLS.launch_s,
    )
    words = (f"torch.nn.DataParallel on {n} GPUs, per micro-batch: scatter (n - 1) input shares and gather "
             f"(n - 1) output shares through GPU 0's link, broadcast the fp32 weights and reduce the fp32 "
             f"gradients onto GPU 0 after backward ({params:,.0f} parameters), and each forward layer at least "
             f"n x tau (one process launches for every GPU)")
    return M * sp.Add(*parts.values()), words


def _explain_chain(
    ctx: Context, s: Strategy, details: dict[str, Any], values: dict[sp.Symbol, float], pred: Prediction
) -> StepFormula:
    """Data, spatial, pipeline and hybrid plans over the layer chain."""
    c = _chain_layers(ctx, s, details, values)
    if s.pp > 1:
        body, ends, ranges = _pipeline(ctx, s, c, details["balance"])
    else:
        body = _single_stage(s, c)
        ends, ranges = [body], [(0, len(ctx.net.layers))]
    if s.dp * s.sp_degree > 1:
        c.terms["gradient_bucket_copies"] = bucket_copies_s(ctx, s, ranges, SYMBOLS)
    if s.is_ps:
        _parameter_server(ctx, s, c)
    elif s.comm == "dataparallel" and s.dp > 1:
        c.terms["gradient_exchange_exposed"], c.legend["gradient_exchange_exposed"] = _dataparallel(ctx, s, c.fwd)
    else:
        exposed, _, slowed = gradient_exchange(ctx, s, c.bwd_with_comm(), ranges, ends, body, LINK)
        if s.dp * s.sp_degree > 1:
            c.terms["nccl_contention"] = slowed
            c.terms["gradient_exchange_exposed"] = exposed
    params_gpu = max(int(st["params"]) for st in details["stages"]) if s.pp > 1 else int(ctx.cc.params.sum())
    c.terms["optimizer_step"] = optimizer_step_s(params_gpu, ctx.optimizer, SYMBOLS)
    return finish(c.terms, values, pred, legend=c.legend, meaning=c.meaning)

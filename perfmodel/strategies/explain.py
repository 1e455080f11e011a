"""``explain``: the step time of a plan as a sympy formula in named symbols, and its value.

The formula is built from the same pieces ``predict`` evaluates: each layer's symbolic
counts (:mod:`perfmodel.network.counts`), the roofline of :func:`perfmodel.cost.formulas.kernel_time`,
the collectives of :func:`perfmodel.cost.collectives.allreduce_expr`, the pipeline schedule
and the bucketed overlap recurrence. Lambdified at the profile's values it gives the
iteration time ``predict`` reports (a test holds them equal). Terms a closed form does not
yet cover (halo exchange and redistribution of spatial plans; filter, channel and
hypergraph model-parallel communication) enter as named constants with their values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy as sp

from ..cost.collectives import Group, allreduce_expr, link_params, link_symbols
from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.formulas import kernel_time, p2p, smax
from ..network.layers import MATMUL_KINDS
from .data import BUCKET_BYTES
from .memory import optimizer_traffic_bytes_per_param
from .predict import OPTIMIZER_LAUNCHES, Context, Prediction, _predict, price, weight_group
from .spec import Strategy

__all__ = ["StepFormula", "explain_plan", "SYMBOL_MEANING"]

R, R32, ETA_C, ETA_L, ETA_M, W_HALF, BETA_MEM, TAU, E, M = sp.symbols(
    "R R_fp32 eta_conv eta_linear eta_mem w_half beta_mem tau e M", positive=True
)
LINK = link_symbols()

#: What each symbol stands for (printed by ``explain``).
SYMBOL_MEANING: dict[str, str] = {
    "b": "samples per micro-batch on one GPU",
    "M": "micro-batches per step",
    "R": "peak FLOP/s of convolutions and matmuls at the precision",
    "R_fp32": "fp32 (CUDA-core) peak FLOP/s, for elementwise ops",
    "eta_conv": "achievable fraction of R for convolutions",
    "eta_linear": "achievable fraction of R for linear layers",
    "eta_mem": "achievable fraction of the memory bandwidth",
    "w_half": "half-performance work of a kernel, FLOPs (Hockney's n_1/2)",
    "beta_mem": "memory bandwidth, bytes/s",
    "tau": "kernel launch overhead, s",
    "e": "bytes per activation element",
    "beta_intra": "effective intra-node bandwidth per GPU, bytes/s",
    "alpha_intra": "intra-node latency, s",
    "beta_net": "effective network bandwidth per GPU, bytes/s",
    "alpha_net": "network latency, s",
}


@dataclass(frozen=True)
class StepFormula:
    """Named terms (sympy), their numeric values, the total and the prediction it reproduces."""

    terms: dict[str, sp.Expr]
    term_values: dict[str, float]
    values: dict[sp.Symbol, float]
    iteration_time_s: float
    prediction: Prediction

    @property
    def total(self) -> sp.Expr:
        return sp.Add(*self.terms.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.prediction.strategy.spec(),
            "formula": "T_step = " + " + ".join(f"T_{k}" for k in self.terms),
            "terms": {k: {"expression": _short(v), "value_s": self.term_values[k]} for k, v in self.terms.items()},
            "symbols": {
                str(s): {"value": v, "meaning": SYMBOL_MEANING.get(str(s), "")} for s, v in self.values.items()
            },
            "iteration_time_s": self.iteration_time_s,
            "predict_iteration_time_s": self.prediction.iteration_time_s,
        }


def _short(expr: sp.Expr, limit: int = 600) -> str:
    text = str(expr)
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text)} characters)"


def _values(ctx: Context, group: Group | None) -> dict[sp.Symbol, float]:
    hw, eff = ctx.hw, ctx.hw.compute[ctx.precision]
    lp = link_params(hw, group)
    return {
        R: hw.device.peak(ctx.precision),
        R32: hw.device.peak_flops_per_s["fp32"],
        ETA_C: eff.conv,
        ETA_L: eff.linear,
        ETA_M: eff.memory,
        W_HALF: eff.half_work_flops,
        BETA_MEM: hw.device.memory_bandwidth_bytes_per_s,
        TAU: hw.kernel_launch_s,
        E: ctx.elem_bytes,
        LINK.bw_intra: lp.bw_intra,
        LINK.alpha_intra: lp.alpha_intra,
        LINK.bw_net_per_gpu: lp.bw_net_per_gpu,
        LINK.alpha_net: lp.alpha_net,
    }


def _layer_exprs(ctx: Context, batch: Any, grid: tuple[int, int, int]) -> tuple[list[Any], list[Any]]:
    """Forward and backward time of every layer as expressions (the roofline of compute.layer_times).

    Every count is linear in the batch, so the count of ``batch`` samples is ``batch`` times
    the per-sample count on the tile (the same sympy counts, evaluated at ``b = 1``).
    """
    ev = ctx.cc.evaluate(1.0, *grid)
    fwd, bwd = [], []
    for i, c in enumerate(ctx.cc.network.layers):
        mm = c.kind in MATMUL_KINDS
        eta = ETA_C if c.kind in ("conv", "conv_transpose") else ETA_L
        f_mm1, f1 = float(ev["fwd_matmul_flops"][i]), float(ev["fwd_flops"][i])
        t_mm = kernel_time(batch * f_mm1, R, eta, W_HALF) if mm and f_mm1 else 0
        t_mem = (batch * float(ev["fwd_mem_elems"][i]) * E + c.params * E) / (BETA_MEM * ETA_M)
        fwd.append(smax(t_mm, batch * (f1 - f_mm1) / R32, t_mem) + TAU)
        b_in1, b_w1 = float(ev["bwd_input_flops"][i]), float(ev["bwd_weight_flops"][i])
        b_in_mm1 = min(b_in1, f_mm1) if mm else 0.0
        t_b: Any = 0
        if mm and b_in_mm1:
            t_b += kernel_time(batch * b_in_mm1, R, eta, W_HALF)
        if mm and b_w1:
            t_b += kernel_time(batch * b_w1, R, eta, W_HALF)
        t_bmem = (batch * float(ev["bwd_mem_elems"][i]) * E + c.params * (E + GRAD_BYTES_PER_PARAM)) / (
            BETA_MEM * ETA_M
        )
        bwd.append(smax(t_b, batch * (b_in1 - b_in_mm1) / R32, t_bmem) + (2 if mm else 1) * TAU)
    return fwd, bwd


def _buckets(grad_bytes: np.ndarray) -> list[tuple[int, float]]:
    """(index in backward order after which a bucket is full, its bytes), as overlapped_exchange fills them."""
    out, acc = [], 0.0
    for i, g in enumerate(grad_bytes):
        acc += g
        if acc >= BUCKET_BYTES:
            out.append((i, acc))
            acc = 0.0
    if acc > 0:
        out.append((len(grad_bytes) - 1, acc))
    return out


def explain_plan(ctx: Context, s: Strategy, global_batch: int) -> StepFormula:
    """The symbolic step formula of plan ``s`` (see the module docstring)."""
    pred = _predict(ctx, s, global_batch)
    priced = price(ctx, s, global_batch)
    net = ctx.net
    m = int(priced.details.get("micro_batch", 1))
    b_sym = sp.Symbol("b", positive=True)
    g = ctx.hw.gpus_per_node
    share = s.dp * s.sp_degree
    group = weight_group(s, g)
    values = _values(ctx, group)
    values[b_sym] = float(m)
    values[M] = float(s.mb)
    terms: dict[str, sp.Expr] = {}
    if s.filter > 1 or s.channel > 1 or s.mp > 1:
        for k, v in priced.breakdown.items():
            sym = sp.Symbol(f"T_{k}")
            terms[k] = sym
            values[sym] = v
        return _finish(terms, values, pred)
    if s.sp_degree > 1:
        spatial = set(priced.details.get("spatial_links", []))
        p = s.sp_degree
        fwd: list[Any] = []
        bwd: list[Any] = []
        f_sp, b_sp = _layer_exprs(ctx, b_sym, s.sp)
        f_sa, b_sa = _layer_exprs(ctx, sp.ceiling(b_sym / p), (1, 1, 1))
        for lk in net.links:
            src = (f_sp, b_sp) if lk.name in spatial else (f_sa, b_sa)
            fwd += src[0][lk.start : lk.stop]
            bwd += src[1][lk.start : lk.stop]
        extra = priced.breakdown.get("halo_exchange", 0.0) + priced.breakdown.get("redistribution", 0.0)
    else:
        fwd, bwd = _layer_exprs(ctx, b_sym, (1, 1, 1))
        extra = 0.0
    t_halo = sp.Symbol("T_halo_redistribution")
    if s.pp > 1:
        bounds = np.concatenate([[0], np.cumsum(priced.details["balance"])]).astype(int)
        st_f, st_b, send = [], [], []
        for i in range(s.pp):
            a, z = net.links[bounds[i]].start, net.links[bounds[i + 1] - 1].stop
            st_f.append(sp.Add(*fwd[a:z]))
            st_b.append(sp.Add(*bwd[a:z]))
            if i < s.pp - 1:
                last = bounds[i + 1] - 1
                nbytes = (
                    b_sym
                    * ctx.cut_elems[last]
                    * E
                    / (s.sp_degree if net.links[last].name in set(priced.details.get("spatial_links", [])) else 1)
                )
                across = ((i + 1) * s.sp_degree) % g == 0 and s.pp * s.sp_degree > g
                send.append(
                    p2p(nbytes, LINK.bw_net_per_gpu, LINK.alpha_net)
                    if across
                    else p2p(nbytes, LINK.bw_intra, LINK.alpha_intra)
                )
        sf = [st_f[i] + (send[i] if i < s.pp - 1 else 0) for i in range(s.pp)]
        sb = [st_b[i] + (send[i - 1] if i > 0 else 0) for i in range(s.pp)]
        rb = [sb[i] + (st_f[i] if s.recompute else 0) for i in range(s.pp)]
        t_f = sp.Add(*sf) + (M - 1) * smax(*sf)
        t_b = sp.Add(*sb) + (M - 1) * smax(*rb) if s.mb > 1 else sp.Add(*sb)
        body = t_f + t_b
        terms["pipeline"] = body
        ends = [body - sp.Add(*sb[:i]) for i in range(s.pp)]
        ranges = [(net.links[bounds[i]].start, net.links[bounds[i + 1] - 1].stop) for i in range(s.pp)]
    else:
        per_mb = sp.Add(*fwd) + sp.Add(*bwd)
        body = M * per_mb + (M * sp.Add(*fwd) if s.recompute else 0)
        terms["compute"] = body
        if extra:
            terms["halo_redistribution"] = s.mb * t_halo
            values[t_halo] = extra / s.mb
            body = body + s.mb * t_halo
        ends = [body]
        ranges = [(0, len(net.layers))]
    # gradient exchange
    grad = ctx.cc.params * GRAD_BYTES_PER_PARAM
    if s.is_ps:
        pspriced = priced.details["parameter_server"]
        t_exp = sp.Symbol("T_ps_exchange")
        terms["gradient_exchange_exposed"] = t_exp
        values[t_exp] = float(pspriced["worst_case_s"]) - float(
            pred.iteration_time_s - priced.breakdown["gradient_exchange_exposed"] - priced.breakdown["optimizer_step"]
        )
    elif share > 1:
        end_max: Any = 0
        for (a, z), end_s in zip(ranges, ends, strict=True):
            bw_rev = bwd[a:z][::-1]
            start = end_s - sp.Add(*bw_rev)
            prefix = [start]
            for t in bw_rev:
                prefix.append(prefix[-1] + t)
            end: Any = start
            for i, nbytes in _buckets(grad[a:z][::-1]):
                end = smax(end, prefix[i + 1]) + allreduce_expr(nbytes, group, LINK, s.comm)
            end_max = end if end_max == 0 else smax(end_max, end)
        terms["gradient_exchange_exposed"] = smax(0, end_max - body)
    # optimizer
    params_gpu = max(int(st["params"]) for st in priced.details["stages"]) if s.pp > 1 else int(ctx.cc.params.sum())
    terms["optimizer_step"] = (
        params_gpu * optimizer_traffic_bytes_per_param(ctx.optimizer) / (BETA_MEM * ETA_M) + OPTIMIZER_LAUNCHES * TAU
    )
    return _finish(terms, values, pred)


def _finish(terms: dict[str, sp.Expr], values: dict[sp.Symbol, float], pred: Prediction) -> StepFormula:
    term_values = {}
    for k, v in terms.items():
        free = sorted(v.free_symbols, key=str) if isinstance(v, sp.Basic) else []
        fn = sp.lambdify(free, v, modules=["math", {"Max": max, "Min": min, "ceiling": math.ceil}])
        term_values[k] = float(fn(*(values[x] for x in free)))
    used = set().union(*(v.free_symbols for v in terms.values() if isinstance(v, sp.Basic)))
    return StepFormula(
        terms, term_values, {k: v for k, v in values.items() if k in used}, sum(term_values.values()), pred
    )

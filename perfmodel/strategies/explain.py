"""``explain``: the step time of a plan as a sympy formula in named symbols, and its value.

The formula is built from the same pieces ``predict`` evaluates: each layer's symbolic
counts (:mod:`perfmodel.network.counts`), the roofline of :func:`perfmodel.cost.formulas.kernel_time`,
the collectives of :mod:`perfmodel.cost.formulas` (ring allreduce, all-gather,
reduce-scatter, point-to-point) on the link symbols, the pipeline schedule and the
bucketed overlap recurrence. Lambdified at the profile's values it gives the iteration
time ``predict`` reports (a test holds them equal), and :meth:`StepFormula.evaluate`
prices what-ifs (other hardware values) from the same formula.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from ..cost.collectives import Group, allreduce_expr, link_params, link_symbols, ring_tier
from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.formulas import kernel_time, p2p, ring_allgather, ring_allreduce, ring_reduce_scatter, smax
from ..errors import UsageError
from ..network.layers import MATMUL_KINDS
from .channels import BREAKDOWN_KEYS, split_counts, split_plan
from .data import BUCKET_BYTES
from .memory import INPUT_BYTES_PER_ELEMENT, optimizer_traffic_bytes_per_param
from .model_parallel import mp_partition, segments, simulate
from .predict import OPTIMIZER_LAUNCHES, Context, Prediction, _predict, price, weight_group
from .spatial import network_halos
from .spec import Strategy

__all__ = ["StepFormula", "explain_plan", "SYMBOL_MEANING", "HARDWARE_SYMBOLS"]

R, R32, ETA_C, ETA_L, ETA_M, W_HALF, BETA_MEM, TAU, E, M = sp.symbols(
    "R R_fp32 eta_conv eta_linear eta_mem w_half beta_mem tau e M", positive=True
)
B_SYM = sp.Symbol("b", positive=True)
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

#: The symbols a what-if may change (:meth:`StepFormula.evaluate`, ``explain --set``): the
#: hardware profile's numbers. The batch, micro-batches, element size and the plan's element
#: counts fix the plan itself.
HARDWARE_SYMBOLS: tuple[str, ...] = (
    "R", "R_fp32", "eta_conv", "eta_linear", "eta_mem", "w_half", "beta_mem", "tau",
    "beta_intra", "alpha_intra", "beta_net", "alpha_net",
)

#: Short names of the split collectives in symbol names, and their words in legends.
_OPS = {
    "allgather": ("ag", "all-gather", "all-gathered"),
    "reduce_scatter": ("rs", "reduce-scatter", "reduce-scattered"),
    "allreduce": ("ar", "allreduce", "all-reduced"),
}
_RING = {"allgather": ring_allgather, "reduce_scatter": ring_reduce_scatter, "allreduce": ring_allreduce}

_MODULES: list[Any] = ["math", {"Max": max, "Min": min, "ceiling": math.ceil}]


@dataclass(frozen=True)
class StepFormula:
    """Named terms (sympy), their numeric values, the total and the prediction it reproduces.

    ``legend`` explains terms whose symbols need it (grouped exchanges), ``meaning`` the
    plan's own symbols (element counts, simulated times), ``notes`` what is not a closed
    form. ``resimulate`` (``mp`` plans) recomputes the simulated symbols at other values.
    """

    terms: dict[str, sp.Expr]
    term_values: dict[str, float]
    values: dict[sp.Symbol, float]
    iteration_time_s: float
    prediction: Prediction
    legend: dict[str, str] = field(default_factory=dict)
    meaning: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    resimulate: Callable[[dict[sp.Symbol, float]], dict[sp.Symbol, float]] | None = field(
        default=None, repr=False, compare=False
    )
    functions: dict[str, Callable[..., float]] = field(default_factory=dict, repr=False, compare=False)
    all_values: dict[sp.Symbol, float] = field(default_factory=dict, repr=False, compare=False)

    @property
    def total(self) -> sp.Expr:
        return sp.Add(*self.terms.values())

    def meaning_of(self, name: str) -> str:
        return self.meaning.get(name) or SYMBOL_MEANING.get(name, "a named term of the breakdown, s")

    def what_if_values(self, changes: Mapping[str | sp.Symbol, float]) -> dict[sp.Symbol, float]:
        """The symbol values with hardware symbols ``changes`` replaced (and simulated times redone)."""
        base = self.all_values or self.values
        by_name = {str(s): s for s in base}
        new = dict(base)
        for key, value in changes.items():
            name = str(key)
            if name not in HARDWARE_SYMBOLS:
                raise UsageError(
                    f"what-if of '{name}': only hardware symbols can change (valid: {', '.join(HARDWARE_SYMBOLS)})"
                )
            v = float(value)
            if not (math.isfinite(v) and v > 0):
                raise UsageError(f"what-if of '{name}': the value must be a positive finite number, got {value!r}")
            if name in by_name:
                new[by_name[name]] = v
        if self.resimulate is not None:
            new.update(self.resimulate(new))
        return new

    def evaluate(self, changes: Mapping[str | sp.Symbol, float] | None = None) -> dict[str, float]:
        """Each term's seconds with hardware symbols set to ``changes`` (names or symbols).

        A symbol the formula does not contain changes nothing.
        """
        vals = self.what_if_values(changes or {})
        return {k: _value(self.functions.get(k), v, vals) for k, v in self.terms.items()}

    def time_s(self, changes: Mapping[str | sp.Symbol, float] | None = None) -> float:
        """The step time with hardware symbols set to ``changes`` (:meth:`evaluate`)."""
        return float(sum(self.evaluate(changes).values()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.prediction.strategy.spec(),
            "formula": "T_step = " + " + ".join(f"T_{k}" for k in self.terms),
            "terms": {
                k: {"expression": _short(v), "value_s": self.term_values[k], "legend": self.legend.get(k, "")}
                for k, v in self.terms.items()
            },
            "symbols": {str(s): {"value": v, "meaning": self.meaning_of(str(s))} for s, v in self.values.items()},
            "notes": list(self.notes),
            "iteration_time_s": self.iteration_time_s,
            "predict_iteration_time_s": self.prediction.iteration_time_s,
        }


def _short(expr: sp.Expr, limit: int = 600) -> str:
    text = str(expr)
    return text if len(text) <= limit else text[:limit] + f" ... ({len(text)} characters)"


def _lambdify(expr: Any) -> Callable[..., float]:
    """A function of the values dict (numbers pass through)."""
    if not isinstance(expr, sp.Basic):
        value = float(expr)
        return lambda values: value
    free = sorted(expr.free_symbols, key=str)
    fn = sp.lambdify(free, expr, modules=_MODULES)
    return lambda values: float(fn(*(values[x] for x in free)))


def _value(fn: Callable[..., float] | None, expr: Any, values: dict[sp.Symbol, float]) -> float:
    return float((fn or _lambdify(expr))(values))


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


def _layer_exprs(
    ctx: Context,
    batch: Any,
    grid: tuple[int, int, int],
    counts: dict[str, np.ndarray] | None = None,
    params: np.ndarray | None = None,
) -> tuple[list[Any], list[Any]]:
    """Forward and backward time of every layer as expressions (the roofline of compute.layer_times).

    Every count is linear in the batch, so the count of ``batch`` samples is ``batch`` times
    the per-sample count on the tile (the same sympy counts, evaluated at ``b = 1``), or of
    ``counts`` per sample and ``params`` per layer where given (a GPU's share of a split).
    """
    ev = counts if counts is not None else ctx.cc.evaluate(1.0, *grid)
    fwd, bwd = [], []
    for i, c in enumerate(ctx.cc.network.layers):
        n_par = float(params[i]) if params is not None else c.params
        mm = c.kind in MATMUL_KINDS
        eta = ETA_C if c.kind in ("conv", "conv_transpose") else ETA_L
        f_mm1, f1 = float(ev["fwd_matmul_flops"][i]), float(ev["fwd_flops"][i])
        t_mm = kernel_time(batch * f_mm1, R, eta, W_HALF) if mm and f_mm1 else 0
        t_mem = (batch * float(ev["fwd_mem_elems"][i]) * E + n_par * E) / (BETA_MEM * ETA_M)
        fwd.append(smax(t_mm, batch * (f1 - f_mm1) / R32, t_mem) + TAU)
        b_in1, b_w1 = float(ev["bwd_input_flops"][i]), float(ev["bwd_weight_flops"][i])
        b_in_mm1 = min(b_in1, f_mm1) if mm else 0.0
        t_b: Any = 0
        if mm and b_in_mm1:
            t_b += kernel_time(batch * b_in_mm1, R, eta, W_HALF)
        if mm and b_w1:
            t_b += kernel_time(batch * b_w1, R, eta, W_HALF)
        t_bmem = (batch * float(ev["bwd_mem_elems"][i]) * E + n_par * (E + GRAD_BYTES_PER_PARAM)) / (
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


def _overlap_end(start: Any, bwd_rev: list[Any], grad_rev: np.ndarray, group: Group, comm: str) -> Any:
    """When the last gradient bucket is reduced: data.overlapped_exchange on expressions."""
    prefix = [start]
    for t in bwd_rev:
        prefix.append(prefix[-1] + t)
    end: Any = start
    for i, nbytes in _buckets(grad_rev):
        end = smax(end, prefix[i + 1]) + allreduce_expr(nbytes, group, LINK, comm)
    return end


def _tier(group: Group) -> tuple[Any, Any, str]:
    """The bandwidth and latency a ring over ``group`` runs at (:func:`ring_tier`), in words too."""
    bw, alpha = ring_tier(group, LINK)
    where = "in one node" if group.nodes <= 1 else f"over {group.nodes} nodes, {group.per_node} GPUs each"
    return bw, alpha, where


def _ring(op: str, n_bytes: Any, group: Group, count: int = 1) -> Any:
    """``count`` ring collectives ``op`` over ``group`` moving ``n_bytes`` in all (one latency each)."""
    bw, alpha, _ = _tier(group)
    p = sp.Integer(group.size)
    fn = _RING[op]
    return fn(n_bytes, p, bw, alpha) + (count - 1) * fn(0, p, bw, alpha)


def _count(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")


@dataclass(frozen=True)
class _SpatialComm:
    """A spatial plan's halo exchanges and redistributions per micro-batch, as predict's ``_spatial``.

    Per layer: the halo elements per sample (0 off the tiled links), the supersteps (tiled
    dimensions) of its exchange, and the elements per sample of the tensor redistributed at
    its start (a cut where the decomposition switches). ``bw``/``alpha`` the group's tier.
    """

    p: int
    halo_elems: np.ndarray
    per_dim: np.ndarray
    switch_elems: np.ndarray
    bw: Any
    alpha: Any
    where: str

    def halo(self, j: int) -> Any:
        """Seconds of layer ``j``'s halo exchange (both passes): 2 p2p + 2 (per_dim - 1) alpha."""
        h = float(self.halo_elems[j])
        if h <= 0:
            return 0
        return 2 * p2p(B_SYM * h * E, self.bw, self.alpha) + 2 * (int(self.per_dim[j]) - 1) * self.alpha

    def switch(self, j: int) -> Any:
        """Seconds of the redistribution at layer ``j`` (both passes): each GPU sends (p-1)/p of its share."""
        c = float(self.switch_elems[j])
        if c <= 0:
            return 0
        p = sp.Integer(self.p)
        return 2 * p2p(B_SYM * c * E / p * (p - 1) / p, self.bw, self.alpha)

    def grouped(
        self, a: int, z: int, suffix: str, values: dict[sp.Symbol, float], meaning: dict[str, str], where: str
    ) -> tuple[Any, Any, dict[str, str]]:
        """(halo seconds, redistribution seconds, their words by term) of layers ``a:z`` with their elements summed
        into symbols ``N_halo<suffix>`` and ``N_redist<suffix>``."""
        halo: Any = 0
        redist: Any = 0
        words: dict[str, str] = {}
        sel = [j for j in range(a, z) if self.halo_elems[j] > 0]
        if sel:
            n_sym = sp.Symbol(f"N_halo{suffix}", positive=True)
            values[n_sym] = float(sum(float(self.halo_elems[j]) for j in sel))
            meaning[str(n_sym)] = f"halo elements per sample of the {_count(len(sel), 'tiled layer')}{where}"
            steps = int(sum(2 * int(self.per_dim[j]) for j in sel))
            halo = steps * self.alpha + 2 * B_SYM * n_sym * E / self.bw
            words["halo_exchange"] = (
                f"halo exchange of {_count(len(sel), 'layer')}, forward and backward, one point-to-point per "
                f"tiled dimension, alpha + n/beta each: {steps}*{self.alpha} + 2*b*{n_sym}*e/{self.bw}"
            )
        cuts = [j for j in range(a, z) if self.switch_elems[j] > 0]
        if cuts:
            r_sym = sp.Symbol(f"N_redist{suffix}", positive=True)
            values[r_sym] = float(sum(float(self.switch_elems[j]) for j in cuts))
            meaning[str(r_sym)] = (
                f"elements per sample of the {_count(len(cuts), 'tensor')} redistributed between spatial "
                f"and sample decomposition{where}"
            )
            p = sp.Integer(self.p)
            redist = 2 * len(cuts) * self.alpha + 2 * B_SYM * r_sym * E * (p - 1) / (p**2 * self.bw)
            words["redistribution"] = (
                f"{_count(len(cuts), 'redistribution')}, forward and backward, every GPU sending (p - 1)/p of "
                f"its 1/p share: {2 * len(cuts)}*{self.alpha} + 2*(p - 1)/p**2 * b*{r_sym}*e/{self.bw}"
            )
        return halo, redist, words


def _spatial_comm(ctx: Context, s: Strategy, spatial_links: set[str]) -> _SpatialComm:
    """The halo and redistribution pieces predict's ``_spatial`` adds, for the links it tiled."""
    net, grid, p = ctx.net, s.sp, s.sp_degree
    halos, _ = network_halos(net, grid)
    tiled = [lk.name in spatial_links for lk in net.links]
    layer_tiled = np.repeat(tiled, [lk.stop - lk.start for lk in net.links])
    per_dim = np.array([sum(1 for x in grid[3 - layer.spatial_dims :] if x > 1) for layer in net.layers])
    switch = np.zeros(len(net.layers))
    for i in range(1, len(net.links)):
        if tiled[i] != tiled[i - 1]:
            switch[net.links[i].start] += ctx.cut_elems[i - 1]
    if p <= ctx.hw.gpus_per_node:
        bw, alpha, where = LINK.bw_intra, LINK.alpha_intra, "in one node"
    else:
        bw, alpha, where = LINK.bw_net_per_gpu, LINK.alpha_net, "over the network"
    return _SpatialComm(p, np.where(layer_tiled, halos, 0.0), per_dim, switch, bw, alpha, where)


def explain_plan(ctx: Context, s: Strategy, global_batch: int) -> StepFormula:
    """The symbolic step formula of plan ``s`` (see the module docstring)."""
    pred = _predict(ctx, s, global_batch)
    priced = price(ctx, s, global_batch)
    # the mean micro-batch: uneven micro-batches are priced at their mean (predict.price)
    m = priced.details.get("samples_per_replica", priced.details.get("micro_batch", 1)) / s.mb
    values = _values(ctx, weight_group(s, ctx.hw.gpus_per_node))
    values[B_SYM] = float(m)
    values[M] = float(s.mb)
    if s.mp > 1:
        return _explain_mp(ctx, s, priced.details, values, pred)
    if s.filter > 1 or s.channel > 1:
        return _explain_split(ctx, s, values, pred)
    return _explain_chain(ctx, s, priced.details, priced.breakdown, values, pred)


def _explain_chain(
    ctx: Context,
    s: Strategy,
    details: dict[str, Any],
    breakdown: dict[str, float],
    values: dict[sp.Symbol, float],
    pred: Prediction,
) -> StepFormula:
    """Data, spatial, pipeline and hybrid plans over the layer chain."""
    net = ctx.net
    b_sym = B_SYM
    g = ctx.hw.gpus_per_node
    share = s.dp * s.sp_degree
    group = weight_group(s, g)
    terms: dict[str, sp.Expr] = {}
    notes: list[str] = []
    legend: dict[str, str] = {}
    meaning: dict[str, str] = {}
    comm: _SpatialComm | None = None
    if s.sp_degree > 1:
        spatial = set(details.get("spatial_links", []))
        p = s.sp_degree
        fwd: list[Any] = []
        bwd: list[Any] = []
        f_sp, b_sp = _layer_exprs(ctx, b_sym, s.sp)
        f_sa, b_sa = _layer_exprs(ctx, sp.ceiling(b_sym / p), (1, 1, 1))
        for lk in net.links:
            src = (f_sp, b_sp) if lk.name in spatial else (f_sa, b_sa)
            fwd += src[0][lk.start : lk.stop]
            bwd += src[1][lk.start : lk.stop]
        comm = _spatial_comm(ctx, s, spatial)
        # each layer's halo exchange and redistribution, half in each pass (as predict adds them):
        # the gradient exchange overlaps with these backward times
        bwd_c = [bwd[j] + (comm.halo(j) + comm.switch(j)) / 2 for j in range(len(bwd))]
        group_words = f"p = {p} GPUs of the spatial group {comm.where}, per micro-batch"
    else:
        fwd, bwd = _layer_exprs(ctx, b_sym, (1, 1, 1))
        bwd_c = bwd
    if s.pp > 1:
        bounds = np.concatenate([[0], np.cumsum(details["balance"])]).astype(int)
        st_f, st_b, send = [], [], []
        stage_words: list[str] = []
        for i in range(s.pp):
            a, z = net.links[bounds[i]].start, net.links[bounds[i + 1] - 1].stop
            extra: Any = 0
            if comm is not None:
                halo, redist, words = comm.grouped(a, z, f"_{i}", values, meaning, f" of stage {i}")
                extra = (halo + redist) / 2
                if words:
                    stage_words.append(f"stage {i}: " + "; ".join(words.values()))
            st_f.append(sp.Add(*fwd[a:z]) + extra)
            st_b.append(sp.Add(*bwd[a:z]) + extra)
            if i < s.pp - 1:
                last = bounds[i + 1] - 1
                # a GPU of a spatial group sends a tile of each sample, or ceil(b/p) whole samples
                # where the link is sample-decomposed (predict's per_gpu)
                spatial_cut = net.links[last].name in set(details.get("spatial_links", []))
                if s.sp_degree == 1:
                    held: Any = b_sym
                else:
                    held = b_sym / s.sp_degree if spatial_cut else sp.ceiling(b_sym / s.sp_degree)
                nbytes = held * ctx.cut_elems[last] * E
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
        if stage_words:
            legend["pipeline"] = (
                f"each stage's forward and backward carry half of its halo exchanges and redistributions "
                f"({group_words}): " + " | ".join(stage_words)
            )
        ends = [body - sp.Add(*sb[:i]) for i in range(s.pp)]
        ranges = [(net.links[bounds[i]].start, net.links[bounds[i + 1] - 1].stop) for i in range(s.pp)]
    else:
        per_mb = sp.Add(*fwd) + sp.Add(*bwd)
        terms["compute"] = M * per_mb + (M * sp.Add(*fwd) if s.recompute else 0)
        if comm is not None:
            halo, redist, words = comm.grouped(0, len(fwd), "", values, meaning, "")
            again = " (and the forward half again under recomputation)" if s.recompute else ""
            scale = sp.Rational(3, 2) if s.recompute else 1
            for key, t in (("halo_exchange", halo), ("redistribution", redist)):
                if key in words:
                    terms[key] = M * scale * t
                    legend[key] = f"{group_words}{again}; {words[key]}"
        body = sp.Add(*terms.values())
        ends = [body]
        ranges = [(0, len(net.layers))]
    # gradient exchange
    grad = ctx.cc.params * GRAD_BYTES_PER_PARAM
    if s.is_ps:
        # the worst case predict reports: every worker pushes G gradient bytes and pulls G weight
        # bytes at once, after compute (strategies.data.parameter_server)
        n = s.dp
        g_bytes = float(ctx.cc.params.sum()) * GRAD_BYTES_PER_PARAM
        if math.ceil(s.gpus / g) > 1:  # the server's and the workers' NICs: a node's network link
            worker, alpha, where = LINK.bw_net_per_gpu, LINK.alpha_net, "over the network"
            server_link = min(g, n) * LINK.bw_net_per_gpu
        else:
            worker, alpha, where = LINK.bw_intra, LINK.alpha_intra, "inside the node"
            server_link = LINK.bw_intra
        if s.comm == "ps-sharded":
            t_ps = 2 * sp.Rational(n - 1, n) * g_bytes / worker + 2 * (n - 1) * alpha
            how = f"sharded over {n} workers: each pushes and pulls (N - 1)/N of G over its own link"
        else:
            t_ps = 2 * n * g_bytes / server_link + 2 * n * alpha
            how = f"central: {n} workers push and pull G at once through the server's link"
        terms["gradient_exchange_exposed"] = t_ps
        legend["gradient_exchange_exposed"] = (
            f"parameter server, worst case (all workers at once) {where}; {how}; G = {g_bytes:,.0f} bytes"
        )
    elif s.comm == "dataparallel" and s.dp > 1:
        terms["gradient_exchange_exposed"], legend["gradient_exchange_exposed"] = _dataparallel(ctx, s, fwd)
    elif share > 1:
        end_max: Any = 0
        for (a, z), end_s in zip(ranges, ends, strict=True):
            bw_rev = bwd_c[a:z][::-1]
            start = end_s - sp.Add(*bw_rev)
            if s.overlap == "none":  # the exchange starts when the backward pass has ended
                start, bw_rev = end_s, [0] * len(bw_rev)
            end = _overlap_end(start, bw_rev, grad[a:z][::-1], group, s.comm)
            end_max = end if end_max == 0 else smax(end_max, end)
        terms["gradient_exchange_exposed"] = smax(0, end_max - body)
    # optimizer
    params_gpu = max(int(st["params"]) for st in details["stages"]) if s.pp > 1 else int(ctx.cc.params.sum())
    terms["optimizer_step"] = _optimizer(ctx, params_gpu)
    return _finish(terms, values, pred, legend=legend, meaning=meaning, notes=notes)


def _dataparallel(ctx: Context, s: Strategy, fwd: list[Any]) -> tuple[Any, str]:
    """torch.nn.DataParallel's exposed seconds (strategies.dataparallel on expressions), per
    micro-batch: scatter, weight broadcast, forward launches from one process, gather, reduce."""
    n, net = s.dp, ctx.net
    bw, alpha = LINK.bw_intra, LINK.alpha_intra
    params = float(ctx.cc.params.sum())
    in_bytes = B_SYM * float(np.prod(net.input_shape)) * INPUT_BYTES_PER_ELEMENT
    out_bytes = B_SYM * float(ctx.cc.evaluate(1.0)["out_elems"][-1]) * E
    launches = sp.Add(*(smax(f, n * TAU) - f for f in fwd))
    per_mb = ((n - 1) * in_bytes / bw + params * 4 / bw + (n - 1) * out_bytes / bw
              + params * GRAD_BYTES_PER_PARAM / bw + 4 * (n - 1) * alpha + launches)
    words = (f"torch.nn.DataParallel on {n} GPUs, per micro-batch: scatter (n - 1) input shares and gather "
             f"(n - 1) output shares through GPU 0's link, broadcast the fp32 weights and reduce the fp32 "
             f"gradients onto GPU 0 after backward ({params:,.0f} parameters), and each forward layer at least "
             f"n x tau (one process launches for every GPU)")
    return M * per_mb, words


def _optimizer(ctx: Context, params_gpu: float) -> Any:
    return params_gpu * optimizer_traffic_bytes_per_param(ctx.optimizer) / (BETA_MEM * ETA_M) + OPTIMIZER_LAUNCHES * TAU


def _explain_split(ctx: Context, s: Strategy, values: dict[sp.Symbol, float], pred: Prediction) -> StepFormula:
    """Filter / channel splits (``filter=N,dp=D``): compute, grouped exchanges, gradient allreduce."""
    mode, n = ("channel", s.channel) if s.channel > 1 else ("filter", s.filter)
    net, g = ctx.net, ctx.hw.gpus_per_node
    plan = split_plan(net, mode, n)
    params = ctx.cc.params * plan.f_par
    fwd, bwd = _layer_exprs(ctx, B_SYM, (1, 1, 1), split_counts(ctx.cc, plan, 1.0), params)
    # n consecutive ranks; the dp replicas of a shard are n ranks apart (as channels places them)
    split_group = weight_group(Strategy(dp=n), g)
    _, _, where = _tier(split_group)
    # each exchange joins its layer's forward or backward time (for the gradient overlap) ...
    fwd_c = list(fwd)
    bwd_c = list(bwd)
    for x in plan.exchanges:
        t = _ring(x.op, B_SYM * x.elems_per_sample * E, split_group)
        if x.phase == "fwd":
            fwd_c[x.layer] += t
        else:
            bwd_c[x.layer] += t
    # ... and is shown grouped by pass and collective: one term per pass, one summand per collective
    terms: dict[str, sp.Expr] = {"compute": M * (sp.Add(*fwd) + sp.Add(*bwd))}
    legend: dict[str, str] = {}
    meaning: dict[str, str] = {}
    bw, alpha, where = _tier(split_group)
    for phase, key in zip(("fwd", "bwd"), BREAKDOWN_KEYS[mode], strict=True):
        parts, words = [], []
        for op, (short, word, done) in _OPS.items():
            xs = [x for x in plan.exchanges if x.phase == phase and x.op == op]
            if not xs:
                continue
            k = len(xs)
            n_sym = sp.Symbol(f"N_{short}_{phase}", positive=True)
            values[n_sym] = float(sum(x.elems_per_sample for x in xs))
            pass_name = "forward" if phase == "fwd" else "backward"
            meaning[str(n_sym)] = f"elements per sample of the {_count(k, 'tensor')} {done} in the {pass_name} pass"
            parts.append(_ring(op, B_SYM * n_sym * E, split_group, k))
            twice = "2*" if op == "allreduce" else ""
            words.append(
                f"{_count(k, 'ring ' + word)}: {twice}(p - 1)/p * b*{n_sym}*e/{bw} + {k}*{twice}(p - 1)*{alpha}"
            )
        if parts:
            terms[key] = M * sp.Add(*parts)
            legend[key] = f"p = {n} GPUs {where}, per micro-batch; " + "; ".join(words)
    body = sp.Add(*terms.values())
    if s.dp > 1:
        dp_group = weight_group(Strategy(dp=s.dp, pp=n), g)
        bw_rev = bwd_c[::-1]
        grad_rev = (params * GRAD_BYTES_PER_PARAM)[::-1]
        start = body - sp.Add(*bw_rev)
        if s.overlap == "none":  # the exchange starts when the backward pass has ended
            start, bw_rev = body, [0] * len(bw_rev)
        end = _overlap_end(start, bw_rev, grad_rev, dp_group, s.comm)
        terms["gradient_exchange_exposed"] = smax(0, end - body)
        legend["gradient_exchange_exposed"] = (
            f"{s.comm} allreduce of each shard's gradients over the dp = {s.dp} replicas in 25 MiB buckets, "
            "overlapped with the last backward pass (exchanges included) as for data parallelism"
        )
    terms["optimizer_step"] = _optimizer(ctx, float(params.sum()))
    notes = [
        f"{mode}={n}: every exchanged tensor of |y| elements per sample is one ring collective of n = b*|y|*e "
        "bytes; the k tensors of one collective in one pass are one summand with k latencies and N = sum |y| "
        "elements (N_ag_fwd, ...). Exchanges are not overlapped with compute."
    ]
    return _finish(terms, values, pred, legend=legend, meaning=meaning, notes=notes)


def _explain_mp(
    ctx: Context, s: Strategy, details: dict[str, Any], values: dict[sp.Symbol, float], pred: Prediction
) -> StepFormula:
    """Hypergraph model parallelism: closed forms of the busiest GPU's work, the schedule simulated."""
    K, g = s.mp, ctx.hw.gpus_per_node
    part = mp_partition(ctx, K)
    hg = part.hypergraph
    seg = segments(part)
    a = np.asarray(part.assignment)
    crit = int(details["critical_gpu"])
    fwd, bwd = _layer_exprs(ctx, B_SYM, (1, 1, 1))
    layer_of, share = hg.unit_layer, hg.unit_share

    def unit_exprs(per_layer: list[Any], units: np.ndarray) -> list[Any]:
        out = []
        for u in units:
            x, w = per_layer[int(layer_of[u])], float(share[u])
            out.append(x if w == 1.0 else w * x)
        return out

    mine = np.flatnonzero(a == crit)
    f_d, b_d = sp.Add(*unit_exprs(fwd, mine)), sp.Add(*unit_exprs(bwd, mine))
    terms: dict[str, sp.Expr] = {"compute": M * (f_d + b_d)}
    legend = {"compute": f"forward and backward of the {len(mine)} layers on GPU {crit} (the busiest), per micro-batch"}
    meaning: dict[str, str] = {}
    if s.recompute:
        terms["recompute"] = (M - 1) * f_d
        legend["recompute"] = "the forward pass again before every backward but the last micro-batch's"
    # point-to-point messages the busiest GPU sends per micro-batch, by tier
    across = (seg.msg_src // g) != (seg.msg_dst // g)
    sends, words = [], []
    tiers = ((False, (LINK.bw_intra, LINK.alpha_intra, "intra")), (True, (LINK.bw_net_per_gpu, LINK.alpha_net, "net")))
    for net_tier, (bw, alpha, tier) in tiers:
        sel = (seg.msg_src == crit) & (across == net_tier)
        k = int(sel.sum())
        if not k:
            continue
        n_sym = sp.Symbol(f"N_p2p_{tier}", positive=True)
        values[n_sym] = float(seg.msg_elems[sel].sum())
        meaning[str(n_sym)] = f"elements per sample of the {_count(k, 'message')} GPU {crit} sends ({tier} links)"
        sends.append(p2p(B_SYM * n_sym * E, bw, alpha) + (k - 1) * alpha)
        words.append(f"{_count(k, 'message')} over {tier} links, alpha + n/beta each: {k}*{alpha} + b*{n_sym}*e/{bw}")
    if sends:
        terms["pipeline_p2p"] = M * sp.Add(*sends)
        legend["pipeline_p2p"] = f"sent by GPU {crit} after its compute, per micro-batch; " + "; ".join(words)
    idle = sp.Symbol("T_idle_sim", positive=True)
    terms["pipeline_bubble"] = idle
    meaning["T_idle_sim"] = f"GPU {crit}'s idle time in the simulated schedule (critical path minus its busy time), s"
    legend["pipeline_bubble"] = (
        "simulated: the GPipe schedule of the segments over the parts (model_parallel.simulate), evaluated numerically"
    )
    body = sp.Add(*terms.values())
    starts = [sp.Symbol(f"T_bwd_start_{i}", positive=True) for i in range(seg.count)]
    if s.dp > 1:
        # a part's replicas are K ranks apart, as model_parallel places them
        group = weight_group(Strategy(dp=s.dp, pp=K), g)
        # a unit's gradient is complete when the last micro-batch's backward of its segment has run
        # it: the segment's start (simulated) plus its units' backward, last layer first
        ready: dict[int, tuple[int, Any]] = {}
        for i, units in enumerate(seg.units):
            t: Any = starts[i]
            for u in units[::-1]:
                t = t + unit_exprs(bwd, np.array([u]))[0]
                ready[int(u)] = (i, t)
            meaning[str(starts[i])] = (
                f"when segment {i}'s (GPU {int(seg.part[i])}) last backward begins in the simulated schedule, s"
            )
        grad_units = hg.layer_values(ctx.cc.params) * GRAD_BYTES_PER_PARAM
        end_max: Any = 0
        for d in range(K):
            units = np.flatnonzero(a == d)[::-1]  # DDP fills buckets last layer first
            marks = dict(_buckets(grad_units[units]))
            latest: dict[int, Any] = {}  # per segment, its latest ready unit so far (ready times grow)
            end: Any = 0
            for j, u in enumerate(units):
                i, t = ready[int(u)]
                latest[i] = t
                if j in marks:  # a bucket is full: reduced once all its gradients are ready and the last is done
                    got = smax(*latest.values()) if len(latest) > 1 else t
                    end = (got if end == 0 else smax(end, got)) + allreduce_expr(marks[j], group, LINK, s.comm)
            end_max = end if end_max == 0 else smax(end_max, end)
        terms["gradient_exchange_exposed"] = smax(0, end_max - body)
        legend["gradient_exchange_exposed"] = (
            f"{s.comm} allreduce of each part's gradients over the dp = {s.dp} replicas in 25 MiB buckets, each "
            "once its gradients are ready in the last backward pass of their segments (from T_bwd_start_i, "
            "simulated) and the previous bucket is done"
        )
    u_params = hg.layer_values(ctx.cc.params)
    terms["optimizer_step"] = _optimizer(ctx, float(max(u_params[a == d].sum() for d in range(K))))

    # the simulation, run on the closed forms at any values
    layer_args = sorted(set().union(*(x.free_symbols for x in fwd + bwd)), key=str)
    layer_fn = sp.lambdify(layer_args, fwd + bwd, modules=_MODULES)
    n_layers = len(fwd)
    across_l = across.tolist()
    elems = seg.msg_elems.tolist()

    def resimulate(vals: dict[sp.Symbol, float]) -> dict[sp.Symbol, float]:
        per_layer = np.array(layer_fn(*(vals[x] for x in layer_args)), dtype=float)
        u_f, u_b = hg.layer_values(per_layer[:n_layers]), hg.layer_values(per_layer[n_layers:])
        seg_f = np.array([u_f[u].sum() for u in seg.units])
        seg_b = np.array([u_b[u].sum() for u in seg.units])
        mb, e = vals[B_SYM], vals[E]
        msg_s = np.array([
            p2p(mb * x * e, vals[LINK.bw_net_per_gpu], vals[LINK.alpha_net]) if net_tier
            else p2p(mb * x * e, vals[LINK.bw_intra], vals[LINK.alpha_intra])
            for x, net_tier in zip(elems, across_l, strict=True)
        ])
        sched = simulate(seg, seg_f, seg_b, msg_s, int(vals[M]), s.recompute)
        busy = sched.compute_s[crit] + sched.recompute_s[crit] + sched.send_s[crit]
        out = {idle: float(sched.total_s - busy)}
        out.update((starts[i], float(sched.bwd_start_s[i])) for i in range(seg.count))
        return out

    values.update(resimulate(values))
    # the symbols the simulation reads are part of the formula too (other GPUs' links, layers)
    sim_symbols = set(layer_args) | {E, B_SYM, M}
    for net_tier, (bw, alpha, _) in tiers:
        if bool((across == net_tier).any()):
            sim_symbols |= {bw, alpha}
    notes = [
        f"mp={K}: the step's critical path is simulated (the GPipe schedule of {seg.count} segments "
        f"on {K} GPUs, {len(seg.msg_elems)} messages per micro-batch), so it has no closed form: "
        "T_idle_sim" + (" and T_bwd_start_i are" if s.dp > 1 else " is")
        + " evaluated numerically from the closed forms of every segment's compute and every message's "
        "alpha + n/beta; a what-if re-runs the simulation.",
    ]
    return _finish(
        terms, values, pred, legend=legend, meaning=meaning, notes=notes, resimulate=resimulate, also=sim_symbols
    )


def _finish(
    terms: dict[str, sp.Expr],
    values: dict[sp.Symbol, float],
    pred: Prediction,
    legend: dict[str, str] | None = None,
    meaning: dict[str, str] | None = None,
    notes: list[str] | None = None,
    resimulate: Callable[[dict[sp.Symbol, float]], dict[sp.Symbol, float]] | None = None,
    also: set[sp.Symbol] | None = None,
) -> StepFormula:
    """Evaluate the terms; the symbols kept are those of the terms and ``also`` (read by a simulation)."""
    fns = {k: _lambdify(v) for k, v in terms.items()}
    term_values = {k: fns[k](values) for k in terms}
    used = set().union(*(v.free_symbols for v in terms.values() if isinstance(v, sp.Basic))) | (also or set())
    return StepFormula(
        terms,
        term_values,
        {k: v for k, v in values.items() if k in used},
        sum(term_values.values()),
        pred,
        legend=legend or {},
        meaning=meaning or {},
        notes=tuple(notes or ()),
        resimulate=resimulate,
        functions=fns,
        all_values=dict(values),
    )

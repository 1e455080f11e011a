"""Parameter servers (docs/SOURCES.md work 2): central or sharded, best and worst bounds of a step."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..cost.collectives import LinkParams, link_params
from ..cost.formulas import Num, smin
from .context import Context
from .spec import Strategy

__all__ = [
    "ParameterServerBounds",
    "parameter_server",
    "parameter_server_comm_s",
    "parameter_server_links",
    "parameter_server_exchange",
]


@dataclass(frozen=True)
class ParameterServerBounds:
    """Best- and worst-case seconds of one step with a parameter server (docs/SOURCES.md work 2)."""

    best_s: float
    worst_s: float
    comm_worst_s: float


def parameter_server(
    compute_s: float, grad_bytes: float, workers: int, server_bw: float, worker_bw: float,
    latency_s: float, sharded: bool,
) -> ParameterServerBounds:
    """Step-time bounds with a central or sharded parameter server, one overlap rule for both.

    ``comm`` (:func:`parameter_server_comm_s`) is how long the busiest link carries one step's
    pushes (``G`` gradient bytes per worker) and pulls (``G`` weight bytes): central, all
    ``N`` workers' traffic through the server's link; sharded, each worker's
    ``(N - 1)/N * G`` both ways over its own link.

    * worst: the exchange is serialised after compute: ``compute + comm``;
    * best: the exchange overlaps the next step's compute as far as the schedule allows (the
      busiest link and the GPUs work at once, the slower of the two sets the pace):
      ``max(compute, comm)``.
    """
    n, g = workers, grad_bytes
    if n <= 1:
        return ParameterServerBounds(compute_s, compute_s, 0.0)
    comm = float(parameter_server_comm_s(g, n, server_bw, worker_bw, latency_s, sharded))
    return ParameterServerBounds(max(compute_s, comm), compute_s + comm, comm)


def parameter_server_comm_s(
    grad_bytes: Num, workers: int, server_bw: Num, worker_bw: Num, latency_s: Num, sharded: bool
) -> Num:
    """Seconds of one step's parameter-server traffic when all workers transfer at once (the
    worst case), on numbers or symbols: sharded ``2*(N - 1)/N*G/bw + 2*(N - 1)*alpha`` over each
    worker's link; central ``2*N*G/link + 2*N*alpha`` through the server's link (or the
    workers' together, if slower)."""
    n, g = workers, grad_bytes
    if sharded:
        return 2 * (n - 1) / n * g / worker_bw + 2 * (n - 1) * latency_s
    return 2 * n * g / smin(server_bw, worker_bw * n) + 2 * n * latency_s


def parameter_server_links(ctx: Context, gpus: int, lp: LinkParams) -> tuple[Num, Num, Num]:
    """(server bandwidth, worker bandwidth, latency) of a parameter server over ``gpus`` GPUs:
    across nodes the node's network link (shared by the node's workers), else the node's own."""
    g = ctx.hw.gpus_per_node
    if math.ceil(gpus / g) > 1:
        server = g * lp.bw_net_per_gpu
        return server, server / min(g, gpus), lp.alpha_net
    return lp.bw_intra, lp.bw_intra, lp.alpha_intra


def parameter_server_exchange(ctx: Context, s: Strategy, body_s: float, rest_s: float) -> dict[str, Any]:
    """The details of a parameter-server plan's exchange: its best and worst cases (all workers
    at once) after compute, on the node's link or, across nodes, the network's, as whole steps:
    each adds ``rest_s``, the step's parts outside its body and the exchange (the gradient
    copies, amp casts and optimizer step), so the step reported, the worst case, equals
    ``worst_case_s``."""
    gb = float(ctx.cc.params.sum()) * ctx.param_bytes
    server_bw, worker_bw, lat = parameter_server_links(ctx, s.gpus, link_params(ctx.hw))
    bounds = parameter_server(body_s, gb, s.dp, server_bw, worker_bw, lat, s.comm == "ps-sharded")
    return {
        "kind": s.comm,
        "best_case_s": bounds.best_s + rest_s,
        "worst_case_s": bounds.worst_s + rest_s,
        "reported": "worst case (all workers transfer at once)",
    }

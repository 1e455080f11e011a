"""Data parallelism: bucketed gradient allreduce overlapped with backward, and parameter servers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cost.collectives import LinkParams, allreduce, link_params
from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.formulas import Num, smax, smin
from .context import Context, weight_group
from .spec import Strategy

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = [
    "BUCKET_BYTES",
    "buckets",
    "overlapped_exchange",
    "gradient_exchange",
    "ParameterServerBounds",
    "parameter_server",
    "parameter_server_exchange",
    "parameter_server_comm_s",
    "parameter_server_links",
]

#: PyTorch DDP's default bucket size, ``bucket_cap_mb=25`` (torch.nn.parallel.DistributedDataParallel docs).
BUCKET_BYTES = 25 * 2**20


def buckets(grad_bytes: FloatSeq, bucket_bytes: float = BUCKET_BYTES) -> list[tuple[int, float]]:
    """DDP's buckets over gradients in backward order: (index of the gradient that fills a
    bucket, the bucket's bytes); the last bucket holds what is left."""
    out, acc = [], 0.0
    for i, g in enumerate(grad_bytes.tolist() if isinstance(grad_bytes, np.ndarray) else grad_bytes):
        acc += g
        if acc >= bucket_bytes:
            out.append((i, acc))
            acc = 0.0
    if acc > 0:
        out.append((len(grad_bytes) - 1, acc))
    return out


def overlapped_exchange(
    bwd_s: Sequence[Num] | np.ndarray,
    grad_bytes: FloatSeq,
    comm: Callable[[float], Num],
    start_s: Num = 0.0,
    bucket_bytes: float = BUCKET_BYTES,
) -> tuple[Num, Num]:
    """When the last bucket's allreduce ends, and the sum of allreduce times.

    ``bwd_s`` and ``grad_bytes`` are per layer in *backward* order (last layer first).
    Gradients fill buckets in that order (:func:`buckets`); a bucket is reduced as soon as it
    is full and the previous bucket's reduction is done (one communication stream, as DDP).
    The end is ``max_k (ready_k + sum_{j >= k} c_j)``; what sticks out past the backward pass
    is exposed. Times may be numbers or sympy expressions (``explain``); sizes are numbers.
    """
    t = start_s
    end = start_s
    total_comm: Num = 0.0
    done = 0
    times = bwd_s.tolist() if isinstance(bwd_s, np.ndarray) else bwd_s
    for i, nbytes in buckets(grad_bytes, bucket_bytes):
        for dt in times[done : i + 1]:
            t = t + dt
        done = i + 1
        c = comm(nbytes)
        end = smax(end, t) + c
        total_comm = total_comm + c
    return end, total_comm


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


def gradient_exchange(
    ctx: Context, s: Strategy, bwd: np.ndarray, ranges: Sequence[tuple[int, int]], ends: Sequence[float], body_s: float
) -> tuple[float, float]:
    """(exposed seconds, total allreduce seconds) of the gradient exchange among the GPUs
    sharing each weight (dp replicas x spatial tiles): every stage's layers ``ranges`` reduced
    in buckets while its last backward micro-batch (``bwd`` per layer) runs up to ``ends``."""
    if s.dp * s.sp_degree == 1 or s.is_ps or s.comm == "dataparallel":
        return 0.0, 0.0
    group = weight_group(s, ctx.hw.gpus_per_node)
    grad = ctx.cc.params * GRAD_BYTES_PER_PARAM

    def reduce(nbytes: float) -> float:
        return allreduce(nbytes, group, ctx.hw, s.comm)

    end_max, total = 0.0, 0.0
    for (a, b), end_s in zip(ranges, ends, strict=True):
        last_bwd = bwd[a:b][::-1]
        start = end_s - float(last_bwd.sum())
        if s.overlap == "none":  # the exchange starts when the backward pass has ended
            start, last_bwd = end_s, np.zeros_like(last_bwd)
        end, tot = overlapped_exchange(last_bwd, grad[a:b][::-1], reduce, start)
        end_max = max(end_max, float(end))
        total += float(tot)
    return max(0.0, end_max - body_s), total


def parameter_server_exchange(ctx: Context, s: Strategy, body_s: float) -> tuple[float, dict[str, Any]]:
    """(exposed seconds, details) of a parameter-server plan: the worst case (all workers at
    once) after compute, on the node's link or, across nodes, the network's."""
    gb = float(ctx.cc.params.sum()) * GRAD_BYTES_PER_PARAM
    server_bw, worker_bw, lat = parameter_server_links(ctx, s.gpus, link_params(ctx.hw))
    bounds = parameter_server(body_s, gb, s.dp, server_bw, worker_bw, lat, s.comm == "ps-sharded")
    details = {
        "kind": s.comm,
        "best_case_s": bounds.best_s,
        "worst_case_s": bounds.worst_s,
        "reported": "worst case (all workers transfer at once)",
    }
    return bounds.worst_s - body_s, details

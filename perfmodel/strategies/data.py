"""Data parallelism: bucketed gradient allreduce overlapped with backward, and parameter servers."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..cost.collectives import allreduce
from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.formulas import Num, smax
from .context import Context, weight_group
from .spec import Strategy

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = [
    "BUCKET_BYTES",
    "overlapped_exchange",
    "gradient_exchange",
    "ParameterServerBounds",
    "parameter_server",
    "parameter_server_exchange",
]

#: PyTorch DDP's default bucket size, ``bucket_cap_mb=25`` (torch.nn.parallel.DistributedDataParallel docs).
BUCKET_BYTES = 25 * 2**20


def overlapped_exchange(
    bwd_s: Sequence[Num] | np.ndarray,
    grad_bytes: FloatSeq,
    comm: Callable[[float], Num],
    start_s: Num = 0.0,
    bucket_bytes: float = BUCKET_BYTES,
) -> tuple[Num, Num]:
    """When the last bucket's allreduce ends, and the sum of allreduce times.

    ``bwd_s`` and ``grad_bytes`` are per layer in *backward* order (last layer first).
    Gradients fill buckets in that order; a bucket is reduced as soon as it is full and the
    previous bucket's reduction is done (one communication stream, as DDP). The end is
    ``max_k (ready_k + sum_{j >= k} c_j)``; what sticks out past the backward pass is exposed.
    Times may be numbers or sympy expressions (``explain``); the bucket sizes are numbers.
    """
    t = start_s
    end = start_s
    total_comm: Num = 0.0
    acc = 0.0
    for dt, g in zip(bwd_s, grad_bytes, strict=True):
        t += dt
        acc += g
        if acc >= bucket_bytes:
            c = comm(acc)
            end = smax(end, t) + c
            total_comm += c
            acc = 0.0
    if acc > 0:
        c = comm(acc)
        end = smax(end, t) + c
        total_comm += c
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
    """Step-time bounds with a central or sharded parameter server.

    Central: each worker pushes ``G`` gradient bytes and pulls ``G`` weight bytes through
    the server's link. Worst case all ``N`` push at once and share it: ``2*N*G/bw`` after
    compute. Best case the transfers of one worker overlap the others' computation: the
    server link is busy ``2*N*G/bw`` per step, so the step is
    ``max(compute + 2*G/bw, 2*N*G/bw)``.
    Sharded: each worker serves ``G/N``; each pushes and pulls ``(N - 1)/N * G`` over its
    own link: worst ``compute + 2*(N - 1)/N*G/bw``, best the same traffic hidden behind
    compute as far as it fits: ``max(compute, 2*(N - 1)/N*G/bw)``.
    """
    n, g = workers, grad_bytes
    if n <= 1:
        return ParameterServerBounds(compute_s, compute_s, 0.0)
    if sharded:
        comm = 2 * (n - 1) / n * g / worker_bw + 2 * (n - 1) * latency_s
        return ParameterServerBounds(max(compute_s, comm), compute_s + comm, comm)
    link = min(server_bw, worker_bw * n)
    comm_all = 2 * n * g / link + 2 * n * latency_s
    own = 2 * g / min(server_bw, worker_bw) + 2 * latency_s
    return ParameterServerBounds(max(compute_s + own, comm_all), compute_s + comm_all, comm_all)


def gradient_exchange(
    ctx: Context, s: Strategy, bwd: np.ndarray, ranges: Sequence[tuple[int, int]], ends: Sequence[float], body_s: float
) -> tuple[float, float]:
    """(exposed seconds, total allreduce seconds) of the gradient exchange among the GPUs
    sharing each weight (dp replicas x spatial tiles): every stage's layers ``ranges`` reduced
    in buckets while its last backward micro-batch (``bwd`` per layer) runs up to ``ends``."""
    if s.dp * s.sp_degree == 1 or s.is_ps:
        return 0.0, 0.0
    group = weight_group(s, ctx.hw.gpus_per_node)
    grad = ctx.cc.params * GRAD_BYTES_PER_PARAM

    def reduce(nbytes: float) -> float:
        return allreduce(nbytes, group, ctx.hw, s.comm)

    end_max, total = 0.0, 0.0
    for (a, b), end_s in zip(ranges, ends, strict=True):
        last_bwd = bwd[a:b][::-1]
        end, tot = overlapped_exchange(last_bwd, grad[a:b][::-1], reduce, end_s - float(last_bwd.sum()))
        end_max = max(end_max, float(end))
        total += float(tot)
    return max(0.0, end_max - body_s), total


def parameter_server_exchange(ctx: Context, s: Strategy, body_s: float) -> tuple[float, dict[str, Any]]:
    """(exposed seconds, details) of a parameter-server plan: the worst case (all workers at
    once) after compute, on the node's link or, across nodes, the network's."""
    hw, g = ctx.hw, ctx.hw.gpus_per_node
    gb = float(ctx.cc.params.sum()) * GRAD_BYTES_PER_PARAM
    if math.ceil(s.gpus / g) > 1:
        server_bw = hw.inter.effective_bandwidth_bytes_per_s
        worker_bw = hw.inter.effective_bandwidth_bytes_per_s / min(g, s.gpus)
        lat = hw.inter.latency_s
    else:
        server_bw = worker_bw = hw.intra.effective_bandwidth_bytes_per_s
        lat = hw.intra.latency_s
    bounds = parameter_server(body_s, gb, s.dp, server_bw, worker_bw, lat, s.comm == "ps-sharded")
    details = {
        "kind": s.comm,
        "best_case_s": bounds.best_s,
        "worst_case_s": bounds.worst_s,
        "reported": "worst case (all workers transfer at once)",
    }
    return bounds.worst_s - body_s, details

"""Data parallelism: bucketed gradient allreduce overlapped with backward, and parameter servers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = ["BUCKET_BYTES", "overlapped_exchange", "ParameterServerBounds", "parameter_server"]

#: PyTorch DDP's default bucket size, ``bucket_cap_mb=25`` (torch.nn.parallel.DistributedDataParallel docs).
BUCKET_BYTES = 25 * 2**20


def overlapped_exchange(
    bwd_s: FloatSeq,
    grad_bytes: FloatSeq,
    comm: Callable[[float], float],
    start_s: float = 0.0,
    bucket_bytes: float = BUCKET_BYTES,
) -> tuple[float, float]:
    """When the last bucket's allreduce ends, and the sum of allreduce times.

    ``bwd_s`` and ``grad_bytes`` are per layer in *backward* order (last layer first).
    Gradients fill buckets in that order; a bucket is reduced as soon as it is full and the
    previous bucket's reduction is done (one communication stream, as DDP). The end is
    ``max_k (ready_k + sum_{j >= k} c_j)``; what sticks out past the backward pass is exposed.
    """
    t = start_s
    end = start_s
    total_comm = 0.0
    acc = 0.0
    for dt, g in zip(bwd_s, grad_bytes, strict=True):
        t += dt
        acc += g
        if acc >= bucket_bytes:
            c = comm(acc)
            end = max(end, t) + c
            total_comm += c
            acc = 0.0
    if acc > 0:
        c = comm(acc)
        end = max(end, t) + c
        total_comm += c
    return end, total_comm


@dataclass(frozen=True)
class ParameterServerBounds:
    """Best- and worst-case seconds of one step with a parameter server (SOURCES.md work 2)."""

    best_s: float
    worst_s: float
    comm_worst_s: float


def parameter_server(
    compute_s: float, grad_bytes: float, workers: int, server_bw: float, worker_bw: float,
    latency_s: float, sharded: bool,
) -> ParameterServerBounds:
    """Step-time bounds with a central or sharded parameter server, one overlap rule for both.

    ``comm`` is how long the busiest link carries one step's pushes (``G`` gradient bytes per
    worker) and pulls (``G`` weight bytes). Central: all ``N`` workers' traffic crosses the
    server's link, ``2*N*G/link + 2*N*alpha`` (``link`` the server's bandwidth, or the
    workers' together if smaller). Sharded: each worker serves ``G/N`` and pushes and pulls
    ``(N - 1)/N * G`` over its own link, ``2*(N - 1)/N*G/bw + 2*(N - 1)*alpha``.

    * worst: the exchange is serialised after compute: ``compute + comm``;
    * best: the exchange overlaps the next step's compute as far as the schedule allows (the
      busiest link and the GPUs work at once, the slower of the two sets the pace):
      ``max(compute, comm)``.
    """
    n, g = workers, grad_bytes
    if n <= 1:
        return ParameterServerBounds(compute_s, compute_s, 0.0)
    if sharded:
        comm = 2 * (n - 1) / n * g / worker_bw + 2 * (n - 1) * latency_s
    else:
        link = min(server_bw, worker_bw * n)
        comm = 2 * n * g / link + 2 * n * latency_s
    return ParameterServerBounds(max(compute_s, comm), compute_s + comm, comm)

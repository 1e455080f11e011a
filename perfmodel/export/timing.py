"""Timing an exported program's steps over all ranks: CUDA events on a GPU, barriers and
``perf_counter`` on the CPU; a step lasts as long as its slowest rank."""

from __future__ import annotations

import datetime
import platform
import time
from collections.abc import Callable
from typing import Any

from ..validation.measure_env import cudnn_version_text, loaded_cudnn
from .rows import RunResult
from .runtime import Topology, torch

__all__ = ["run_steps", "run_result"]


def run_steps(step: Callable[[], Any], topo: Topology, warmup: int, steps: int) -> tuple[list[float], list[float]]:
    """Run ``warmup`` untimed then ``steps`` timed steps; return each timed step's seconds (the
    slowest rank's) and every step's loss averaged over the data-parallel replicas."""
    dist = torch.distributed
    losses: list[Any] = []
    for _ in range(warmup):
        losses.append(step())
    cuda = topo.device.type == "cuda"
    events: list[tuple[Any, Any]] = []
    times: list[float] = []
    dist.barrier()
    for _ in range(steps):
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            losses.append(step())
            end.record()
            events.append((start, end))
        else:
            dist.barrier()
            t0 = time.perf_counter()
            losses.append(step())
            dist.barrier()
            times.append(time.perf_counter() - t0)
    if cuda:
        torch.cuda.synchronize()
        times = [float(s.elapsed_time(e)) / 1e3 for s, e in events]
    t = torch.tensor(times, dtype=torch.float64, device=topo.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    loss = torch.stack([x.float() for x in losses]).to(torch.float64)
    dist.all_reduce(loss, op=dist.ReduceOp.SUM)  # one replica's loss per step on its last stage
    dp = topo.world // (1 if topo.pp_group is None else dist.get_world_size(topo.pp_group))
    return t.cpu().tolist(), (loss / dp).cpu().tolist()


def _peak_memory(topo: Topology) -> float | None:
    """The largest ``max_memory_allocated`` over the ranks (None on the CPU: a process's
    resident memory is not the GPU memory the model predicts)."""
    if topo.device.type != "cuda":
        return None
    m = torch.tensor([float(torch.cuda.max_memory_allocated(topo.device))], device=topo.device)
    torch.distributed.all_reduce(m, op=torch.distributed.ReduceOp.MAX)
    return float(m.item())


def run_result(topo: Topology, backend: str, warmup: int, times: list[float], losses: list[float]) -> RunResult:
    """What the run measured, with the device it ran on."""
    cudnn = ""
    if topo.device.type == "cuda":
        name = str(torch.cuda.get_device_name(topo.device))
        version = loaded_cudnn(torch)
        cudnn = "" if version is None else cudnn_version_text(version)
    else:
        name = platform.processor() or platform.machine() or "cpu"
    return RunResult(
        device=topo.device.type,
        device_name=name,
        backend=backend,
        torch_version=str(torch.__version__),
        date=datetime.date.today().isoformat(),
        warmup=warmup,
        step_times_s=tuple(times),
        losses=tuple(losses),
        peak_memory_per_gpu_bytes=_peak_memory(topo),
        cudnn_version=cudnn,
    )

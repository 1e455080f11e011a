"""The timing harness: medians after a warm-up (CUDA events or perf_counter), precisions, layers."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from ..hardware import PRECISIONS, unknown_precision
from ..network import Network
from .measure_result import LayerTiming
from .measure_torch import layer_module, module_to_memory_format, to_memory_format

__all__ = ["Timer", "layer_timings", "make_timer", "median_time", "precision_context"]

#: Seconds of one call of a function.
Timer = Callable[[Callable[[], Any]], float]


def make_timer(torch: Any, device: str) -> Timer:
    """A function timing one call of ``f`` in seconds (CUDA events on a GPU)."""
    if device == "cuda":

        def cuda_time(f: Callable[[], Any]) -> float:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            f()
            end.record()
            torch.cuda.synchronize()
            return float(start.elapsed_time(end)) / 1e3

        return cuda_time

    def cpu_time(f: Callable[[], Any]) -> float:
        t0 = time.perf_counter()
        f()
        return time.perf_counter() - t0

    return cpu_time


def median_time(timer: Timer, f: Callable[[], Any], warmup: int, reps: int) -> tuple[float, list[float]]:
    """The median seconds of ``reps`` calls of ``f`` after ``warmup`` calls, and every time."""
    for _ in range(warmup):
        timer(f)
    ts = [timer(f) for _ in range(reps)]
    return statistics.median(ts), ts


def precision_context(torch: Any, device: str, precision: str) -> Any:
    """Set the math mode of ``precision`` and return the autocast context (or a no-op)."""
    if precision not in PRECISIONS:
        raise UsageError(f"measure: {unknown_precision(precision)}")
    if device == "cpu" and precision in ("amp", "tf32"):
        raise UsageError(
            f"measure: precision {precision} needs --device cuda (on the CPU use fp32 or bf16)"
        )
    if device == "cuda":
        allow = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow
    if precision == "amp":
        return torch.autocast(device_type="cuda", dtype=torch.float16)
    if precision == "bf16":
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def layer_timings(
    net: Network,
    torch: Any,
    dev: Any,
    device: str,
    precision: str,
    batch: int,
    timer: Timer,
    warmup: int,
    reps: int,
    memory_format: str = "nchw",
) -> list[LayerTiming]:
    """Forward and backward seconds of every layer of ``net``, each alone on random inputs, its
    parameters and inputs laid out in ``memory_format`` (:func:`to_memory_format`)."""
    ctx = precision_context(torch, device, precision)
    out: list[LayerTiming] = []
    for layer in net.layers:
        mod, fn = layer_module(layer, torch)
        if mod is not None:
            module_to_memory_format(torch, mod.to(dev), memory_format)
        elif isinstance(fn, torch.nn.Module):
            fn.to(dev)
        if hasattr(fn, "train"):
            fn.train()
        inputs = [
            to_memory_format(torch, torch.randn(batch, *s, device=dev), memory_format).requires_grad_(name != "input")
            for name, s in zip(layer.inputs, layer.in_shapes, strict=True)
        ]

        def forward(fn: Callable[..., Any] = fn, inputs: list[Any] = inputs) -> Any:
            with ctx:
                return fn(*inputs)

        fwd_s, _ = median_time(timer, forward, min(warmup, 2), reps)
        y = forward()
        needs_grad = y.requires_grad
        if needs_grad:
            g = torch.ones_like(y)

            def backward(y: Any = y, g: Any = g) -> None:
                torch.autograd.backward(y, g, retain_graph=True)

            bwd_s, _ = median_time(timer, backward, min(warmup, 2), reps)
        else:
            bwd_s = 0.0
        out.append(
            LayerTiming(layer.name, layer.kind + (f":{layer.fn}" if layer.fn else ""), fwd_s, bwd_s)
        )
    return out

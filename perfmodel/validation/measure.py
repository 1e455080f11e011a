"""Measure training on the local device: perfmodel's own layer IR run as torch modules.

torch is optional (``pip install torch``; from a checkout ``pip install -e ".[torch]"``) and
imported only inside functions.
Times are medians over repeated runs after a warm-up: CUDA events on a GPU, ``perf_counter``
on the CPU. Per-layer times are taken in isolation (each layer on random inputs of its
shapes), the step time on the whole network (forward, backward, SGD step).
The pieces live in ``measure_torch`` (the IR as modules), ``measure_timing`` (the harness),
``measure_env`` (what it ran on) and ``measure_result`` (the result and its row); this module
runs them and re-exports their public names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..cost.layout import DEFAULT_MEMORY_FORMAT, check_memory_format
from ..errors import UsageError
from ..network import Network, get_model
from ..network.importers import absolute_spec, is_import_spec
from .measure_env import device_name, environment
from .measure_result import LayerTiming, MeasureResult
from .measure_timing import layer_timings, make_timer, median_time, precision_context
from .measure_torch import (
    TORCH_MISSING,
    TorchNotInstalledError,
    build_module,
    module_to_memory_format,
    require_torch,
    to_memory_format,
)

__all__ = [
    "TorchNotInstalledError",
    "LayerTiming",
    "MeasureResult",
    "require_torch",
    "build_module",
    "module_to_memory_format",
    "to_memory_format",
    "measure",
    "training_step",
    "DEVICES",
    "TORCH_MISSING",
]

DEVICES = ("cpu", "cuda")


def measure(
    model: str,
    batch: int = 32,
    precision: str = "fp32",
    steps: int = 20,
    device: str | None = None,
    image_size: int | None = None,
    warmup: int = 5,
    layers: bool = True,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
) -> MeasureResult:
    """Time training of ``model`` (a zoo name, or an imported model's spec: the result names its file
    by its absolute path) on the local ``device`` (``cuda`` if available, else cpu),
    its activations and filters in ``memory_format`` (``nhwc``: ``torch.channels_last``, or
    ``channels_last_3d`` for volumes; ``nchw``: PyTorch's default), which the result's
    environment records."""
    check_memory_format(memory_format)
    torch = require_torch()
    if batch < 1 or steps < 1 or warmup < 0:
        raise UsageError(f"measure: batch ({batch}) and steps ({steps}) must be >= 1, warm-up >= 0")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device not in DEVICES:
        raise UsageError(f"measure: unknown device '{device}' (valid: {', '.join(DEVICES)})")
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("measure: --device cuda but torch sees no CUDA device (use --device cpu)")
    net = get_model(model, image_size)
    timer = make_timer(torch, device)
    dev = torch.device(device)
    step = training_step(torch, net, dev, precision, batch, memory_format)
    step_s, step_ts = median_time(timer, step, warmup, steps)
    timings = (
        layer_timings(net, torch, dev, device, precision, batch, timer, warmup, steps, memory_format)
        if layers
        else ()
    )
    return MeasureResult(
        absolute_spec(model) if is_import_spec(model) else net.name,  # a file model: found from any folder
        net.image_size,
        batch,
        precision,
        device,
        device_name(torch, device),
        steps,
        warmup,
        step_s,
        tuple(step_ts),
        tuple(timings),
        {**environment(torch, device), "memory_format": memory_format},
    )


def training_step(torch: Any, net: Network, dev: Any, precision: str, batch: int,
                  memory_format: str = DEFAULT_MEMORY_FORMAT) -> Callable[[], None]:
    """One training step of ``net`` on ``dev`` as a call: forward under ``precision``'s autocast,
    a sum loss, backward, an SGD-with-momentum step and ``zero_grad``, on a fixed random batch in
    ``memory_format`` (what :func:`measure` times as the step)."""
    ctx = precision_context(torch, dev.type, precision)
    torch.manual_seed(0)
    module = module_to_memory_format(torch, build_module(net, torch).to(dev), memory_format)
    module.train()
    opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
    x = to_memory_format(torch, torch.randn(batch, *net.input_shape, device=dev), memory_format)

    def step() -> None:
        with ctx:
            out = module(x)
        loss = out.float().sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step

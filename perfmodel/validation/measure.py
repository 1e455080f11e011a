"""Measure training on the local device: perfmodel's own layer IR run as torch modules.

torch is optional (``pip install torch``; from a checkout ``pip install -e ".[torch]"``) and
imported only inside functions.
Times are medians over repeated runs after a warm-up: CUDA events on a GPU, ``perf_counter``
on the CPU. Per-layer times are taken in isolation (each layer on random inputs of its
shapes), the step time on the whole network (forward, backward, SGD step).
"""

from __future__ import annotations

import datetime
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..hardware import PRECISIONS
from ..network import Network, get_model
from ..network.layers import Layer

__all__ = [
    "TorchNotInstalledError",
    "LayerTiming",
    "MeasureResult",
    "require_torch",
    "build_module",
    "measure",
    "DEVICES",
    "TORCH_MISSING",
]

DEVICES = ("cpu", "cuda")
TORCH_MISSING = (
    'torch is not installed: pip install torch (from a perfmodel checkout: pip install -e ".[torch]")'
)


class TorchNotInstalledError(UsageError):
    """``perfmodel measure`` needs torch, an optional extra (exit code 1)."""

    exit_code = 1


def require_torch() -> Any:
    """The ``torch`` module, or :class:`TorchNotInstalledError` with the install hint."""
    try:
        import torch
    except ImportError:
        raise TorchNotInstalledError(TORCH_MISSING) from None
    return torch


@dataclass(frozen=True)
class LayerTiming:
    """Median seconds of one layer, alone, for the whole batch: forward and backward."""

    name: str
    kind: str
    forward_s: float
    backward_s: float


@dataclass(frozen=True)
class MeasureResult:
    """A measured training step of one model on one device, with per-layer times."""

    model: str
    image_size: int
    batch: int
    precision: str
    device: str
    device_name: str
    steps: int
    warmup: int
    step_time_s: float
    step_times_s: tuple[float, ...]
    layers: tuple[LayerTiming, ...]
    environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def throughput_samples_per_s(self) -> float:
        return self.batch / self.step_time_s

    def measurement_row(self, hardware: str = "unspecified") -> dict[str, object]:
        """The run as one row of the measurement format (``perfmodel validate`` reads it)."""
        env = self.environment
        return {
            "model": self.model,
            "hardware": hardware,
            "gpus": 1,
            "precision": self.precision,
            "batch_per_gpu": self.batch,
            "global_batch": "",
            "strategy": "dp=1",
            "measured_throughput": self.throughput_samples_per_s,
            "image_size": self.image_size,
            "framework": f"PyTorch {env.get('torch', '?')} (perfmodel measure)",
            "source": f"perfmodel measure on {self.device_name} ({self.device}), "
            f"{env.get('date', '')}; median of {self.steps} steps after {self.warmup} warm-up",
            "step_time_s": self.step_time_s,
            "device_name": self.device_name,
            "driver": env.get("driver", ""),
            "cuda": env.get("cuda", ""),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "image_size": self.image_size,
            "batch": self.batch,
            "precision": self.precision,
            "device": self.device,
            "device_name": self.device_name,
            "steps": self.steps,
            "warmup": self.warmup,
            "step_time_s": self.step_time_s,
            "step_times_s": list(self.step_times_s),
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "environment": dict(self.environment),
            "layers": [lt.__dict__ for lt in self.layers],
        }


# -- the IR as torch modules --------------------------------------------------------------------
def _layer_fn(layer: Layer, torch: Any) -> tuple[Any, Callable[..., Any]]:
    """(module holding the layer's parameters or None, function of its input tensors)."""
    nn = torch.nn
    k = layer.kind
    ins = layer.in_shape
    nd = len(layer.out_shape) - 1
    if k in ("conv", "conv_transpose"):
        conv_cls = {
            (2, False): nn.Conv2d,
            (3, False): nn.Conv3d,
            (1, False): nn.Conv1d,
            (2, True): nn.ConvTranspose2d,
            (3, True): nn.ConvTranspose3d,
            (1, True): nn.ConvTranspose1d,
        }[(len(layer.kernel), k == "conv_transpose")]
        kw: dict[str, Any] = dict(
            stride=layer.stride,
            padding=layer.padding,
            dilation=layer.dilation or 1,
            groups=layer.groups,
            bias=layer.bias,
        )
        if k == "conv_transpose":
            s, p, d = layer.stride, layer.padding, layer.dilation or (1,) * len(layer.kernel)
            kw["output_padding"] = tuple(
                o - ((i - 1) * s_ - 2 * p_ + d_ * (k_ - 1) + 1)
                for o, i, s_, p_, d_, k_ in zip(
                    layer.out_shape[1:], ins[1:], s, p, d, layer.kernel, strict=True
                )
            )
        mod = conv_cls(ins[0], layer.out_shape[0], layer.kernel, **kw)
        return mod, mod
    if k == "linear":
        mod = nn.Linear(ins[0], layer.out_shape[0], bias=layer.bias)
        return mod, mod
    if k == "batchnorm":
        cls = {0: nn.BatchNorm1d, 1: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[nd]
        mod = cls(ins[0], affine=layer.params > 0)
        return mod, mod
    if k == "act":
        acts = {
            "relu": nn.ReLU,
            "relu6": nn.ReLU6,
            "silu": nn.SiLU,
            "sigmoid": nn.Sigmoid,
            "hardswish": nn.Hardswish,
            "hardsigmoid": nn.Hardsigmoid,
            "gelu": nn.GELU,
            "tanh": nn.Tanh,
        }
        return None, acts[layer.fn]()
    if k in ("maxpool", "avgpool"):
        ceil = bool(layer.attr("ceil_mode"))
        if k == "maxpool":
            cls = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}[nd]
            return None, cls(
                layer.kernel, layer.stride, layer.padding, layer.dilation or 1, ceil_mode=ceil
            )
        cls = {1: nn.AvgPool1d, 2: nn.AvgPool2d, 3: nn.AvgPool3d}[nd]
        return None, cls(layer.kernel, layer.stride, layer.padding, ceil_mode=ceil)
    if k == "adaptive_avgpool":
        cls = {1: nn.AdaptiveAvgPool1d, 2: nn.AdaptiveAvgPool2d, 3: nn.AdaptiveAvgPool3d}[nd]
        return None, cls(tuple(layer.out_shape[1:]))
    if k == "add":
        return None, lambda a, b: a + b
    if k == "mul":
        return None, lambda a, b: a * b
    if k == "concat":
        return None, lambda *xs: torch.cat(xs, dim=1)
    if k == "flatten":
        return None, lambda x: torch.flatten(x, 1)
    if k == "dropout":
        if layer.attr("channelwise"):
            return None, (nn.Dropout2d if nd == 2 else nn.Dropout3d)(layer.attr("p", 0.5))
        return None, nn.Dropout(layer.attr("p", 0.5))
    if k == "upsample":
        bilinear = bool(layer.attr("bilinear"))
        mode = ("bilinear" if nd == 2 else "trilinear") if bilinear else "nearest"
        return None, nn.Upsample(
            scale_factor=layer.attr("scale", 2.0),
            mode=mode,
            align_corners=True if bilinear else None,
        )
    raise UsageError(f"measure: layer kind '{k}' of {layer.name} has no torch counterpart")


def build_module(net: Network, torch: Any | None = None) -> Any:
    """``net`` as a ``torch.nn.Module`` whose forward runs the IR's layers in order."""
    torch = torch or require_torch()
    nn = torch.nn

    class IRNet(nn.Module):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.params = nn.ModuleDict()
            self.fns: list[tuple[str, tuple[str, ...], Callable[..., Any]]] = []
            for layer in net.layers:
                mod, fn = _layer_fn(layer, torch)
                if mod is not None:
                    self.params[layer.name.replace(".", "__")] = mod
                elif isinstance(fn, nn.Module):
                    self.params[layer.name.replace(".", "__")] = fn
                self.fns.append((layer.name, layer.inputs, fn))

        def forward(self, x: Any) -> Any:
            env = {"input": x}
            out = x
            for name, inputs, fn in self.fns:
                out = fn(*(env[i] for i in inputs))
                env[name] = out
            return out

    return IRNet()


# -- timing -----------------------------------------------------------------------------------
def _timer(torch: Any, device: str) -> Callable[[Callable[[], Any]], float]:
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


def _median(
    timer: Callable[[Callable[[], Any]], float], f: Callable[[], Any], warmup: int, reps: int
) -> tuple[float, list[float]]:
    for _ in range(warmup):
        timer(f)
    ts = [timer(f) for _ in range(reps)]
    return statistics.median(ts), ts


def _environment(torch: Any, device: str) -> dict[str, str]:
    env = {
        "torch": str(torch.__version__),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.date.today().isoformat(),
    }
    if device == "cuda":
        env["cuda"] = str(torch.version.cuda)
        env["gpu"] = str(torch.cuda.get_device_name(0))
        env["cudnn"] = str(torch.backends.cudnn.version())
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
            env["driver"] = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
        except (OSError, subprocess.SubprocessError):
            env["driver"] = ""
    else:
        env["cpu"] = platform.processor() or platform.machine()
        env["threads"] = str(torch.get_num_threads())
    return env


def _precision_context(torch: Any, device: str, precision: str) -> Any:
    """Set the math mode of ``precision`` and return the autocast context (or a no-op)."""
    import contextlib

    if precision not in PRECISIONS:
        raise UsageError(
            f"measure: unknown precision '{precision}' (valid: {', '.join(PRECISIONS)})"
        )
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


def measure(
    model: str,
    batch: int = 32,
    precision: str = "fp32",
    steps: int = 20,
    device: str | None = None,
    image_size: int | None = None,
    warmup: int = 5,
    layers: bool = True,
) -> MeasureResult:
    """Time training of zoo ``model`` on the local ``device`` (``cuda`` if available, else cpu)."""
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
    ctx = _precision_context(torch, device, precision)
    timer = _timer(torch, device)
    dev = torch.device(device)
    torch.manual_seed(0)
    module = build_module(net, torch).to(dev)
    module.train()
    opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(batch, *net.input_shape, device=dev)

    def step() -> None:
        with ctx:
            out = module(x)
        loss = out.float().sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step_s, step_ts = _median(timer, step, warmup, steps)
    timings = (
        _layer_timings(net, torch, dev, device, precision, batch, timer, warmup, steps)
        if layers
        else ()
    )
    name = (
        torch.cuda.get_device_name(0)
        if device == "cuda"
        else (platform.processor() or platform.machine())
    )
    return MeasureResult(
        net.name,
        net.image_size,
        batch,
        precision,
        device,
        str(name),
        steps,
        warmup,
        step_s,
        tuple(step_ts),
        tuple(timings),
        _environment(torch, device),
    )


def _layer_timings(
    net: Network,
    torch: Any,
    dev: Any,
    device: str,
    precision: str,
    batch: int,
    timer: Callable[[Callable[[], Any]], float],
    warmup: int,
    reps: int,
) -> list[LayerTiming]:
    ctx = _precision_context(torch, device, precision)
    out: list[LayerTiming] = []
    for layer in net.layers:
        mod, fn = _layer_fn(layer, torch)
        if mod is not None:
            mod.to(dev)
        elif isinstance(fn, torch.nn.Module):
            fn.to(dev)
        if hasattr(fn, "train"):
            fn.train()
        inputs = [
            torch.randn(batch, *s, device=dev, requires_grad=(name != "input"))
            for name, s in zip(layer.inputs, layer.in_shapes, strict=True)
        ]

        def forward(fn: Callable[..., Any] = fn, inputs: list[Any] = inputs) -> Any:
            with ctx:
                return fn(*inputs)

        fwd_s, _ = _median(timer, forward, min(warmup, 2), reps)
        y = forward()
        needs_grad = y.requires_grad
        if needs_grad:
            g = torch.ones_like(y)

            def backward(y: Any = y, g: Any = g) -> None:
                torch.autograd.backward(y, g, retain_graph=True)

            bwd_s, _ = _median(timer, backward, min(warmup, 2), reps)
        else:
            bwd_s = 0.0
        out.append(
            LayerTiming(layer.name, layer.kind + (f":{layer.fn}" if layer.fn else ""), fwd_s, bwd_s)
        )
    return out

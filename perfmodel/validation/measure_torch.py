"""perfmodel's layer IR as torch modules, for timing (torch is optional and imported when asked)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..cost.layout import check_memory_format
from ..errors import UsageError
from ..network import Network
from ..network.layers import Layer

__all__ = ["TORCH_MISSING", "TorchNotInstalledError", "build_module", "layer_module", "require_torch",
           "torch_memory_format", "to_memory_format", "module_to_memory_format"]

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


def torch_memory_format(torch: Any, fmt: str, ndim: int) -> Any:
    """torch's layout for a tensor of ``ndim`` dimensions in perfmodel's memory format ``fmt``
    (:mod:`perfmodel.cost.layout`): ``torch.channels_last`` for 4-D and ``torch.channels_last_3d``
    for 5-D tensors under ``nhwc``; None where the tensor keeps PyTorch's default (``nchw``, and
    tensors without spatial dimensions, which have no channels-last form)."""
    if check_memory_format(fmt) == "nchw":
        return None
    return {4: torch.channels_last, 5: torch.channels_last_3d}.get(ndim)


def to_memory_format(torch: Any, x: Any, fmt: str) -> Any:
    """``x`` laid out in ``fmt`` (a copy when its strides change, ``x`` itself otherwise)."""
    layout = torch_memory_format(torch, fmt, x.dim())
    return x if layout is None else x.contiguous(memory_format=layout)


def module_to_memory_format(torch: Any, module: Any, fmt: str) -> Any:
    """``module`` with every 4-D and 5-D parameter (convolution filters) laid out in ``fmt``, as
    ``module.to(memory_format=torch.channels_last)`` does for 4-D ones (PyTorch tutorial "Channels
    Last Memory Format in PyTorch"), a network of 3-D convolutions in ``channels_last_3d``."""
    for p in module.parameters():
        layout = torch_memory_format(torch, fmt, p.dim())
        if layout is not None:
            p.data = p.data.contiguous(memory_format=layout)
    return module


def layer_module(layer: Layer, torch: Any) -> tuple[Any, Callable[..., Any]]:
    """(module holding the layer's parameters or None, function of its input tensors)."""
    nn = torch.nn
    k = layer.kind
    ins = layer.in_shape
    nd = len(layer.out_shape) - 1
    if k in ("conv", "conv_transpose"):
        mod = _conv(layer, nn)
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
    if k in ("maxpool", "avgpool", "adaptive_avgpool"):
        return None, _pool(layer, nn)
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
    if k == "lrn":
        return None, nn.LocalResponseNorm(int(layer.attr("size")), layer.attr("alpha"), layer.attr("beta"),
                                          layer.attr("k"))
    if k == "upsample":
        bilinear = bool(layer.attr("bilinear"))
        mode = ("bilinear" if nd == 2 else "trilinear") if bilinear else "nearest"
        return None, nn.Upsample(
            scale_factor=layer.attr("scale", 2.0),
            mode=mode,
            align_corners=True if bilinear else None,
        )
    raise UsageError(f"measure: layer kind '{k}' of {layer.name} has no torch counterpart")


def _conv(layer: Layer, nn: Any) -> Any:
    """A convolution or transposed convolution layer as its torch module (1-D to 3-D)."""
    k = layer.kind
    ins = layer.in_shape
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
            for o, i, s_, p_, d_, k_ in zip(layer.out_shape[1:], ins[1:], s, p, d, layer.kernel, strict=True)
        )
    return conv_cls(ins[0], layer.out_shape[0], layer.kernel, **kw)


def _pool(layer: Layer, nn: Any) -> Any:
    """A max, average or adaptive average pooling layer as its torch module (1-D to 3-D)."""
    k = layer.kind
    nd = len(layer.out_shape) - 1
    if k == "adaptive_avgpool":
        cls = {1: nn.AdaptiveAvgPool1d, 2: nn.AdaptiveAvgPool2d, 3: nn.AdaptiveAvgPool3d}[nd]
        return cls(tuple(layer.out_shape[1:]))
    ceil = bool(layer.attr("ceil_mode"))
    if k == "maxpool":
        cls = {1: nn.MaxPool1d, 2: nn.MaxPool2d, 3: nn.MaxPool3d}[nd]
        return cls(layer.kernel, layer.stride, layer.padding, layer.dilation or 1, ceil_mode=ceil)
    cls = {1: nn.AvgPool1d, 2: nn.AvgPool2d, 3: nn.AvgPool3d}[nd]
    return cls(layer.kernel, layer.stride, layer.padding, ceil_mode=ceil)


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
                mod, fn = layer_module(layer, torch)
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

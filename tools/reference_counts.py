"""Print reference counts of the zoo's models from PyTorch itself (needs torch and torchvision).

Not run by the tests (the project does not depend on torch): it printed the literal tables in
``tests/test_zoo.py``. For every model at its default size and batch 1 it prints the parameter
count (``sum(p.numel())``), the forward FLOPs of ``torch.utils.flop_counter.FlopCounterMode``
(2 FLOPs per multiply-add, convolutions and matrix products only) and, with ``--saved``, the
activation elements autograd saves for backward (``torch.autograd.graph.saved_tensors_hooks``;
unique storages, parameters and the input excluded). With ``--shapes`` it compares the output
shape of every module whose name is also a layer name of the zoo's network.

Usage (from the repository root)::

    python tools/reference_counts.py [--saved] [--shapes] [MODEL ...]

The NVIDIA (SE-)ResNeXt101-32x4d and the torchgpipe U-Net are not in torchvision; this script
writes them in plain torch after their definitions (see their zoo modules' sources).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torchvision.models as tvm
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from perfmodel.validation.autograd_saved import saved_storages

TORCHVISION: dict[str, tuple[Callable[..., nn.Module], dict[str, Any], int]] = {
    "alexnet": (tvm.alexnet, {}, 224),
    "vgg11": (tvm.vgg11, {}, 224),
    "vgg13": (tvm.vgg13, {}, 224),
    "vgg16": (tvm.vgg16, {}, 224),
    "vgg19": (tvm.vgg19, {}, 224),
    "resnet18": (tvm.resnet18, {}, 224),
    "resnet34": (tvm.resnet34, {}, 224),
    "resnet50": (tvm.resnet50, {}, 224),
    "resnet101": (tvm.resnet101, {}, 224),
    "resnet152": (tvm.resnet152, {}, 224),
    "resnext50_32x4d": (tvm.resnext50_32x4d, {}, 224),
    "resnext101_32x8d": (tvm.resnext101_32x8d, {}, 224),
    "wide_resnet50_2": (tvm.wide_resnet50_2, {}, 224),
    "googlenet": (tvm.googlenet, {"aux_logits": False, "init_weights": False}, 224),
    "inception_v3": (tvm.inception_v3, {"aux_logits": False, "init_weights": False}, 299),
    "squeezenet1_0": (tvm.squeezenet1_0, {}, 224),
    "squeezenet1_1": (tvm.squeezenet1_1, {}, 224),
    "mobilenet_v2": (tvm.mobilenet_v2, {}, 224),
    "densenet121": (tvm.densenet121, {}, 224),
    "densenet161": (tvm.densenet161, {}, 224),
    "efficientnet_b0": (tvm.efficientnet_b0, {}, 224),
    "efficientnet_b1": (tvm.efficientnet_b1, {}, 240),
    "efficientnet_b2": (tvm.efficientnet_b2, {}, 260),
    "efficientnet_b3": (tvm.efficientnet_b3, {}, 300),
    "efficientnet_b4": (tvm.efficientnet_b4, {}, 380),
}


class _NvSE(nn.Module):
    """NVIDIA's SqueezeAndExcitation: pool, 1x1 conv to 16 channels, ReLU, 1x1 conv, sigmoid."""

    def __init__(self, channels: int, squeeze: int = 16) -> None:
        super().__init__()
        self.pooling = nn.AdaptiveAvgPool2d(1)
        self.squeeze = nn.Conv2d(channels, squeeze, 1)
        self.activation = nn.ReLU(inplace=True)
        self.expand = nn.Conv2d(squeeze, channels, 1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sigmoid(self.expand(self.activation(self.squeeze(self.pooling(x)))))


class _NvBottleneck(nn.Module):
    """ResNeXt bottleneck (grouped 3x3 with the stride), optionally with NVIDIA's fused SE."""

    def __init__(self, cin: int, width: int, cout: int, stride: int, se: bool) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=32, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))
        self.squeeze = _NvSE(cout) if se else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        residual = x if self.downsample is None else self.downsample(x)
        if self.squeeze is None:
            out += residual
        else:
            out = torch.addcmul(residual, out, self.squeeze(out), value=1)
        return self.relu(out)


def nv_resnext101_32x4d(se: bool = False) -> nn.Module:
    """NVIDIA DeepLearningExamples' resnext101-32x4d / se-resnext101-32x4d."""
    layers: list[nn.Module] = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                               nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for stage, n in enumerate((3, 4, 23, 3)):
        width, cout = 128 * 2**stage, 256 * 2**stage
        for i in range(n):
            layers.append(_NvBottleneck(cin, width, cout, 2 if stage and not i else 1, se))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def _unet_cell(cin: int, mid: int, cout: int, n: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    for i in range(n):
        c = cout if i == n - 1 else mid
        mods += [nn.Conv2d(cin, c, 3, padding=1, bias=False), nn.Dropout2d(0.1),
                 nn.InstanceNorm2d(c), nn.LeakyReLU(0.01)]
        cin = c
    return nn.Sequential(*mods)


class UNet(nn.Module):
    """torchgpipe's benchmark U-Net(depth, num_convs, base_channels), without the skip machinery."""

    def __init__(self, depth: int = 5, num_convs: int = 5, c: int = 64) -> None:
        super().__init__()
        self.enc = nn.ModuleList(
            _unet_cell(3 if i == 0 else c * 2 ** (i - 1), c * 2**i, c * 2**i, num_convs)
            for i in range(depth)
        )
        half = c * 2 ** (depth - 1)
        self.bottleneck = _unet_cell(half, c * 2**depth, half, num_convs)
        self.dec = nn.ModuleList(
            _unet_cell(c * 2 ** (i + 1), c * 2**i // 2, c * 2**i // 2, num_convs)
            for i in reversed(range(depth))
        )
        self.segment = nn.Conv2d(c // 2, 1, 1, bias=False)
        self.pool = nn.MaxPool2d(2, 2)
        self.up = nn.Upsample(scale_factor=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for cell in self.enc:
            x = cell(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottleneck(x)
        for cell in self.dec:
            x = cell(torch.cat((self.up(x), skips.pop()), 1))
        return self.segment(x)


OTHERS: dict[str, tuple[Callable[[], nn.Module], int]] = {
    "resnext101_32x4d": (lambda: nv_resnext101_32x4d(False), 224),
    "se_resnext101_32x4d": (lambda: nv_resnext101_32x4d(True), 224),
    "unet": (UNet, 192),
}


def build(name: str) -> tuple[nn.Module, int]:
    if name in TORCHVISION:
        fn, kwargs, size = TORCHVISION[name]
        return fn(weights=None, **kwargs), size
    make, size = OTHERS[name]
    return make(), size


def flops(model: nn.Module, size: int) -> int:
    model.eval()
    x = torch.randn(1, 3, size, size)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        model(x)
    return int(fc.get_total_flops())


def compare_shapes(name: str, model: nn.Module, size: int) -> list[str]:
    """Modules whose name is a layer of the zoo network and whose output shape differs."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from perfmodel.network.zoo import get_model

    net = get_model(name, size)
    shapes = {layer.name: layer.out_shape for layer in net.layers}
    bad: list[str] = []
    checked = [0]

    def hook(mod_name: str) -> Callable[..., None]:
        def f(_m: nn.Module, _i: Any, out: Any) -> None:
            if mod_name in shapes and isinstance(out, torch.Tensor):
                checked[0] += 1
                if tuple(out.shape[1:]) != shapes[mod_name]:
                    bad.append(f"{mod_name}: torch {tuple(out.shape[1:])} zoo {shapes[mod_name]}")
        return f

    for n, m in model.named_modules():
        if n and not list(m.children()):
            m.register_forward_hook(hook(n))
    model.eval()
    with torch.no_grad():
        model(torch.randn(1, 3, size, size))
    return [f"{checked[0]} modules checked", *bad]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", default=[*TORCHVISION, *OTHERS])
    ap.add_argument("--saved", action="store_true", help="also measure saved activations")
    ap.add_argument("--shapes", action="store_true", help="compare output shapes with the zoo")
    args = ap.parse_args()
    print(f"# torch {torch.__version__}, torchvision {__import__('torchvision').__version__}")
    print(f"# {'model':22s} {'size':>4s} {'params':>12s} {'fwd FLOPs':>15s}")
    for name in args.models:
        model, size = build(name)
        params = sum(p.numel() for p in model.parameters())
        line = f"{name:24s} {size:4d} {params:12d} {flops(model, size):15d}"
        if args.saved:
            saved = saved_storages(model, (3, size, size))
            fl, other = round(saved.float_elements), round(saved.other_bytes)
            line += f"  saved {fl} elems + {other} bytes"
        print(line, flush=True)
        if args.shapes:
            for msg in compare_shapes(name, model, size):
                print("    " + msg)


if __name__ == "__main__":
    main()

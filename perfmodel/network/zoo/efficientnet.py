"""EfficientNet-B0..B4 as torchvision defines them (Tan & Le 2019), with SE, SiLU and dropout."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..builder import NetBuilder
from ..graph import Network
from ._common import conv_bn_act, make_divisible
from .entry import ModelEntry

__all__ = [
    "efficientnet",
    "efficientnet_b0",
    "efficientnet_b1",
    "efficientnet_b2",
    "efficientnet_b3",
    "efficientnet_b4",
    "ENTRIES",
]

SOURCE = (
    "torchvision.models.efficientnet (torchvision 0.29), Tan & Le 2019"
    " (stochastic depth left out: no parameters and negligible work)"
)

#: B0's stages: (expansion, kernel, first stride, input channels, output channels, layers)
_STAGES = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
           (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))

#: name -> (width multiplier, depth multiplier, classifier dropout, default image size)
VARIANTS: dict[str, tuple[float, float, float, int]] = {
    "efficientnet_b0": (1.0, 1.0, 0.2, 224),
    "efficientnet_b1": (1.0, 1.1, 0.2, 240),
    "efficientnet_b2": (1.1, 1.2, 0.3, 260),
    "efficientnet_b3": (1.2, 1.4, 0.3, 300),
    "efficientnet_b4": (1.4, 1.8, 0.4, 380),
}


def _cna(b: NetBuilder, x: str, c: int, k: int, prefix: str, stride: int = 1, groups: int = 1,
         act: str | None = "silu") -> str:
    """torchvision's Conv2dNormActivation: conv (no bias), BN, SiLU in place."""
    return conv_bn_act(b, x, c, k, prefix, stride=stride, padding=(k - 1) // 2, groups=groups,
                       act=act, names=("0", "1", "2"))


def _mbconv(b: NetBuilder, x: str, expand: int, k: int, stride: int, out: int, prefix: str) -> str:
    """Expand 1x1, depthwise kxk, squeeze-and-excitation (to input/4 channels), project 1x1."""
    cin = b.shape(x)[0]
    hidden = make_divisible(cin * expand)
    y = x
    i = 0
    if hidden != cin:
        y = _cna(b, y, hidden, 1, f"{prefix}.block.{i}")
        i += 1
    y = _cna(b, y, hidden, k, f"{prefix}.block.{i}", stride=stride, groups=hidden)
    i += 1
    se = f"{prefix}.block.{i}"
    s = b.adaptive_avgpool(y, 1, name=f"{se}.avgpool")
    s = b.act(b.conv(s, max(1, cin // 4), 1, name=f"{se}.fc1"), "silu", inplace=True,
              name=f"{se}.activation")
    s = b.act(b.conv(s, hidden, 1, name=f"{se}.fc2"), "sigmoid", name=f"{se}.scale_activation")
    y = b.mul(y, s, name=f"{se}.scale")
    y = _cna(b, y, out, 1, f"{prefix}.block.{i + 1}", act=None)
    if stride == 1 and cin == out:
        y = b.add(y, x, inplace=True, name=f"{prefix}.add")  # ``result += input``
    return y


def efficientnet(name: str, image_size: int | None = None) -> Network:
    """Stem conv, MBConv stages scaled in width and depth, 1x1 conv to 4x, pool, dropout, fc."""
    width, depth, dropout, default = VARIANTS[name]
    size = default if image_size is None else image_size
    b = NetBuilder(name, (3, size, size), source=SOURCE)
    with b.block("features.0"):
        x = _cna(b, "input", make_divisible(32 * width), 3, "features.0", stride=2)
    for si, (t, k, s, _cin, cout, n) in enumerate(_STAGES):
        out = make_divisible(cout * width)
        for j in range(int(math.ceil(n * depth))):
            prefix = f"features.{si + 1}.{j}"
            with b.block(prefix):
                x = _mbconv(b, x, t, k, s if j == 0 else 1, out, prefix)
    last = len(_STAGES) + 1
    with b.block(f"features.{last}"):
        x = _cna(b, x, 4 * b.shape(x)[0], 1, f"features.{last}")
    with b.block("head"):
        x = b.flatten(b.adaptive_avgpool(x, 1, name="avgpool"), name="flatten")
        x = b.dropout(x, dropout, inplace=True, name="classifier.0")
        b.linear(x, 1000, name="classifier.1")
    return b.build()


def _builder(name: str) -> Callable[[int], Network]:
    def build(image_size: int = VARIANTS[name][3]) -> Network:
        return efficientnet(name, image_size)

    build.__name__ = name
    build.__doc__ = f"{name} (torchvision), default input {VARIANTS[name][3]}."
    return build


efficientnet_b0 = _builder("efficientnet_b0")
efficientnet_b1 = _builder("efficientnet_b1")
efficientnet_b2 = _builder("efficientnet_b2")
efficientnet_b3 = _builder("efficientnet_b3")
efficientnet_b4 = _builder("efficientnet_b4")

ENTRIES = tuple(
    ModelEntry(n, _builder(n), v[3], SOURCE, min_image_size=32) for n, v in VARIANTS.items()
)

"""MobileNetV2 as torchvision defines it (Sandler et al. 2018), width multiplier 1.0."""

from __future__ import annotations

from ..builder import NetBuilder
from ..graph import Network
from ._common import conv_bn_act
from .entry import ModelEntry

__all__ = ["mobilenet_v2", "ENTRIES"]

SOURCE = "torchvision.models.mobilenet_v2 (torchvision 0.29), Sandler et al. 2018"

#: (expansion t, output channels c, repeats n, first stride s)
_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1))


def _cna(b: NetBuilder, x: str, c: int, k: int, prefix: str, stride: int = 1, groups: int = 1,
         act: str | None = "relu6") -> str:
    """torchvision's Conv2dNormActivation: conv (no bias), BN, ReLU6 in place."""
    return conv_bn_act(b, x, c, k, prefix, stride=stride, padding=(k - 1) // 2, groups=groups,
                       act=act, names=("0", "1", "2"))


def _inverted_residual(b: NetBuilder, x: str, out: int, stride: int, t: int, prefix: str) -> str:
    cin = b.shape(x)[0]
    hidden = round(cin * t)
    y = x
    i = 0
    if t != 1:
        y = _cna(b, y, hidden, 1, f"{prefix}.conv.{i}")
        i += 1
    y = _cna(b, y, hidden, 3, f"{prefix}.conv.{i}", stride=stride, groups=hidden)
    y = b.conv(y, out, 1, bias=False, name=f"{prefix}.conv.{i + 1}")
    y = b.bn(y, name=f"{prefix}.conv.{i + 2}")
    if stride == 1 and cin == out:
        y = b.add(x, y, name=f"{prefix}.add")  # torchvision: ``x + self.conv(x)``, not in place
    return y


def mobilenet_v2(image_size: int = 224) -> Network:
    """Stem conv, 17 inverted-residual blocks, 1x1 conv to 1280, pool, dropout, fc."""
    b = NetBuilder("mobilenet_v2", (3, image_size, image_size), source=SOURCE)
    with b.block("features.0"):
        x = _cna(b, "input", 32, 3, "features.0", stride=2)
    i = 1
    for t, c, n, s in _SETTINGS:
        for j in range(n):
            with b.block(f"features.{i}"):
                x = _inverted_residual(b, x, c, s if j == 0 else 1, t, f"features.{i}")
            i += 1
    with b.block(f"features.{i}"):
        x = _cna(b, x, 1280, 1, f"features.{i}")
    with b.block("head"):
        x = b.flatten(b.adaptive_avgpool(x, 1, name="avgpool"), name="flatten")
        x = b.dropout(x, 0.2, name="classifier.0")
        b.linear(x, 1000, name="classifier.1")
    return b.build()


ENTRIES = (ModelEntry("mobilenet_v2", mobilenet_v2, 224, SOURCE, min_image_size=32),)

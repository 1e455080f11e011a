"""SqueezeNet 1.0 and 1.1 as torchvision defines them (Iandola et al. 2016)."""

from __future__ import annotations

from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["squeezenet1_0", "squeezenet1_1", "ENTRIES"]

SOURCE = "torchvision.models.squeezenet (torchvision 0.29), Iandola et al. 2016"

# Features: ("conv", out, kernel, stride), ("pool", ...) or ("fire", squeeze, expand1x1, expand3x3).
_Item = tuple[str, int, int, int]
_POOL: _Item = ("pool", 0, 0, 0)
_FEATURES: dict[str, tuple[_Item, ...]] = {
    "squeezenet1_0": (
        ("conv", 96, 7, 2), _POOL, ("fire", 16, 64, 64), ("fire", 16, 64, 64),
        ("fire", 32, 128, 128), _POOL, ("fire", 32, 128, 128), ("fire", 48, 192, 192),
        ("fire", 48, 192, 192),
        ("fire", 64, 256, 256), _POOL, ("fire", 64, 256, 256),
    ),
    "squeezenet1_1": (
        ("conv", 64, 3, 2), _POOL, ("fire", 16, 64, 64), ("fire", 16, 64, 64), _POOL,
        ("fire", 32, 128, 128), ("fire", 32, 128, 128), _POOL, ("fire", 48, 192, 192),
        ("fire", 48, 192, 192), ("fire", 64, 256, 256), ("fire", 64, 256, 256),
    ),
}


def _fire(b: NetBuilder, x: str, s: int, e1: int, e3: int, prefix: str) -> str:
    """Squeeze 1x1 conv + ReLU, then parallel 1x1 and 3x3 expand convs + ReLU, concatenated."""
    y = b.act(b.conv(x, s, 1, name=f"{prefix}.squeeze"), "relu", inplace=True,
              name=f"{prefix}.squeeze_activation")
    a = b.act(b.conv(y, e1, 1, name=f"{prefix}.expand1x1"), "relu", inplace=True,
              name=f"{prefix}.expand1x1_activation")
    c = b.act(b.conv(y, e3, 3, padding=1, name=f"{prefix}.expand3x3"), "relu", inplace=True,
              name=f"{prefix}.expand3x3_activation")
    return b.concat([a, c], name=f"{prefix}.cat")


def squeezenet(name: str, image_size: int = 224) -> Network:
    """Stem conv, fire modules with ceil-mode max-pools between, then a 1x1-conv classifier."""
    b = NetBuilder(name, (3, image_size, image_size), source=SOURCE)
    x = "input"
    i = 0
    for kind, c, k, s in _FEATURES[name]:
        if kind == "conv":
            with b.block("stem"):
                x = b.conv(x, c, k, stride=s, name=f"features.{i}")
                x = b.act(x, "relu", inplace=True, name=f"features.{i + 1}")
            i += 2
        elif kind == "pool":
            x = b.maxpool(x, 3, 2, ceil_mode=True, name=f"features.{i}")
            i += 1
        else:
            with b.block(f"features.{i}"):
                x = _fire(b, x, c, k, s, f"features.{i}")
            i += 1
    with b.block("head"):
        x = b.dropout(x, 0.5, name="classifier.0")
        x = b.conv(x, 1000, 1, name="classifier.1")
        x = b.act(x, "relu", inplace=True, name="classifier.2")
        x = b.adaptive_avgpool(x, 1, name="classifier.3")
        b.flatten(x, name="flatten")
    return b.build()


def squeezenet1_0(image_size: int = 224) -> Network:
    """SqueezeNet 1.0: 7x7 stem with 96 channels."""
    return squeezenet("squeezenet1_0", image_size)


def squeezenet1_1(image_size: int = 224) -> Network:
    """SqueezeNet 1.1: 3x3 stem with 64 channels, earlier pooling (2.4x fewer FLOPs)."""
    return squeezenet("squeezenet1_1", image_size)


ENTRIES = (
    ModelEntry("squeezenet1_0", squeezenet1_0, 224, SOURCE, min_image_size=21),
    ModelEntry("squeezenet1_1", squeezenet1_1, 224, SOURCE, min_image_size=17),
)

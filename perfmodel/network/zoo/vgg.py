"""VGG-11/13/16/19 without batch norm, as torchvision defines them (Simonyan & Zisserman 2015)."""

from __future__ import annotations

from collections.abc import Callable

from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["vgg", "vgg11", "vgg13", "vgg16", "vgg19", "ENTRIES"]

SOURCE = "torchvision.models.vgg (torchvision 0.29), Simonyan & Zisserman 2015 (configs A, B, D, E)"

#: Convolutions per stage (each stage ends in a 2x2 max-pool); widths 64, 128, 256, 512, 512.
_DEPTHS = {"vgg11": (1, 1, 2, 2, 2), "vgg13": (2, 2, 2, 2, 2), "vgg16": (2, 2, 3, 3, 3),
           "vgg19": (2, 2, 4, 4, 4)}
_WIDTHS = (64, 128, 256, 512, 512)


def vgg(name: str, image_size: int = 224) -> Network:
    """3x3 convolutions with ReLU in five stages, pooled to 7x7, then a 3-layer classifier."""
    b = NetBuilder(name, (3, image_size, image_size), source=SOURCE)
    x = "input"
    i = 0
    for depth, width in zip(_DEPTHS[name], _WIDTHS, strict=True):
        for _ in range(depth):
            with b.block(f"features.{i}"):
                x = b.conv(x, width, 3, padding=1, name=f"features.{i}")
                x = b.act(x, "relu", inplace=True, name=f"features.{i + 1}")
            i += 2
        x = b.maxpool(x, 2, 2, name=f"features.{i}")
        i += 1
    with b.block("head"):
        x = b.adaptive_avgpool(x, 7, name="avgpool")
        x = b.flatten(x, name="flatten")
        x = b.act(b.linear(x, 4096, name="classifier.0"), "relu", inplace=True, name="classifier.1")
        x = b.dropout(x, 0.5, name="classifier.2")
        x = b.act(b.linear(x, 4096, name="classifier.3"), "relu", inplace=True, name="classifier.4")
        x = b.dropout(x, 0.5, name="classifier.5")
        b.linear(x, 1000, name="classifier.6")
    return b.build()


def _builder(name: str) -> Callable[[int], Network]:
    def build(image_size: int = 224) -> Network:
        return vgg(name, image_size)

    build.__name__ = name
    build.__doc__ = f"{name} (torchvision, no batch norm)."
    return build


vgg11 = _builder("vgg11")
vgg13 = _builder("vgg13")
vgg16 = _builder("vgg16")
vgg19 = _builder("vgg19")

ENTRIES = tuple(
    ModelEntry(n, f, 224, SOURCE, min_image_size=32)
    for n, f in (("vgg11", vgg11), ("vgg13", vgg13), ("vgg16", vgg16), ("vgg19", vgg19))
)

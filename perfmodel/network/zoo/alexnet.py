"""AlexNet as torchvision defines it (the one-GPU variant of Krizhevsky 2014)."""

from __future__ import annotations

from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["alexnet", "ENTRIES"]

SOURCE = "torchvision.models.alexnet (torchvision 0.29), Krizhevsky 2014 'One weird trick'"


def alexnet(image_size: int = 224) -> Network:
    """Five convolutions with ReLU and three max-pools, pooled to 6x6, then a 3-layer classifier."""
    b = NetBuilder("alexnet", (3, image_size, image_size), source=SOURCE)
    # (out_channels, kernel, stride, padding, max-pool after)
    convs = [(64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
             (256, 3, 1, 1, False), (256, 3, 1, 1, True)]
    x = "input"
    i = 0
    for c, k, s, p, pool in convs:
        with b.block(f"features.{i}"):
            x = b.conv(x, c, k, stride=s, padding=p, name=f"features.{i}")
            x = b.act(x, "relu", inplace=True, name=f"features.{i + 1}")
        i += 2
        if pool:
            x = b.maxpool(x, 3, 2, name=f"features.{i}")
            i += 1
    with b.block("head"):
        x = b.adaptive_avgpool(x, 6, name="avgpool")
        x = b.flatten(x, name="flatten")
        x = b.dropout(x, 0.5, name="classifier.0")
        x = b.act(b.linear(x, 4096, name="classifier.1"), "relu", inplace=True, name="classifier.2")
        x = b.dropout(x, 0.5, name="classifier.3")
        x = b.act(b.linear(x, 4096, name="classifier.4"), "relu", inplace=True, name="classifier.5")
        b.linear(x, 1000, name="classifier.6")
    return b.build()


ENTRIES = (ModelEntry("alexnet", alexnet, 224, SOURCE, min_image_size=63),)

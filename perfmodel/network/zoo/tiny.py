"""Tiny test networks (not in torchvision): a 3-layer CNN and a residual toy, for fast tests."""

from __future__ import annotations

from ..builder import NetBuilder
from ..graph import Network
from .entry import ModelEntry

__all__ = ["tiny_cnn", "ENTRIES"]


def tiny_cnn(image_size: int = 32) -> Network:
    """conv3x3(3->8)-bn-relu, residual block of two conv3x3(8->8), pool, fc(8->10)."""
    b = NetBuilder("tiny_cnn", (3, image_size, image_size), source="perfmodel test network")
    with b.block("stem"):
        x = b.act(b.bn(b.conv("input", 8, 3, padding=1, bias=False)), "relu", inplace=True)
    with b.block("res"):
        y = b.act(b.bn(b.conv(x, 8, 3, padding=1, bias=False)), "relu", inplace=True)
        y = b.bn(b.conv(y, 8, 3, padding=1, bias=False))
        x = b.act(b.add(y, x, inplace=True), "relu", inplace=True)
    with b.block("head"):
        x = b.flatten(b.adaptive_avgpool(x, 1))
        b.linear(x, 10)
    return b.build()


ENTRIES = (ModelEntry("tiny_cnn", tiny_cnn, 32, "perfmodel test network", min_image_size=4),)

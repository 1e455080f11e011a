"""GoogLeNet (Inception v1) as torchvision defines it, no auxiliary classifiers (Szegedy 2015)."""

from __future__ import annotations

from ..builder import NetBuilder
from ..graph import Network
from ._common import conv_bn_act
from .entry import ModelEntry

__all__ = ["googlenet", "ENTRIES"]

SOURCE = (
    "torchvision.models.googlenet (torchvision 0.29, aux_logits=False), Szegedy et al. 2015;"
    " BN after every conv, 3x3 kernels in the '5x5' branch as torchvision has them"
)

#: module name -> (1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5", pool projection)
_INCEPTION = {
    "inception3a": (64, 96, 128, 16, 32, 32),
    "inception3b": (128, 128, 192, 32, 96, 64),
    "inception4a": (192, 96, 208, 16, 48, 64),
    "inception4b": (160, 112, 224, 24, 64, 64),
    "inception4c": (128, 128, 256, 24, 64, 64),
    "inception4d": (112, 144, 288, 32, 64, 64),
    "inception4e": (256, 160, 320, 32, 128, 128),
    "inception5a": (256, 160, 320, 32, 128, 128),
    "inception5b": (384, 192, 384, 48, 128, 128),
}


def _basic(
    b: NetBuilder, x: str, c: int, k: int, prefix: str, stride: int = 1, padding: int = 0
) -> str:
    """torchvision's BasicConv2d: conv (no bias), BN (eps 0.001), ReLU in place."""
    return conv_bn_act(b, x, c, k, prefix, stride=stride, padding=padding)


def _inception(b: NetBuilder, x: str, name: str) -> str:
    c1, c3r, c3, c5r, c5, cp = _INCEPTION[name]
    b1 = _basic(b, x, c1, 1, f"{name}.branch1")
    b2 = _basic(b, x, c3r, 1, f"{name}.branch2.0")
    b2 = _basic(b, b2, c3, 3, f"{name}.branch2.1", padding=1)
    b3 = _basic(b, x, c5r, 1, f"{name}.branch3.0")
    b3 = _basic(b, b3, c5, 3, f"{name}.branch3.1", padding=1)
    b4 = b.maxpool(x, 3, 1, padding=1, ceil_mode=True, name=f"{name}.branch4.0")
    b4 = _basic(b, b4, cp, 1, f"{name}.branch4.1")
    return b.concat([b1, b2, b3, b4], name=f"{name}.cat")


def googlenet(image_size: int = 224) -> Network:
    """Stem of three convs, nine inception modules with max-pools between, pool, dropout, fc."""
    b = NetBuilder("googlenet", (3, image_size, image_size), source=SOURCE)
    with b.block("stem"):
        x = _basic(b, "input", 64, 7, "conv1", stride=2, padding=3)
        x = b.maxpool(x, 3, 2, ceil_mode=True, name="maxpool1")
        x = _basic(b, x, 64, 1, "conv2")
        x = _basic(b, x, 192, 3, "conv3", padding=1)
        x = b.maxpool(x, 3, 2, ceil_mode=True, name="maxpool2")
    for name in _INCEPTION:
        with b.block(name):
            x = _inception(b, x, name)
        if name == "inception3b":
            x = b.maxpool(x, 3, 2, ceil_mode=True, name="maxpool3")
        elif name == "inception4e":
            x = b.maxpool(x, 2, 2, ceil_mode=True, name="maxpool4")
    with b.block("head"):
        x = b.flatten(b.adaptive_avgpool(x, 1, name="avgpool"), name="flatten")
        x = b.dropout(x, 0.2, name="dropout")
        b.linear(x, 1000, name="fc")
    return b.build()


ENTRIES = (ModelEntry("googlenet", googlenet, 224, SOURCE, min_image_size=15),)

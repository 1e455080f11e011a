"""Inception v3 as torchvision defines it, no auxiliary classifier (Szegedy et al. 2016)."""

from __future__ import annotations

from ..builder import IntOrTuple, NetBuilder
from ..graph import Network
from ._common import conv_bn_act
from .entry import ModelEntry

__all__ = ["inception_v3", "ENTRIES"]

SOURCE = "torchvision.models.inception_v3 (torchvision 0.29, aux_logits=False), Szegedy et al. 2016"


def _bc(b: NetBuilder, x: str, c: int, k: IntOrTuple, prefix: str, stride: int = 1,
        padding: IntOrTuple = 0) -> str:
    """torchvision's BasicConv2d: conv (no bias), BN (eps 0.001), ReLU in place."""
    return conv_bn_act(b, x, c, k, prefix, stride=stride, padding=padding)


def _avg_branch(b: NetBuilder, x: str, c: int, name: str) -> str:
    y = b.avgpool(x, 3, 1, padding=1, name=f"{name}.avg_pool")
    return _bc(b, y, c, 1, f"{name}.branch_pool")


def _inception_a(b: NetBuilder, x: str, pool_features: int, name: str) -> str:
    b1 = _bc(b, x, 64, 1, f"{name}.branch1x1")
    b5 = _bc(b, x, 48, 1, f"{name}.branch5x5_1")
    b5 = _bc(b, b5, 64, 5, f"{name}.branch5x5_2", padding=2)
    b3 = _bc(b, x, 64, 1, f"{name}.branch3x3dbl_1")
    b3 = _bc(b, b3, 96, 3, f"{name}.branch3x3dbl_2", padding=1)
    b3 = _bc(b, b3, 96, 3, f"{name}.branch3x3dbl_3", padding=1)
    bp = _avg_branch(b, x, pool_features, name)
    return b.concat([b1, b5, b3, bp], name=f"{name}.cat")


def _inception_b(b: NetBuilder, x: str, name: str) -> str:
    b3 = _bc(b, x, 384, 3, f"{name}.branch3x3", stride=2)
    bd = _bc(b, x, 64, 1, f"{name}.branch3x3dbl_1")
    bd = _bc(b, bd, 96, 3, f"{name}.branch3x3dbl_2", padding=1)
    bd = _bc(b, bd, 96, 3, f"{name}.branch3x3dbl_3", stride=2)
    bp = b.maxpool(x, 3, 2, name=f"{name}.max_pool")
    return b.concat([b3, bd, bp], name=f"{name}.cat")


def _inception_c(b: NetBuilder, x: str, c7: int, name: str) -> str:
    h, v = ((1, 7), (0, 3)), ((7, 1), (3, 0))
    b1 = _bc(b, x, 192, 1, f"{name}.branch1x1")
    b7 = _bc(b, x, c7, 1, f"{name}.branch7x7_1")
    b7 = _bc(b, b7, c7, h[0], f"{name}.branch7x7_2", padding=h[1])
    b7 = _bc(b, b7, 192, v[0], f"{name}.branch7x7_3", padding=v[1])
    bd = _bc(b, x, c7, 1, f"{name}.branch7x7dbl_1")
    for i, (k, p) in enumerate((v, h, v)):
        bd = _bc(b, bd, c7, k, f"{name}.branch7x7dbl_{i + 2}", padding=p)
    bd = _bc(b, bd, 192, h[0], f"{name}.branch7x7dbl_5", padding=h[1])
    bp = _avg_branch(b, x, 192, name)
    return b.concat([b1, b7, bd, bp], name=f"{name}.cat")


def _inception_d(b: NetBuilder, x: str, name: str) -> str:
    b3 = _bc(b, x, 192, 1, f"{name}.branch3x3_1")
    b3 = _bc(b, b3, 320, 3, f"{name}.branch3x3_2", stride=2)
    b7 = _bc(b, x, 192, 1, f"{name}.branch7x7x3_1")
    b7 = _bc(b, b7, 192, (1, 7), f"{name}.branch7x7x3_2", padding=(0, 3))
    b7 = _bc(b, b7, 192, (7, 1), f"{name}.branch7x7x3_3", padding=(3, 0))
    b7 = _bc(b, b7, 192, 3, f"{name}.branch7x7x3_4", stride=2)
    bp = b.maxpool(x, 3, 2, name=f"{name}.max_pool")
    return b.concat([b3, b7, bp], name=f"{name}.cat")


def _inception_e(b: NetBuilder, x: str, name: str) -> str:
    b1 = _bc(b, x, 320, 1, f"{name}.branch1x1")
    b3 = _bc(b, x, 384, 1, f"{name}.branch3x3_1")
    b3a = _bc(b, b3, 384, (1, 3), f"{name}.branch3x3_2a", padding=(0, 1))
    b3b = _bc(b, b3, 384, (3, 1), f"{name}.branch3x3_2b", padding=(1, 0))
    b3 = b.concat([b3a, b3b], name=f"{name}.branch3x3_cat")
    bd = _bc(b, x, 448, 1, f"{name}.branch3x3dbl_1")
    bd = _bc(b, bd, 384, 3, f"{name}.branch3x3dbl_2", padding=1)
    bda = _bc(b, bd, 384, (1, 3), f"{name}.branch3x3dbl_3a", padding=(0, 1))
    bdb = _bc(b, bd, 384, (3, 1), f"{name}.branch3x3dbl_3b", padding=(1, 0))
    bd = b.concat([bda, bdb], name=f"{name}.branch3x3dbl_cat")
    bp = _avg_branch(b, x, 192, name)
    return b.concat([b1, b3, bd, bp], name=f"{name}.cat")


def inception_v3(image_size: int = 299) -> Network:
    """Stem of five convolutions and two max-pools, eleven inception modules, pool, dropout, fc."""
    b = NetBuilder("inception_v3", (3, image_size, image_size), source=SOURCE)
    with b.block("stem"):
        x = _bc(b, "input", 32, 3, "Conv2d_1a_3x3", stride=2)
        x = _bc(b, x, 32, 3, "Conv2d_2a_3x3")
        x = _bc(b, x, 64, 3, "Conv2d_2b_3x3", padding=1)
        x = b.maxpool(x, 3, 2, name="maxpool1")
        x = _bc(b, x, 80, 1, "Conv2d_3b_1x1")
        x = _bc(b, x, 192, 3, "Conv2d_4a_3x3")
        x = b.maxpool(x, 3, 2, name="maxpool2")
    for name, pool in (("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)):
        with b.block(name):
            x = _inception_a(b, x, pool, name)
    with b.block("Mixed_6a"):
        x = _inception_b(b, x, "Mixed_6a")
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        with b.block(name):
            x = _inception_c(b, x, c7, name)
    with b.block("Mixed_7a"):
        x = _inception_d(b, x, "Mixed_7a")
    for name in ("Mixed_7b", "Mixed_7c"):
        with b.block(name):
            x = _inception_e(b, x, name)
    with b.block("head"):
        x = b.adaptive_avgpool(x, 1, name="avgpool")
        x = b.dropout(x, 0.5, name="dropout")
        x = b.flatten(x, name="flatten")
        b.linear(x, 1000, name="fc")
    return b.build()


ENTRIES = (ModelEntry("inception_v3", inception_v3, 299, SOURCE, min_image_size=75),)

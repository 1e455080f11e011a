"""Small helpers shared by the zoo's model definitions (conv-norm-activation units)."""

from __future__ import annotations

from ..builder import IntOrTuple, NetBuilder

__all__ = ["conv_bn_act", "make_divisible"]


def conv_bn_act(
    b: NetBuilder,
    x: str,
    out_channels: int,
    kernel: IntOrTuple,
    prefix: str,
    stride: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    groups: int = 1,
    act: str | None = "relu",
    names: tuple[str, str, str] = ("conv", "bn", "relu"),
) -> str:
    """Conv (no bias) -> BatchNorm -> optional in-place activation, named ``prefix.<names>``."""
    p = f"{prefix}." if prefix else ""
    y = b.conv(x, out_channels, kernel, stride=stride, padding=padding, groups=groups, bias=False,
               name=f"{p}{names[0]}")
    y = b.bn(y, name=f"{p}{names[1]}")
    if act is not None:
        y = b.act(y, act, inplace=True, name=f"{p}{names[2]}")
    return y


def make_divisible(v: float, divisor: int = 8) -> int:
    """Round channels to a multiple of ``divisor``, at most 10% down (MobileNet's rule)."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v

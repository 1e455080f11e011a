"""Random CNNs with residual adds and concatenations, for hypothesis strategies."""

from __future__ import annotations

from hypothesis import strategies as st

from perfmodel.network import Network
from perfmodel.network.builder import NetBuilder

__all__ = ["random_dag"]


def random_dag(draw: st.DrawFn, size: int, first: tuple[int, int], blocks: tuple[int, int],
               side: tuple[int, int]) -> Network:
    """A ``size`` x ``size`` RGB CNN: a 3x3 convolution of ``first`` channels (one drawn), then a
    drawn number of ``blocks`` (min, max) of conv-bn-relu, each a chain, a residual add or a
    concatenation with a 1x1 side branch of ``side`` channels (one drawn), and a linear head."""
    b = NetBuilder("random_dag", (3, size, size))
    x = b.conv("input", draw(st.sampled_from(first)), 3, padding=1)
    for i in range(draw(st.integers(*blocks))):
        with b.block(f"b{i}"):
            c = b.shape(x)[0]
            y = b.act(b.bn(b.conv(x, c, 3, padding=1)), "relu")
            form = draw(st.sampled_from(["chain", "add", "concat"]))
            if form == "add":
                y = b.add(b.conv(y, c, 1), x)
            elif form == "concat":
                y = b.concat([y, b.conv(x, draw(st.sampled_from(side)), 1)])
            x = y
    b.linear(b.flatten(b.adaptive_avgpool(x, 1)), 10)
    return b.build()

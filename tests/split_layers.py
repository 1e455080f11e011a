"""Oracle layers for split-pricing tests: one C -> F layer after a ReLU, and its busiest-GPU times."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from perfmodel.cost.compute import layer_times
from perfmodel.hardware import load_hardware
from perfmodel.network.builder import NetBuilder
from perfmodel.network.counts import compile_counts
from perfmodel.network.graph import Network
from perfmodel.strategies.channels import split_counts, split_plan

__all__ = ["BATCH", "linear_layer", "conv_layer", "busiest_gpu_times"]

#: Samples per step the oracles price at.
BATCH = 32.0


def linear_layer(c: int, f: int) -> Network:
    """A ``c -> f`` linear layer ``L`` (no bias) after a ReLU ``r``."""
    b = NetBuilder("lin", (c,))
    b.linear(b.act("input", "relu", name="r"), f, bias=False, name="L")
    return b.build()


def conv_layer(k: int, hw: int) -> Callable[[int, int], Network]:
    """A builder of a ``c -> f`` ``k x k`` convolution ``L`` (same padding, no bias) on ``hw x hw``
    inputs after a ReLU ``r``."""
    def build(c: int, f: int) -> Network:
        b = NetBuilder("conv", (c, hw, hw))
        b.conv(b.act("input", "relu", name="r"), f, k, padding=k // 2, bias=False, name="L")
        return b.build()
    return build


def busiest_gpu_times(net: Network, hw: str, precision: str, mode: str | None, n: int, major: int = 8) -> np.ndarray:
    """Forward and backward seconds of layer ``L`` on the busiest GPU of a ``mode=n`` split
    (the whole layer where ``mode`` is None)."""
    cc = compile_counts(net)
    i = [layer.name for layer in net.layers].index("L")
    if mode is None:
        lt = layer_times(cc, load_hardware(hw), precision, BATCH, cudnn_major=major)
    else:
        plan = split_plan(net, mode, n)
        lt = layer_times(replace(cc, params=cc.params * plan.f_par), load_hardware(hw), precision, BATCH,
                         counts=split_counts(cc, plan, BATCH), cudnn_major=major, shares=plan.tensor_shares)
    return np.array([lt.fwd[i], lt.bwd[i]])

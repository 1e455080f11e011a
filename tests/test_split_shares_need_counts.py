"""``layer_times`` with a split's shares prices only the split GPU's counts: whole counts (or
none) with shares would divide the output by its share twice, so they raise instead."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfmodel.cost.compute import layer_seconds, layer_times
from perfmodel.cost.kernel_model import ComputeValues
from perfmodel.hardware import load_hardware
from perfmodel.network.builder import NetBuilder
from perfmodel.network.counts import compile_counts
from perfmodel.network.graph import Network
from perfmodel.strategies.channels import split_counts, split_plan

HW, PRECISION, BATCH = "v100-16gb-dgx1", "fp32", 32.0


def _net() -> Network:
    b = NetBuilder("pair", (16, 28, 28))
    x = b.conv("input", 32, 3, padding=1, name="c0")
    b.conv(b.act(x, "relu", name="r0"), 64, 3, padding=1, name="c1")
    return b.build()


@pytest.mark.parametrize("mode", ["filter", "channel"])
def test_shares_without_counts_raise(mode: str) -> None:
    net = _net()
    cc, plan = compile_counts(net), split_plan(net, mode, 4)
    with pytest.raises(ValueError, match="split_counts"):
        layer_times(cc, load_hardware(HW), PRECISION, BATCH, shares=plan.tensor_shares)


@pytest.mark.parametrize("mode", ["filter", "channel"])
def test_shares_with_whole_counts_raise(mode: str) -> None:
    net = _net()
    cc, plan = compile_counts(net), split_plan(net, mode, 4)
    with pytest.raises(ValueError, match="split_counts"):
        layer_times(cc, load_hardware(HW), PRECISION, BATCH, counts=cc.evaluate(BATCH), shares=plan.tensor_shares)
    with pytest.raises(ValueError, match="split_counts"):
        layer_seconds(cc, cc.evaluate(BATCH), cc.params, ComputeValues.of(load_hardware(HW), PRECISION),
                      shares=plan.tensor_shares)


@pytest.mark.parametrize("mode", ["filter", "channel"])
def test_shares_with_split_counts_price(mode: str) -> None:
    """The intended call prices, and below the whole layers' time (the split GPU does less)."""
    net = _net()
    cc, plan = compile_counts(net), split_plan(net, mode, 4)
    lt = layer_times(replace(cc, params=cc.params * plan.f_par), load_hardware(HW), PRECISION, BATCH,
                     counts=split_counts(cc, plan, BATCH), shares=plan.tensor_shares)
    whole = layer_times(cc, load_hardware(HW), PRECISION, BATCH)
    assert 0.0 < lt.total < whole.total

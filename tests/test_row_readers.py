"""Measured rows priced in one call are unrelated problems: one row's tensors never fork another's.

Autograd adds a gradient sum where a tensor has a second reader
(:mod:`perfmodel.cost.gradient_sums`). The validation rows all name their operands ``x`` (or
``x0``, ``x1``), so counting readers over every row priced together made each of NeuSight's 137
A100 ``mul`` rows look forked (its backward ~1.5x); the scored rows are forward only, so no
scored price moved. Oracle: a row priced with others costs what it costs priced alone, and a
network's own fork still adds its sum.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from perfmodel.cost.kernels import layer_kernels
from perfmodel.network.builder import NetBuilder
from perfmodel.validation.kernel_rows import KernelRow, load_rows
from perfmodel.validation.kernels import price_rows


def _neusight(op: str) -> list[KernelRow]:
    return [r for r in load_rows(("neusight",)) if r.layer.kind == op]


@pytest.mark.parametrize("op", ["mul", "add"])
def test_a_row_priced_with_others_costs_what_it_costs_alone(op: str) -> None:
    rows = _neusight(op)
    assert len(rows) >= 2 and len({r.layer.inputs for r in rows}) == 1  # the names do collide
    # each row's backward too (what a fork changes), on one GPU
    gpu = rows[0].gpu
    mine = [replace(r, what=w, window_floor=None) for r in rows if r.gpu == gpu for w in ("layer_fwd", "layer_bwd")]
    together, _ = price_rows(mine, before=False)
    alone = np.array([price_rows([r], before=False)[0][0] for r in mine])
    np.testing.assert_allclose(together, alone, rtol=1e-12)


def test_a_networks_own_fork_still_adds_its_gradient_sum() -> None:
    """The same multiply in a network where its operand has a second reader (SE's pooling)."""
    b = NetBuilder("se", (8, 4, 4))
    y = b.conv("input", 8, 3, padding=1, name="conv")
    s = b.act(b.adaptive_avgpool(y, 1, name="pool"), "sigmoid", name="sig")
    b.mul(y, s, name="scale")
    net = b.build()
    first = [all(t == "input" for t in layer.inputs) for layer in net.layers]
    i = [layer.name for layer in net.layers].index("conv")  # the sum runs where the fork is produced
    forked = layer_kernels(net.layers, first).grad_sum_elems_bwd[i]
    apart = layer_kernels(net.layers, first, one_network=False).grad_sum_elems_bwd[i]
    assert forked - apart == 3 * 8 * 4 * 4  # read both gradients, write one

"""NCCL's memory traffic beside backward: the bytes each allreduce algorithm really sends per
GPU (counted by simulating its schedule chunk by chunk), at the bandwidth the compute's
memory kernels reach (peak x eta_mem), in predict and in explain alike."""

from __future__ import annotations

import dataclasses

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.collectives import Group, link_bytes, link_params, memory_contention_s
from perfmodel.cost.compute import ComputeValues
from perfmodel.errors import StrategyError
from perfmodel.hardware import Hardware, load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import predict
from perfmodel.strategies.context import context
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.spec import parse_strategy

V100 = load_hardware("v100-16gb-dgx1")


def ring_sends(ranks: list[int], n: float, rounds: int) -> dict[int, float]:
    """Bytes each rank sends in ``rounds`` ring passes (reduce-scatter, all-gather) over
    ``ranks``: every step each rank forwards one chunk of n/len(ranks) to its successor."""
    p = len(ranks)
    out = {r: 0.0 for r in ranks}
    for _ in range(rounds * (p - 1)):
        for r in ranks:
            out[r] += n / p
    return out


def chain_sends(ranks: list[int], n: float) -> dict[int, float]:
    """A chain (NCCL's tree inside a node): reduce towards the head, then broadcast back;
    every rank but the ends forwards the whole buffer each way."""
    out = {r: 0.0 for r in ranks}
    for i, r in enumerate(ranks):
        if i > 0:
            out[r] += n  # reduce: pass the partial sum up
        if i < len(ranks) - 1:
            out[r] += n  # broadcast: pass the result down
    return out


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(nodes=st.integers(1, 8), per_node=st.integers(1, 8), n=st.floats(1.0, 1e9))
def test_link_bytes_are_what_the_schedules_send(nodes: int, per_node: int, n: float) -> None:
    """The busiest GPU's sent bytes, counted step by step, are link_bytes for each algorithm."""
    p = nodes * per_node
    if p < 2:
        return
    group = Group(p, per_node)
    ring = max(ring_sends(list(range(p)), n, 2).values())
    assert link_bytes(n, group, "ring") == pytest.approx(ring, rel=1e-12)
    # hierarchical: reduce-scatter in each node, ring allreduce of the n/q shard across nodes
    # (the GPUs with the same local rank), all-gather in the node
    sent = {r: 0.0 for r in range(p)}
    for k in range(nodes):
        node = list(range(k * per_node, (k + 1) * per_node))
        for r, b in ring_sends(node, n, 2).items():  # the in-node reduce-scatter + all-gather
            sent[r] += b
    for j in range(per_node):
        peers = [k * per_node + j for k in range(nodes)]
        for r, b in ring_sends(peers, n / per_node, 2).items():
            sent[r] += b
    assert link_bytes(n, group, "hierarchical") == pytest.approx(max(sent.values()), rel=1e-12)
    # tree: the chain in a node (the double binary tree across nodes sends at most the same
    # per GPU: n/2 up and 2 x n/2 down where a node is inner, n/2 each way where it is a leaf)
    if per_node >= 3:
        assert link_bytes(n, group, "tree") == pytest.approx(max(chain_sends(list(range(per_node)), n).values()))


def test_tree_moves_more_than_the_ring_and_unknown_algorithms_are_refused() -> None:
    group = Group(16, 8)
    assert link_bytes(1.0, group, "tree") / link_bytes(1.0, group, "ring") == pytest.approx(16 / 15)
    assert link_bytes(1.0, Group(1, 1), "tree") == 0
    with pytest.raises(StrategyError, match="unknown allreduce algorithm 'star'"):
        link_bytes(1.0, group, "star")


def test_memory_seconds_are_at_the_effective_bandwidth() -> None:
    """kappa x link bytes / (beta_mem x eta_mem): V100's 900 GB/s at its memory efficiency."""
    group = Group(8, 8)
    lp = link_params(V100, group)
    eta = ComputeValues.of(V100, "amp").eta_memory
    assert 0 < eta < 1
    got = float(memory_contention_s(25 * 2**20, group, lp, "ring", eta))
    by_hand = V100.collectives.memory_passes * 2 * 7 / 8 * 25 * 2**20 / (900e9 * eta)
    assert V100.device.memory_bandwidth_bytes_per_s == 900e9
    assert got == pytest.approx(by_hand, rel=1e-12)


def with_memory_efficiency(hw: Hardware, precision: str, eta: float) -> Hardware:
    eff = dataclasses.replace(hw.compute[precision], memory=eta)
    return dataclasses.replace(hw, compute={**hw.compute, precision: eff})


@pytest.mark.parametrize("comm", ["ring", "tree", "hierarchical"])
def test_explain_what_if_on_eta_mem_is_predict_on_that_profile(comm: str) -> None:
    """The contention term holds eta_mem, and re-evaluating it at another memory efficiency is
    predict's number on a profile with that efficiency (compute and contention move together)."""
    ctx = context(get_model("vgg16"), V100, "amp", "sgd")
    spec = f"dp=16,comm={comm}"
    f = explain_plan(ctx, parse_strategy(spec, 16), 16 * 32)
    assert sp.Symbol("eta_mem", positive=True) in sp.sympify(f.terms["nccl_contention"]).free_symbols
    other = with_memory_efficiency(V100, "amp", 0.5)
    p = predict("vgg16", 16, spec, other, "amp", batch_per_gpu=32)
    terms = f.evaluate({"eta_mem": 0.5})
    assert terms["nccl_contention"] == pytest.approx(p.breakdown["nccl_contention"], rel=1e-9)
    assert sum(terms.values()) == pytest.approx(p.iteration_time_s, rel=1e-9)

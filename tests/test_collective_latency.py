"""All-gathers and reduce-scatters pay NCCL's base latency and split their hops between the
node's links and the network as NCCL's tuning model does, like the allreduce: checked
against values computed by hand from NCCL's tables, and through explain's what-ifs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.collectives import Group, allgather, allreduce, gather_expr, link_params, reduce_scatter
from perfmodel.errors import StrategyError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies.channels import split_plan
from perfmodel.strategies.context import context
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.spec import parse_strategy
from perfmodel.strategies.split_terms import exchange_s

A100 = load_hardware("a100-80gb-dgx")


@pytest.mark.parametrize(
    ("gpus", "nccl_us"),
    [
        # NCCL src/graph/tuning.cc (2.30.7), ring all-gather / reduce-scatter, Simple protocol:
        # baseLatencies Ring 8.4 us; nsteps = p - 1, nInterSteps = nodes - 1; hwLatencies
        # NVLink Ring 3.4 us (intra), NET Ring 14 us (inter). By hand:
        (2, 8.4 + 1 * 3.4),
        (8, 8.4 + 7 * 3.4),  # one node: 7 NVLink steps
        (16, 8.4 + 14 * 3.4 + 1 * 14),  # 2 nodes: 15 steps, 1 across
        (64, 8.4 + 56 * 3.4 + 7 * 14),  # 8 nodes: 63 steps, 7 across
    ],
)
def test_gather_latency_is_ncclS_tuning_model(gpus: int, nccl_us: float) -> None:
    group = Group(gpus, min(gpus, 8))
    intra = A100.intra.effective_bandwidth_bytes_per_s
    bw = intra if gpus <= 8 else min(intra, A100.inter.effective_bandwidth_bytes_per_s)
    per_byte = (gpus - 1) / gpus / bw
    for fn in (allgather, reduce_scatter):
        assert fn(1.0, group, A100) - per_byte == pytest.approx(nccl_us * 1e-6, rel=1e-9)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(size=st.integers(2, 256), nbytes=st.floats(1.0, 1e9))
def test_a_reduce_scatter_and_an_all_gather_are_an_allreduce_and_one_more_launch(size: int, nbytes: float) -> None:
    """NCCL's ring allreduce is a reduce-scatter then an all-gather over the same ring, in one
    launch: the two collectives cost the allreduce plus one base latency, on any group."""
    group = Group(size, min(size, A100.gpus_per_node))
    two = reduce_scatter(nbytes, group, A100) + allgather(nbytes, group, A100)
    assert two == pytest.approx(allreduce(nbytes, group, A100, "ring") + A100.collectives.base_latency_s, rel=1e-9)


def test_one_gpu_gathers_for_free_and_unknown_collectives_are_refused() -> None:
    assert allgather(1e6, Group(1, 1), A100) == 0.0
    assert gather_expr(1e6, Group(1, 1), link_params(A100)) == 0
    with pytest.raises(StrategyError, match="unknown collective 'broadcast' \\(valid: allgather"):
        exchange_s("broadcast", 1.0, Group(4, 4), link_params(A100))


@pytest.mark.parametrize(("spec", "keys"), [
    ("filter=4,dp=2", ("filter_allgather", "filter_reduce_scatter")),
    ("channel=4,dp=2", ("channel_allreduce", "channel_allgather")),
])
def test_every_split_collective_pays_the_base_latency(spec: str, keys: tuple[str, str]) -> None:
    """explain's what-if alpha_0 = 0 removes exactly M x alpha_0 per collective launched in each
    pass (one per exchanged tensor: the plan lists them), and predict prices the same."""
    ctx = context(get_model("resnet18"), A100, "amp", "sgd")
    s = parse_strategy(spec, 8)
    f = explain_plan(ctx, s, 8 * 32)
    without = f.evaluate({"alpha_0": 0.0})
    mode, n = ("filter", s.filter) if s.filter > 1 else ("channel", s.channel)
    exchanges = split_plan(ctx.net, mode, n).exchanges
    for key, phase in zip(keys, ("fwd", "bwd"), strict=True):
        launches = sum(1 for x in exchanges if x.phase == phase)
        drop = f.term_values[key] - without[key]
        assert launches >= 1 and drop == pytest.approx(s.mb * launches * A100.collectives.base_latency_s, rel=1e-9)
        assert f.term_values[key] == pytest.approx(f.prediction.breakdown[key], rel=1e-12)

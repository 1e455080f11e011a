"""Layers that read across channels under filter/channel splits: LRN's halo and the classifier's softmax."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_explain_terms import check_terms

from perfmodel.cost.collectives import link_params
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.channel_split import LayerSplit, blocks, channel_split, halo_reads
from perfmodel.network.layers import numel
from perfmodel.partition.hypergraph import build_hypergraph
from perfmodel.strategies import parse_strategy, predict
from perfmodel.strategies.channels import split_plan
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.predict import context

V100 = "v100-16gb-dgx1"


def _window_by_hand(size: int) -> tuple[int, int]:
    """torch.nn.LocalResponseNorm: output channel c averages input channels c - size//2 .. c + (size-1)//2."""
    return size // 2, (size - 1) // 2


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 300), st.integers(2, 8), st.integers(1, 13))
def test_halo_reads_are_the_window_channels_other_parts_hold(c: int, n: int, size: int) -> None:
    """Brute force: every channel some output channel of part j averages over, not in part j."""
    below, above = _window_by_hand(size)
    parts = blocks(c, n)
    ls = LayerSplit("follow", c, parts, (True,), (below, above))
    for j, share in enumerate(parts):
        own = {x for lo, hi in share for x in range(lo, hi)}
        need = {w for x in own for w in range(x - below, x + above + 1) if 0 <= w < c} - own
        got = [x for lo, hi in halo_reads(ls, j) for x in range(lo, hi)]
        assert got == sorted(need)


@pytest.mark.parametrize("mode", ["filter", "channel"])
def test_alexnet_lrn_exchanges_its_window_across_the_boundary(mode: str) -> None:
    net = get_model("alexnet_bvlc")
    plan = split_plan(net, mode, 2)
    halos = [x for x in plan.exchanges if x.op == "halo"]
    split_lrn = [(i, la) for i, (la, ls) in enumerate(zip(net.layers, plan.shares, strict=True))
                 if la.kind == "lrn" and ls.split]
    assert split_lrn and {la.name for _, la in split_lrn} == ({"norm1", "norm2"} if mode == "filter" else {"norm2"})
    for i, la in split_lrn:
        below, above = _window_by_hand(int(la.attr("size")))
        # two GPUs: GPU 0 receives `above` channels from GPU 1, GPU 1 `below` from GPU 0
        h, w = la.in_shape[1:]
        want = max(below, above) * h * w
        mine = [x for x in halos if x.layer == i]
        assert sorted(x.phase for x in mine) == ["bwd", "fwd"]
        assert all(x.elems_per_sample == want and x.tensor == la.inputs[0] for x in mine)
    assert len(halos) == 2 * len(split_lrn)


def test_alexnet_softmax_gathers_its_row() -> None:
    net = get_model("alexnet_bvlc")
    plan = split_plan(net, "filter", 2)
    i = next(k for k, la in enumerate(net.layers) if la.kind == "softmax")
    got = {(x.phase, x.op) for x in plan.exchanges if x.layer == i}
    assert got == {("fwd", "allgather"), ("bwd", "reduce_scatter")}
    assert all(x.elems_per_sample == 1000 for x in plan.exchanges if x.layer == i)
    assert plan.shares[i].role == "own" and plan.f_in[i] == 1.0


@pytest.mark.parametrize("model", ["alexnet_bvlc", "googlenet_v1"])
@pytest.mark.parametrize("n", [2, 4])
def test_predict_prices_the_halo_by_hand(model: str, n: int) -> None:
    """The step includes the halos: a latency per exchange and the busiest GPU's halo elements each
    pass over the split group's NVLink (as a spatial split's halo)."""
    hw = load_hardware(V100)
    p = predict(model, n, f"filter={n}", hardware=hw, precision="fp32", global_batch=64)
    plan = split_plan(get_model(model), "filter", n)
    halos = [x for x in plan.exchanges if x.op == "halo"]
    assert len(halos) == 4  # two LRN layers, two passes
    lp = link_params(hw)
    elems = sum(x.elems_per_sample for x in halos)  # both passes
    by_hand = len(halos) * lp.alpha_intra + 64 * elems * 4 / lp.bw_intra
    assert p.breakdown["halo_exchange"] == pytest.approx(by_hand, rel=1e-12)
    assert p.iteration_time_s == pytest.approx(sum(p.breakdown.values()), rel=1e-12)


def test_explain_writes_the_halo_as_predicted() -> None:
    ctx = context(get_model("alexnet_bvlc"), load_hardware(V100), "fp32", "sgd")
    f = explain_plan(ctx, parse_strategy("filter=2,dp=2", 4), 128)
    check_terms(f)
    assert "N_halo" in {str(x) for x in f.terms["halo_exchange"].free_symbols}


@pytest.mark.parametrize("model", ["alexnet_bvlc", "googlenet_v1"])
@pytest.mark.parametrize("n", [2, 4])
def test_hypergraph_units_read_what_the_split_exchanges(model: str, n: int) -> None:
    """Channel units as the split plan: an LRN unit reads its own share plus a net per neighbour of
    exactly its halo channels; the softmax's units read every unit of their input (gathered)."""
    net = get_model(model)
    hg = build_hypergraph(net, None, "fp32", "channel", groups=n)
    splits = channel_split(net, n)
    plan = split_plan(net, "filter", n)
    for i, la in enumerate(net.layers):
        if la.kind not in ("lrn", "softmax"):
            continue
        src = net.layers.index(next(x for x in net.layers if x.name == la.inputs[0]))
        per_channel = numel(la.in_shape) // la.in_shape[0]
        read: dict[int, int] = {}
        for k in range(hg.num_nets):
            pins = hg.net_pins(k)
            if int(hg.unit_layer[pins[0]]) == src:
                for r in pins[1:]:
                    if int(hg.unit_layer[r]) == i:
                        read[int(r)] = read.get(int(r), 0) + int(hg.net_elems[k])
        units = [u for u in range(hg.num_units) if int(hg.unit_layer[u]) == i]
        for j, u in enumerate(units):
            if la.kind == "softmax":
                assert read[u] == numel(la.in_shape)  # the whole row
            else:
                own = splits[i].size(j)
                halo = sum(hi - lo for lo, hi in halo_reads(splits[i], j))
                assert read[u] == (own + halo) * per_channel
        if la.kind == "softmax":
            assert la.inputs[0] in {x.tensor for x in plan.exchanges if x.op == "allgather"}

"""Hypergraph partitioning: metrics, KaHyPar's balance and determinism, mp pricing, the CLI."""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pytest
from cli_helpers import run_main as _run
from hypothesis import given, settings
from hypothesis import strategies as st
from random_nets import random_dag

from perfmodel.errors import PartitionError, StrategyError, UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import NetBuilder, Network, get_model
from perfmodel.partition import (
    Hypergraph,
    build_hypergraph,
    connectivity,
    contiguous_partition,
    data_parallel_volume_bytes,
    hypergraph_partition,
    km1_volume,
    network_partition,
    partition_report,
)
from perfmodel.partition.kahypar_backend import kahypar_partition
from perfmodel.partition.metrics import imbalance, is_acyclic, max_allowed_weight, quotient_edges
from perfmodel.partition.plan import Partition, clear_cache, network_hypergraph
from perfmodel.strategies import predict
from perfmodel.strategies.context import context
from perfmodel.strategies.mp_candidates import mp_candidates
from perfmodel.strategies.mp_schedule import gradient_ready_s, greedy_schedule, replay, simulate
from perfmodel.strategies.mp_segments import Segments, segments
from perfmodel.strategies.pipeline import pipeline_timing

pytest.importorskip("kahypar")

HW = load_hardware()


def _toy() -> Network:
    """conv a (3->4) - relu r - conv b (4->4) - add(b, r) - flatten - linear (->10), 8x8 input."""
    b = NetBuilder("toy", (3, 8, 8))
    a = b.conv("input", 4, 3, padding=1, bias=False, name="a")
    r = b.act(a, "relu", name="r")
    c = b.conv(r, 4, 3, padding=1, bias=False, name="b")
    s = b.add(c, r, name="add")
    f = b.flatten(s, name="flat")
    b.linear(f, 10, name="fc")
    return b.build()


def _hypergraph(nets: list[list[int]], weights: list[float], units: int) -> Hypergraph:
    offsets = np.concatenate([[0], np.cumsum([len(n) for n in nets])])
    return Hypergraph(
        model="hand",
        granularity="layer",
        groups=1,
        elem_bytes=2,
        unit_names=tuple(f"u{i}" for i in range(units)),
        unit_layer=np.arange(units),
        unit_share=np.ones(units),
        unit_seconds=np.ones(units),
        unit_weights=np.ones(units, dtype=np.int64),
        net_names=tuple(f"n{i}" for i in range(len(nets))),
        offsets=offsets.astype(np.int64),
        pins=np.array([p for n in nets for p in n], dtype=np.int64),
        net_elems=np.array(weights, dtype=np.int64) // 4,
        net_bytes=np.array(weights, dtype=float),
    )


# -- metrics ---------------------------------------------------------------------------------
def test_km1_volume_of_hand_computed_hypergraph() -> None:
    hg = _hypergraph([[0, 1, 2], [2, 3], [0, 3], [1, 0]], [10.0, 5.0, 1.0, 7.0], units=4)
    a = np.array([0, 0, 1, 2])
    assert connectivity(hg, a, 3).tolist() == [2, 2, 2, 1]
    # n0 spans parts {0, 1}: 10; n1 {1, 2}: 5; n2 {0, 2}: 1; n3 only part 0: 0
    assert km1_volume(hg, a, 3) == 16.0
    assert km1_volume(hg, np.zeros(4, dtype=int), 3) == 0.0
    # every unit on its own part: (3-1)*10 + 5 + 1 + 7
    assert km1_volume(hg, np.array([0, 1, 2, 3]), 4) == 33.0
    assert quotient_edges(hg, a) == ((0, 1), (0, 2), (1, 2))
    assert is_acyclic(3, quotient_edges(hg, a))
    assert not is_acyclic(2, ((0, 1), (1, 0)))
    assert imbalance(np.array([3.0, 1.0])) == pytest.approx(0.5)
    assert max_allowed_weight(7, 2, 0.03) == pytest.approx(1.03 * 4)


def test_layer_hypergraph_of_toy_network() -> None:
    hg = build_hypergraph(_toy(), HW, "amp", "layer")
    assert hg.unit_names == ("a", "r", "b", "add", "flat", "fc")
    # every produced tensor that someone reads is a net, producer first; fc's output is not
    assert hg.net_names == ("a", "r", "b", "add", "flat")
    assert [hg.net_pins(i).tolist() for i in range(hg.num_nets)] == [
        [0, 1],
        [1, 2, 3],
        [2, 3],
        [3, 4],
        [4, 5],
    ]
    # 4 channels x 8 x 8 elements, forward activation + backward gradient, 2 bytes each (amp)
    assert hg.net_bytes.tolist() == [1024.0] * 5
    a = np.array([0, 0, 1, 1, 1, 1])  # cut after r: r's tensor crosses once
    assert km1_volume(hg, a, 2) == 1024.0
    a = np.array([0, 1, 0, 1, 1, 1])  # a, r, b each cross once; add, flat stay
    assert km1_volume(hg, a, 2) == 3 * 1024.0


def test_channel_hypergraph_splits_layers() -> None:
    layer = build_hypergraph(_toy(), HW, "amp", "layer")
    hg = build_hypergraph(_toy(), HW, "amp", "channel", groups=2)
    assert hg.unit_names == (
        "a[0:2]",
        "a[2:4]",
        "r[0:2]",
        "r[2:4]",
        "b[0:2]",
        "b[2:4]",
        "add[0:2]",
        "add[2:4]",
        "flat[0:128]",  # filter parallelism's flatten keeps its input's split: channels 0:2 x 8 x 8
        "flat[128:256]",
        "fc[0:5]",
        "fc[5:10]",
    )
    pins = {hg.net_names[i]: hg.net_pins(i).tolist() for i in range(hg.num_nets)}
    assert pins["a[0:2]"] == [0, 2]  # relu is channel-wise: group 0 reads group 0 only
    assert pins["r[2:4]"] == [3, 4, 5, 7]  # conv b mixes channels: both its groups read it
    assert pins["add[2:4]"] == [7, 9]  # flatten follows its input's groups
    assert pins["flat[0:128]"] == [8, 10, 11]  # the linear layer reads every group
    assert hg.net_bytes[hg.net_names.index("a[0:2]")] == 2 * 2 * 64 * 2
    assert hg.net_bytes[hg.net_names.index("flat[128:256]")] == 2 * 128 * 2
    # every unit is a piece of one layer, run as the smaller layer its GPU computes: two halves of a
    # tiny layer take longer than the layer (launches and host dispatch twice; tests/test_unit_times.py)
    per_layer = np.bincount(hg.unit_layer, weights=hg.unit_seconds, minlength=6)
    assert np.all(per_layer >= layer.unit_seconds * (1 - 1e-12))
    assert sorted(set(hg.unit_layer.tolist())) == list(range(6))


# -- KaHyPar ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model", "parts", "granularity"),
    [
        ("resnet18", 2, "layer"),
        ("resnet18", 4, "layer"),
        ("resnet18", 4, "channel"),
        ("googlenet", 8, "layer"),
    ],
)
def test_partition_respects_epsilon_and_assigns_every_layer(
    model: str, parts: int, granularity: str
) -> None:
    net = get_model(model)
    p = network_partition(net, HW, "amp", parts, granularity, epsilon=0.03)
    hg = p.hypergraph
    # KaHyPar's bound on the integer weights: (1 + eps) * ceil(total / K)
    assert p.weight_loads.max() <= max_allowed_weight(int(hg.unit_weights.sum()), parts, 0.03)
    assert p.assignment.shape == (hg.num_units,)
    assert set(p.assignment.tolist()) == set(range(parts))
    assert sorted(set(hg.unit_layer.tolist())) == list(range(len(net.layers)))
    assert set(p.unit_parts) == set(hg.unit_names)
    assert p.imbalance < 0.03 + 0.02  # integer rounding of the weights aside, within epsilon


def test_unreachable_balance_is_reported() -> None:
    # at fp32 one of alexnet's 22 layers alone weighs 1.7x an eighth of the network
    r = partition_report("alexnet", 8, "layer", precision="fp32")
    assert not r.balanced and r.heaviest_unit_over_bound > 1
    assert r.to_dict()["balance"]["met"] is False
    layer_imbalance = r.hypergraph.imbalance
    r = partition_report("alexnet", 8, "channel", precision="fp32")
    # KaHyPar's bound is met; the GPUs' own times (one kernel per layer block, its fixed costs
    # included: partition.loads) stay far better balanced than whole layers allow (0.16 vs 0.70)
    assert r.balanced and r.hypergraph.imbalance is not None and layer_imbalance is not None
    assert r.hypergraph.imbalance < layer_imbalance / 2


def test_partition_is_deterministic_with_the_seed() -> None:
    hg = network_hypergraph(get_model("resnet18"), HW, "amp", 4, "layer")
    first = kahypar_partition(hg, 4, 0.03, seed=7)
    assert np.array_equal(first, kahypar_partition(hg, 4, 0.03, seed=7))
    clear_cache()
    a = hypergraph_partition(hg, 4, 0.03, seed=7)
    b = hypergraph_partition(hg, 4, 0.03, seed=7)  # from the cache
    assert a.seconds > 0 and b.seconds == 0
    assert np.array_equal(a.assignment, b.assignment) and np.array_equal(a.assignment, first)


def test_missing_kahypar_raises_partition_error(monkeypatch: pytest.MonkeyPatch) -> None:
    hg = network_hypergraph(get_model("tiny_cnn"), HW, "amp", 2, "layer")
    monkeypatch.setitem(sys.modules, "kahypar", None)
    with pytest.raises(PartitionError, match="pip install kahypar"):
        kahypar_partition(hg, 2, 0.03, 1)


def test_parts_out_of_range_are_usage_errors() -> None:
    net = get_model("tiny_cnn")
    with pytest.raises(UsageError, match=">= 2"):
        network_partition(net, HW, "amp", 1)
    with pytest.raises(UsageError, match="only 13 units"):
        network_partition(net, HW, "amp", 14)
    with pytest.raises(UsageError, match="granularity"):
        network_partition(net, HW, "amp", 2, "block")
    with pytest.raises(UsageError, match="epsilon"):
        network_partition(net, HW, "amp", 2, epsilon=0.0)


# -- baselines and report ----------------------------------------------------------------------
def test_report_volumes_and_baselines() -> None:
    net = get_model("resnet18")
    r = partition_report(net, 2, global_batch=64)
    r2 = partition_report(net, 2, global_batch=128)
    assert r2.hypergraph.comm_volume_bytes == pytest.approx(2 * r.hypergraph.comm_volume_bytes)
    assert (
        r.data_parallel_volume_bytes
        == data_parallel_volume_bytes(net.params, 2)
        == 2 * 1 * 4 * net.params
    )
    assert r.hypergraph.comm_volume_per_device_bytes == pytest.approx(
        r.hypergraph.comm_volume_bytes / 2
    )
    assert r.contiguous is not None and r.contiguous.imbalance is not None
    assert r.reduction_vs_data_parallel == pytest.approx(
        1 - r.hypergraph.comm_volume_bytes / r.data_parallel_volume_bytes
    )
    assert r.break_even_batch == pytest.approx(
        64 * r.data_parallel_volume_bytes / r.hypergraph.comm_volume_bytes
    )
    assert set(r.assignment) == {la.name for la in net.layers}


def test_contiguous_partition_follows_the_links() -> None:
    net = get_model("resnet18")
    hg = network_hypergraph(net, HW, "amp", 3, "layer")
    p = contiguous_partition(net, hg, 3)
    assert p is not None
    assert np.all(np.diff(p.assignment) >= 0)  # stages in layer order
    for lk in net.links:
        assert len(set(p.assignment[lk.start : lk.stop].tolist())) == 1  # a link is never cut
    assert contiguous_partition(net, network_hypergraph(net, HW, "amp", 11, "layer"), 11) is None


# -- mp pricing ------------------------------------------------------------------------------
@pytest.mark.parametrize("parts", [2, 3, 5])
def test_simulation_of_a_chain_equals_the_gpipe_closed_form(parts: int) -> None:
    net = get_model("vgg11")
    p = contiguous_partition(net, network_hypergraph(net, HW, "amp", parts, "layer"), parts)
    assert p is not None
    seg = segments(p)
    assert seg.count == parts
    rng = np.random.default_rng(parts)
    f, b = rng.uniform(1, 3, parts), rng.uniform(2, 5, parts)
    msg = rng.uniform(0.1, 0.5, len(seg.msg_elems))
    send_f, send_b = np.zeros(parts), np.zeros(parts)
    np.add.at(send_f, seg.msg_src[~seg.msg_bwd], msg[~seg.msg_bwd])
    np.add.at(send_b, seg.msg_src[seg.msg_bwd], msg[seg.msg_bwd])
    for mb in (1, 4, 9):
        sim = simulate(seg, f, b, msg, mb, False)
        assert sim.total_s == pytest.approx(
            pipeline_timing(
                f.tolist(), b.tolist(), send_f.tolist(), send_b.tolist(), mb, False
            ).total_s,
            rel=1e-12,
        )


def test_gradients_are_ready_when_the_last_backward_ran_them() -> None:
    net = get_model("vgg11")
    p = contiguous_partition(net, network_hypergraph(net, HW, "amp", 3, "layer"), 3)
    assert p is not None
    seg = segments(p)
    rng = np.random.default_rng(3)
    u_b = rng.uniform(0.1, 1.0, p.hypergraph.num_units)
    b = np.array([u_b[u].sum() for u in seg.units])
    msg = rng.uniform(0.1, 0.5, len(seg.msg_elems))
    sched = simulate(seg, rng.uniform(0.1, 1.0, 3), b, msg, 4, False)
    ready = gradient_ready_s(seg, sched, u_b)
    send_b = np.zeros(3)
    np.add.at(send_b, seg.msg_src[seg.msg_bwd], msg[seg.msg_bwd])
    for d, units in enumerate(seg.units):  # one segment per stage
        # the stage's first layer is the last its backward runs: then it sends its gradient
        assert ready[units[0]] + send_b[d] == pytest.approx(sched.last_bwd_end_s[d], rel=1e-12)
        assert np.all(np.diff(ready[units]) < 0)  # the last layer's gradient is ready first


def test_mp2_dp4_predict_on_resnet18() -> None:
    p = predict("resnet18", 8, "mp=2,dp=4,mb=4", batch_per_gpu=32)
    assert p.strategy.mp == 2 and p.strategy.dp == 4 and p.strategy.kind == "hybrid"
    assert math.isfinite(p.iteration_time_s) and p.iteration_time_s > 0
    assert all(math.isfinite(v) and v >= 0 for v in [*p.breakdown.values(), *p.memory.values()])
    assert sum(p.breakdown.values()) == pytest.approx(p.iteration_time_s)
    assert {
        "compute",
        "pipeline_p2p",
        "pipeline_bubble",
        "gradient_exchange_exposed",
        "optimizer_step",
    } <= set(p.breakdown)
    assert set(p.memory) == {
        "weights",
        "gradients",
        "optimizer_state",
        "gradient_buckets",
        "input_batch",
        "activations",
        "workspace",
    }
    # the busiest GPU holds its replica's whole batch (64 images) if it runs conv1, else none
    busiest = p.details["parts"][p.details["busiest_part"]]
    assert p.memory["input_batch"] == (64 * 3 * 224 * 224 * 4 if "conv1" in busiest["layers"] else 0.0)
    assert p.fits_in_memory and p.speedup_vs_1gpu is not None
    assert sum(part["params"] for part in p.details["parts"]) == get_model("resnet18").params
    json.dumps(p.to_dict())


# -- the schedule: greedy is not monotone, the fixed order is ------------------------------------
def _chain_partition(assignment: list[int], parts: int) -> Partition:
    """Units 0 -> 1 -> ... in a chain, unit i on part ``assignment[i]``."""
    units = len(assignment)
    hg = _hypergraph([[i, i + 1] for i in range(units - 1)], [4.0] * (units - 1), units)
    return Partition(hg, parts, np.array(assignment), "hand", 0.0, 0)


def test_greedy_schedule_anomaly_and_the_fixed_order() -> None:
    """The module docstring's counterexample: a shorter task makes the greedy schedule longer."""
    seg = segments(_chain_partition([0, 1, 0], 2))
    f, msg = np.array([2.0, 1.0, 1.0]), np.array([2.0, 1.0, 0.0, 1.0])
    assert seg.msg_bwd.tolist() == [False, True, False, True]  # u0 fwd, u0 grad, u1 fwd, u1 grad
    slow_b, fast_b = np.array([2.0, 2.0, 5.0]), np.array([2.0, 1.0, 5.0])
    slow, slow_order = greedy_schedule(seg, f, slow_b, msg, 3, False)
    fast, fast_order = greedy_schedule(seg, f, fast_b, msg, 3, False)
    assert fast.total_s > slow.total_s  # Graham's anomaly
    assert slow_order != fast_order
    # the fixed order: the same order for both, and the shorter task does not hurt
    assert simulate(seg, f, fast_b, msg, 3, False).total_s <= simulate(seg, f, slow_b, msg, 3, False).total_s
    # replaying either greedy order on its own durations reproduces the greedy schedule
    for b, order, sched in ((slow_b, slow_order, slow), (fast_b, fast_order, fast)):
        assert replay(seg, f, b, msg, 3, False, order).total_s == sched.total_s


@st.composite
def hand_schedule(draw: st.DrawFn) -> tuple[Segments, np.ndarray, np.ndarray, np.ndarray, int, bool]:
    """A random chain of 3-8 units over 2-4 parts (cycles between parts included) and durations."""
    parts = draw(st.integers(2, 4))
    rest = draw(st.lists(st.integers(0, parts - 1), min_size=max(0, 3 - parts), max_size=8 - parts))
    assignment = draw(st.permutations([*range(parts), *rest]))  # every part holds a unit
    seg = segments(_chain_partition(assignment, parts))
    times = st.floats(0.0, 5.0, allow_nan=False)
    f = np.array(draw(st.lists(times, min_size=seg.count, max_size=seg.count)))
    b = np.array(draw(st.lists(times, min_size=seg.count, max_size=seg.count)))
    n = len(seg.msg_elems)
    msg = np.array(draw(st.lists(times, min_size=n, max_size=n)))
    return seg, f, b, msg, draw(st.integers(1, 5)), draw(st.booleans())


@settings(derandomize=True, max_examples=150, deadline=None, database=None)
@given(hand_schedule(), st.data())
def test_fixed_order_schedule_is_monotone_and_replays_greedy(
    case: tuple[Segments, np.ndarray, np.ndarray, np.ndarray, int, bool], data: st.DataObject
) -> None:
    seg, f, b, msg, mb, rc = case
    greedy, order = greedy_schedule(seg, f, b, msg, mb, rc)
    again = replay(seg, f, b, msg, mb, rc, order)
    for field in ("compute_s", "recompute_s", "send_s", "last_bwd_end_s", "bwd_start_s"):
        np.testing.assert_allclose(getattr(again, field), getattr(greedy, field), rtol=1e-12, atol=1e-12)
    assert again.total_s == pytest.approx(greedy.total_s, rel=1e-12, abs=1e-12)
    # every duration shrunk by its own factor in [0, 1]: nothing starts or ends later
    shrink = st.lists(st.floats(0.0, 1.0), min_size=len(f) * 2 + len(msg), max_size=len(f) * 2 + len(msg))
    k = np.array(data.draw(shrink, label="factors"))
    f2, b2, msg2 = f * k[: len(f)], b * k[len(f) : 2 * len(f)], msg * k[2 * len(f) :]
    before, after = simulate(seg, f, b, msg, mb, rc), simulate(seg, f2, b2, msg2, mb, rc)
    assert after.total_s <= before.total_s * (1 + 1e-12) + 1e-12
    assert np.all(after.last_bwd_end_s <= before.last_bwd_end_s * (1 + 1e-12) + 1e-12)
    assert np.all(after.bwd_start_s <= before.bwd_start_s * (1 + 1e-12) + 1e-12)


# -- a faster device or link never makes an mp plan slower -------------------------------------
FASTER = (
    ("peak_scale", (1.5, 2.0, 10.0)),
    ("memory_bandwidth_scale", (1.5, 2.0, 10.0)),
    ("intra_bandwidth_scale", (1.5, 2.0, 10.0)),
    ("inter_bandwidth_scale", (2.0, 10.0)),
    ("intra_latency_scale", (0.5, 0.1, 0.0)),
    ("inter_latency_scale", (0.5, 0.0)),
)


@st.composite
def small_net(draw: st.DrawFn) -> Network:
    """A zoo model at a small image, or a random CNN with residual adds and concatenations."""
    zoo = draw(st.sampled_from(["", "tiny_cnn", "resnet18", "mobilenet_v2", "squeezenet1_1"]))
    if zoo:
        return get_model(zoo, 32 if zoo == "tiny_cnn" else 64)
    return random_dag(draw, 16, (8, 16), (1, 5), (4, 8))


@settings(derandomize=True, max_examples=100, deadline=None, database=None)
@given(
    small_net(),
    st.integers(2, 4),
    st.sampled_from(["a100-80gb-dgx", "v100-16gb-dgx1", "p40-24gb-pcie", "h100-80gb-dgx", "abci-v100-16gb"]),
    st.sampled_from(["amp", "fp32"]),
    st.data(),
)
def test_faster_hardware_never_slows_an_mp_plan(
    net: Network, k: int, hardware: str, precision: str, data: st.DataObject
) -> None:
    base = load_hardware(hardware)
    dp = data.draw(st.sampled_from([d for d in (1, 2, 4) if k * d <= base.max_gpus]), label="dp")
    mb = data.draw(st.sampled_from([1, k, 4 * k]), label="mb")
    spec = f"mp={k},dp={dp},mb={mb}" + (",recompute=true" if data.draw(st.booleans(), label="recompute") else "")
    if dp > 1:
        spec += ",comm=" + data.draw(st.sampled_from(["ring", "tree", "hierarchical"]), label="comm")
    batch = dp * mb * data.draw(st.sampled_from([1, 2, 8]), label="micro-batch")
    p = predict(net, k * dp, spec, base, precision, global_batch=batch)
    for key, factors in FASTER:
        factor = data.draw(st.sampled_from(factors), label=key)
        q = predict(net, k * dp, spec, base.what_if(**{key: factor}), precision, global_batch=batch)
        assert q.iteration_time_s <= p.iteration_time_s * (1 + 1e-9), (spec, key, factor)
        # the same candidate partitions on every profile (each profile runs its fastest of them)
        names = [[c["name"] for c in x.details["partition_choice"]["candidates"]] for x in (p, q)]
        assert names[0] == names[1]


def test_mp_candidate_partitions_are_the_same_on_every_profile() -> None:
    net = get_model("googlenet")
    cands = {hw: mp_candidates(context(net, load_hardware(hw), "amp", "sgd"), 4, 16)
             for hw in ("a100-80gb-dgx", "p40-24gb-pcie", "h100-80gb-dgx")}
    assert len({tuple((n, p.assignment.tobytes()) for n, p in c.items()) for c in cands.values()}) == 1
    parts = {hw: predict(net, 4, "mp=4,mb=4", hw, "amp", global_batch=64).details["parts"] for hw in cands}
    # the loads differ by profile
    assert len({tuple(p["forward_s"] for p in v) for v in parts.values()}) == 3


def test_mp_plan_errors() -> None:
    with pytest.raises(StrategyError, match="only 13 layers"):
        predict("tiny_cnn", 16, "mp=16", global_batch=16)
    with pytest.raises(StrategyError, match="GPipe"):
        predict("resnet18", 2, "mp=2,schedule=1f1b", global_batch=16)


# -- CLI -------------------------------------------------------------------------------------


def test_cli_partition_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["partition", "resnet18", "--parts", "2", "--format", "json"], capsys)
    assert code == 0
    d = json.loads(out)
    for key in (
        "parts",
        "comm_volume_bytes",
        "imbalance",
        "assignment",
        "baselines",
        "definitions",
    ):
        assert key in d
    assert d["parts"] == 2 and len(d["assignment"]) == 69
    for name in ("contiguous", "data_parallel"):
        assert d["baselines"][name]["comm_volume_bytes"] > 0
    assert d["baselines"]["contiguous"]["imbalance"] >= 0
    assert "summed over all devices" in d["definitions"]["comm_volume_bytes"]


def test_break_even_batch_below_one_is_said_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    """tiny_cnn's cut at one sample outweighs its gradients: no 'global batch 0', the ratio at batch 1."""
    r = partition_report("tiny_cnn", 13, hardware=HW)
    assert 0 < r.break_even_batch < 1
    code, out, _ = _run(["partition", "tiny_cnn", "--parts", "13"], capsys)
    assert code == 0 and "global batch 0" not in out
    assert f"more at every global batch ({1 / r.break_even_batch:,.1f}x at global batch 1)" in out
    code, out, _ = _run(["partition", "resnet18", "--parts", "2"], capsys)
    assert code == 0 and "; the same at global batch " in out


def test_cli_partition_table_csv_and_chart(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    from pathlib import Path

    chart = Path(str(tmp_path)) / "p.png"
    code, out, _ = _run(["partition", "resnet18", "-k", "3", "--chart", str(chart)], capsys)
    assert code == 0 and "volume_GB" in out and "load_ms" in out
    assert chart.stat().st_size > 0
    code, out, _ = _run(
        ["partition", "resnet18", "-k", "2", "--granularity", "channel", "--format", "csv"], capsys
    )
    assert code == 0 and out.splitlines()[0].startswith("split,comm_volume_bytes")


@pytest.mark.parametrize(
    "args",
    [
        ["--parts", "1"],
        ["--parts", "70"],
        ["--parts", "2", "--granularity", "block"],
        ["--parts", "2", "--epsilon", "-1"],
    ],
)
def test_cli_partition_errors_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["partition", "resnet18", *args], capsys)
    assert code == 2
    assert "Traceback" not in err and err.strip()


@pytest.mark.parametrize(("kwargs", "phrase"), [
    ({"global_batch": 10**400}, "is too large (valid: 1 to 1,000,000,000"),
    ({"global_batch": 0}, "global batch must be a positive integer"),
    ({"seed": 2**31}, "seed must be an integer from 0 to 2,147,483,647"),
    ({"seed": -1}, "seed must be an integer from 0"),
])
def test_partition_report_refuses_out_of_range_numbers(kwargs: dict[str, int], phrase: str) -> None:
    with pytest.raises(UsageError, match=re.escape(phrase)):
        partition_report("tiny_cnn", 2, **kwargs)  # type: ignore[arg-type]


def test_partition_says_it_is_working_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A 30 s KaHyPar run (resnet50, 64 parts, channels) printed nothing until done: on a terminal a
    line says what runs and is erased after; a redirected stderr stays empty."""
    import io

    from perfmodel.commands import partition as cmd

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    with cmd._working("partitioning x"):
        assert tty.getvalue() == "partitioning x ..."
    assert tty.getvalue().endswith("\r" + " " * 18 + "\r")
    monkeypatch.undo()
    code, _, err = _run(["partition", "tiny_cnn", "--parts", "2"], capsys)
    assert code == 0 and err == ""

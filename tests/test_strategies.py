"""Strategy specs, the pipeline and spatial dynamic programs, DP overlap, parameter servers, predict."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.errors import BatchSplitError, StrategyError
from perfmodel.network import NetBuilder, compile_counts, get_model
from perfmodel.partition.stages import brute_force_partition, partition_min_max, partition_with_cut_costs
from perfmodel.strategies import parse_strategy, predict
from perfmodel.strategies.data import overlapped_exchange
from perfmodel.strategies.parameter_server import parameter_server
from perfmodel.strategies.pipeline import pipeline_timing
from perfmodel.strategies.spatial import choose_decomposition, halo_elems, halo_widths


# -- spec ------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["dp=8", "pp=4,dp=2,mb=8", "sp=2x2,dp=2", "sp=2,pp=2,dp=2,mb=4",
                                  "dp=8,comm=ps-central", "pp=2,dp=4,mb=4,schedule=1f1b,recompute=true"])
def test_spec_round_trips(spec: str) -> None:
    s = parse_strategy(spec, 8)
    assert s.gpus == 8
    assert parse_strategy(s.spec(), 8) == s


@pytest.mark.parametrize("spec, msg", [
    ("dp=3", "multiply to 3, not 8"), ("pp=4,dp=4", "not 8"), ("dq=8", "did you mean dp"),
    ("dp", "key=value"), ("dp=x", "not an integer"), ("comm=foo,dp=8", "comm 'foo'"), ("", "empty"),
    ("sp=2x2x2x2", "sp=2x2x2x2"),
])
def test_bad_specs(spec: str, msg: str) -> None:
    with pytest.raises(StrategyError, match=msg):
        parse_strategy(spec, 8)


def test_missing_dp_is_inferred() -> None:
    assert parse_strategy("pp=2", 8).dp == 4


# -- pipeline --------------------------------------------------------------------------
@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.floats(0.01, 10), min_size=2, max_size=9), st.integers(2, 5))
def test_partition_is_optimal(costs: list[float], parts: int) -> None:
    parts = min(parts, len(costs))
    runs = partition_min_max(costs, parts)
    assert len(runs) == parts and sum(runs) == len(costs) and min(runs) >= 1
    bounds = np.concatenate([[0], np.cumsum(runs)])
    worst = max(sum(costs[bounds[i]:bounds[i + 1]]) for i in range(parts))
    assert worst == pytest.approx(brute_force_partition(costs, parts), rel=1e-9)


def test_pipeline_timing_by_hand() -> None:
    # 2 equal stages, f=1, b=2, 4 micro-batches, no sends: (2 + 3*1) + (4 + 3*2) = 15; bubble 15 - 4*3 = 3
    t = pipeline_timing([1, 1], [2, 2], [0, 0], [0, 0], 4, False)
    assert t.total_s == pytest.approx(15)
    assert t.bubble_s == pytest.approx(3)
    r = pipeline_timing([1, 1], [2, 2], [0, 0], [0, 0], 4, True)
    assert r.total_s == pytest.approx(15 + 3)  # three of four micro-batches recompute f=1


# -- spatial ---------------------------------------------------------------------------
def test_halo_widths_by_hand() -> None:
    assert halo_widths(3, 1, 1, 1) == (1, 1)
    assert halo_widths(7, 2, 3, 1) == (3, 2)
    assert halo_widths(1, 1, 0, 1) == (0, 0)


def test_halo_elems_by_hand() -> None:
    net = get_model("resnet50")
    conv = next(la for la in net.layers if la.kind == "conv" and la.kernel == (3, 3) and la.in_shape[1] == 56)
    c, h, w = conv.in_shape
    # 1x2 grid: one neighbour per tile, 1 column of height h
    assert halo_elems(conv, (1, 1, 2)) == pytest.approx(c * 1 * h)
    # 4x1 grid: interior tiles have both neighbours: 2 rows of width w
    assert halo_elems(conv, (1, 4, 1)) == pytest.approx(c * 2 * w)
    # 2x2 grid: a row and a column of the quarter tile, and the corner element they share
    assert halo_elems(conv, (1, 2, 2)) == pytest.approx(c * (h / 2 + w / 2 + 1))
    # 4x4 grid: two rows, two columns and four corners around an interior tile
    assert halo_elems(conv, (1, 4, 4)) == pytest.approx(c * ((h / 4 + 2) * (w / 4 + 2) - h / 4 * w / 4))


def test_halo_elems_3d_faces_edges_corners() -> None:
    # a 3x3x3 convolution (padding 1) on 8^3 voxels split 2x2x2: each octant receives three
    # 4x4 faces, three 4-voxel edges and one corner: (4 + 1)^3 - 4^3 = 3*16 + 3*4 + 1 = 61
    b = NetBuilder("vol", (2, 8, 8, 8))
    b.conv("input", 4, 3, padding=1)
    conv = b.build().layers[0]
    assert halo_elems(conv, (2, 2, 2)) == 2 * 61
    # split along depth only: one 8x8 face
    assert halo_elems(conv, (2, 1, 1)) == 2 * 64


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.data())
def test_decomposition_dp_equals_brute_force(data: st.DataObject) -> None:
    net = get_model("resnet18", 64)
    n = len(net.links)
    fl = st.floats(0, 10)
    sp_c = data.draw(st.lists(fl, min_size=n, max_size=n))
    sa_c = data.draw(st.lists(fl, min_size=n, max_size=n))
    sw_c = data.draw(st.lists(fl, min_size=n, max_size=n))
    allowed = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    choice, total = choose_decomposition(net, sp_c, sa_c, allowed, sw_c)
    best = math.inf
    for combo in itertools.product((False, True), repeat=n):
        if any(c and not a for c, a in zip(combo, allowed, strict=True)):
            continue
        cost = sum(sp_c[i] if c else sa_c[i] for i, c in enumerate(combo))
        cost += sum(sw_c[i] for i in range(1, n) if combo[i] != combo[i - 1])
        best = min(best, cost)
    assert total == pytest.approx(best, abs=1e-9)
    again = sum(sp_c[i] if c else sa_c[i] for i, c in enumerate(choice)) + sum(
        sw_c[i] for i in range(1, n) if choice[i] != choice[i - 1])
    assert again == pytest.approx(total, abs=1e-9)


# -- data parallel ---------------------------------------------------------------------
def test_bucket_overlap_by_hand() -> None:
    # two layers of 1 s backward, 30 MiB of gradients each: bucket 1 ready at 1 s, bucket 2 at 2 s;
    # each reduction takes 0.5 s -> end at 2.5 s, 0.5 s exposed
    end, total = overlapped_exchange([1.0, 1.0], [30 * 2**20, 30 * 2**20], lambda n: 0.5)
    assert end == pytest.approx(2.5) and total == pytest.approx(1.0)
    end, _ = overlapped_exchange([1.0, 1.0], [30 * 2**20, 30 * 2**20], lambda n: 3.0)
    assert end == pytest.approx(7.0)  # serial channel: 1 + 3 + 3


def test_parameter_server_bounds() -> None:
    c = parameter_server(1.0, 1e8, 8, 1e10, 1e10, 0.0, sharded=False)
    s = parameter_server(1.0, 1e8, 8, 1e10, 1e10, 0.0, sharded=True)
    assert c.worst_s == pytest.approx(1.0 + 2 * 8 * 1e8 / 1e10)
    assert c.best_s <= c.worst_s and s.best_s <= s.worst_s
    assert c.worst_s >= s.worst_s and c.best_s >= s.best_s


# -- predict ---------------------------------------------------------------------------
def test_one_gpu_is_the_serial_model() -> None:
    p = predict("resnet18", 1, "dp=1", batch_per_gpu=32)
    assert p.speedup_vs_1gpu == pytest.approx(1.0)
    assert p.breakdown["gradient_exchange_exposed"] == 0.0


@pytest.mark.parametrize("spec", ["dp=8", "pp=4,dp=2,mb=8", "sp=2x2,dp=2", "dp=8,comm=ps-central",
                                  "pp=2,dp=4,mb=4,recompute=true"])
def test_predict_fields_and_invariants(spec: str) -> None:
    p = predict("resnet50", 8, spec, batch_per_gpu=32)
    d = p.to_dict()
    for key in ("model", "hardware", "gpus", "strategy", "precision", "global_batch", "iteration_time_s",
                "throughput_samples_per_s", "speedup_vs_1gpu", "memory_per_gpu_bytes", "fits_in_memory",
                "breakdown", "memory", "assumptions"):
        assert key in d
    json.dumps(d, allow_nan=False)
    assert sum(p.breakdown.values()) == pytest.approx(p.iteration_time_s)
    assert p.speedup_vs_1gpu is not None and p.speedup_vs_1gpu <= 8 + 1e-9
    assert d["memory_per_gpu_bytes"] == pytest.approx(sum(p.memory.values()))


def test_bad_batches() -> None:
    with pytest.raises(BatchSplitError, match="multiple of 8"):
        predict("resnet18", 8, "dp=8", global_batch=100)
    with pytest.raises(BatchSplitError, match="mb <= 4"):
        predict("resnet18", 8, "pp=2,dp=4,mb=8", global_batch=16)
    with pytest.raises(StrategyError, match="valid: pp <="):
        predict("alexnet", 64, "pp=64", global_batch=64)
    with pytest.raises(StrategyError, match="larger than the input"):
        predict("resnet18", 64, "sp=64x1", global_batch=1, image_size=32)


def test_spatial_is_chosen_for_large_images() -> None:
    # one sample over 4 GPUs: sample decomposition would replicate the work, tiles share it
    p = predict("resnet50", 4, "sp=2x2", global_batch=1, image_size=1024)
    assert p.details["spatial_links"], "large feature maps should be decomposed spatially"
    assert p.breakdown["halo_exchange"] > 0
    one = predict("resnet50", 1, "dp=1", global_batch=1, image_size=1024)
    assert p.memory["activations"] < one.memory["activations"]
    assert p.iteration_time_s < one.iteration_time_s


def test_pipeline_memory_gpipe_vs_1f1b() -> None:
    g = predict("vgg16", 8, "pp=8,mb=32", global_batch=256)
    o = predict("vgg16", 8, "pp=8,mb=32,schedule=1f1b", global_batch=256)
    assert g.iteration_time_s == pytest.approx(o.iteration_time_s)
    assert o.memory["activations"] < g.memory["activations"]


def _bottleneck_with_cuts(costs: list[float], cuts: list[float], balance: tuple[int, ...]) -> float:
    b = [0, *itertools.accumulate(balance)]
    n = len(costs)
    return max(sum(costs[b[i]:b[i + 1]]) + (cuts[b[i] - 1] if b[i] > 0 else 0.0)
               + (cuts[b[i + 1] - 1] if b[i + 1] < n else 0.0) for i in range(len(balance)))


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.data())
def test_partition_with_cut_costs_is_a_valid_split_and_exact_without_cut_costs(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 12))
    parts = data.draw(st.integers(1, n))
    costs = data.draw(st.lists(st.floats(0, 10), min_size=n, max_size=n))
    cuts = data.draw(st.lists(st.floats(0, 10), min_size=n - 1, max_size=n - 1))
    bal = partition_with_cut_costs(costs, cuts, parts)
    assert len(bal) == parts and sum(bal) == n and min(bal) >= 1
    free = partition_with_cut_costs(costs, [0.0] * (n - 1), parts)
    assert _bottleneck_with_cuts(costs, [0.0] * (n - 1), free) == pytest.approx(
        brute_force_partition(costs, parts), rel=1e-9, abs=1e-12)


def test_partition_with_cut_costs_avoids_an_expensive_cut() -> None:
    # six equal links in two stages: the balanced cut (after link 3) would cost 9 to both stages
    assert partition_min_max([1.0] * 6, 2) == (3, 3)
    assert partition_with_cut_costs([1.0] * 6, [0, 0, 9, 0, 0], 2) in {(2, 4), (4, 2)}
    assert partition_with_cut_costs([1.0] * 6, [0, 10, 9, 0, 0], 2) == (4, 2)
    with pytest.raises(ValueError, match=r"shorter than intended partitions \(2 < 3\)"):
        partition_with_cut_costs([1.0, 1.0], [0.0], 3)


def test_spatial_plans_tile_every_link_unless_decomp_auto() -> None:
    # sp=4 is spatial parallelism: every link whose layers can be tiled is (ParaDL's plan);
    # decomp=auto lets the per-link DP choose, which at 224 px is sample decomposition everywhere
    tiled = predict("resnet50", 4, "sp=4", global_batch=256)
    auto = predict("resnet50", 4, "sp=4,decomp=auto", global_batch=256)
    net = get_model("resnet50")
    assert len(tiled.details["spatial_links"]) >= len(net.links) - 1  # all but the head (1x1 maps)
    assert tiled.breakdown["halo_exchange"] > 0
    assert auto.details["spatial_links"] == [] and auto.breakdown["halo_exchange"] == 0
    assert auto.iteration_time_s < tiled.iteration_time_s
    assert auto.iteration_time_s == pytest.approx(predict("resnet50", 4, "dp=4", global_batch=256).iteration_time_s)
    # the breakdown adds up, redistribution where the tiling stops (the head)
    assert sum(tiled.breakdown.values()) == pytest.approx(tiled.iteration_time_s, rel=1e-12)
    assert tiled.breakdown["redistribution"] > 0
    assert parse_strategy("sp=2x2,decomp=auto", 4).spec() == "sp=2x2,dp=1,decomp=auto"
    assert parse_strategy("sp=2x2,decomp=spatial", 4).spec() == "sp=2x2,dp=1"
    with pytest.raises(StrategyError, match="decomp=auto needs a spatial group"):
        parse_strategy("dp=4,decomp=auto", 4)
    with pytest.raises(StrategyError, match="decomp 'tiles' is not one of spatial, auto"):
        parse_strategy("sp=4,decomp=tiles", 4)


def test_input_batch_memory_by_hand() -> None:
    # a CosmoFlow 512^3 sample: 4 channels x 512^3 voxels x 4 B (fp32 as the loader delivers it) = 2 GiB
    one = predict("cosmoflow", 1, "dp=1", hardware="abci-v100-16gb", global_batch=1, image_size=512)
    assert one.memory["input_batch"] == 4 * 512**3 * 4
    # a spatial tile holds its quarter of the sample
    sp4 = predict("cosmoflow", 4, "sp=4", hardware="abci-v100-16gb", global_batch=1, image_size=512)
    assert sp4.details["spatial_links"][0] == "conv1"  # the first link is decomposed spatially
    assert sp4.memory["input_batch"] == 4 * 512**3 * 4 / 4
    # data parallelism: the GPU's own samples; accumulation: one micro-batch at a time
    dp = predict("resnet50", 8, "dp=8", global_batch=256)
    assert dp.memory["input_batch"] == 32 * 3 * 224 * 224 * 4
    acc = predict("resnet50", 8, "dp=8,mb=4", global_batch=256)
    assert acc.memory["input_batch"] == 8 * 3 * 224 * 224 * 4
    # GPipe: the first stage holds its replica's whole batch (the micro-batches are cut there)
    pp = predict("resnet50", 8, "pp=2,dp=4,mb=4", global_batch=256)
    assert pp.memory["input_batch"] == 64 * 3 * 224 * 224 * 4
    # 1F1B: the first stage has min(stages, micro-batches) micro-batches in flight
    f1b = predict("resnet50", 8, "pp=4,dp=2,mb=8,schedule=1f1b", global_batch=256)
    assert f1b.memory["input_batch"] == 4 * 16 * 3 * 224 * 224 * 4
    # recomputation keeps the input once (input_batch), plus the largest link's saved tensors
    rec = predict("cosmoflow", 1, "dp=1,recompute=true", "a100-80gb-dgx", "fp32", global_batch=4, image_size=128)
    net = get_model("cosmoflow", 128)
    ev = compile_counts(net).evaluate(4.0)
    saved = ev["saved_elems"] * 4 + ev["saved_extra_bytes"]
    assert rec.memory["activations"] == pytest.approx(max(saved[lk.start:lk.stop].sum() for lk in net.links))
    assert rec.memory["input_batch"] == 4 * 4 * 128**3 * 4
    assert pp.memory_per_gpu_bytes == pytest.approx(sum(pp.memory.values()))


def test_more_bandwidth_never_slower() -> None:
    from perfmodel.hardware import load_hardware

    hw = load_hardware("v100-16gb-dgx1")
    for spec in ("dp=16", "pp=2,dp=8,mb=4"):
        slow = predict("resnet50", 16, spec, hw, batch_per_gpu=64)
        fast = predict("resnet50", 16, spec, hw.what_if(inter_bandwidth_scale=4, intra_bandwidth_scale=2),
                       batch_per_gpu=64)
        assert fast.iteration_time_s <= slow.iteration_time_s

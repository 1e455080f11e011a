"""A part's load is the time its GPU takes for the step's batch: one kernel per layer block.

Oracles: ``predict --strategy filter=K``'s compute term (the busiest GPU's forward and backward
of every layer at the global batch) for the partition that puts unit ``j`` of every layer on part
``j``; a network built at the width a part holds (its units of a layer merged into one block)
priced alone by :func:`~perfmodel.cost.compute.layer_times`; and at layer granularity the layer
times at the global batch, with KaHyPar's partition that of ``mp=K`` plans.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.compute import layer_times
from perfmodel.hardware import REFERENCE_PROFILE, load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.counts import compile_counts
from perfmodel.network.graph import Network
from perfmodel.partition import partition_report
from perfmodel.partition.hypergraph import WEIGHT_SCALE, Hypergraph, build_hypergraph, reference_layer_times
from perfmodel.partition.loads import part_blocks, part_seconds
from perfmodel.partition.plan import network_partition
from perfmodel.strategies import predict

pytest.importorskip("kahypar")


def _filter_layout(hg: Hypergraph, n_layers: int) -> np.ndarray:
    """Unit ``j`` of every layer on part ``j`` (a whole layer's one unit on part 0)."""
    a = np.zeros(hg.num_units, dtype=np.int64)
    for layer in range(n_layers):
        units = np.flatnonzero(hg.unit_layer == layer)
        a[units] = np.arange(len(units))
    return a


CASES = [  # model, K, hardware, precision, global batch
    ("resnet50", 8, "a100-80gb-dgx", "amp", 256),  # every channel count divides by 8
    ("googlenet", 4, "a100-80gb-dgx", "amp", 64),
    ("vgg16", 3, "v100-16gb-dgx1", "fp32", 96),  # uneven blocks: 1000 = 334 + 334 + 332, 64 = 22 + 22 + 20
    ("mobilenet_v2", 4, "p100-16gb-nvlink", "fp32", 128),  # depthwise layers follow their input's blocks
]


@pytest.mark.parametrize(("model", "k", "hw", "precision", "batch"), CASES)
def test_the_filter_layout_costs_what_predict_prices_a_filter_gpu(model: str, k: int, hw: str, precision: str,
                                                                 batch: int) -> None:
    """Included on both sides: every layer's forward and backward kernels (launches, host dispatch,
    tile and tensor-core padding of the GPU's channels) at the global batch; not in predict's
    compute term nor in a load: the exchanges, the optimizer step and the per-step overhead."""
    net, profile = get_model(model), load_hardware(hw)
    hg = build_hypergraph(net, profile, precision, "channel", k)
    loads = part_seconds(net, hg, _filter_layout(hg, len(net.layers)), k, profile, precision, batch)
    pred = predict(net, k, f"filter={k}", hardware=profile, precision=precision, global_batch=batch)
    compute = pred.breakdown["compute"]
    assert float(loads[0]) == pytest.approx(compute, rel=1e-9)  # part 0: the largest blocks and every whole layer
    assert float(loads.max()) == pytest.approx(compute, rel=1e-9)
    if model == "resnet50":
        np.testing.assert_allclose(loads, compute, rtol=1e-9)  # even blocks, no whole layer: every GPU alike


def _block_net(c: int, f: int) -> Network:
    """ReLU of the input, a 1x1 convolution ``c -> f`` that owns its channels, then layers that
    follow them: batch norm, ReLU and a depthwise 3x3 convolution."""
    b = NetBuilder("blk", (c, 28, 28))
    x = b.conv(b.act("input", "relu", name="r"), f, 1, bias=False, name="a")
    x = b.act(b.bn(x, name="bn"), "relu", name="act")
    b.conv(x, f, 3, padding=1, groups=f, bias=False, name="dw")
    return b.build()


def _network_seconds(net: Network, hw: str | None, precision: str, batch: int) -> float:
    lt = layer_times(compile_counts(net), load_hardware(hw or REFERENCE_PROFILE), precision, batch)
    return float(lt.fwd.sum() + lt.bwd.sum())


@pytest.mark.parametrize(("hw", "precision"), [(None, "amp"), ("v100-16gb-dgx1", "fp32")])
@pytest.mark.parametrize("batch", [32, 256])
def test_a_parts_blocks_of_one_layer_run_as_one_kernel(hw: str | None, precision: str, batch: int) -> None:
    """64 channels in 8 units of 8: part 0 holds units 0-2 of every split layer (24 channels) and
    the whole ReLU, part 1 units 3-4 (16 channels), part 2 the rest (24). Each part costs the
    network built 64 -> 24 (or 16) wide, priced alone: its three blocks of a layer are ONE layer
    of 24 channels, not three of 8 (which pay three kernels' fixed costs)."""
    net, profile = _block_net(64, 64), None if hw is None else load_hardware(hw)
    hg = build_hypergraph(net, profile, precision, "channel", 8)
    rank = _filter_layout(hg, len(net.layers))
    a = np.select([rank < 3, rank < 5], [0, 1], 2)
    loads = part_seconds(net, hg, a, 3, profile, precision, batch)
    full = layer_times(compile_counts(net), load_hardware(hw or REFERENCE_PROFILE), precision, batch)
    relu = float(full.fwd[0] + full.bwd[0])  # layer "r": whole, on part 0
    assert float(loads[0]) == pytest.approx(_network_seconds(_block_net(64, 24), hw, precision, batch), rel=1e-9)
    for part, width in ((1, 16), (2, 24)):
        oracle = _network_seconds(_block_net(64, width), hw, precision, batch) - relu
        assert float(loads[part]) == pytest.approx(oracle, rel=1e-9)
    assert float(loads[0]) < float(np.sum(hg.unit_seconds[a == 0])) * batch  # three kernels cost more than one


def test_blocks_are_linear_in_units_and_whole_where_a_part_holds_a_layer() -> None:
    net = get_model("resnet18")
    hg = build_hypergraph(net, None, "amp", "channel", 8)
    a = np.arange(hg.num_units) % 3
    a[hg.unit_layer == 5] = 1  # every unit of layer 5 on part 1
    blocks = part_blocks(hg, a, 3)
    assert len(blocks.part) == len({(int(p), int(layer)) for p, layer in zip(a, hg.unit_layer, strict=True)})
    np.testing.assert_array_equal(blocks.share[blocks.layer == 5], [1.0])
    per_layer = np.bincount(blocks.layer, weights=blocks.share)
    np.testing.assert_allclose(per_layer, 1.0, rtol=1e-12)  # a layer's blocks hold all its channels once


@pytest.mark.parametrize(("model", "k"), [("resnet50", 8), ("inception_v3", 4)])
def test_layer_granularity_loads_are_the_layer_times_at_the_global_batch(model: str, k: int) -> None:
    """The partition is weighted at the batch its parts run (the report's global batch, as ``mp=K``
    plans weight theirs at their micro-batch); each part's load is its layers' times at that batch,
    so KaHyPar's balance bound holds for the loads themselves; for ResNet-50 at 256 samples the
    loads are less than the per-sample times at 32 samples times 256 (each kernel's fixed costs
    paid once per step, not once per 32 samples)."""
    net, hw, batch = get_model(model), load_hardware("a100-80gb-dgx"), 256
    r = partition_report(net, k, "layer", hardware=hw, global_batch=batch)
    p = network_partition(net, hw, "amp", k, "layer", batch=batch)
    assert r.assignment == p.unit_parts
    layer_s = _network_layers(net, batch)
    parts = np.bincount(p.assignment, weights=layer_s[p.hypergraph.unit_layer], minlength=k)
    np.testing.assert_allclose(r.hypergraph.part_loads_s, parts, rtol=1e-9)
    ref = reference_layer_times(net, "amp", hw=hw, batch=batch)
    w = (ref.fwd + ref.bwd) / float((ref.fwd + ref.bwd).sum()) * WEIGHT_SCALE
    np.testing.assert_array_equal(p.hypergraph.unit_weights, np.maximum(1, np.rint(w)).astype(np.int64))
    assert r.heaviest_unit_over_bound < 1.0  # so KaHyPar's bound is reachable: the loads meet it
    assert max(parts) <= 1.03 * parts.sum() / k * (1 + 1e-4)
    if model == "resnet50":
        at_32 = reference_layer_times(net, "amp", hw=hw, batch=32)
        per_sample_32 = np.bincount(p.assignment, weights=(at_32.fwd + at_32.bwd)[p.hypergraph.unit_layer],
                                    minlength=k)
        assert float(parts.sum()) < float(per_sample_32.sum()) * batch


def _network_layers(net: Network, batch: int) -> np.ndarray:
    lt = layer_times(compile_counts(net), load_hardware("a100-80gb-dgx"), "amp", batch)
    return np.asarray(lt.fwd + lt.bwd)


def test_channel_report_loads_lie_between_an_even_share_and_the_filter_plan() -> None:
    """ResNet-50 over 8 parts at global batch 256: KaHyPar's slowest part is no slower than the
    filter=8 layout (predict's compute, 45.1 ms: every layer in eight blocks, each from the whole
    input) and no faster than an eighth of the unsplit network (146.9 ms / 8) -- not the 150.7 ms
    of per-unit kernels at batch 32 scaled to 256."""
    r = partition_report("resnet50", 8, "channel", global_batch=256)
    compute = predict("resnet50", 8, "filter=8", global_batch=256).breakdown["compute"]
    whole = float(_network_layers(get_model("resnet50"), 256).sum())
    assert whole / 8 <= max(r.hypergraph.part_loads_s) <= compute


_RESNET18 = build_hypergraph(get_model("resnet18"), None, "amp", "channel", 6)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=_RESNET18.num_units, max_size=_RESNET18.num_units),
       st.randoms(use_true_random=False))
def test_a_parts_load_depends_on_its_own_units_only(labels: list[int], rnd: random.Random) -> None:
    """Reshuffling the units of the other parts (and renaming parts) leaves a part's load alone."""
    net, a = get_model("resnet18"), np.array(labels, dtype=np.int64)
    loads = part_seconds(net, _RESNET18, a, 3, None, "amp", 64)
    b = np.where(a == 0, 0, np.array([rnd.choice((1, 2)) for _ in labels]))
    assert float(part_seconds(net, _RESNET18, b, 3, None, "amp", 64)[0]) == pytest.approx(float(loads[0]), rel=1e-12)
    renamed = part_seconds(net, _RESNET18, (a + 1) % 3, 3, None, "amp", 64)
    np.testing.assert_allclose(renamed, np.roll(loads, 1), rtol=1e-12)

"""Filter / channel parallelism, 3-D layers and halos, and CosmoFlow, against hand-worked cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfmodel.errors import StrategyError
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts, get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.graph import Network
from perfmodel.network.zoo.cosmoflow import cosmoflow
from perfmodel.partition.hypergraph import build_hypergraph
from perfmodel.strategies.channels import price_channel_split, split_plan
from perfmodel.strategies.predict import Context, context, predict, price
from perfmodel.strategies.spatial import halo_elems
from perfmodel.strategies.spec import Strategy, parse_strategy

HW = "abci-v100-16gb"
GIB = 2**30


def tiny_chain() -> Network:
    """conv3x3 (3->8) - bn - relu - conv3x3 (8->16) - global pool - flatten - fc (16->10)."""
    b = NetBuilder("chain", (3, 8, 8))
    x = b.conv("input", 8, 3, padding=1, bias=False, name="conv0")
    x = b.act(b.bn(x, name="bn0"), "relu", name="relu0")
    x = b.conv(x, 16, 3, padding=1, bias=False, name="conv1")
    x = b.flatten(b.adaptive_avgpool(x, 1, name="pool"), name="flat")
    b.linear(x, 10, name="fc")
    return b.build()


@pytest.fixture(scope="module")
def abci_chain() -> Context:
    return context(tiny_chain(), load_hardware(HW), "amp", "sgd")


@pytest.fixture(scope="module")
def resnet_ctx() -> Context:
    return context(get_model("resnet50"), load_hardware(HW), "amp", "sgd")


#: NCCL's base latency of one collective (tuning.cc baseLatencies, Ring/Simple), the profile's.
A0 = load_hardware(HW).collectives.base_latency_s


def ring_gather(nbytes: float, p: int, bw: float, alpha: float) -> float:
    """Hand formula: ring all-gather / reduce-scatter of nbytes in total over p GPUs in one
    node, NCCL's base latency once and one hop latency per step."""
    return A0 + (p - 1) / p * nbytes / bw + (p - 1) * alpha


# -- the split plan: what is exchanged -------------------------------------------------------
def test_filter_plan_gathers_each_split_input_once() -> None:
    plan = split_plan(tiny_chain(), "filter", 4)
    got = [(x.phase, x.op, x.tensor, x.elems_per_sample) for x in plan.exchanges]
    # conv0 reads the replicated input: nothing; conv1 reads relu0 (8x8x8, split): gathered;
    # fc reads flat (16 features, split): gathered; each gradient reduce-scattered back
    assert got == [
        ("fwd", "allgather", "relu0", 512), ("bwd", "reduce_scatter", "relu0", 512),
        ("fwd", "allgather", "flat", 16), ("bwd", "reduce_scatter", "flat", 16),
    ]
    # conv/linear: a quarter of the output channels, whole input; bn/relu on 2 of 8 channels
    np.testing.assert_allclose(plan.f_work, [0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.3])
    np.testing.assert_allclose(plan.f_in[[0, 3, 6]], 1.0)


def test_channel_plan_allreduces_partial_outputs() -> None:
    plan = split_plan(tiny_chain(), "channel", 4)
    got = [(x.phase, x.op, x.tensor, x.elems_per_sample) for x in plan.exchanges]
    # conv0 has 3 < 4 input channels and reads the network input: it runs replicated
    assert plan.replicated[0] == "conv0"
    assert got == [
        ("fwd", "allreduce", "conv1", 16 * 8 * 8), ("bwd", "allgather", "relu0", 8 * 8 * 8),
        ("fwd", "allreduce", "fc", 10), ("bwd", "allgather", "flat", 16),
    ]


def test_filter_exchange_time_by_hand(abci_chain: Context) -> None:
    hw = abci_chain.hw
    bw, alpha = hw.intra.bandwidth_bytes_per_s * hw.intra.efficiency, hw.intra.latency_s
    s = Strategy(filter=4)
    out = price_channel_split(abci_chain, s, 32)
    e = 2  # fp16 activations under amp
    want = ring_gather(32 * 512 * e, 4, bw, alpha) + ring_gather(32 * 16 * e, 4, bw, alpha)
    assert out.breakdown["filter_allgather"] == pytest.approx(want, rel=1e-12)
    assert out.breakdown["filter_reduce_scatter"] == pytest.approx(want, rel=1e-12)
    assert sum(out.breakdown.values()) == pytest.approx(out.time_s, rel=1e-12)


def test_channel_allreduce_time_by_hand(abci_chain: Context) -> None:
    hw = abci_chain.hw
    bw, alpha = hw.intra.bandwidth_bytes_per_s * hw.intra.efficiency, hw.intra.latency_s
    out = price_channel_split(abci_chain, Strategy(channel=4), 32)
    e = 2
    # ring allreduce = 2 x the all-gather cost of the same bytes, one base latency
    fwd = 2 * ring_gather(32 * 1024 * e, 4, bw, alpha) + 2 * ring_gather(32 * 10 * e, 4, bw, alpha) - 2 * A0
    bwd = ring_gather(32 * 512 * e, 4, bw, alpha) + ring_gather(32 * 16 * e, 4, bw, alpha)
    assert out.breakdown["channel_allreduce"] == pytest.approx(fwd, rel=1e-12)
    assert out.breakdown["channel_allgather"] == pytest.approx(bwd, rel=1e-12)


def test_split_across_nodes_uses_the_network(abci_chain: Context) -> None:
    # filter=8 on 4-GPU nodes spans two nodes: slower than filter=4 inside one
    inside = price_channel_split(abci_chain, Strategy(filter=4), 64)
    across = price_channel_split(abci_chain, Strategy(filter=8), 64)
    assert across.details["layer_split"]["nodes"] == 2
    assert across.breakdown["filter_allgather"] > inside.breakdown["filter_allgather"]


def test_gradient_of_shards_allreduced_across_replicas(abci_chain: Context) -> None:
    solo = price_channel_split(abci_chain, Strategy(filter=4), 64)
    dp = price_channel_split(abci_chain, Strategy(filter=4, dp=8), 512)
    assert solo.breakdown["gradient_exchange_exposed"] == 0.0
    assert dp.details["gradient_group"] == {"gpus": 8, "per_node": 1, "algorithm": "ring"}
    assert dp.memory["gradient_buckets"] == dp.memory["gradients"] > 0


# -- filter=1 is data parallelism; what the split saves ---------------------------------------
@pytest.mark.parametrize("batch", [64, 256])
def test_filter_one_equals_plain_dp(resnet_ctx: Context, batch: int) -> None:
    s = Strategy(dp=8)
    plain = price(resnet_ctx, s, batch)
    split = price_channel_split(resnet_ctx, s, batch)
    assert split.time_s == pytest.approx(plain.time_s, rel=1e-12)
    for k, v in plain.breakdown.items():
        assert split.breakdown[k] == pytest.approx(v, rel=1e-12, abs=1e-15)
    assert split.breakdown["filter_allgather"] == split.breakdown["filter_reduce_scatter"] == 0.0
    for k, v in plain.memory.items():
        assert split.memory[k] == pytest.approx(v, rel=1e-12)


def test_filter_shards_weights(resnet_ctx: Context) -> None:
    dp = price(resnet_ctx, Strategy(dp=8), 512)
    f4 = price(resnet_ctx, Strategy(filter=4, dp=8), 512)
    # every ResNet-50 conv, BN and the fc have a multiple of 4 channels: exactly a quarter
    for k in ("weights", "gradients", "optimizer_state"):
        assert f4.memory[k] / dp.memory[k] == pytest.approx(0.25, rel=1e-12)
    c4 = price(resnet_ctx, Strategy(channel=4, dp=8), 512)
    # channel: conv1 (3 input channels) and the batch norms on allreduced tensors stay whole
    assert 0.25 < c4.memory["weights"] / dp.memory["weights"] < 0.27


def test_filter_saves_activations_per_sample(resnet_ctx: Context) -> None:
    # each GPU of a filter group processes the replica's whole batch: per sample it keeps
    # the gathered inputs of its convolutions and a quarter of everything else
    dp = price(resnet_ctx, Strategy(dp=32), 512)  # 16 samples per GPU
    f4 = price(resnet_ctx, Strategy(filter=4, dp=8), 512)  # 64 samples per GPU
    per_dp = dp.memory["activations"] / 16
    per_f4 = f4.memory["activations"] / 64
    assert 0.4 * per_dp < per_f4 < 0.9 * per_dp


def test_resnet_gathers_each_tensor_once() -> None:
    net = get_model("resnet50")
    plan = split_plan(net, "filter", 4)
    read_by_matmul = {t for layer in net.layers if layer.kind in ("conv", "linear")
                      for t in layer.inputs if t != "input"}
    gathers = [x.tensor for x in plan.exchanges if x.op == "allgather"]
    assert sorted(gathers) == sorted(read_by_matmul)


def test_depthwise_convolution_needs_no_gather() -> None:
    net = get_model("mobilenet_v2")
    plan = split_plan(net, "filter", 4)
    gathered_by = {net.layers[x.layer].name for x in plan.exchanges}
    depthwise = [la.name for la in net.layers
                 if la.kind == "conv" and la.groups == la.in_shape[0] > 1]
    assert depthwise and not gathered_by & set(depthwise)


# -- one split for filter parallelism and the hypergraph partitioner ---------------------------
def odd_channels() -> Network:
    """Channel counts n does not divide: 6 channels over 4 GPUs are 2, 2, 2 and none."""
    b = NetBuilder("odd", (3, 8, 8))
    x = b.act(b.bn(b.conv("input", 6, 3, padding=1, name="conv0"), name="bn0"), "relu", name="relu0")
    y = b.conv(x, 10, 1, name="conv1")
    x = b.concat([x, y], name="cat")
    b.linear(b.flatten(b.adaptive_avgpool(x, 1, name="pool"), name="flat"), 5, name="fc")
    return b.build()


@pytest.mark.parametrize("model", ["resnet50", "googlenet", "mobilenet_v2", "vgg16", "odd"])
@pytest.mark.parametrize("n", [2, 4])
def test_partitioner_units_are_the_filter_shares(model: str, n: int) -> None:
    """The channel units the partitioner cuts a layer into are the GPUs' shares under filter=n."""
    net = odd_channels() if model == "odd" else get_model(model)
    plan = split_plan(net, "filter", n)
    hg = build_hypergraph(net, load_hardware(HW), "amp", "channel", groups=n)
    units: dict[int, list[int]] = {}
    for u, i in enumerate(hg.unit_layer.tolist()):
        units.setdefault(i, []).append(u)
    for i, layer in enumerate(net.layers):
        mine = units[i]
        got = [hg.unit_channels[u] for u in mine]
        # the same channels per unit, in order, as the GPUs' non-empty shares
        assert got == [p for p in plan.shares[i].parts if p], layer.name
        assert sum(hi - lo for share in got for lo, hi in share) == layer.out_shape[0]  # they tile the layer
        # what filter=n prices the layer at is its largest unit's fraction
        largest = max(float(hg.unit_share[u]) for u in mine)
        assert plan.f_out[i] == pytest.approx(largest, rel=1e-12), layer.name
        assert plan.held[layer.name] == pytest.approx(largest, rel=1e-12), layer.name
        assert (len(mine) == 1) == (layer.name in plan.replicated), layer.name
        if layer.kind in ("conv", "linear") and layer.groups == 1:
            # a convolution or linear layer: contiguous blocks of ceil(C/n) channels
            c = layer.out_shape[0]
            b = math.ceil(c / n)
            assert got == [((lo, min(c, lo + b)),) for lo in range(0, c, b)], layer.name

    # filter=n all-gathers a split tensor exactly when a reader of it needs every one of its units
    reads_all: set[str] = set()
    for k in range(hg.num_nets):
        pins = hg.net_pins(k)
        producer = int(hg.unit_layer[pins[0]])
        readers = hg.unit_layer[pins[1:]].tolist()
        if len(units[producer]) > 1 and any(len(units[r]) > 1 and readers.count(r) == len(units[r]) for r in readers):
            reads_all.add(net.layers[producer].name)
    assert reads_all == {x.tensor for x in plan.exchanges if x.op == "allgather"}


def test_depthwise_units_read_only_their_own_share() -> None:
    net = get_model("mobilenet_v2")
    hg = build_hypergraph(net, load_hardware(HW), "amp", "channel", groups=4)
    depthwise = {i for i, la in enumerate(net.layers) if la.kind == "conv" and la.groups == la.in_shape[0] > 1}
    checked = 0
    for k in range(hg.num_nets):
        pins = hg.net_pins(k)
        into_dw = [int(u) for u in pins[1:] if int(hg.unit_layer[u]) in depthwise]
        if into_dw:
            # one depthwise unit per input share: the same channels, no gather
            assert len(into_dw) == 1 and hg.unit_channels[into_dw[0]] == hg.unit_channels[int(pins[0])]
            checked += 1
    assert checked == 4 * len(depthwise)


# -- errors ------------------------------------------------------------------------------------
def test_split_larger_than_channels(abci_chain: Context) -> None:
    with pytest.raises(StrategyError, match="filter=16 exceeds the 8 output channels of conv0"):
        price(abci_chain, Strategy(filter=16), 16)
    with pytest.raises(StrategyError, match="channel=16 exceeds the 8 input channels of conv1"):
        price(abci_chain, Strategy(channel=16), 16)


@pytest.mark.parametrize("spec", ["filter=2,sp=2", "filter=2,pp=2", "channel=2,comm=ps-central",
                                  "filter=2,recompute=true"])
def test_unsupported_combinations(abci_chain: Context, spec: str) -> None:
    with pytest.raises(StrategyError):
        price(abci_chain, parse_strategy(spec), 16)


# -- 3-D layers and halos ------------------------------------------------------------------------
def tiny_volume() -> Network:
    b = NetBuilder("vol", (4, 8, 8, 8))
    x = b.conv("input", 16, 3, padding=1, name="conv")
    x = b.act(b.bn(x, name="bn"), "relu", name="relu")
    x = b.avgpool(b.maxpool(x, 2, name="mp"), 2, name="ap")
    b.linear(b.flatten(x, name="flat"), 4, name="fc")
    return b.build()


def test_3d_shapes_and_flops_by_hand() -> None:
    net = tiny_volume()
    shapes = {la.name: la.out_shape for la in net.layers}
    assert shapes["conv"] == (16, 8, 8, 8) and shapes["mp"] == (16, 4, 4, 4)
    assert shapes["ap"] == (16, 2, 2, 2) and shapes["flat"] == (128,)
    assert net.layers[0].params == 16 * 4 * 27 + 16
    ev = compile_counts(net).evaluate(1)
    # 2 FLOPs x 16*8^3 outputs x 4 input channels x 27 taps
    assert ev["fwd_matmul_flops"][0] == 2 * 16 * 512 * 4 * 27
    # a 2x2x2 tile holds an eighth of every volume
    ev8 = compile_counts(net).evaluate(1, 2, 2, 2)
    assert ev8["fwd_matmul_flops"][0] == ev["fwd_matmul_flops"][0] / 8
    assert ev8["out_elems"][3] == 16 * 4**3 / 8


def test_3d_halo_faces_by_hand() -> None:
    conv = tiny_volume().layers[0]  # 3x3x3, padding 1, on 4 x 8 x 8 x 8
    # 2x2x2 grid: each tile (4x4x4) has one neighbour per dimension; the 3x3x3 kernel needs a
    # voxel-deep face of 4x4 from each, the three 4-voxel edges between them and the corner:
    # C x (3 x 16 + 3 x 4 + 1) = C x ((4 + 1)^3 - 4^3)
    assert halo_elems(conv, (2, 2, 2)) == 4 * (3 * 16 + 3 * 4 + 1)
    # 4 slabs along D: an inner slab (2 x 8 x 8) receives an 8x8 face from both sides
    assert halo_elems(conv, (4, 1, 1)) == 2 * 4 * 8 * 8
    # sp=2 splits H: one face of C x D x W
    assert halo_elems(conv, parse_strategy("sp=2").sp) == 4 * 8 * 8


# -- CosmoFlow ------------------------------------------------------------------------------------
def test_cosmoflow_layers_match_paradl_table() -> None:
    net = cosmoflow(512)
    convs = [la for la in net.layers if la.kind == "conv"]
    assert [la.out_shape for la in convs] == [
        (16, 510, 510, 510), (32, 253, 253, 253), (64, 62, 62, 62), (128, 29, 29, 29),
        (256, 13, 13, 13), (256, 5, 5, 5), (128, 1, 1, 1)]
    assert [la.out_shape[0] for la in net.layers if la.kind == "linear"] == [2048, 256, 4]
    assert net.params == 2_131_252  # 2,128,064 weights + 3,188 biases
    ev = compile_counts(net).evaluate(1)
    assert ev["fwd_matmul_flops"][0] == 2 * 16 * 510**3 * 4 * 27
    for size in (128, 256):
        small = get_model("cosmoflow", size)
        assert small.params == net.params and small.layers[-1].out_shape == (4,)


def test_cosmoflow_512_needs_more_than_one_16gb_gpu() -> None:
    one = predict("cosmoflow", 1, "dp=1", hardware=HW, global_batch=1)
    assert not one.fits_in_memory
    for gpus, spec in ((4, "sp=4"), (4, "sp=1x2x2"), (8, "sp=2x2x2")):
        p = predict("cosmoflow", gpus, spec, hardware=HW, global_batch=1)
        assert p.fits_in_memory, (spec, p.memory_per_gpu_bytes / GIB)
        assert p.breakdown["halo_exchange"] > 0
        assert p.iteration_time_s < one.iteration_time_s


def test_cosmoflow_filter_split() -> None:
    p = predict("cosmoflow", 32, "filter=4,dp=8", hardware=HW, global_batch=8)
    assert p.fits_in_memory and p.breakdown["filter_allgather"] > 0
    with pytest.raises(StrategyError, match="filter=8 exceeds the 4 output channels of fc3"):
        predict("cosmoflow", 8, "filter=8", hardware=HW, global_batch=1)


# -- ResNet-50 on 32 ABCI GPUs ---------------------------------------------------------------------
@pytest.mark.parametrize("spec", ["filter=4,dp=8", "sp=4,dp=8", "channel=4,dp=8"])
@pytest.mark.parametrize("batch", [512, 2048])
def test_resnet50_on_32_abci_gpus(spec: str, batch: int) -> None:
    p = predict("resnet50", 32, spec, hardware=HW, global_batch=batch)
    assert math.isfinite(p.iteration_time_s) and p.iteration_time_s > 0
    assert sum(p.breakdown.values()) == pytest.approx(p.iteration_time_s, rel=1e-9)
    assert p.strategy.gpus == 32 and p.global_batch == batch
    if spec.startswith("filter"):
        assert {"filter_allgather", "filter_reduce_scatter"} <= set(p.breakdown)
        assert p.details["layer_split"] == {"kind": "filter", "gpus": 4, "per_node": 4, "nodes": 1}

"""The model zoo against PyTorch's numbers: parameters, forward FLOPs, saved activations; chains."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.errors import UnknownNameError, UsageError
from perfmodel.network import compile_counts, get_model, model_names
from perfmodel.network.zoo.registry import MODELS
from perfmodel.network.zoo.registry import model_names as registry_names

# Parameter counts, ``sum(p.numel() for p in model.parameters())`` on torchvision 0.29.1 with
# ``weights=None`` (googlenet and inception_v3 with ``aux_logits=False``), printed by
# tools/reference_counts.py; they equal the ``num_params`` of torchvision's model docs (where the
# docs count the auxiliary classifiers, i.e. googlenet and inception_v3, the numbers here do not).
# resnext101_32x4d / se_resnext101_32x4d: NVIDIA DeepLearningExamples' ConvNets definitions
# (image_classification/models/resnet.py), written out in torch in tools/reference_counts.py:
# ResNeXt101-32x4d is 44.18M as published; NVIDIA's SE block squeezes to a fixed 16 channels
# (``se_squeeze=16``), which gives 45.25M, not the 48.96M of the SE-Net paper's ratio 16.
# unet: torchgpipe's benchmarks/models/unet with depth 5, num_convs 5, base_channels 64.
TORCH_PARAMS = {
    "alexnet": 61_100_840,
    "vgg11": 132_863_336,
    "vgg13": 133_047_848,
    "vgg16": 138_357_544,
    "vgg19": 143_667_240,
    "resnet18": 11_689_512,
    "resnet34": 21_797_672,
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "resnet152": 60_192_808,
    "resnext50_32x4d": 25_028_904,
    "resnext101_32x8d": 88_791_336,
    "wide_resnet50_2": 68_883_240,
    "googlenet": 6_624_904,
    "inception_v3": 23_834_568,
    "squeezenet1_0": 1_248_424,
    "squeezenet1_1": 1_235_496,
    "mobilenet_v2": 3_504_872,
    "densenet121": 7_978_856,
    "efficientnet_b0": 5_288_548,
    "efficientnet_b1": 7_794_184,
    "efficientnet_b2": 9_109_994,
    "efficientnet_b3": 12_233_232,
    "efficientnet_b4": 19_341_616,
    "resnext101_32x4d": 44_177_704,
    "se_resnext101_32x4d": 45_251_128,
    "unet": 232_687_328,
}

# Forward FLOPs per sample measured with torch.utils.flop_counter.FlopCounterMode (torch 2.14.1,
# torchvision 0.29.1; 2 FLOPs per multiply-add, convolutions and matrix products only) at each
# model's default image size and batch 1, printed by tools/reference_counts.py.
TORCH_FWD_FLOPS = {
    "alexnet": 1_428_376_960,
    "vgg11": 15_218_180_096,
    "vgg13": 22_616_932_352,
    "vgg16": 30_940_528_640,
    "vgg19": 39_264_124_928,
    "resnet18": 3_628_146_688,
    "resnet34": 7_327_522_816,
    "resnet50": 8_178_368_512,
    "resnet101": 15_602_810_880,
    "resnet152": 23_027_253_248,
    "resnext50_32x4d": 8_460_959_744,
    "resnext101_32x8d": 32_828_030_976,
    "wide_resnet50_2": 22_796_042_240,
    "googlenet": 2_996_752_384,
    "inception_v3": 11_426_432_192,
    "squeezenet1_0": 1_637_849_152,
    "squeezenet1_1": 698_303_872,
    "mobilenet_v2": 601_548_544,
    "densenet121": 5_668_323_328,
    "efficientnet_b0": 771_629_504,
    "efficientnet_b1": 1_373_605_664,
    "efficientnet_b2": 1_987_123_744,
    "efficientnet_b3": 3_654_282_784,
    "efficientnet_b4": 8_787_542_048,
    "resnext101_32x4d": 15_939_993_600,
    "se_resnext101_32x4d": 15_942_074_368,
    "unet": 97_974_484_992,
}

# Float32 elements per sample that autograd saves for backward in training mode, measured with
# torch.autograd.graph.saved_tensors_hooks (tools/reference_counts.py --saved; torch 2.14.1 on
# CPU, batch 2 halved; distinct storages, parameters and the input excluded). resnet50: 20,978,560.
TORCH_SAVED_ELEMS = {
    "resnet50": 20_978_560,
    "resnext50_32x4d": 27_566_720,
    "se_resnext101_32x4d": 50_281_104,
    "vgg16": 15_127_552,
    "alexnet": 608_128,
    "googlenet": 9_071_808,
    "inception_v3": 22_894_112,
    "squeezenet1_0": 7_685_128,
    "mobilenet_v2": 19_435_968,
    "densenet121": 32_122_048,
    "efficientnet_b0": 21_940_001,
    "unet": 113_060_448,
}

DEFAULT_SIZES = {"inception_v3": 299, "efficientnet_b1": 240, "efficientnet_b2": 260,
                 "efficientnet_b3": 300, "efficientnet_b4": 380, "unet": 192}

def test_registry_has_every_model() -> None:
    assert set(TORCH_PARAMS) <= set(model_names())
    assert model_names() == registry_names() == sorted(MODELS)


@pytest.mark.parametrize("name", sorted(TORCH_PARAMS))
def test_parameters_equal_torch(name: str) -> None:
    net = get_model(name)
    assert net.params == TORCH_PARAMS[name]
    assert net.image_size == DEFAULT_SIZES.get(name, 224) == MODELS[name].default_image_size
    assert net.name == name and net.source == MODELS[name].source and MODELS[name].source


@pytest.mark.parametrize("name", sorted(TORCH_FWD_FLOPS))
def test_forward_matmul_flops_match_flop_counter(name: str) -> None:
    flops = compile_counts(get_model(name)).total("fwd_matmul_flops")
    assert flops == pytest.approx(TORCH_FWD_FLOPS[name], rel=0.005)


@pytest.mark.parametrize("name", sorted(TORCH_SAVED_ELEMS))
def test_saved_activations_match_autograd(name: str) -> None:
    saved = compile_counts(get_model(name)).total("saved_elems")
    assert saved == pytest.approx(TORCH_SAVED_ELEMS[name], rel=0.15)


@pytest.mark.parametrize("name", sorted(TORCH_PARAMS))
def test_chain_of_blocks(name: str) -> None:
    net = get_model(name)
    links = net.links
    assert len(links) >= 5
    assert links[0].start == 0 and links[-1].stop == len(net.layers)
    for a, b in zip(links, links[1:], strict=False):
        assert a.stop == b.start
    assert all(link.cut_elems_per_sample > 0 for link in links)
    assert len({link.name for link in links}) == len(links)  # a block is one contiguous link


def test_resnet50_chain_is_stem_16_bottlenecks_head() -> None:
    net = get_model("resnet50")
    names = [link.name for link in net.links]
    expected = [f"layer{s + 1}.{i}" for s, n in enumerate((3, 4, 6, 3)) for i in range(n)]
    assert names == ["stem", *expected, "head"]
    # every bottleneck has three convs (four with the downsample), one in-place add, ends in ReLU
    for link in net.links[1:-1]:
        layers = net.layers[link.start:link.stop]
        kinds = [la.kind for la in layers]
        assert kinds.count("conv") == (4 if link.name.endswith(".0") else 3)
        (add,) = [la for la in layers if la.kind == "add"]
        assert add.inplace and add.inputs[0].endswith(".bn3")
        assert layers[-1].kind == "act" and layers[-1].inplace
        assert link.cut_elems_per_sample == layers[-1].out_elems
    assert net.links[0].cut_elems_per_sample == 64 * 56 * 56
    assert net.layers[-1].out_shape == (1000,)


def test_activation_dropout_flatten_are_layers() -> None:
    kinds = {la.kind for la in get_model("alexnet").layers}
    assert {"act", "dropout", "flatten", "adaptive_avgpool", "maxpool"} <= kinds
    vgg = get_model("vgg16")
    assert sum(la.kind == "dropout" for la in vgg.layers) == 2
    assert all(la.inplace for la in vgg.layers if la.kind == "act")
    eff = get_model("efficientnet_b0")
    assert {la.fn for la in eff.layers if la.kind == "act"} == {"silu", "sigmoid"}
    assert sum(la.kind == "mul" for la in eff.layers) == 16  # one SE scaling per MBConv
    mb = get_model("mobilenet_v2")
    assert all(la.fn == "relu6" and la.inplace for la in mb.layers if la.kind == "act")
    assert not any(la.inplace for la in mb.layers if la.kind == "add")  # ``x + conv(x)``


def test_inception_modules_are_links() -> None:
    g = [link.name for link in get_model("googlenet").links]
    assert [n for n in g if n.startswith("inception")] == [
        "inception3a", "inception3b", "inception4a", "inception4b", "inception4c", "inception4d",
        "inception4e", "inception5a", "inception5b"]
    v3 = get_model("inception_v3")
    assert sum(link.name.startswith("Mixed_") for link in v3.links) == 11
    assert v3.shape_of("Mixed_7c.cat") == (2048, 8, 8)
    d = get_model("densenet121")
    assert [link.name for link in d.links if "denseblock" in link.name] == [
        f"features.denseblock{i}" for i in range(1, 5)]
    assert d.shape_of("features.denseblock4.cat") == (1024, 7, 7)


def test_unet_skips_cross_the_cuts() -> None:
    net = get_model("unet")
    names = [link.name for link in net.links]
    assert names == [*(f"encoder.{i}" for i in range(5)), "bottleneck",
                     *(f"decoder.{i}" for i in range(5)), "segment"]
    assert net.layers[-1].out_shape == (1, 192, 192)
    cut = {link.name: link.cut_elems_per_sample for link in net.links}
    # after encoder level 1: the pooled output plus the two stashed skips
    assert cut["encoder.1"] == 128 * 48 * 48 + 64 * 192 * 192 + 128 * 96 * 96
    # the bottleneck keeps the 1024x6x6 shape, every skip is in flight; after the last level none is
    assert cut["bottleneck"] == cut["encoder.4"] > cut["encoder.0"]
    assert cut["decoder.4"] == 32 * 192 * 192
    with pytest.raises(UsageError, match="multiple of 32"):
        get_model("unet", 200)


def test_non_default_size_scales_flops_with_area() -> None:
    small = compile_counts(get_model("resnet50", 128)).total("fwd_matmul_flops")
    full = compile_counts(get_model("resnet50", 224)).total("fwd_matmul_flops")
    assert small / full == pytest.approx((128 / 224) ** 2, rel=0.02)
    assert get_model("resnet50", 128).params == TORCH_PARAMS["resnet50"]
    big = compile_counts(get_model("efficientnet_b0", 320)).total("fwd_matmul_flops")
    assert big / TORCH_FWD_FLOPS["efficientnet_b0"] == pytest.approx((320 / 224) ** 2, rel=0.05)


@pytest.mark.parametrize("name", sorted(TORCH_PARAMS))
def test_builds_at_its_minimum_size(name: str) -> None:
    entry = MODELS[name]
    net = get_model(name, entry.min_image_size)
    assert net.params == TORCH_PARAMS[name]  # the classifier's input does not depend on the size
    with pytest.raises(UsageError, match="too small"):
        get_model(name, entry.min_image_size - 1)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(TORCH_PARAMS)), size=st.integers(min_value=75, max_value=400))
def test_parameters_do_not_depend_on_size(name: str, size: int) -> None:
    if name == "unet":
        size -= size % 32
    assert get_model(name, size).params == TORCH_PARAMS[name]


def test_unknown_model_names_the_closest() -> None:
    with pytest.raises(UnknownNameError, match="resnet50"):
        get_model("resnet5")


def test_models_lists_every_zoo_model_with_units_in_the_headers(capsys: pytest.CaptureFixture[str]) -> None:
    """``perfmodel models``: the table's size column says pixels; JSON keeps its keys and the networks' sizes."""
    code, out, _ = run_main(["models"], capsys)
    assert code == 0
    header = out.splitlines()[0].split()
    assert "image_size_px" in header and "image_size" not in header
    code, out, _ = run_main(["models", "--format", "json"], capsys)
    rows = {r["model"]: r for r in json.loads(out)["models"]}
    assert sorted(rows) == sorted(model_names())
    for name in ("resnet50", "cosmoflow"):
        assert rows[name]["image_size"] == get_model(name).image_size

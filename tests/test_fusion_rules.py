"""Which chains each fusion fuses, which settings it can run in, and which rows name it."""

from __future__ import annotations

import dataclasses
from importlib import resources

import numpy as np
import pytest

from perfmodel import predict
from perfmodel.cost.compute import layer_times
from perfmodel.cost.fusion import FUSIONS, RUNS_IN, check_fusion_setting, fused_chains
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.counts import compile_counts
from perfmodel.validation import load_measurements
from perfmodel.validation.software_era import fusion_of, memory_format_of

# SE-ResNeXt-101 32x4d (Hu et al. 2018, table 1 with ResNeXt-101's 3, 4, 23, 3 blocks): 33
# bottleneck blocks, the first of each stage down-sampling through a 1x1 conv + batch norm
_BLOCKS, _DOWN = 3 + 4 + 23 + 3, 4


def test_mxnet_fuses_only_the_bodys_batch_norm_with_the_add() -> None:
    # MXNet's BatchNormAddRelu is the body's last batch norm with the shortcut as addend; an SE
    # block's body ends in the SE multiply, so no add is fused, only each block's two bn-relu
    net = get_model("se_resnext101_32x4d", 224)
    chains = fused_chains(net, "mxnet-bn-add-relu")
    assert [c for c in chains if c.add >= 0] == []
    assert len(chains) == 1 + 2 * _BLOCKS
    assert not any("downsample" in net.layers[c.bn].name for c in chains)


def test_xla_fuses_the_shortcut_batch_norm_of_se_down_sampling_blocks() -> None:
    net = get_model("se_resnext101_32x4d", 224)
    with_add = [c for c in fused_chains(net, "xla") if c.add >= 0]
    assert len(with_add) == _DOWN
    for c in with_add:
        add = net.layers[c.add]
        assert net.layers[c.bn].name == add.name.replace(".add", ".downsample.1")
        other = next(t for t in add.inputs if t != net.layers[c.bn].name)
        assert next(layer for layer in net.layers if layer.name == other).kind == "mul"  # the SE scale


def test_mxnet_prices_se_blocks_adds_and_shortcuts_eager() -> None:
    net = get_model("se_resnext101_32x4d", 224)
    cc, hw = compile_counts(net), load_hardware("v100-16gb-dgx1")
    eager = layer_times(cc, hw, "amp", 64)
    mx = layer_times(cc, hw, "amp", 64, fusion="mxnet-bn-add-relu")
    xla = layer_times(cc, hw, "amp", 64, fusion="xla")
    kept = [i for i, layer in enumerate(net.layers) if layer.kind == "add" or "downsample.1" in layer.name]
    assert len(kept) == _BLOCKS + _DOWN
    np.testing.assert_array_equal(mx.fwd[kept], eager.fwd[kept])
    np.testing.assert_array_equal(mx.bwd[kept], eager.bwd[kept])
    assert xla.fwd[kept].sum() < eager.fwd[kept].sum()  # XLA fuses the 4 shortcut chains
    assert mx.total < eager.total  # the bn-relu chains still fuse


@pytest.mark.parametrize("model", ["resnet50", "resnext101_32x4d", "resnet18"])
def test_plain_residual_blocks_fuse_the_same_under_both(model: str) -> None:
    # without SE the body's batch norm is the add's first input: both fusions take the same chains
    net = get_model(model, 224)
    assert fused_chains(net, "mxnet-bn-add-relu") == fused_chains(net, "xla")


def _tf_row():  # type: ignore[no-untyped-def]
    rows = load_measurements([resources.files("perfmodel.data") / "holdout_runs.csv"]).rows
    return next(m for m in rows if "XLA" in m.framework)


_CONVNETS = "NVIDIA/DeepLearningExamples TensorFlow/Classification/ConvNets"


@pytest.mark.parametrize(("framework", "source", "notes", "fusion"), [
    ("TensorFlow 1 (NGC 20.06-tf1-py3, XLA)", _CONVNETS, "", "xla"),
    ("TensorFlow 1 (NGC 20.06-tf1-py3, --xla)", _CONVNETS, "", "xla"),
    # a note or source that names XLA to say it was off cannot turn it on
    ("TensorFlow 1 (NGC 20.06-tf1-py3)", _CONVNETS, "run without XLA (--xla not passed)", "eager"),
    ("TensorFlow 1 (NGC 20.06-tf1-py3)", _CONVNETS + " XLA comparison table", "XLA off", "eager"),
    ("TensorFlow 1 (NGC 20.06-tf1-py3)", _CONVNETS, "with XLA", "eager"),  # only the framework says what ran
    # negated in the framework field itself
    ("TensorFlow 1 (NGC 20.06-tf1-py3, no XLA)", _CONVNETS, "", "eager"),
    ("TensorFlow 1 (NGC 20.06-tf1-py3, without --xla)", _CONVNETS, "", "eager"),
    ("TensorFlow 1 (NGC 20.06-tf1-py3, XLA off)", _CONVNETS, "", "eager"),
])
def test_xla_is_read_from_the_framework_field_only(framework: str, source: str, notes: str, fusion: str) -> None:
    m = _tf_row()
    row = dataclasses.replace(m, framework=framework, source=source, columns={**m.columns, "notes": notes})
    assert fusion_of(row) == fusion


@pytest.mark.parametrize(("precision", "memory_format"), [("fp32", "nhwc"), ("bf16", "nhwc"), ("tf32", "nhwc"),
                                                          ("amp", "nchw"), ("fp32", "nchw")])
def test_mxnet_fusion_outside_fp16_nhwc_is_a_usage_error(precision: str, memory_format: str) -> None:
    with pytest.raises(UsageError, match=f"precision amp in memory format nhwc only .*not {precision} {memory_format}"):
        predict("resnet50", 1, "dp=1", "v100-16gb-dgx1", precision, 32, memory_format=memory_format,
                fusion="mxnet-bn-add-relu")


@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp", "bf16"])
@pytest.mark.parametrize("memory_format", ["nchw", "nhwc"])
def test_xla_and_eager_run_at_every_precision_and_format(precision: str, memory_format: str) -> None:
    for fusion in FUSIONS:
        if fusion not in RUNS_IN:
            assert check_fusion_setting(fusion, precision, memory_format) == fusion
    assert check_fusion_setting("mxnet-bn-add-relu", "amp", "nhwc") == "mxnet-bn-add-relu"


def test_every_shipped_mxnet_fused_row_is_fp16_nhwc() -> None:
    # validate prices these rows with their fusion: each must be a setting the kernels run in
    files = ("published_runs.csv", "holdout_runs.csv", "families_runs.csv", "families_holdout_runs.csv")
    rows = [m for f in files for m in load_measurements([resources.files("perfmodel.data") / f]).rows]
    fused = [m for m in rows if fusion_of(m) == "mxnet-bn-add-relu"]
    assert len(fused) == 13  # perfmodel/data/MEASUREMENTS.md, the MXNet ResNet-50 amp rows
    assert {(m.precision, memory_format_of(m)) for m in fused} == {("amp", "nhwc")}

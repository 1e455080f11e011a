"""``perfmodel partition`` and the mp strategy weight units with the memory format they are told
(``--memory-format`` / ``memory_format=``; default nchw): under nchw cuDNN transposes the tensors
of every tensor-core convolution (:mod:`perfmodel.cost.layout`), which makes those layers heavier."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from perfmodel.cost.compute import layer_times
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts, get_model
from perfmodel.partition import build_hypergraph, partition_report
from perfmodel.partition.hypergraph import WEIGHT_BATCH, reference_layer_times
from perfmodel.strategies.context import context
from perfmodel.strategies.model_parallel import mp_partition
from tests.cli_helpers import run_main

MODEL = "resnet50"
HW = "a100-80gb-dgx"


def test_unit_seconds_are_the_layer_times_of_that_format() -> None:
    net, hw = get_model(MODEL), load_hardware(HW)
    for fmt in ("nchw", "nhwc"):
        lt = layer_times(compile_counts(net), hw, "amp", WEIGHT_BATCH, memory_format=fmt)
        g = build_hypergraph(net, hw, "amp", memory_format=fmt)
        assert g.memory_format == fmt
        np.testing.assert_allclose(g.unit_seconds, (lt.fwd + lt.bwd) / WEIGHT_BATCH, rtol=1e-12)
        ref = reference_layer_times(net, "amp", memory_format=fmt)
        np.testing.assert_allclose(build_hypergraph(net, None, "amp", memory_format=fmt).unit_seconds,
                                   ref.fwd + ref.bwd, rtol=1e-12)


def test_only_transposed_convolutions_weigh_more_under_nchw() -> None:
    net, hw = get_model(MODEL), load_hardware(HW)
    a = build_hypergraph(net, hw, "amp", memory_format="nchw")
    b = build_hypergraph(net, hw, "amp", memory_format="nhwc")
    conv = np.array([layer.kind == "conv" for layer in net.layers])[a.unit_layer]
    assert conv.sum() == 53  # ResNet-50: 49 convolutions in the blocks, 3 downsample, the stem
    assert np.all(a.unit_seconds[conv] > b.unit_seconds[conv])
    np.testing.assert_array_equal(a.unit_seconds[~conv], b.unit_seconds[~conv])
    # fp32 with TF32 off runs no tensor-core convolution: nothing to transpose
    np.testing.assert_array_equal(build_hypergraph(net, hw, "fp32", memory_format="nchw").unit_seconds,
                                  build_hypergraph(net, hw, "fp32", memory_format="nhwc").unit_seconds)


def test_partition_report_states_and_uses_its_format() -> None:
    a = partition_report(MODEL, 4, hardware=HW, memory_format="nchw")
    b = partition_report(MODEL, 4, hardware=HW, memory_format="nhwc")
    assert (a.memory_format, b.memory_format) == ("nchw", "nhwc")
    assert a.assumptions["memory_format"].startswith("memory format nchw")
    assert b.assumptions["memory_format"].startswith("memory format nhwc")
    assert sum(a.hypergraph.part_loads_s) > sum(b.hypergraph.part_loads_s)
    d = b.to_dict()
    assert d["memory_format"] == "nhwc" and d["assumptions"] == b.assumptions
    assert partition_report(MODEL, 4, hardware=HW).assumptions == a.assumptions  # nchw is the default


@pytest.mark.parametrize("bad", ["NHWC", "channels_last", "", None, 1])
def test_partition_report_rejects_unknown_formats(bad: Any) -> None:
    with pytest.raises(UsageError, match=r"unknown memory format .* \(valid: nchw, nhwc\)"):
        partition_report("tiny_cnn", 2, memory_format=bad)


def test_cli_partition_memory_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["partition", MODEL, "-k", "2", "--memory-format", "nhwc", "--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["memory_format"] == "nhwc" and d["assumptions"]["memory_format"].startswith("memory format nhwc")
    want = partition_report(MODEL, 2, memory_format="nhwc").hypergraph.part_loads_s
    assert d["part_loads_s"] == pytest.approx(list(want))
    code, out, err = run_main(["partition", MODEL, "-k", "2"], capsys)
    assert code == 0, err
    assert "\n  memory_format: memory format nchw" in out.split("assumptions:")[1]
    code, out, err = run_main(["partition", "tiny_cnn", "-k", "2", "--memory-format", "nhwc", "--format", "csv"],
                              capsys)
    assert code == 0, err
    header, first = out.splitlines()[:2]
    assert first.split(",")[header.split(",").index("memory_format")] == "nhwc"


def test_mp_plans_partition_with_the_contexts_format() -> None:
    net, hw = get_model(MODEL), load_hardware(HW)
    a = mp_partition(context(net, hw, "amp", "sgd", memory_format="nchw"), 2, WEIGHT_BATCH)
    b = mp_partition(context(net, hw, "amp", "sgd", memory_format="nhwc"), 2, WEIGHT_BATCH)
    assert (a.hypergraph.memory_format, b.hypergraph.memory_format) == ("nchw", "nhwc")
    ref = reference_layer_times(net, "amp", memory_format="nhwc")
    np.testing.assert_allclose(b.hypergraph.unit_seconds, ref.fwd + ref.bwd, rtol=1e-12)
    assert mp_partition(context(net, hw, "amp", "sgd", memory_format="nhwc"), 2, WEIGHT_BATCH) is b  # cached per format

"""``perfmodel partition`` and the mp strategy weight units with the grouped convolutions of the
cuDNN they are told (``--cudnn N`` / ``cudnn_major=``; default 9)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from perfmodel.cost.compute import layer_times
from perfmodel.cost.grouped import DEFAULT_CUDNN_MAJOR
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts, get_model
from perfmodel.partition import build_hypergraph, partition_report
from perfmodel.partition.hypergraph import WEIGHT_BATCH, reference_layer_times
from perfmodel.strategies.context import context
from perfmodel.strategies.model_parallel import mp_partition
from tests.cli_helpers import run_main

MODEL = "resnext50_32x4d"
HW = "v100-16gb-dgx1"  # Volta: cuDNN 7 (grouped loops) and 9 both ran on it


def grouped_layers(name: str = MODEL) -> np.ndarray:
    """Layers whose groups are neither 1 nor one per channel: the ones the cuDNN era reprices."""
    net = get_model(name)
    return np.array([layer.kind == "conv" and 1 < layer.groups < layer.in_shapes[0][0] for layer in net.layers])


@pytest.mark.parametrize("hw_name", [HW, None])
def test_only_grouped_layers_weigh_more_under_cudnn7(hw_name: str | None) -> None:
    net = get_model(MODEL)
    hw = None if hw_name is None else load_hardware(hw_name)
    g7 = build_hypergraph(net, hw, "fp32", cudnn_major=7)
    g9 = build_hypergraph(net, hw, "fp32")
    assert (g7.cudnn_major, g9.cudnn_major) == (7, DEFAULT_CUDNN_MAJOR)
    grouped = grouped_layers()[g7.unit_layer]
    assert grouped.sum() == 16  # ResNeXt-50's 16 bottlenecks each have one grouped 3x3 convolution
    np.testing.assert_array_equal(g7.unit_seconds[~grouped], g9.unit_seconds[~grouped])
    assert np.all(g7.unit_seconds[grouped] > g9.unit_seconds[grouped])  # one kernel per group


def test_unit_seconds_are_the_layer_times_of_that_cudnn() -> None:
    net, hw = get_model(MODEL), load_hardware(HW)
    lt = layer_times(compile_counts(net), hw, "amp", WEIGHT_BATCH, cudnn_major=6)
    g = build_hypergraph(net, hw, "amp", cudnn_major=6)
    np.testing.assert_allclose(g.unit_seconds, (lt.fwd + lt.bwd) / WEIGHT_BATCH, rtol=1e-12)
    ref = reference_layer_times(net, "amp", 6)
    np.testing.assert_allclose(build_hypergraph(net, None, "amp", cudnn_major=6).unit_seconds,
                               ref.fwd + ref.bwd, rtol=1e-12)


def test_a_network_without_grouped_layers_is_unchanged() -> None:
    net = get_model("resnet50")
    assert not grouped_layers("resnet50").any()
    a = build_hypergraph(net, None, "amp", cudnn_major=5)
    b = build_hypergraph(net, None, "amp")
    np.testing.assert_array_equal(a.unit_seconds, b.unit_seconds)


def test_partition_report_states_and_uses_its_cudnn() -> None:
    r7 = partition_report(MODEL, 4, hardware=HW, cudnn_major=7)
    r9 = partition_report(MODEL, 4, hardware=HW)
    assert (r7.cudnn_major, r9.cudnn_major) == (7, 9)
    assert r7.assumptions["cudnn"].startswith("cuDNN 7.x") and "one kernel per group" in r7.assumptions["cudnn"]
    assert r9.assumptions["cudnn"].startswith("cuDNN 9.x")
    assert sum(r7.hypergraph.part_loads_s) > sum(r9.hypergraph.part_loads_s)
    d = r7.to_dict()
    assert d["cudnn_major"] == 7 and d["assumptions"] == r7.assumptions


@pytest.mark.parametrize("bad", [4, 10, True, 8.5, "9", None])
def test_partition_report_rejects_unknown_cudnn(bad: Any) -> None:
    with pytest.raises(UsageError, match="unknown cuDNN major version"):
        partition_report("tiny_cnn", 2, cudnn_major=bad)


def test_cli_partition_cudnn(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["partition", MODEL, "-k", "2", "-H", HW, "--cudnn", "7", "--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["cudnn_major"] == 7 and "cuDNN 7.x" in d["assumptions"]["cudnn"]
    assert d["part_loads_s"] == pytest.approx(
        list(partition_report(MODEL, 2, hardware=HW, cudnn_major=7).hypergraph.part_loads_s))
    code, out, err = run_main(["partition", MODEL, "-k", "2"], capsys)
    assert code == 0, err
    assert "assumptions:\n  cudnn: cuDNN 9.x" in out
    code, out, err = run_main(["partition", "tiny_cnn", "-k", "2", "--cudnn", "8", "--format", "csv"], capsys)
    assert code == 0, err
    header, first = out.splitlines()[:2]
    assert first.split(",")[header.split(",").index("cudnn_major")] == "8"


def test_mp_plans_partition_with_the_contexts_cudnn() -> None:
    net, hw = get_model(MODEL), load_hardware(HW)
    p7 = mp_partition(context(net, hw, "fp32", "sgd", cudnn_major=7), 2, WEIGHT_BATCH)
    p9 = mp_partition(context(net, hw, "fp32", "sgd"), 2, WEIGHT_BATCH)
    assert (p7.hypergraph.cudnn_major, p9.hypergraph.cudnn_major) == (7, 9)
    ref = reference_layer_times(net, "fp32", 7)
    np.testing.assert_allclose(p7.hypergraph.unit_seconds, ref.fwd + ref.bwd, rtol=1e-12)
    assert mp_partition(context(net, hw, "fp32", "sgd", cudnn_major=7), 2, WEIGHT_BATCH) is p7  # cached per cuDNN

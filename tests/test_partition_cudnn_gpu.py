"""``network_partition`` (and ``network_hypergraph``) refuse a cuDNN that never ran on the GPU,
as ``predict`` and ``perfmodel partition`` do: cuDNN 7 predates Ampere (cuDNN Support Matrix)."""

from __future__ import annotations

import pytest

from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.partition import network_partition
from perfmodel.partition.plan import network_hypergraph


def test_network_partition_refuses_cudnn7_on_an_a100() -> None:
    with pytest.raises(UsageError, match=r"cuDNN 7 cannot run .*Ampere needs cuDNN >= 8"):
        network_partition(get_model("tiny_cnn"), load_hardware("a100-80gb-dgx"), "fp32", 2, cudnn_major=7)


def test_network_hypergraph_refuses_cudnn7_on_an_h100() -> None:
    with pytest.raises(UsageError, match="Hopper needs cuDNN >= 8"):
        network_hypergraph(get_model("tiny_cnn"), load_hardware("h100-80gb-dgx"), "fp32", 2, "layer", cudnn_major=7)


def test_cudnn7_on_a_v100_and_on_the_reference_profile_still_partition() -> None:
    net = get_model("tiny_cnn")
    assert network_partition(net, load_hardware("v100-16gb-dgx1"), "fp32", 2, cudnn_major=7).parts == 2
    assert network_partition(net, None, "fp32", 2, cudnn_major=7).parts == 2

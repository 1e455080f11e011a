"""The contexts ``context`` keeps: shared by calls with the same network, profile and settings,
never by others, bounded, and never handing a caller what a later call reads."""

from __future__ import annotations

import dataclasses

from perfmodel import predict
from perfmodel.hardware import load_hardware
from perfmodel.network.zoo import get_model
from perfmodel.strategies.context import CONTEXTS_KEPT, context


def test_same_arguments_share_a_context_and_others_do_not() -> None:
    net, hw = get_model("resnet18"), load_hardware("a100-80gb-dgx")
    ctx = context(net, hw, "amp", "sgd")
    assert context(net, hw, "amp", "sgd") is ctx
    assert context(net, hw, "fp32", "sgd") is not ctx
    assert context(net, hw, "amp", "adam") is not ctx
    assert context(net, hw, "amp", "sgd", compute_scale=1.1) is not ctx
    assert context(net, hw, "amp", "sgd", memory_format="nhwc") is not ctx
    twin = dataclasses.replace(hw)  # an equal profile, another object: what a what-if builds
    assert context(net, twin, "amp", "sgd") is not ctx
    assert context(get_model("resnet18", 160), hw, "amp", "sgd") is not ctx


def test_kept_contexts_are_bounded() -> None:
    net, hw = get_model("tiny_cnn"), load_hardware("a100-80gb-dgx")
    first = context(net, hw, "amp", "sgd")
    for k in range(CONTEXTS_KEPT):
        context(net, hw, "amp", "sgd", compute_scale=1.0 + (k + 1) / 100)
    assert context(net, hw, "amp", "sgd") is not first  # the oldest was dropped


def test_a_caller_changing_a_prediction_changes_no_later_one() -> None:
    p = predict("resnet18", 8, "dp=8")
    want = (p.iteration_time_s, dict(p.breakdown), dict(p.memory))
    p.breakdown.clear()
    p.memory["activations"] = -1.0
    p.details.clear()
    q = predict("resnet18", 8, "dp=8")
    assert (q.iteration_time_s, q.breakdown, q.memory) == want
    assert q.details

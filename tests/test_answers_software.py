"""The answers' largest batch per GPU is searched with the software the prediction was priced with.

A pipeline's stage split is the fastest split that fits, priced with the layers' times, which
the memory format and cuDNN change. Until the split search covered every split (split_search.py)
the candidates came from those times, so the largest batch that fits moved with the software;
now it is the largest batch at which any split fits, the same for every software (memory has no
layout or cuDNN term). Oracle: :func:`largest_batch_per_gpu` on a context built with the
prediction's own assumptions (searched from scratch, without the known point the answers reuse).
"""

from __future__ import annotations

import pytest

from perfmodel import predict
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.report.answers import answers_for
from perfmodel.strategies.headroom import largest_batch_per_gpu
from perfmodel.strategies.predict import context

HW = "v100-32gb-dgx1"  # Volta: cuDNN 7 (grouped loops) and 9 both ran on it; 32 GB so both move the answer


def test_predictions_carry_their_software() -> None:
    p = predict("resnext50_32x4d", 4, "dp=4", HW, "amp", 32, cudnn_major=7, memory_format="nhwc")
    assert (p.cudnn_major, p.memory_format) == (7, "nhwc")
    d = predict("resnext50_32x4d", 4, "dp=4", HW, "amp", 32)
    assert (d.cudnn_major, d.memory_format) == (9, "nchw")


@pytest.mark.parametrize(("model", "spec", "precision", "software"), [
    ("resnet50", "pp=4,mb=8", "amp", {"memory_format": "nhwc"}),
    ("resnext101_32x8d", "pp=2,dp=2,mb=8", "amp", {"cudnn_major": 7}),
])
def test_largest_batch_follows_the_predictions_software(model: str, spec: str, precision: str,
                                                        software: dict[str, object]) -> None:
    hw, net = load_hardware(HW), get_model(model)
    p = predict(model, 4, spec, HW, precision, 32, **software)  # type: ignore[arg-type]
    want = largest_batch_per_gpu(context(net, hw, precision, "sgd", **software), p.strategy)  # type: ignore[arg-type]
    default = largest_batch_per_gpu(context(net, hw, precision, "sgd"), p.strategy)
    assert want == default  # every split searched: the largest batch is where any split fits
    assert answers_for(p, hw, net=net).memory.largest_batch_per_gpu == want

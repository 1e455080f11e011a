"""explain's formula, evaluated at the profile's values, is predict's step on every kind of layer and plan."""

from __future__ import annotations

import pytest

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.graph import Network
from perfmodel.strategies import context, parse_strategy
from perfmodel.strategies.explain import explain_plan


def _arithmetic_only_net() -> Network:
    """A layer norm and a softmax over 196 x 768 elements per sample (ViT-B/16's token grid),
    once priced by their elementwise FLOPs alone (no kernel row); since
    :mod:`perfmodel.cost.norm_kernels` each is the larger of its kernels' bytes and FLOPs."""
    b = NetBuilder("ln_softmax", (196, 768))
    x = b.linear("input", 768)
    x = b.norm(x, "layernorm", params=2 * 768, norm_elems=768)
    x = b.softmax(x)
    b.linear(x, 10)
    return b.build()


@pytest.mark.parametrize("precision", ["fp32", "amp"])
def test_flops_of_layers_that_move_no_bytes_are_in_both(precision: str) -> None:
    """Before the fix explain dropped these layers' FLOPs (their byte count is 0, their FLOPs a
    sympy expression of the batch): a100-80gb-dgx at 1024 samples, explain 1.5477 ms
    against predict's 1.8160 ms in fp32 (-14.8%), 1.0501 against 1.3184 ms under amp (-20.4%)."""
    ctx = context(_arithmetic_only_net(), load_hardware("a100-80gb-dgx"), precision, "sgd")
    f = explain_plan(ctx, parse_strategy("dp=1", 1), 1024)
    lt = ctx.times(1024)[0]
    norm = [i for i, la in enumerate(ctx.net.layers) if la.kind in ("layernorm", "softmax")]
    host = ctx.hw.kernels.host_op_s
    # the layers are arithmetic-bound (not at the host's pace), so dropping their FLOPs would show
    assert all(lt.fwd[i] > 2 * host and lt.bwd[i] > 2 * host for i in norm)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)


@pytest.mark.parametrize(("model", "spec", "gpus"), [
    ("mobilenet_v2", "pp=3,mb=5", 3), ("resnext50_32x4d", "mp=3,mb=2", 3), ("resnet18", "filter=2,dp=2", 4),
])
def test_calibrated_context_scales_explains_layers(model: str, spec: str, gpus: int) -> None:
    """A context with a calibration factor (``compute_scale``, per-group calibration) scales every
    layer's seconds in predict; explain's layer expressions carry the same factor. Before the fix
    explain ignored it (x0.83, explain against predict: mobilenet_v2 pp=3 11.993 against
    10.170 ms, +17.9%; resnext50_32x4d mp=3 10.772 against 9.193 ms; resnet18 filter=2,dp=2 4.873
    against 4.477 ms)."""
    ctx = context(get_model(model, 64), load_hardware("h100-80gb-pcie"), "bf16", "sgd", compute_scale=0.83)
    f = explain_plan(ctx, parse_strategy(spec, gpus), 32 * gpus)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)
    assert f.term_values["compute"] == pytest.approx(f.prediction.breakdown["compute"], rel=1e-9)

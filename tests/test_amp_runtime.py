"""The mixed-precision runtime a row ran with, and what each runtime prices (casts, scaler, weight copy)."""

from __future__ import annotations

import pytest

from perfmodel.api import load_hardware, load_model
from perfmodel.errors import UsageError
from perfmodel.network.counts import compile_counts
from perfmodel.strategies.amp_runtime import AMP_RUNTIMES, DEFAULT_AMP_RUNTIME
from perfmodel.strategies.amp_step import amp_casts_s, amp_step
from perfmodel.strategies.context import context
from perfmodel.strategies.dimension import optimizer_step_s
from perfmodel.strategies.predict import predict_in
from perfmodel.strategies.spec import parse_strategy
from perfmodel.validation import parse_measurements
from perfmodel.validation.amp_runtime_of import amp_runtime_of
from perfmodel.validation.compare import compare_rows
from perfmodel.validation.measurements import Measurement, load_measurements, shipped_path
from perfmodel.validation.pricing import RowPrice, price_row
from perfmodel.validation.step_scope import FORWARD_BACKWARD

HEADER = "model,hardware,gpus,precision,batch_per_gpu,global_batch,strategy,measured_throughput,framework,notes,step"


def _shipped(name: str) -> list[Measurement]:
    return list(load_measurements([shipped_path().parent / name]).rows)


@pytest.mark.parametrize(("csv", "framework", "expected"), [
    ("u39kun_runs.csv", "PyTorch 0.3.0", "pytorch-half"),
    ("holdout_runs.csv", "MXNet", "mxnet-multi-precision"),
    ("holdout_runs.csv", "TensorFlow", "tensorflow-amp"),
    ("published_runs.csv", "PyTorch", DEFAULT_AMP_RUNTIME),
    ("families_runs.csv", "PyTorch", DEFAULT_AMP_RUNTIME),
])
def test_shipped_rows_read_their_runtime(csv: str, framework: str, expected: str) -> None:
    """Every 16-bit row of a source gets its runtime; its fp32/tf32 rows the default."""
    rows = [m for m in _shipped(csv) if m.framework.startswith(framework)]
    half = [m for m in rows if m.precision == "amp"]
    assert half, csv
    assert {amp_runtime_of(m) for m in half} == {expected}
    assert {amp_runtime_of(m) for m in rows if m.precision in ("fp32", "tf32")} <= {DEFAULT_AMP_RUNTIME}


def _row(framework: str, notes: str = "", step: str = "full", precision: str = "amp") -> str:
    return f'resnet50,a100-80gb-dgx,1,{precision},64,,dp=1,1000,"{framework}","{notes}",{step}'


def _price(*rows: str) -> list[RowPrice]:
    ms = parse_measurements(HEADER + "\n" + "\n".join(rows) + "\n")
    hw = load_hardware("a100-80gb-dgx")
    return [price_row(m, hw) for m in ms.rows]


def test_forward_backward_keeps_the_casts_and_drops_the_scaler() -> None:
    """A forward-backward autocast row keeps amp_casts (they run inside forward and backward) and
    loses GradScaler's kernels with the update: its optimizer_step is the fp32 one's."""
    full, fb, fb32 = _price(_row("PyTorch"), _row("PyTorch", step=FORWARD_BACKWARD),
                            _row("PyTorch", step=FORWARD_BACKWARD, precision="fp32"))
    assert fb.breakdown["amp_casts"] == full.breakdown["amp_casts"] > 0
    assert fb.breakdown["optimizer_step"] == fb32.breakdown["optimizer_step"] < full.breakdown["optimizer_step"]


def test_half_model_and_mxnet_price_no_casts() -> None:
    """model.half() launches no casts and no scaler: its optimizer term is the plain formula's over
    16-bit weights, gradients and momentum; MXNet multi-precision none per forward, its update writes
    the fp16 copy and reads a 16-bit gradient, G (2 e - 4) bytes beside the fp32 update's: 0 at fp16."""
    half, mx, torch_amp = _price(_row("PyTorch 0.3.0", notes="model.half() and a half input"),
                                 _row("MXNet (NGC mxnet-20.12-py3)"), _row("PyTorch"))
    ctx = context(load_model("resnet50"), load_hardware("a100-80gb-dgx"), "amp", "sgd")
    base = optimizer_step_s(float(ctx.cc.params.sum()), "sgd", ctx.values)
    base_half = optimizer_step_s(float(ctx.cc.params.sum()), "sgd", ctx.values, param_bytes=2)
    for r, expected in ((half, base_half), (mx, base)):
        assert "amp_casts" not in r.breakdown
        assert r.breakdown["optimizer_step"] == pytest.approx(expected, rel=1e-12)
    assert base_half < base < torch_amp.breakdown["optimizer_step"]
    assert half.breakdown["compute"] == torch_amp.breakdown["compute"]


def test_runtime_is_in_the_repeated_run_key() -> None:
    """Two rows that differ only by framework are priced each with its own runtime, not once."""
    ms = parse_measurements(HEADER + "\n" + _row("PyTorch") + "\n" + _row("MXNet") + "\n")
    a, b = compare_rows(ms.rows)[:2]
    assert a.predicted_throughput != b.predicted_throughput


def test_runtime_in_context_and_assumptions() -> None:
    net, hw = load_model("resnet18"), load_hardware("a100-80gb-dgx")
    s = parse_strategy("dp=1")
    for name in AMP_RUNTIMES:
        p = predict_in(context(net, hw, "amp", "sgd", amp_runtime=name), s, 64)
        words = p.assumptions["mixed_precision"]
        assert (name in words) == (name != DEFAULT_AMP_RUNTIME)
    held = compile_counts(net).params
    assert amp_step(net, "amp", held, "pytorch-half") is None
    tf, pt = amp_step(net, "amp", held, "tensorflow-amp"), amp_step(net, "amp", held)
    assert tf == pt and tf is not None and amp_casts_s(tf, 1.0, context(net, hw, "amp", "sgd").values) > 0
    bf = amp_step(net, "bf16", held)
    assert bf is not None and not bf.scaler and bf.cast_tensors == pt.cast_tensors


def test_unknown_runtime_is_a_usage_error_with_the_closest_name() -> None:
    with pytest.raises(UsageError, match="unknown mixed-precision runtime 'pytorch-halfs'.*closest: pytorch-half"):
        context(load_model("resnet18"), load_hardware("a100-80gb-dgx"), "amp", "sgd", amp_runtime="pytorch-halfs")

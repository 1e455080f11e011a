"""The memory format (NCHW or NHWC): cuDNN's transposes around tensor-core convolutions under NCHW.

Oracles: the kernel formula without the rule (kernel_work + phase_times, what layer_seconds
computed before it), a hand count of one convolution's transposes, and the single-plan
``predict(..., memory_format=f)`` for every other surface.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from cli_helpers import run_main

from perfmodel import plan, predict
from perfmodel.api import plan_frame, predict_frame, scale, sweep
from perfmodel.commands.compare import compare
from perfmodel.cost.compute import HALF_PRECISIONS, ComputeValues, layer_times
from perfmodel.cost.kernel_model import phase_times, tensor_cores
from perfmodel.cost.kernels import network_kernels
from perfmodel.cost.layout import DEFAULT_MEMORY_FORMAT, check_memory_format, transposed_layers
from perfmodel.cost.work import kernel_work
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.counts import compile_counts
from perfmodel.strategies.spec import parse_strategy
from perfmodel.validation.measurements import Measurement
from perfmodel.validation.software_era import memory_format_of

HW = "a100-80gb-dgx"


def test_default_is_pytorchs_contiguous_format() -> None:
    assert DEFAULT_MEMORY_FORMAT == "nchw"
    with pytest.raises(UsageError, match="valid: nchw, nhwc"):
        check_memory_format("NHWC")


@pytest.mark.parametrize(("model", "hw", "precision"), [
    ("resnet50", HW, "amp"), ("mobilenet_v2", HW, "tf32"), ("resnext50_32x4d", "v100-16gb-dgx1", "amp"),
])
def test_nhwc_is_the_kernel_formula_without_the_rule(model: str, hw: str, precision: str) -> None:
    """NHWC prices exactly the native kernels: kernel_work and phase_times with no transposes."""
    net, prof, b = get_model(model), load_hardware(hw), 64.0
    cc = compile_counts(net)
    ev = cc.evaluate(b)
    lt = layer_times(cc, prof, precision, b, counts=ev, memory_format="nhwc")
    lk = network_kernels(net)
    scale_ = np.asarray(ev["out_elems"], float) / np.where(cc.evaluate(1.0)["out_elems"] > 0,
                                                            cc.evaluate(1.0)["out_elems"], 1.0)
    w = kernel_work(lk, prof.kernels, scale_, tensor_cores(prof, precision), precision in HALF_PRECISIONS)
    v = ComputeValues.of(prof, precision)
    conv = np.array([k in ("conv", "conv_transpose") for k in cc.kinds])
    lin = np.array([k in ("linear", "matmul", "attention") for k in cc.kinds])
    ew_f = np.asarray(ev["fwd_flops"]) - np.asarray(ev["fwd_matmul_flops"])
    ew_b = np.asarray(ev["bwd_input_flops"]) - np.minimum(ev["bwd_input_flops"], ev["fwd_matmul_flops"])
    ew_b = np.where(conv | lin, ew_b, ev["bwd_input_flops"])
    f, bw = phase_times(w, cc.params, v, np.where(conv, v.eta_conv, v.eta_linear), ew_f, ew_b)
    assert np.array_equal(lt.fwd, np.asarray(f, float))
    assert np.array_equal(lt.bwd, np.asarray(bw, float))


def _two_convs() -> tuple[NetBuilder, str]:
    b = NetBuilder("two", (64, 56, 56))
    x = b.conv("input", 64, 3, padding=1, bias=False, name="c0")
    x = b.act(x, "relu", name="r0")
    return b, b.conv(x, 128, 3, stride=2, padding=1, bias=False, name="c1")


X, Y = 64 * 56 * 56, 128 * 28 * 28  # c1's input and output elements per sample


def _c1_deltas(precision: str, batch: float) -> tuple[np.ndarray, np.ndarray, float, float, int]:
    """On the two-conv net: NCHW minus NHWC forward and backward seconds per layer, the seconds
    to read and write one element per sample of the batch once (the activations' bytes over the
    memory bandwidth), one launch's seconds, and c1's index."""
    b, _ = _two_convs()
    net, prof = b.build(), load_hardware(HW)
    cc = compile_counts(net)
    nchw = layer_times(cc, prof, precision, batch, memory_format="nchw")
    nhwc = layer_times(cc, prof, precision, batch, memory_format="nhwc")
    bw = prof.device.memory_bandwidth_bytes_per_s * prof.compute[precision].memory
    e = 2.0 if precision in HALF_PRECISIONS else 4.0  # fp16/bf16 activations, else fp32
    i = [layer.name for layer in net.layers].index("c1")
    return nchw.fwd - nhwc.fwd, nchw.bwd - nhwc.bwd, 2 * batch * e / bw, prof.kernel_launch_s, i


def test_nchw_adds_exactly_the_transposes_of_a_hand_counted_conv() -> None:
    """c1 (64x56x56 -> 128x28x28, not the first layer): forward transposes x in and y out,
    the data gradient dy in and dx out, the weight gradient x and dy in: each tensor read and
    written once at the memory efficiency, one launch each."""
    d_fwd, d_bwd, rw, tau, i = _c1_deltas("amp", 256.0)
    assert d_fwd[i] == pytest.approx((X + Y) * rw + 2 * tau, rel=1e-9)
    assert d_bwd[i] == pytest.approx(2 * (X + Y) * rw + 4 * tau, rel=1e-9)
    # the first convolution computes no data gradient: its backward pays the weight gradient's only
    x0 = y0 = 64 * 56 * 56
    assert d_bwd[0] == pytest.approx((x0 + y0) * rw + 2 * tau, rel=1e-9)
    assert d_fwd[1] == 0.0  # the ReLU is no convolution


def test_tf32_weight_gradients_run_natively_in_nchw() -> None:
    """TF32 (tensorflow/tensorflow PR #58054: NHWC helps only the forward and the data gradient):
    c1's backward pays the data gradient's transposes and not the weight gradient's; fp32 bytes."""
    d_fwd, d_bwd, rw, tau, i = _c1_deltas("tf32", 64.0)
    assert d_fwd[i] == pytest.approx((X + Y) * rw + 2 * tau, rel=1e-9)
    assert d_bwd[i] == pytest.approx((X + Y) * rw + 2 * tau, rel=1e-9)
    assert d_bwd[0] == 0.0  # the first layer's backward is its weight gradient alone


def test_no_tensor_cores_no_transposes() -> None:
    """fp32 on a V100 runs CUDA-core kernels, native in NCHW: the format changes nothing."""
    a = predict("resnet50", 8, "dp=8", "v100-16gb-dgx1", "fp32", 32, memory_format="nchw")
    b = predict("resnet50", 8, "dp=8", "v100-16gb-dgx1", "fp32", 32, memory_format="nhwc")
    assert a.iteration_time_s == b.iteration_time_s
    c = predict("resnet50", 8, "dp=8", "v100-16gb-dgx1", "amp", 32, memory_format="nchw")
    d = predict("resnet50", 8, "dp=8", "v100-16gb-dgx1", "amp", 32, memory_format="nhwc")
    assert c.iteration_time_s > 1.1 * d.iteration_time_s


def test_depthwise_layers_are_exempt() -> None:
    lk = network_kernels(get_model("mobilenet_v2"))
    mask = transposed_layers(lk, True, "nchw")
    assert lk.depthwise.any() and not (mask & lk.depthwise).any()
    assert np.array_equal(mask, lk.conv & ~lk.depthwise)
    assert not transposed_layers(lk, True, "nhwc").any() and not transposed_layers(lk, False, "nchw").any()


def _row(source: str, precision: str, framework: str = "PyTorch", notes: str = "") -> Measurement:
    return Measurement(file="t.csv", row=1, model="resnet50", hardware=HW, gpus=1, precision=precision,
                       batch_per_gpu=256, global_batch=None, strategy=parse_strategy("dp=1", 1), strategy_text="dp=1",
                       measured_throughput=1.0, framework=framework, source=source, columns={"notes": notes})


@pytest.mark.parametrize(("source", "precision", "framework", "notes", "fmt"), [
    ("NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5/README.md @ HEAD 729963dd",
     "amp", "PyTorch", "", "nhwc"),
    ("NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5/README.md @ HEAD 729963dd",
     "tf32", "PyTorch", "", "nchw"),
    ("NVIDIA/DeepLearningExamples MxNet/Classification/RN50v1.5/README.md @ 134510b4", "amp", "MXNet", "", "nhwc"),
    ("NVIDIA/DeepLearningExamples MxNet/Classification/RN50v1.5/README.md @ 134510b4", "fp32", "MXNet", "", "nchw"),
    ("NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5/README.md @ f0ef8493 (2019-12-20)",
     "amp", "PyTorch", "", "nchw"),
    ("tensorflow/tensorflow tensorflow/docs_src/performance/benchmarks.md @ 5984ffef", "fp32", "TensorFlow", "",
     "nchw"),
    ("NVIDIA/DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5/README.md @ 46ff3707 (2020-06-27)",
     "amp", "PyTorch", "", "nchw"),
    ("my own runs", "amp", "PyTorch", "model.to(memory_format=torch.channels_last)", "nhwc"),
    ("my own runs", "amp", "PyTorch", "", "nchw"),
])
def test_validation_rows_get_the_format_their_source_ran(source: str, precision: str, framework: str,
                                                         notes: str, fmt: str) -> None:
    assert memory_format_of(_row(source, precision, framework, notes)) == fmt


@pytest.fixture(scope="module")
def oracle() -> dict[str, float]:
    return {f: predict("resnet50", 8, "dp=8", HW, "amp", 32, memory_format=f).iteration_time_s
            for f in ("nchw", "nhwc")}


def test_api_surfaces_price_and_state_the_format(oracle: dict[str, float]) -> None:
    assert oracle["nchw"] > oracle["nhwc"]
    for f in ("nchw", "nhwc"):
        df = sweep("resnet50", [8], "dp=8", HW, "amp", batch_per_gpu=32, memory_format=f)
        assert float(df["step_s"].iloc[0]) == pytest.approx(oracle[f], rel=1e-9)
        assert df.attrs["memory_format"] == f and df.attrs["memory_format_assumption"].startswith(f"memory format {f}")
        pf = predict_frame("resnet50", 8, "dp=8", HW, "amp", 32, memory_format=f)
        assert float(pf["step_s"].iloc[0]) == pytest.approx(oracle[f], rel=1e-9)
        sc = scale("resnet50", [1, 8], HW, "amp", batch_per_gpu=32, strategies="dp", memory_format=f)
        assert float(sc.loc[sc["gpus"] == 8, "step_s"].iloc[0]) == pytest.approx(oracle[f], rel=1e-9)
        assert sc.attrs["memory_format"] == f
        c = compare("resnet50", 8, [HW], ["amp"], "dp=8", 32, memory_format=f)
        assert c.predictions[0].iteration_time_s == pytest.approx(oracle[f], rel=1e-9)
        p = predict("resnet50", 8, "dp=8", HW, "amp", 32, memory_format=f)
        assert p.assumptions["memory_format"].startswith(f"memory format {f}:")


def test_searches_take_the_format() -> None:
    for f in ("nchw", "nhwc"):
        best = plan("resnet50", 8, HW, "amp", 256, top=1, kinds=("dp",), memory_format=f).plans[0]
        again = predict("resnet50", 8, best.strategy.spec(), HW, "amp", global_batch=256, memory_format=f)
        assert best.iteration_time_s == pytest.approx(again.iteration_time_s, rel=1e-9)
        assert best.assumptions["memory_format"].startswith(f"memory format {f}")
        pf = plan_frame("resnet50", 8, HW, "amp", 256, top=1, kinds="dp", memory_format=f)
        assert float(pf["step_s"].iloc[0]) == pytest.approx(best.iteration_time_s, rel=1e-9)
        assert pf.attrs["memory_format"] == f


@pytest.mark.parametrize("call", [
    lambda: predict("resnet50", 1, "dp=1", HW, "amp", 32, memory_format="channels_last"),
    lambda: sweep("resnet50", [1], "dp=1", HW, "amp", memory_format="nhwc "),
    lambda: plan_frame("resnet50", 1, HW, "amp", memory_format="NCHW"),
    lambda: scale("resnet50", [1], HW, "amp", memory_format=1),
])
def test_api_bad_values_are_usage_errors(call: object) -> None:
    with pytest.raises(UsageError, match="unknown memory format"):
        call()  # type: ignore[operator]


@pytest.mark.parametrize("cmd", [
    ["predict", "resnet50", "-n", "8", "-s", "dp=8"],
    ["plan", "resnet50", "-n", "8", "--strategies", "dp"],
    ["explain", "resnet50", "-n", "8", "-s", "dp=8"],
    ["scale", "resnet50", "--gpus", "1,8", "--strategies", "dp"],
    ["compare", "resnet50", "-n", "8", "-H", HW, "-s", "dp=8"],
])
def test_cli_states_the_format(cmd: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    for f in ("nchw", "nhwc"):
        code, out, err = run_main([*cmd, "--memory-format", f], capsys)
        assert code == 0, err
        assert f"memory format {f}:" in out


def test_cli_json_carries_the_format(capsys: pytest.CaptureFixture[str], oracle: dict[str, float]) -> None:
    code, out, err = run_main(["predict", "resnet50", "-n", "8", "-s", "dp=8", "-b", "32", "--memory-format",
                               "nhwc", "--format", "json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["iteration_time_s"] == pytest.approx(oracle["nhwc"], rel=1e-9)
    assert d["assumptions"]["memory_format"].startswith("memory format nhwc")

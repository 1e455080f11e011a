"""``perfmodel measure --memory-format nhwc`` really runs channels-last, says so, and is priced so.

On the CPU (channels-last works on CPU tensors) the convolutions' inputs and filters are
checked by hooks on the modules torch runs; a GPU run is stood in for by a result whose
environment the command's pricing reads (oracle: ``layer_times`` and ``price`` called
directly with the format).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfmodel.commands.measure import predicted_times
from perfmodel.cost.compute import layer_times
from perfmodel.hardware import load_hardware
from perfmodel.network import NetBuilder, Network, compile_counts, get_model
from perfmodel.strategies.predict import context, price
from perfmodel.strategies.spec import Strategy
from perfmodel.validation import load_measurements
from perfmodel.validation.measure_result import LayerTiming, MeasureResult
from perfmodel.validation.software_era import memory_format_of
from tests.cli_helpers import run_main

torch = pytest.importorskip("torch")

from perfmodel.validation import measure as measure_mod  # noqa: E402
from perfmodel.validation import measure_timing  # noqa: E402
from perfmodel.validation.measure_timing import layer_timings, make_timer  # noqa: E402

CONV = (torch.nn.Conv2d, torch.nn.Conv3d)
MODEL, HW, BATCH = "resnet50", "a100-80gb-dgx", 8


def _layout(t: Any) -> str:
    """nhwc or nchw by the tensor's strides (a tensor with one channel or pixel could read both)."""
    cl = {4: torch.channels_last, 5: torch.channels_last_3d}[t.dim()]
    if t.is_contiguous(memory_format=cl) and not t.is_contiguous():
        return "nhwc"
    return "nchw" if t.is_contiguous() else "other"


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(input layout, filter layout) of every convolution call ``measure`` makes."""
    calls: list[tuple[str, str]] = []

    def hook(mod: Any, args: tuple[Any, ...]) -> None:
        calls.append((_layout(args[0]), _layout(mod.weight)))

    def hooked(*a: Any, **k: Any) -> Any:
        m = real_build(*a, **k)
        for sub in m.modules():
            if isinstance(sub, CONV):
                sub.register_forward_pre_hook(hook)
        return m

    def hooked_layer(*a: Any, **k: Any) -> Any:
        mod, fn = real_layer(*a, **k)
        if isinstance(mod, CONV):
            mod.register_forward_pre_hook(hook)
        return mod, fn

    real_build, real_layer = measure_mod.build_module, measure_timing.layer_module
    monkeypatch.setattr(measure_mod, "build_module", hooked)
    monkeypatch.setattr(measure_timing, "layer_module", hooked_layer)
    return calls


@pytest.mark.parametrize("fmt", ["nchw", "nhwc"])
def test_measure_runs_the_convolutions_in_the_format(fmt: str, seen: list[tuple[str, str]]) -> None:
    r = measure_mod.measure("tiny_cnn", 4, "fp32", 1, "cpu", None, 0, layers=True, memory_format=fmt)
    n_conv = sum(layer.kind == "conv" for layer in get_model("tiny_cnn").layers)
    assert len(seen) >= 2 * n_conv  # every convolution in the step and timed alone
    assert set(seen) == {(fmt, fmt)}
    assert r.environment["memory_format"] == fmt and r.memory_format == fmt


def _volume_net() -> Network:
    b = NetBuilder("vol", (2, 6, 6, 6))
    b.conv(b.act(b.conv("input", 4, 3, padding=1), "relu"), 4, 3, padding=1)
    return b.build()


def test_volumes_run_channels_last_3d(seen: list[tuple[str, str]]) -> None:
    net = _volume_net()
    out = layer_timings(net, torch, torch.device("cpu"), "cpu", "fp32", 2, make_timer(torch, "cpu"), 0, 1, "nhwc")
    assert len(out) == len(net.layers)
    assert len(seen) >= 2 and set(seen) == {("nhwc", "nhwc")}


@pytest.mark.parametrize("fmt", ["nchw", "nhwc"])
def test_the_written_row_names_its_format(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.csv"
    code, text, err = run_main(["measure", "tiny_cnn", "-b", "2", "--steps", "1", "--warmup", "0", "--no-layers",
                                "--device", "cpu", "--memory-format", fmt, "-H", HW, "-o", str(out)], capsys)
    assert code == 0, err
    assert f"memory_format {fmt}" in text  # the environment line
    row = load_measurements([out]).rows[0]
    assert row.columns["memory_format"] == fmt and fmt.upper() in row.framework
    assert memory_format_of(row) == fmt  # `perfmodel validate` prices the row in the layout it ran


# -- pricing, with a stand-in for a GPU run ----------------------------------------------------
def gpu_result(fmt: str | None) -> MeasureResult:
    """An amp run on an A100 (made-up times: only the pricing is tested)."""
    net = get_model(MODEL)
    layers = tuple(LayerTiming(layer.name, layer.kind, 1e-4, 2e-4) for layer in net.layers)
    env = {"torch": "2.3.1+cu121", "gpu": "NVIDIA A100-SXM4-80GB"}
    if fmt is not None:
        env["memory_format"] = fmt
    return MeasureResult(net.name, net.image_size, BATCH, "amp", "cuda", env["gpu"], 3, 1, 0.01, (0.01,) * 3,
                         layers, env)


def oracle(fmt: str) -> tuple[list[float], float]:
    net, hw = get_model(MODEL), load_hardware(HW)
    lt = layer_times(compile_counts(net), hw, "amp", BATCH, memory_format=fmt)
    step = price(context(net, hw, "amp", "sgd", memory_format=fmt), Strategy(), BATCH).time_s
    return [float(x) for x in lt.fwd], step


def test_predicted_times_take_the_runs_format() -> None:
    for fmt in ("nchw", "nhwc"):
        fwd, step = oracle(fmt)
        layers, got = predicted_times(gpu_result(fmt), HW)
        assert got == pytest.approx(step, rel=1e-12) and [f for f, _ in layers] == pytest.approx(fwd, rel=1e-12)
    assert oracle("nhwc")[1] < oracle("nchw")[1]  # amp on tensor cores: nchw adds the transposes
    assert predicted_times(gpu_result(None), HW)[1] == pytest.approx(oracle("nchw")[1], rel=1e-12)


def test_the_command_prices_and_states_the_format(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[str] = []

    def fake(*_a: Any, memory_format: str = "nchw", **_k: Any) -> MeasureResult:
        asked.append(memory_format)
        return gpu_result(memory_format)

    monkeypatch.setattr("perfmodel.commands.measure.measure", fake)
    for fmt in ("nhwc", "nchw"):
        code, out, err = run_main(["measure", MODEL, "-b", str(BATCH), "--precision", "amp", "-H", HW,
                                   "--memory-format", fmt, "--format", "json"], capsys)
        assert code == 0, err
        d = json.loads(out)
        assert d["predicted_step_time_s"] == pytest.approx(oracle(fmt)[1], rel=1e-12)
        assert d["assumptions"]["memory_format"].startswith(f"memory format {fmt}")
        assert d["measurement_row"]["memory_format"] == fmt
    assert asked == ["nhwc", "nchw"]
    code, out, err = run_main(["measure", MODEL, "-b", str(BATCH), "--precision", "amp", "-H", HW], capsys)
    assert code == 0, err
    assert asked[-1] == "nchw" and "  memory_format: memory format nchw" in out.split("assumptions:")[1]

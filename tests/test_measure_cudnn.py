"""``perfmodel measure`` prices its comparison with the cuDNN the measuring process loaded.

No GPU is needed: torch's calls are replaced by a stand-in object, and the timing run by a
result built from that environment.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from perfmodel.commands.measure import predicted_times
from perfmodel.cost.compute import layer_times
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts, get_model
from perfmodel.strategies.predict import context, price
from perfmodel.strategies.spec import Strategy
from perfmodel.validation import load_measurements, measure_env
from perfmodel.validation.measure_env import (
    cudnn_major_of_version,
    cudnn_version_text,
    environment,
    pricing_cudnn,
)
from perfmodel.validation.measure_result import LayerTiming, MeasureResult
from perfmodel.validation.software_era import cudnn_major_of
from tests.cli_helpers import run_main

MODEL = "resnext50_32x4d"  # grouped 3x3 convolutions: cuDNN 7 and 9 price them differently
HW = "v100-16gb-dgx1"  # Volta: cuDNN 7.6.5 and 9 both ran on it (an A100 needs cuDNN >= 8)
BATCH = 8


@pytest.mark.parametrize(
    ("version", "major", "text"),
    [
        (5110, 5, "5.1.10"),  # cuDNN 5.1.10, old encoding major*1000 + minor*100 + patch
        (6021, 6, "6.0.21"),
        (7605, 7, "7.6.5"),
        (8902, 8, "8.9.2"),
        (8907, 8, "8.9.7"),
        (90100, 9, "9.1.0"),  # cuDNN 9 encoding major*10000 + minor*100 + patch
        (90501, 9, "9.5.1"),
        (91000, 9, "9.10.0"),  # a two-digit minor, which the old encoding could not hold
        (100200, 10, "10.2.0"),
    ],
)
def test_both_version_encodings_decode(version: int, major: int, text: str) -> None:
    assert cudnn_major_of_version(version) == major
    assert cudnn_version_text(version) == text


@pytest.mark.parametrize("bad", [0, 999, -8902, True, 8902.0, "8902", None])
def test_a_non_version_is_a_usage_error(bad: Any) -> None:
    with pytest.raises(UsageError, match="not a cuDNN version number"):
        cudnn_major_of_version(bad)


def fake_torch(cudnn: int | None, hip: str | None = None) -> Any:
    """The parts of torch :func:`environment` reads, on a machine with one GPU."""
    return SimpleNamespace(
        __version__="2.3.1+cu121",
        version=SimpleNamespace(cuda="12.1", hip=hip),
        cuda=SimpleNamespace(get_device_name=lambda _i: "Tesla V100-SXM2-16GB"),
        backends=SimpleNamespace(cudnn=SimpleNamespace(version=lambda: cudnn)),
        get_num_threads=lambda: 8,
    )


@pytest.fixture
def nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    real = subprocess.run

    def run(args: list[str], **kw: Any) -> Any:  # platform's own calls (uname) still run
        if args[0] != "nvidia-smi":
            return real(args, **kw)
        return subprocess.CompletedProcess(args, 0, stdout="550.54.15\n", stderr="")

    monkeypatch.setattr(measure_env.subprocess, "run", run)


def test_environment_records_the_loaded_cudnn(nvidia_smi: None) -> None:
    env = environment(fake_torch(8902), "cuda")
    assert env["cudnn"] == "8902" and env["cudnn_version"] == "8.9.2"
    assert (env["torch"], env["cuda"], env["gpu"], env["driver"]) == (
        "2.3.1+cu121", "12.1", "Tesla V100-SXM2-16GB", "550.54.15")
    assert environment(fake_torch(90100), "cuda")["cudnn_version"] == "9.1.0"


@pytest.mark.parametrize(("cudnn", "hip"), [(None, None), (50300, "6.0")])
def test_no_cudnn_is_recorded_without_one(nvidia_smi: None, cudnn: int | None, hip: str | None) -> None:
    env = environment(fake_torch(cudnn, hip), "cuda")  # a ROCm build reports MIOpen's version
    assert "cudnn" not in env and "cudnn_version" not in env


def test_pricing_cudnn_picks_loaded_then_override_then_default() -> None:
    assert pricing_cudnn("8902", None)[0] == 8
    assert pricing_cudnn("7605", None)[0] == 7
    assert pricing_cudnn("90100", None)[0] == 9
    major, note = pricing_cudnn("8902", 7)
    assert major == 7 and "given by --cudnn" in note and "8.9.2" in note
    major, note = pricing_cudnn(None, None)
    assert major == 9 and "no cuDNN" in note
    major, note = pricing_cudnn("100200", None)  # a major perfmodel does not know yet
    assert major == 9 and "10.2.0" in note and "nearest" in note
    with pytest.raises(UsageError, match="unknown cuDNN major version 4"):
        pricing_cudnn("8902", 4)


def result(env: dict[str, str]) -> MeasureResult:
    """A measured run of :data:`MODEL` on the GPU (made-up times: only the pricing is tested)."""
    net = get_model(MODEL)
    layers = tuple(LayerTiming(layer.name, layer.kind, 1e-4, 2e-4) for layer in net.layers)
    return MeasureResult(net.name, net.image_size, BATCH, "fp32", "cuda", env["gpu"], 3, 1, 0.1,
                         (0.1, 0.1, 0.1), layers, env)


def priced(major: int) -> tuple[list[float], float]:
    """The model's per-layer forward seconds and step seconds under cuDNN ``major``."""
    net, hw = get_model(MODEL), load_hardware(HW)
    lt = layer_times(compile_counts(net), hw, "fp32", BATCH, cudnn_major=major)
    step = price(context(net, hw, "fp32", "sgd", cudnn_major=major), Strategy(), BATCH).time_s
    return [float(x) for x in lt.fwd], step


@pytest.fixture
def measured_with(monkeypatch: pytest.MonkeyPatch, nvidia_smi: None) -> Any:
    """Make ``perfmodel measure`` return a run whose torch loaded cuDNN ``version``."""

    def use(version: int) -> None:
        r = result(environment(fake_torch(version), "cuda"))
        monkeypatch.setattr("perfmodel.commands.measure.measure", lambda *_a, **_k: r)

    return use


def measure_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    code, out, err = run_main(["measure", MODEL, "-b", str(BATCH), "--precision", "fp32", "-H", HW,
                               "--format", "json", *extra], capsys)
    assert code == 0, err
    d: dict[str, Any] = json.loads(out)
    return d


def test_measure_prices_with_the_loaded_cudnn(measured_with: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fwd7, step7 = priced(7)
    fwd9, step9 = priced(9)
    assert step7 > step9  # cuDNN 7 loops over the groups: one launch and its own waves per group
    measured_with(7605)
    d = measure_json(capsys)
    assert d["cudnn_major"] == 7 and "7.6.5" in d["assumptions"]["cudnn"]
    assert d["predicted_step_time_s"] == pytest.approx(step7, rel=1e-12)
    assert [lt["predicted_forward_s"] for lt in d["layers"]] == pytest.approx(fwd7, rel=1e-12)
    d = measure_json(capsys, "--cudnn", "9")  # the override wins over what torch loaded
    assert d["cudnn_major"] == 9 and "given by --cudnn" in d["assumptions"]["cudnn"]
    assert d["predicted_step_time_s"] == pytest.approx(step9, rel=1e-12)
    measured_with(90100)
    d = measure_json(capsys)
    assert d["cudnn_major"] == 9 and d["predicted_step_time_s"] == pytest.approx(step9, rel=1e-12)


def test_predicted_times_defaults_to_the_loaded_cudnn(nvidia_smi: None) -> None:
    fwd7, step7 = priced(7)
    r = result(environment(fake_torch(7605), "cuda"))
    layers, step = predicted_times(r, HW)
    assert step == pytest.approx(step7, rel=1e-12) and [f for f, _ in layers] == pytest.approx(fwd7, rel=1e-12)
    assert predicted_times(r, HW, 9)[1] == pytest.approx(priced(9)[1], rel=1e-12)


def test_measure_text_states_the_cudnn(measured_with: Any, capsys: pytest.CaptureFixture[str]) -> None:
    measured_with(8902)
    code, out, err = run_main(["measure", MODEL, "-b", str(BATCH), "--precision", "fp32", "-H", HW], capsys)
    assert code == 0, err
    assumptions = out[out.index("assumptions:"):]
    assert "cuDNN 8.x" in assumptions and "8.9.2" in assumptions
    assert "cudnn_version 8.9.2" in out  # the environment line


def test_the_written_row_is_validated_with_its_cudnn(measured_with: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    measured_with(7605)
    out = tmp_path / "run.csv"
    code, _, err = run_main(["measure", MODEL, "-b", str(BATCH), "--precision", "fp32", "-H", HW,
                             "-o", str(out)], capsys)
    assert code == 0, err
    row = load_measurements([out]).rows[0]
    assert row.columns["cudnn"] == "7.6.5"
    assert cudnn_major_of(row) == 7  # `perfmodel validate` prices the row as cuDNN 7 ran it

"""``perfmodel measure``: a clean error without torch; with torch, a real CPU run of tiny_cnn."""

from __future__ import annotations

import builtins
import csv

import pytest

from perfmodel.cli import main
from perfmodel.network import get_model
from perfmodel.validation import load_measurements
from perfmodel.validation.measure import TORCH_MISSING, TorchNotInstalledError, require_torch


@pytest.fixture
def no_torch(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)


def test_without_torch_the_error_says_how_to_install(no_torch):
    with pytest.raises(TorchNotInstalledError, match="pip install torch"):
        require_torch()


def test_cli_without_torch_exits_1_with_one_line(no_torch, capsys):
    with pytest.raises(SystemExit) as e:
        main(["measure", "tiny_cnn", "--steps", "1"])
    err = capsys.readouterr().err
    assert e.value.code == 1
    assert err.strip() == f"error: {TORCH_MISSING}"


def test_measure_tiny_cnn_on_cpu(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    from perfmodel.validation.measure import build_module, measure

    net = get_model("tiny_cnn")
    module = build_module(net, torch)
    assert sum(p.numel() for p in module.parameters()) == net.params
    y = module(torch.randn(2, *net.input_shape))
    assert tuple(y.shape) == (2, *net.layers[-1].out_shape)

    r = measure("tiny_cnn", batch=4, steps=2, warmup=1, device="cpu")
    assert r.step_time_s > 0 and len(r.step_times_s) == 2
    assert [lt.name for lt in r.layers] == [layer.name for layer in net.layers]
    assert all(lt.forward_s > 0 and lt.backward_s >= 0 for lt in r.layers)
    assert r.layers[0].backward_s > 0  # the first conv still has a weight gradient

    out = tmp_path / "run.csv"
    with pytest.raises(SystemExit) as e:
        main(
            [
                "measure",
                "tiny_cnn",
                "--batch",
                "4",
                "--steps",
                "2",
                "--warmup",
                "1",
                "--device",
                "cpu",
                "--hardware",
                "a100-80gb-dgx",
                "-o",
                str(out),
            ]
        )
    assert e.value.code == 0, capsys.readouterr().err
    ms = load_measurements([out])
    assert ms.rows[0].model == "tiny_cnn" and ms.rows[0].batch_per_gpu == 4
    layers = list(csv.DictReader(out.with_suffix(".layers.csv").open()))
    assert len(layers) == len(net.layers) and "predicted_forward_ms" in layers[0]


def test_measure_rejects_gpu_precisions_on_cpu():
    pytest.importorskip("torch")
    from perfmodel.errors import UsageError
    from perfmodel.validation.measure import measure

    with pytest.raises(UsageError, match="needs --device cuda"):
        measure("tiny_cnn", batch=2, steps=1, device="cpu", precision="amp")

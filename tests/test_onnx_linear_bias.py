"""nn.Linear on token inputs, exported to ONNX as MatMul + Add, imports as one linear with its bias."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from perfmodel.network import get_model  # noqa: E402
from perfmodel.network.importers import import_module  # noqa: E402
from perfmodel.strategies import predict  # noqa: E402


class Tokens(torch.nn.Module):  # type: ignore[misc,name-defined]
    """Patches as tokens through two biased linear layers (3-D inputs: MatMul + Add in ONNX)."""

    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.a = torch.nn.Linear(3, 32, bias=bias)
        self.b = torch.nn.Linear(32, 32, bias=bias)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[name-defined]
        t = x.flatten(2).transpose(1, 2)
        t = self.b(torch.relu(self.a(t)))
        return self.head(t.mean(dim=1))


@pytest.mark.parametrize("bias", [True, False])
def test_matmul_and_bias_add_import_as_the_torch_linear(bias: bool, tmp_path: Path) -> None:
    """The ONNX file prices as the traced module does: the same layers' kinds, parameters and
    step time (before the fold, each bias Add was a const_op whose fp32 bias promoted its output
    to fp32 under autocast, adding casts)."""
    path = tmp_path / "tokens.onnx"
    torch.onnx.export(Tokens(bias).train(), (torch.randn(2, 3, 8, 8),), str(path), dynamo=False,
                      do_constant_folding=False, opset_version=20, training=torch.onnx.TrainingMode.TRAINING)
    ox = get_model(str(path))
    fx = import_module(lambda: Tokens(bias), "tokens", (3, 8, 8))
    assert ox.params == fx.params
    assert [la.kind for la in ox.layers if la.kind in ("linear", "const_op")] == ["linear"] * 3
    for precision in ("amp", "fp32"):
        t_onnx = predict(ox, 2, "dp=2", "a100-80gb-dgx", precision, global_batch=64).iteration_time_s
        t_fx = predict(fx, 2, "dp=2", "a100-80gb-dgx", precision, global_batch=64).iteration_time_s
        assert t_onnx == pytest.approx(t_fx, rel=1e-9)

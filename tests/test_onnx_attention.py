"""scaled_dot_product_attention exported to ONNX (scaled Mul, MatMul, Softmax, MatMul) imports as one
attention layer; attention written out in the module stays explicit products."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from perfmodel.network import Network, get_model  # noqa: E402
from perfmodel.network.importers import import_module  # noqa: E402
from perfmodel.strategies import predict  # noqa: E402


class Attend(torch.nn.Module):  # type: ignore[misc,name-defined]
    """Patches as tokens, one attention (fused sdpa or written out), a classifier."""

    def __init__(self, fused: bool) -> None:
        super().__init__()
        self.fused = fused
        self.q, self.k, self.v = (torch.nn.Linear(3, 16) for _ in range(3))
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[name-defined]
        t = x.flatten(2).transpose(1, 2)
        q, k, v = self.q(t), self.k(t), self.v(t)
        if self.fused:
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        else:
            o = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(16), dim=-1) @ v
        return self.head(o.mean(dim=1))


def _onnx(fused: bool, path: Path) -> Network:
    torch.onnx.export(Attend(fused).train(), (torch.randn(2, 3, 8, 8),), str(path), dynamo=False,
                      do_constant_folding=False, opset_version=20, training=torch.onnx.TrainingMode.TRAINING)
    return get_model(str(path))


def test_sdpa_imports_as_the_traced_attention(tmp_path: Path) -> None:
    """One attention layer, no explicit scores or softmax; the same parameters, attention FLOPs
    and step time as the traced module (before the fold: two matmuls, a softmax and two scale
    multiplies, the scores priced in memory)."""
    ox, fx = _onnx(True, tmp_path / "sdpa.onnx"), import_module(lambda: Attend(True), "attend", (3, 8, 8))
    kinds = [la.kind for la in ox.layers]
    assert kinds.count("attention") == 1 and not {"matmul", "softmax"} & set(kinds)
    assert ox.params == fx.params
    (a_onnx,) = (la for la in ox.layers if la.kind == "attention")
    (a_fx,) = (la for la in fx.layers if la.kind == "attention")
    assert a_onnx.in_shapes == a_fx.in_shapes and a_onnx.out_shape == a_fx.out_shape
    for precision in ("amp", "fp32"):
        t_onnx = predict(ox, 2, "dp=2", "a100-80gb-dgx", precision, global_batch=64).iteration_time_s
        t_fx = predict(fx, 2, "dp=2", "a100-80gb-dgx", precision, global_batch=64).iteration_time_s
        assert t_onnx == pytest.approx(t_fx, rel=1e-9)


def test_written_out_attention_stays_explicit(tmp_path: Path) -> None:
    """``softmax(q @ k^T / sqrt(d)) @ v`` in the module runs as those products in eager PyTorch, and
    its export (scaled after the MatMul) is not taken for sdpa."""
    kinds = [la.kind for la in _onnx(False, tmp_path / "explicit.onnx").layers]
    assert "attention" not in kinds and kinds.count("matmul") == 2 and "softmax" in kinds

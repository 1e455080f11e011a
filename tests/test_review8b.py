"""Review 8b: what the outputs say about the autocast rule they price every 16-bit runtime with."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.cli import main
from perfmodel.cost.batched_matmul import product_views
from perfmodel.cost.compute import ShapeRules
from perfmodel.errors import NetworkError
from perfmodel.hardware import load_hardware
from perfmodel.network.builder import NetBuilder
from perfmodel.network.layers import Layer


def test_a_16_bit_model_is_priced_with_autocast_and_the_output_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """``--amp-runtime pytorch-half`` (model.half(): no autocast) still prices norms in fp32 with
    casts (ShapeRules has no runtime); the kernels assumption must say so, not only 'no casts'."""
    rules = ShapeRules.of(load_hardware("a100-80gb-dgx"), "amp")
    assert rules.autocast == "float16"
    with pytest.raises(SystemExit) as info:
        main(["predict", "unet3d", "--gpus", "2", "--strategy", "dp=2", "-B", "4", "--amp-runtime", "pytorch-half"])
    out = capsys.readouterr().out
    assert info.value.code in (0, None), out
    assert "a 16-bit model's too: its norms and softmax are not priced at 16 bits" in out


def test_an_imported_shape_error_names_the_network_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A builder error inside a torch import is prefixed with the network's name once, not twice."""
    pytest.importorskip("torch")
    f = tmp_path / "pos.py"
    f.write_text(
        "import torch\n"
        "class Pos(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.pos = torch.nn.Parameter(torch.zeros(1, 5, 8))\n"
        "    def forward(self, x):\n"
        "        return x.flatten(2).transpose(1, 2) + self.pos\n"
    )
    with pytest.raises(SystemExit) as info:
        main(["show", f"{f}:Pos", "--input-shape", "8,3,3"])
    err = capsys.readouterr().err
    assert info.value.code == 1
    assert "pos.py:Pos: shapes" in err and err.count("pos.py:Pos:") == 1, err


@pytest.mark.parametrize(("q_len", "kv_len", "e", "ev"), [(128, 128, 64, 64), (100, 300, 64, 32), (17, 40, 16, 96)])
def test_attention_backward_flops_are_torchs_count(q_len: int, kv_len: int, e: int, ev: int) -> None:
    """FlashAttention's backward (scores recomputed, dV, dP, dQ, dK) at q/k width ``e`` and v width
    ``ev``: the GEMM view's FLOPs equal torch's own counter's (an independent count), also where
    ``e != ev`` (the view had ``2 E + 3 Ev`` for ``3 E + 2 Ev`` before)."""
    flop_counter = pytest.importorskip("torch.utils.flop_counter")
    sq, sk, sv = (2, q_len, e), (2, kv_len, e), (2, kv_len, ev)
    layer = Layer("attn", "attention", ("q", "k", "v"), (sq, sk, sv), (2, q_len, ev),
                  attrs=(("s", float(kv_len)), ("e", float(e))))
    m, n, kk, _ = product_views(layer, (True, True, True))["dgrad"]
    want = flop_counter.sdpa_backward_flop_count((1, 2, q_len, ev), (1, 2, q_len, e), (1, 2, kv_len, e),
                                                 (1, 2, kv_len, ev))
    assert 2 * 2 * m * n * kk == pytest.approx(want, rel=1e-12)


def test_attention_of_a_one_dimensional_key_is_a_network_error() -> None:
    """q (L, E) with a per-sample 1-D key or value: one NetworkError with the shapes, not an IndexError."""
    b = NetBuilder("att1d", (4, 8))
    k = b.view("input", (32,), name="k")
    with pytest.raises(NetworkError, match=r"attention of shapes \(4, 8\), \(32,\)"):
        b.attention("input", k, "input")
    with pytest.raises(NetworkError, match=r"attention of shapes \(4, 8\), \(4, 8\), \(32,\)"):
        b.attention("input", "input", k)

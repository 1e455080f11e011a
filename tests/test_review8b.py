"""Review 8b: the autocast rule a 16-bit run is priced with, and what the outputs say of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfmodel.cli import main
from perfmodel.cost.batched_matmul import product_views
from perfmodel.cost.compute import ShapeRules
from perfmodel.errors import NetworkError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.layers import Layer
from perfmodel.strategies.context import context


@pytest.mark.parametrize(("runtime", "autocast"), [("pytorch-autocast", True), ("tensorflow-amp", True),
                                                   ("pytorch-half", False), ("mxnet-multi-precision", False)])
def test_only_autocast_runtimes_price_norms_at_fp32(runtime: str, autocast: bool,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``model.half()`` and MXNet's fp16 model run no autocast: their group norms (unet3d's instance
    norms) stay 16-bit, so they price faster than under autocast, whose norms move fp32 bytes and
    casts (review 8b: unet3d dp=8 at 16 samples 101.23 ms either way before); the output says which."""
    hw = load_hardware("a100-80gb-dgx")
    assert ShapeRules.of(hw, "amp", autocast=autocast).autocast == ("float16" if autocast else "")
    net = get_model("unet3d")
    ctx = context(net, hw, "amp", "sgd", amp_runtime=runtime)
    assert ctx.autocast is autocast
    mine, auto = ctx.times(4.0)[0], context(net, hw, "amp", "sgd").times(4.0)[0]
    norm = np.array([layer.kind == "groupnorm" for layer in net.layers])
    conv = np.array([layer.kind == "conv" for layer in net.layers])
    assert norm.sum() == 22 and conv.any()
    if autocast:
        assert np.array_equal(mine.fwd, auto.fwd) and np.array_equal(mine.bwd, auto.bwd)
    else:  # half the bytes of fp32 norms; no casts up into them, nor down into the convolutions after
        assert np.all(mine.fwd[norm] < auto.fwd[norm]) and np.all(mine.bwd[norm] < auto.bwd[norm])
        assert np.all(mine.fwd[conv] <= auto.fwd[conv]) and np.any(mine.fwd[conv] < auto.fwd[conv])
    with pytest.raises(SystemExit) as info:
        main(["predict", "unet3d", "--gpus", "2", "--strategy", "dp=2", "-B", "4", "--amp-runtime", runtime])
    out = capsys.readouterr().out
    assert info.value.code in (0, None), out
    assert "at 16 bits in a 16-bit model (--amp-runtime pytorch-half, mxnet-multi-precision)" in out


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

"""torch's transformer modules read by torch.fx as their training-mode bodies (importers/fx_transformer.py):
eager dispatch, FlopCounterMode, parameter counts and the ONNX reading as oracles."""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch_nets as T  # noqa: E402
from cli_helpers import run_main  # noqa: E402
from torch_nets import DispatchedOps, read_kernels  # noqa: E402

from perfmodel import predict  # noqa: E402
from perfmodel.network import Network, compile_counts  # noqa: E402
from perfmodel.network.importers import import_module, import_onnx  # noqa: E402

nn = torch.nn
SHAPE = (12, 32)  # tokens x features per sample
_EAGER = {"clone": "copy", "mm": "gemm", "addmm": "gemm", "native_layer_norm": "norm", "native_dropout": "dropout",
          "_scaled_dot_product_flash_attention_for_cpu": "attention", "add": "add"}
_READ = {"linear": "gemm", "layernorm": "norm", "dropout": "dropout", "attention": "attention", "add": "add"}


class Stack(nn.Module):  # type: ignore[misc,name-defined]
    """Tokens through one of torch's transformer modules, then a linear head over their mean."""

    def __init__(self, kind: str, norm_first: bool = False, batch_first: bool = True, act: Any = "relu",
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.kind, self.batch_first = kind, batch_first
        kw = {"dim_feedforward": 64, "norm_first": norm_first, "batch_first": batch_first, "activation": act,
              "dropout": dropout}
        if kind == "encoder_layer":
            self.body = nn.TransformerEncoderLayer(32, 4, **kw)
        elif kind == "decoder_layer":
            self.mem = nn.Linear(32, 32)
            self.body = nn.TransformerDecoderLayer(32, 4, **kw)
        elif kind == "encoder":
            self.body = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, **kw), 2, norm=nn.LayerNorm(32),
                                              enable_nested_tensor=False)
        elif kind == "decoder":
            self.mem = nn.Linear(32, 32)
            self.body = nn.TransformerDecoder(nn.TransformerDecoderLayer(32, 4, **kw), 2)
        else:
            self.body = nn.Transformer(32, 4, 1, 1, **kw)
        self.head = nn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        x = x if self.batch_first else x.transpose(0, 1)
        if self.kind in ("decoder_layer", "decoder"):
            y = self.body(x, self.mem(x))
        elif self.kind == "transformer":
            y = self.body(x, x)
        else:
            y = self.body(x)
        y = y if self.batch_first else y.transpose(0, 1)
        return self.head(y.mean(1))


class _Adds(DispatchedOps):
    """:class:`DispatchedOps` that also counts the adds of two equal-shaped tensors (residual adds;
    a bias added after ``aten::matmul``'s GEMM, which the reader prices with its linear layer, is not one)."""

    def __init__(self) -> None:
        super().__init__()
        self.residual = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.overloadpacket.__name__ == "add" and len(args) > 1 and hasattr(args[1], "shape"):
            self.residual += tuple(args[0].shape) == tuple(args[1].shape)
        return super().__torch_dispatch__(func, types, args, kwargs)


def _eager(model: Any) -> Counter[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _Adds() as d:
            model.train()(torch.randn(2, *SHAPE))
    c = Counter({k: sum(n for op, n in d.ops.items() if _EAGER.get(op) == k) for k in set(_EAGER.values())})
    c["add"] = d.residual
    return c


def _read(net: Network) -> Counter[str]:
    return read_kernels(net, _READ, set(_EAGER.values()))


CASES = [("encoder_layer", False, True), ("encoder_layer", True, True), ("encoder_layer", False, False),
         ("decoder_layer", False, True), ("decoder_layer", True, False), ("encoder", False, True),
         ("encoder", True, True), ("decoder", False, True), ("transformer", False, True)]


@pytest.mark.parametrize(("kind", "norm_first", "batch_first"), CASES)
def test_kernels_are_what_eager_training_dispatches(kind: str, norm_first: bool, batch_first: bool) -> None:
    """GEMMs, copies, norms, attentions and adds: one read layer per eager ATen call (no dropout:
    with it, eager PyTorch on the CPU spells attention out in the math backend, which GPUs do not)."""
    def make() -> Any:
        return Stack(kind, norm_first, batch_first)
    assert _read(import_module(make, kind, SHAPE)) == _eager(make())


@pytest.mark.parametrize(("kind", "norm_first", "batch_first"), CASES)
def test_counts_equal_torchs(kind: str, norm_first: bool, batch_first: bool) -> None:
    """Parameters exactly (a stack's layers are copies, each counted), forward matmul FLOPs within 1%."""
    def make() -> Any:
        return Stack(kind, norm_first, batch_first)
    net, model = import_module(make, kind, SHAPE), make()
    assert net.params == T.torch_params(model)
    assert compile_counts(net).total("fwd_matmul_flops") == pytest.approx(T.torch_flops(model, SHAPE), rel=0.01)


@pytest.mark.parametrize("kind", ["encoder_layer", "decoder_layer", "transformer"])
def test_dropouts_are_the_masks_eager_draws(kind: str) -> None:
    """Each dropout mask eager draws (a ``bernoulli_`` call) is a dropout layer, or the attention
    dropout that the fused attention kernels apply inside (one per read attention)."""
    def make() -> Any:
        return Stack(kind, dropout=0.1)
    net = import_module(make, kind, SHAPE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with DispatchedOps() as d:
            make().train()(torch.randn(2, *SHAPE))
    read = Counter(la.kind for la in net.layers)
    assert read["dropout"] > 0 and read["dropout"] + read["attention"] == d.ops["bernoulli_"]


@pytest.mark.parametrize("act", ["gelu", nn.GELU()])
def test_activation_given_as_name_or_module(act: Any) -> None:
    net = import_module(lambda: Stack("encoder_layer", act=act), "enc", SHAPE)
    assert [la.fn for la in net.layers if la.kind == "act"] == ["gelu"]


@pytest.mark.parametrize("norm_first", [False, True])
def test_fx_and_onnx_readings_of_an_encoder_layer_price_alike(tmp_path: Any, norm_first: bool) -> None:
    """The ONNX export of the same layer (importers/onnx_mha.py) is an independent reading."""
    def make() -> Any:
        return Stack("encoder_layer", norm_first)
    path = tmp_path / "enc.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(make().train(), (torch.randn(2, *SHAPE),), str(path), dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    fx, ox = import_module(make, "enc", SHAPE), import_onnx(path, input_shape=SHAPE)
    assert fx.params == ox.params and len(fx.layers) == len(ox.layers)
    t = [predict(n, 2, "dp=2", "a100-80gb-dgx", batch_per_gpu=16).iteration_time_s for n in (fx, ox)]
    assert t[0] == pytest.approx(t[1], rel=1e-9)


def test_masks_are_refused_in_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "masked.py"
    src.write_text("import torch\nfrom torch import nn\n\n"
                   "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   "        self.body = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)\n\n"
                   "    def forward(self, x):\n"
                   "        return self.body(x, src_mask=torch.zeros(12, 12))\n", encoding="utf-8")
    code, _, err = run_main(["show", f"{src}:M", "--input-shape", "12,32"], capsys)
    err = err.strip()
    assert code == 1 and len(err.splitlines()) == 1
    assert "nn.TransformerEncoderLayer at module 'body': src_mask is read only as a causal mask" in err


class SeqFirst(nn.Module):  # type: ignore[misc,name-defined]
    """A sequence-first stack (torch's default layout) pooled over the sequence: ``mean(0)`` and a
    ``cat`` along the sequence, dimension 0 of a ``(T, N, D)`` tensor, not the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0), 2)
        self.head = nn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        y = self.body(x.transpose(0, 1))
        return self.head(torch.cat((y, y), 0).mean(0))


def test_sequence_first_reductions_and_concatenations_are_over_the_sequence() -> None:
    net = import_module(SeqFirst, "seq", SHAPE)
    assert net.params == T.torch_params(SeqFirst())
    assert [la.out_shape for la in net.layers if la.kind in ("concat", "mean")] == [(24, 32), (32,)]
    assert _read(net) == _eager(SeqFirst())


class BatchFirstInput(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.TransformerEncoderLayer(32, 4, 64)  # batch_first=False, fed (N, T, D)

    def forward(self, x: Any) -> Any:
        return self.body(x)


class Subclass(nn.TransformerEncoderLayer):  # type: ignore[misc,name-defined]
    """A user's subclass that keeps torch's forward."""


class BadKeyword(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)

    def forward(self, x: Any) -> Any:
        return self.body(x, src_mak=None)


class PaddingMask(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.att = nn.MultiheadAttention(32, 4, batch_first=True)
        self.register_buffer("pad", torch.zeros(2, 12, dtype=torch.bool))

    def forward(self, x: Any) -> Any:
        return self.att(x, x, x, self.pad, False)[0]


def test_a_subclass_that_keeps_forward_reads_as_its_base() -> None:
    sub = import_module(lambda: Subclass(32, 4, 64, batch_first=True), "sub", SHAPE)
    base = import_module(lambda: nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), "base", SHAPE)
    assert [(la.kind, la.out_shape) for la in sub.layers] == [(la.kind, la.out_shape) for la in base.layers]


@pytest.mark.parametrize(("make", "says"), [
    (BatchFirstInput, "batch_first=False reads (sequence, batch, embedding), but its input is batch-first"),
    (BadKeyword, "nn.TransformerEncoderLayer at module 'body': got an unexpected keyword argument 'src_mak'"),
    (PaddingMask, "only activation inputs without masks"),
])
def test_misuse_is_one_clear_error(make: Any, says: str) -> None:
    from perfmodel.errors import DataError

    with pytest.raises(DataError) as e:
        import_module(make, "m", SHAPE)
    assert says in str(e.value) and "\n" not in str(e.value) and "_encoder_layer" not in str(e.value)


def test_building_a_stack_prints_no_fast_path_warning(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "preln.py"
    src.write_text("from torch import nn\n\n"
                   "def build():\n"
                   "    return nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, norm_first=True, "
                   "batch_first=True), 2)\n",
                   encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a warning torch would print fails the test
        code, _, err = run_main(["show", f"{src}:build", "--input-shape", "12,32"], capsys)
    assert code == 0 and "enable_nested_tensor" not in err


class Causal(nn.Module):  # type: ignore[misc,name-defined]
    """A decoder-only (GPT-style) stack: a causal mask flagged ``is_causal=True``, or the mask alone."""

    def __init__(self, flagged: bool = True, kind: str = "encoder") -> None:
        super().__init__()
        self.flagged, self.kind = flagged, kind
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.body = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False) if kind == "encoder" else layer
        self.head = nn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        mask = nn.Transformer.generate_square_subsequent_mask(12)
        if self.kind == "encoder":
            y = self.body(x, mask=mask, is_causal=True) if self.flagged else self.body(x, mask=mask)
        else:
            y = self.body(x, src_mask=mask, is_causal=True) if self.flagged else self.body(x, src_mask=mask)
        return self.head(y.mean(1))


@pytest.mark.parametrize("kind", ["encoder", "layer"])
def test_a_flagged_causal_mask_is_a_causal_attention(kind: str) -> None:
    """Eager runs the same kernels (the mask is dropped for a causal flash kernel): one read layer
    per call, and every attention is marked causal."""
    net = import_module(lambda: Causal(kind=kind), "gpt", SHAPE)
    attn = [la for la in net.layers if la.kind == "attention"]
    assert attn and all(la.attr("causal") == 1.0 for la in attn)
    assert _read(net) == _eager(Causal(kind=kind))


def test_an_unflagged_mask_is_refused() -> None:
    from perfmodel.errors import DataError

    with pytest.raises(DataError, match="mask is read only as a causal mask, with is_causal=True"):
        import_module(lambda: Causal(flagged=False), "gpt", SHAPE)

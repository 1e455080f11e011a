"""ONNX exports of transformers read back as the modules that run them: ``nn.MultiheadAttention``
as the kernels eager PyTorch launches for it, and the export's reshape/transpose chains as the
views and copies torch dispatches (a ``TorchDispatchMode`` over the eager forward is the oracle)."""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import torch_nets as T  # noqa: E402
from cli_helpers import run_main  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

from perfmodel.network import Network, compile_counts  # noqa: E402
from perfmodel.network.importers import import_module, import_onnx  # noqa: E402
from perfmodel.strategies import predict  # noqa: E402

nn = torch.nn
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


class Mha(nn.Module):  # type: ignore[misc,name-defined]
    """Patches as tokens, normalised (a separate transpose: torch.onnx merges adjacent ones), one
    self-attention, a classifier."""

    def __init__(self, need_weights: bool = False, batch_first: bool = True, dropout: float = 0.0) -> None:
        super().__init__()
        self.need_weights, self.batch_first = need_weights, batch_first
        self.proj, self.norm = nn.Conv2d(3, 64, 8, 8), nn.LayerNorm(64)
        self.att = nn.MultiheadAttention(64, 4, dropout=dropout, batch_first=batch_first)
        self.head = nn.Linear(64, 10)

    def forward(self, x: Any) -> Any:
        t = self.norm(self.proj(x).flatten(2).transpose(1, 2))
        if not self.batch_first:
            t = t.transpose(0, 1)
        y, _ = self.att(t, t, t, need_weights=self.need_weights)
        return self.head((y if self.batch_first else y.transpose(0, 1)).mean(1))


class Encoder(nn.Module):  # type: ignore[misc,name-defined]
    """``nn.TransformerEncoderLayer`` (dropout 0.1: attention dropout inside the fused kernel)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 64, 8, 8)
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
        self.head = nn.Linear(64, 10)

    def forward(self, x: Any) -> Any:
        return self.head(self.layer(self.proj(x).flatten(2).transpose(1, 2)).mean(1))


def _write(model: Any, shape: tuple[int, ...], path: Path, opset: int = 20) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.train(), (torch.randn(2, *shape),), str(path), dynamo=False, opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)


def _export(model: Any, shape: tuple[int, ...], path: Path, opset: int = 20) -> Network:
    _write(model, shape, path, opset)
    return import_onnx(path)


def _eager_kernels(model: Any, shape: tuple[int, ...]) -> Counter[str]:
    """The kernels eager PyTorch runs in the forward (training mode, CPU), by kind."""
    with T.DispatchedOps() as d:
        model.train()(torch.randn(2, *shape))
    kinds = {"clone": "copy", "mm": "gemm", "addmm": "gemm", "bmm": "product", "mean": "mean", "_softmax": "softmax",
             "_scaled_dot_product_flash_attention_for_cpu": "attention"}
    return Counter({k: sum(n for op, n in d.ops.items() if kinds.get(op) == k) for k in set(kinds.values())})


_VIEW_CALLS = frozenset({"view", "reshape", "flatten", "transpose", "permute", "unbind", "__getitem__", "squeeze",
                         "unsqueeze", "expand", "contiguous", "split", "chunk", "select", "narrow", "unflatten", "t"})


class _ViewCalls(TorchFunctionMode):  # type: ignore[misc]
    """Torch-level view calls on activations (not parameters), counting each piece of a split."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces = 0

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        x = args[0] if args else None
        if getattr(func, "__name__", "") in _VIEW_CALLS and isinstance(x, torch.Tensor) and \
                not isinstance(x, nn.Parameter):
            self.pieces += len(out) if isinstance(out, (tuple, list)) else 1
        return out


def _read_kernels(net: Network) -> Counter[str]:
    """The same kinds as the reading prices them."""
    c: Counter[str] = Counter()
    for la in net.layers:
        kind = {"linear": "gemm", "matmul": "product", "mean": "mean", "softmax": "softmax",
                "attention": "attention"}.get(la.kind)
        if la.kind == "view" and la.attr("copy"):
            kind = "copy"
        if kind:
            c[kind] += 1
    return c


def _same_reading(ox: Network, fx: Network) -> None:
    """The same layers (kinds, shapes, copies), parameters and step times (amp and fp32)."""
    def sig(n: Network) -> list[tuple[Any, ...]]:
        return [(la.kind, la.in_shapes, la.out_shape, bool(la.attr("copy"))) for la in n.layers]
    assert sig(ox) == sig(fx)
    assert ox.params == fx.params
    for precision in ("amp", "fp32"):  # the same layers price the same, to rounding
        t_onnx = predict(ox, 2, "dp=2", "a100-80gb-dgx", precision, global_batch=64).iteration_time_s
        t_fx = predict(fx, 2, "dp=2", "a100-80gb-dgx", precision, global_batch=64).iteration_time_s
        assert t_onnx == pytest.approx(t_fx, rel=1e-9)


def test_vit_with_multihead_attention_reads_as_traced(tmp_path: Path) -> None:
    """torchvision-style ViT (``nn.MultiheadAttention`` without weights, ``batch_first``): refused
    before; now the traced module's layers, parameters, FLOPs and step times."""
    ox = _export(T.ViT(), (3, 64, 64), tmp_path / "vit.onnx")
    fx = import_module(T.ViT, "vit", (3, 64, 64))
    _same_reading(ox, fx)
    assert ox.params == T.torch_params(T.ViT())
    assert compile_counts(ox).total("fwd_matmul_flops") == pytest.approx(T.torch_flops(T.ViT(), (3, 64, 64)), rel=1e-6)
    att = [la for la in ox.layers if la.kind == "attention"]
    assert len(att) == 2 and all(la.in_shapes == ((4, 17, 24),) * 3 for la in att)
    assert compile_counts(ox).total("saved_elems") == pytest.approx(T.torch_saved(T.ViT(), (3, 64, 64)), rel=0.02)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("opset", [17, 20])
def test_multihead_attention_prices_what_eager_runs(tmp_path: Path, need_weights: bool, batch_first: bool,
                                                    opset: int) -> None:
    """Copies, GEMMs, batched products, softmax, means and attention kernels: as many as a
    ``TorchDispatchMode`` sees eager PyTorch run, in both readings (before: the ONNX file was
    refused, the traced reading missed the copies and the head-averaged weights)."""
    make = lambda: Mha(need_weights, batch_first)  # noqa: E731
    ox = _export(make(), (3, 32, 32), tmp_path / "mha.onnx", opset)
    fx = import_module(make, "mha", (3, 32, 32))
    _same_reading(ox, fx)
    eager = _eager_kernels(make(), (3, 32, 32))
    assert _read_kernels(ox) == _read_kernels(fx) == +eager
    assert compile_counts(ox).total("fwd_matmul_flops") == pytest.approx(T.torch_flops(make(), (3, 32, 32)), rel=1e-6)


def test_transformer_encoder_layer(tmp_path: Path) -> None:
    """``nn.TransformerEncoderLayer`` (torch.fx keeps it a leaf; only its export is read): torch's
    parameters and FLOPs, one attention layer with attention dropout inside it."""
    net = _export(Encoder(), (3, 32, 32), tmp_path / "enc.onnx")
    kinds = Counter(la.kind for la in net.layers)
    assert kinds["attention"] == 1 and kinds["matmul"] == 0 and kinds["softmax"] == 0
    assert net.params == T.torch_params(Encoder())
    assert compile_counts(net).total("fwd_matmul_flops") == pytest.approx(T.torch_flops(Encoder(), (3, 32, 32)),
                                                                           rel=1e-6)


def test_sdpa_vit_views_are_the_traced_ones(tmp_path: Path) -> None:
    """The export's ``Split`` + ``Squeeze`` of ``unbind`` is one view per piece, and the head
    merge after the fused attention is a view, not a copy (the fused kernels write
    ``(B, L, H, E)``): no copy kernel, as eager dispatches none; the traced reading's layers and
    step time (before: 38 layers against 32, 1.506 ms against 1.386 ms, and the traced reading
    priced a copy that eager does not run)."""
    make = lambda: T.ViT(sdpa=True)  # noqa: E731
    ox = _export(make(), (3, 64, 64), tmp_path / "vit_sdpa.onnx")
    fx = import_module(make, "vit", (3, 64, 64))
    _same_reading(ox, fx)
    assert _read_kernels(ox)["copy"] == _eager_kernels(make(), (3, 64, 64))["copy"] == 0
    with _ViewCalls() as calls:  # each view the module calls is one view layer, neither more nor fewer
        make().train()(torch.randn(2, 3, 64, 64))
    assert sum(la.kind in ("view", "flatten") for la in ox.layers) == calls.pieces == 17
    # without the phantom copy, what autograd saves (the packed qkv once): -1.0%, was +13%
    assert compile_counts(ox).total("saved_elems") == pytest.approx(T.torch_saved(make(), (3, 64, 64)), rel=0.02)


def test_transposed_reshape_copies_as_torch_does(tmp_path: Path) -> None:
    """``x.transpose(1, 2).reshape(...)`` copies (torch's strides cannot be regrouped); a reshape
    of a contiguous tensor does not: the ONNX reading follows the strides through the views."""

    class Swap(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x: Any) -> Any:
            y = x.reshape(x.shape[0], 4, 4, 16)  # a view
            return self.fc(y.transpose(1, 2).reshape(x.shape[0], 16, 16))  # a copy

    net = _export(Swap(), (16, 16), tmp_path / "swap.onnx")
    assert _read_kernels(net)["copy"] == _eager_kernels(Swap(), (16, 16))["copy"] == 1
    assert _read_kernels(import_module(Swap, "swap", (16, 16)))["copy"] == 1


class Mixer(nn.Module):  # type: ignore[misc,name-defined]
    """MLP-Mixer's token mixing: a linear over the tokens of a transposed activation."""

    def __init__(self) -> None:
        super().__init__()
        self.proj, self.norm = nn.Conv2d(3, 32, 4, 4), nn.LayerNorm(32)
        self.token, self.channel, self.head = nn.Linear(64, 64), nn.Linear(32, 32), nn.Linear(32, 10)

    def forward(self, x: Any) -> Any:
        t = self.norm(self.proj(x).flatten(2).transpose(1, 2))
        t = t + self.token(t.transpose(1, 2)).transpose(1, 2)  # aten::matmul copies the transposed tokens
        t = t + self.channel(t)  # contiguous: folded as a view
        return self.head(t.mean(1))


def test_linear_on_transposed_tokens_copies_as_eager(tmp_path: Path) -> None:
    """A linear layer on a tensor whose tokens cannot be folded into the GEMM's rows as a view
    runs a copy first in eager PyTorch (one ``clone`` in the dispatch): both readings price it
    (before: neither did), and the same way."""
    ox = _export(Mixer(), (3, 32, 32), tmp_path / "mixer.onnx")
    fx = import_module(Mixer, "mixer", (3, 32, 32))
    _same_reading(ox, fx)
    assert _read_kernels(ox) == +_eager_kernels(Mixer(), (3, 32, 32))
    assert _read_kernels(ox)["copy"] == 1


def _softmax_to_relu(g: Any) -> None:
    n = next(n for n in g.node if n.op_type == "Softmax")
    n.op_type = "Relu"
    del n.attribute[:]


def _weights_read_twice(g: Any) -> None:
    n = next(n for n in g.node if n.op_type == "Softmax")
    g.node.append(onnx.helper.make_node("Identity", [n.output[0]], ["weights_copy"], name="/extra/Identity"))
    g.output.append(onnx.helper.make_tensor_value_info("weights_copy", onnx.TensorProto.FLOAT, None))


def _scale_as_add(g: Any) -> None:
    n = next(n for n in g.node if n.op_type == "Mul" and n.name.startswith("/att/"))
    n.op_type = "Add"


@pytest.mark.parametrize(("mutate", "node", "expected"), [
    (_softmax_to_relu, "(MatMul)", "expected Softmax of the scores"),
    (_weights_read_twice, "(Softmax)", "expected MatMul of the attention weights by v"),
    (_scale_as_add, "(Add)", "expected scaled_dot_product_attention of the split heads"),
])
def test_unmatched_attention_export_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], mutate: Any,
                                                node: str, expected: str) -> None:
    """A graph with the in-projection's signature whose attention is not what the exporter
    writes: the node is named with what was expected, exit 1, no traceback."""
    path = tmp_path / "mha.onnx"
    _export(Mha(need_weights=True), (3, 32, 32), path)
    model = onnx.load(str(path))
    mutate(model.graph)
    onnx.save(model, str(path))
    code, _, err = run_main(["show", str(path)], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert node in err and "nn.MultiheadAttention" in err and expected in err


class Projections(nn.Module):  # type: ignore[misc,name-defined]
    """Tokens attending to a memory (``cross``: a decoder layer's cross-attention) or through an
    attention whose key width is not the embedding's (separate q/k/v projections)."""

    def __init__(self, cross: bool) -> None:
        super().__init__()
        self.cross, self.mem = cross, nn.Linear(32, 32 if cross else 16)
        self.dec = nn.TransformerDecoderLayer(32, 4, 64, batch_first=True) if cross else None
        self.att = None if cross else nn.MultiheadAttention(32, 4, kdim=16, vdim=16, batch_first=True)

    def forward(self, x: Any) -> Any:
        m = self.mem(x)
        return self.dec(x, m) if self.dec is not None else self.att(x, m, m, need_weights=False)[0]


@pytest.mark.parametrize(("cross", "module", "what"), [
    (True, "dec.multihead_attn", "a cross-attention"), (False, "att", "separate q/k/v projections")])
def test_exports_the_reader_does_not_match_name_their_module(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             cross: bool, module: str, what: str) -> None:
    """Refused naming the module and what it is, not the first node shape inference left unknown;
    the torch reading of the same module works (tests/test_fx_transformer.py, test_review9c.py)."""
    path = tmp_path / "proj.onnx"
    _write(Projections(cross), (12, 32), path)
    code, _, err = run_main(["show", str(path), "--input-shape", "12,32"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert f"nn.MultiheadAttention '{module}' is exported as {what}" in err
    assert import_module(lambda: Projections(cross), "proj", (12, 32)).params == T.torch_params(Projections(cross))

"""Products of two activations (perfmodel.cost.batched_matmul) against the ops torch dispatches.

Oracle: small modules imported with torch.fx into the IR and run forward and backward in eager
PyTorch (CPU) under ``TorchDispatchMode``: every ``bmm`` torch runs is one GEMM slot of the layer
with its shape (``P`` products of ``m x n x k``, ``P`` the batch times the layer's products per
sample), an operand broadcast over batch dimensions is one ``clone`` forward and one ``sum``
backward, and an operand that is the network input gets no gradient GEMM. Then: every layer with
matrix-multiply FLOPs prices GEMMs of those FLOPs (the gap this module closes: ``matmul`` and
``attention`` layers had none, and linear layers over tokens were priced as vectors), attention
scores cost about 4x at twice the sequence length, and a product's time never falls as
``m``, ``n`` or ``k`` grows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.compute import layer_times
from perfmodel.cost.kernels import MM_SLOTS, network_kernels
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts
from perfmodel.network.builder import NetBuilder
from perfmodel.network.layers import MATMUL_KINDS

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch_nets import ViT  # noqa: E402

from perfmodel.network.importers import import_module  # noqa: E402
from perfmodel.validation.autograd_saved import saved_storages  # noqa: E402

nn = torch.nn
BATCH = 2


class Trace(TorchDispatchMode):
    """Every op dispatched: (name, input shapes, output shapes)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, list[tuple[int, ...]], list[tuple[int, ...]]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
        self.ops.append((str(func), shapes, [tuple(o.shape) for o in outs if isinstance(o, torch.Tensor)]))
        return out


class Scores(nn.Module):
    """Attention-like products of projections of the input: ``(q k^T) v`` per head, ``k`` and ``v``
    shared by every head where ``shared`` (broadcast over the head dimension), and, where ``raw``,
    a product whose left operand is the network input itself (no gradient)."""

    def __init__(self, width: int, shared: bool = False, raw: bool = False) -> None:
        super().__init__()
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.shared, self.raw = shared, raw

    def forward(self, x: Any) -> Any:
        kv = x[:, :1] if self.shared else x
        q = x if self.raw else self.q(x)
        s = torch.softmax(q @ self.k(kv).transpose(-1, -2), dim=-1)
        return s @ self.v(kv)


def _run(model: Any, shape: tuple[int, ...]) -> tuple[Trace, Trace]:
    torch.manual_seed(0)
    fwd, bwd = Trace(), Trace()
    x = torch.randn(BATCH, *shape)
    with fwd:
        y = model(x)
    with bwd:
        y.backward(torch.randn_like(y))
    return fwd, bwd


def _bmm(trace: Trace) -> list[tuple[int, int, int, int]]:
    """(products, m, n, k) of every ``bmm`` dispatched: ``(P, m, k) @ (P, k, n)``."""
    shapes = [ins for name, ins, _ in trace.ops if name == "aten.bmm.default"]
    return sorted((a[0], a[1], b[2], a[2]) for a, b in shapes)


def _expanded_clones(trace: Trace) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(operand, copy) shapes of each ``clone`` of a broadcasting ``expand`` (``matmul``'s
    ``expand(...).reshape(...)``; clones of non-contiguous linear inputs are left out)."""
    ops = trace.ops
    return [(ops[i - 1][1][0], outs[0]) for i, (name, ins, outs) in enumerate(ops)
            if name == "aten.clone.default" and i and ops[i - 1][0] == "aten.expand.default"
            and ops[i - 1][1][0] != ops[i - 1][2][0]]


def _batch_sums(trace: Trace) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input, output) shapes of each ``sum`` over broadcast batch dimensions (the batch kept; a
    bias gradient's sum reduces the batch and is left out)."""
    return [(ins[0], outs[0]) for name, ins, outs in trace.ops
            if name.startswith("aten.sum.") and len(ins[0]) >= 3 and ins[0][0] == outs[0][0] == BATCH]


CASES = [
    ("heads", lambda: Scores(6), (3, 5, 6)),  # (heads, tokens, width): 4-D operands, no broadcast
    ("flat", lambda: Scores(6), (5, 6)),  # 3-D operands: torch calls bmm directly
    ("shared", lambda: Scores(6, shared=True), (3, 5, 6)),  # k and v broadcast over the heads
    ("raw", lambda: Scores(6, raw=True), (3, 5, 6)),  # q is the network input: no dq GEMM
]


@pytest.mark.parametrize(("name", "make", "shape"), CASES)
def test_matmul_gemms_are_the_bmms_torch_runs(name: str, make: Any, shape: tuple[int, ...]) -> None:
    net = import_module(make, name, shape)
    lk = network_kernels(net)
    fwd, bwd = _run(make(), shape)
    want_f: list[tuple[int, int, int, int]] = []
    want_b: list[tuple[int, int, int, int]] = []
    clones = sums = 0
    for i, layer in enumerate(net.layers):
        if layer.kind != "matmul":
            continue
        p = int(BATCH * lk.gemm_batch[i])
        view = {s: (int(lk.m[s][i]), int(lk.n[s][i]), int(lk.k[s][i])) for s in MM_SLOTS if lk.n[s][i]}
        want_f.append((p, *view["fwd"]))
        if "dgrad" in view:
            want_b.append((p, *view["dgrad"]))
        if "wgrad" in view:  # priced as dB^T = dC^T A; torch runs dB = A^T dC: m and n swapped
            m, n, k = view["wgrad"]
            want_b.append((p, n, m, k))
        clones += int(lk.launches_fwd[i]) - 1
        sums += int(lk.launches_bwd[i]) - len(view) + 1
        assert lk.host_ops_fwd[i] == lk.host_ops_bwd[i] == 1
    assert _bmm(fwd) == sorted(want_f)
    assert _bmm(bwd) == sorted(want_b)
    assert clones == len(_expanded_clones(fwd))
    assert sums == len(_batch_sums(bwd))
    if name == "raw":  # q @ k^T with q the input: only the k gradient
        assert len(_bmm(bwd)) == 3


def test_broadcast_operand_moves_its_expanded_copy_and_sums_its_gradient() -> None:
    make, shape = CASES[2][1], CASES[2][2]
    net = import_module(make, "shared", shape)
    lk = network_kernels(net)
    fwd, bwd = _run(make(), shape)
    clone, summed = _expanded_clones(fwd), _batch_sums(bwd)
    moved_b = sum(np.prod(i) + np.prod(o) for i, o in summed) / BATCH
    mats = [i for i, la in enumerate(net.layers) if la.kind == "matmul"]
    # clone reads the operand once (its stride-0 expanded view re-reads it from cache) and writes the copy
    moved_f = sum(np.prod(i) + np.prod(o) for i, o in clone) / BATCH
    assert sum(lk.mem_elems_fwd[i] for i in mats) == pytest.approx(moved_f)
    assert sum(lk.mem_elems_bwd[i] for i in mats) == pytest.approx(moved_b)
    assert len(clone) == len(summed) == 2


def _gemm_flops(net: Any, batch: float) -> tuple[np.ndarray, np.ndarray]:
    """Per layer, the direct FLOPs of the forward GEMM and of the backward GEMMs the kernel model prices."""
    lk = network_kernels(net)
    products = np.where(lk.gemm_batch > 0, lk.gemm_batch, lk.groups) * batch
    per = {s: 2 * products * lk.m[s] * lk.n[s] * lk.k[s] for s in MM_SLOTS}
    return per["fwd"], per["dgrad"] + per["wgrad"]


def _attention_net(width: int, heads: int, tokens: int, explicit: bool) -> Any:
    """One attention block on ``tokens`` tokens: explicit scores (``nn.MultiheadAttention`` with
    its weights) or a fused ``scaled_dot_product_attention`` (without)."""

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(width, heads, batch_first=True)

        def forward(self, x: Any) -> Any:
            return self.attn(x, x, x, need_weights=explicit)[0]

    return import_module(Block, f"block{tokens}", (tokens, width))


@pytest.mark.parametrize("make", [lambda: ViT(32, 8, 48, 4, 2), lambda: ViT(32, 8, 48, 4, 2, sdpa=True),
                                  lambda: Scores(6, shared=True)])
def test_every_matmul_flop_is_priced_as_a_gemm(make: Any) -> None:
    net = import_module(make, "net", (3, 32, 32) if not isinstance(make(), Scores) else (3, 5, 6))
    ev = compile_counts(net).evaluate(4.0)
    fwd, bwd = _gemm_flops(net, 4.0)
    kinds = np.array([la.kind for la in net.layers])
    mm = np.isin(kinds, ["linear", "matmul", "attention"]) | (kinds == "conv")
    assert mm.any() and set(kinds[mm]) <= MATMUL_KINDS
    assert fwd[mm] == pytest.approx(np.asarray(ev["fwd_matmul_flops"])[mm], rel=1e-9)
    lin = np.isin(kinds, ["linear", "matmul"])  # both gradients as the counts have them
    first = np.array([all(t == "input" for t in la.inputs) for la in net.layers])
    counted_b = np.asarray(ev["bwd_weight_flops"]) + np.where(first, 0.0, ev["fwd_matmul_flops"])
    assert bwd[lin] == pytest.approx(counted_b[lin], rel=1e-9)


def _layer_time(net: Any, name: str, precision: str, batch: int) -> float:
    t = layer_times(compile_counts(net), load_hardware("a100-80gb-dgx"), precision, batch)
    i = [la.name for la in net.layers].index(name)
    return float(t.fwd[i] + t.bwd[i])


@pytest.mark.parametrize("explicit", [True, False])
def test_attention_scores_cost_grows_with_the_square_of_the_sequence(explicit: bool) -> None:
    name = "attn.scores" if explicit else "attn.attn"
    short = _layer_time(_attention_net(768, 12, 256, explicit), name, "fp32", 64)
    long = _layer_time(_attention_net(768, 12, 512, explicit), name, "fp32", 64)
    assert 3.0 < long / short < 5.0


def _product(m: int, n: int, k: int, heads: int = 4) -> Any:
    """``(heads, m, k) @ (heads, k, n)`` of two activations (reshaped linear outputs)."""
    b = NetBuilder("product", (8,))
    a = b.view(b.linear("input", heads * m * k, name="a"), (heads, m, k), name="av")
    c = b.view(b.linear("input", heads * k * n, name="c"), (heads, k, n), name="cv")
    b.matmul(a, c, name="mm")
    return b.build()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300), st.integers(1, 300), st.sampled_from(["m", "n", "k"]),
       st.integers(1, 64), st.sampled_from(["amp", "fp32"]))
def test_matmul_time_is_monotone_in_each_dimension(m: int, n: int, k: int, grow: str, step: int,
                                                   precision: str) -> None:
    dims = {"m": m, "n": n, "k": k}
    bigger = {**dims, grow: dims[grow] + step}
    t0 = _layer_time(_product(**dims), "mm", precision, 16)
    t1 = _layer_time(_product(**bigger), "mm", precision, 16)
    assert t1 >= t0 * (1 - 1e-12)


@pytest.mark.parametrize(("name", "make", "shape"), CASES[:2])
def test_saved_activations_of_products_are_what_autograd_saves(name: str, make: Any, shape: tuple[int, ...]) -> None:
    """Both operands of each product (and the softmax's output, which the second reads) are saved
    once: perfmodel's count equals autograd's saved storages (``saved_tensors_hooks``)."""
    net = import_module(make, name, shape)
    counted = float(np.sum(compile_counts(net).evaluate(1.0)["saved_elems"]))
    assert counted == saved_storages(make(), shape, batch=2).float_elements

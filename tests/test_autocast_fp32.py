"""Autocast's fp32 layers and casts (perfmodel.cost.autocast_fp32) against what torch does.

Oracles on CPU: (1) autocast's fp32 cast policy as torch dispatches it (CPU autocast to bfloat16 of
an op on its CPU fp32 list, ``mse_loss``: each 16-bit input is cast by one ``_to_copy`` and the op
runs and returns fp32); CPU's fp32 list has no layer norm or softmax (they stay 16-bit on CPU),
CUDA's has (``autocast_mode.cpp``), which the pricing follows. (2) Which activations stay 16-bit:
an fx trace of a ViT run under CPU autocast (same lower-precision list for conv, linear and
matmul, and the same type promotion) with CUDA's fp32 policy applied to its norm and softmax
calls, against :func:`sixteen_bit`. (3) The priced bytes: fp32 layers at 4 bytes per element
under ``amp``/``bf16``, the casts around them, the half-to-float softmax at float16, and nothing
moved at ``fp32``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from perfmodel.cost.autocast_fp32 import CAST_BYTES, FP32_KINDS, autocast_memory, sixteen_bit
from perfmodel.cost.compute import ShapeRules
from perfmodel.cost.kernels import network_kernels
from perfmodel.cost.work import kernel_work
from perfmodel.hardware import load_hardware
from perfmodel.network.builder import NetBuilder
from perfmodel.network.zoo import get_model
from perfmodel.strategies import context, parse_strategy
from perfmodel.strategies.explain import explain_plan

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch_nets import ViT  # noqa: E402

from perfmodel.network.importers import import_module  # noqa: E402

nn, F = torch.nn, torch.nn.functional
HW = load_hardware("a100-80gb-dgx")


class Dtypes(TorchDispatchMode):
    """Every op dispatched with its tensor inputs' and outputs' dtypes."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, list[Any], list[Any]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        self.ops.append((str(func), [a.dtype for a in args if isinstance(a, torch.Tensor)],
                         [o.dtype for o in outs if isinstance(o, torch.Tensor)]))
        return out


def test_fp32_policy_casts_each_16_bit_input_and_runs_in_fp32() -> None:
    a, b = torch.randn(4, 8).bfloat16(), torch.randn(4, 8).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16), Dtypes() as t:
        F.mse_loss(a, b)
    casts = [op for op in t.ops if op[0] == "aten._to_copy.default"]
    assert [(i, o) for _, i, o in casts] == [([torch.bfloat16], [torch.float32])] * 2  # read 2, write 4 bytes
    assert [o for name, _, o in t.ops if name.startswith("aten.mse_loss")] == [[torch.float32]]


def test_cpu_autocast_keeps_norms_16_bit_unlike_cuda() -> None:
    x = torch.randn(4, 8).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16), Dtypes() as t:
        F.layer_norm(x, (8,))
        torch.softmax(x, -1)
    assert not any(name == "aten._to_copy.default" for name, _, _ in t.ops)
    assert all(o == [torch.bfloat16] for name, _, o in t.ops if "softmax" in name)


class CudaFp32Policy(torch.fx.Interpreter):
    """Runs a traced module under CPU autocast with CUDA's fp32 policy for layer norm, group norm
    and softmax (inputs cast to fp32, the op run outside autocast), recording each node's dtype."""

    def __init__(self, gm: Any) -> None:
        super().__init__(gm)
        self.dtypes: dict[str, Any] = {}

    def run_node(self, n: Any) -> Any:
        fp32 = (n.op == "call_module" and isinstance(self.module.get_submodule(n.target), (nn.LayerNorm, nn.GroupNorm))
                or n.op == "call_function" and getattr(n.target, "__name__", "") in ("softmax", "log_softmax"))
        if fp32:
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            args = tuple(a.float() if isinstance(a, torch.Tensor) else a for a in args)
            with torch.autocast("cpu", enabled=False):
                out = getattr(self, n.op)(n.target, args, kwargs)
        else:
            out = super().run_node(n)
        if isinstance(out, torch.Tensor):
            self.dtypes[n.target if n.op == "call_module" else n.name] = out.dtype
        return out


@pytest.mark.parametrize("sdpa", [False, True])
def test_sixteen_bit_tensors_are_those_autocast_leaves_16_bit(sdpa: bool) -> None:
    make = lambda: ViT(32, 8, 48, 4, 2, sdpa=sdpa)  # noqa: E731
    net = import_module(make, "vit", (3, 32, 32))
    model = make()
    if not sdpa:  # MHA without weights has a fused fast path in eval; trace the plain module
        model.train()
    gm = torch.fx.symbolic_trace(model)
    interp = CudaFp32Policy(gm)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        interp.run(torch.randn(2, 3, 32, 32))
    bits = sixteen_bit(net.layers)
    compared = 0
    for layer in net.layers:
        dtype = interp.dtypes.get(layer.name, interp.dtypes.get(layer.name.rsplit(".", 1)[-1]))  # fx flattens names
        if dtype is None:
            continue
        assert bits[layer.name] == (dtype == torch.bfloat16), (layer.name, layer.kind, dtype)
        compared += 1
    assert compared >= 20
    kinds = {la.kind for la in net.layers if not bits[la.name]}
    assert {"layernorm", "add", "concat"} <= kinds  # the residual stream is fp32 (fp32 class token, position embedding)


def _net(precision_kinds: str = "tokens") -> Any:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.ln, self.out = nn.Linear(64, 64), nn.LayerNorm(64), nn.Linear(64, 64)

        def forward(self, x: Any) -> Any:
            return self.out(torch.softmax(self.ln(self.fc(x)), dim=-1))

    return import_module(Block, precision_kinds, (16, 64))


def _work(net: Any, precision: str) -> Any:
    rules = ShapeRules.of(HW, precision)
    lk = network_kernels(net)
    return kernel_work(lk, HW.kernels, np.full(len(net.layers), 8.0), rules.tensor_cores, rules.half_precision,
                       autocast=rules.autocast)


@pytest.mark.parametrize("precision", ["amp", "bf16"])
def test_fp32_layers_move_fp32_bytes_and_their_casts(precision: str) -> None:
    net = _net()
    names = [la.name for la in net.layers]
    ln, sm, out = names.index("ln"), names.index("softmax"), names.index("out")
    half, full = _work(net, precision), _work(net, "fp32")
    n = 8.0 * 16 * 64  # elements of each activation in the batch
    lk = network_kernels(net)
    # the layer norm reads a 16-bit linear output: cast up (6 bytes per element), then its fp32 kernels
    assert half.mem_elems_fwd[ln] == 0 and full.mem_elems_fwd[ln] == lk.mem_elems_fwd[ln] * 8
    assert half.mem_extra_bytes_fwd[ln] == pytest.approx(full.mem_extra_bytes_fwd[ln] + 4 * full.mem_elems_fwd[ln]
                                                         + CAST_BYTES * n)
    assert half.launches_fwd[ln] == full.launches_fwd[ln] + 1
    assert half.mem_extra_bytes_bwd[ln] == pytest.approx(full.mem_extra_bytes_bwd[ln] + 4 * full.mem_elems_bwd[ln]
                                                         + CAST_BYTES * n)
    # the softmax reads the layer norm's fp32 output: no cast; the linear after it casts its input down
    assert half.mem_extra_bytes_fwd[sm] == pytest.approx(4 * full.mem_elems_fwd[sm])
    assert half.launches_fwd[sm] == full.launches_fwd[sm]
    assert half.mem_extra_bytes_fwd[out] == pytest.approx(full.mem_extra_bytes_fwd[out] + CAST_BYTES * n)
    assert half.launches_fwd[out] == full.launches_fwd[out] + 1 and half.launches_bwd[out] == full.launches_bwd[out] + 1
    # the first linear reads the network input, taken at the precision (its cast is not priced)
    assert half.launches_fwd[names.index("fc")] == full.launches_fwd[names.index("fc")]


def test_half_to_float_softmax_skips_the_cast_at_float16_only() -> None:
    n = np.array([100.0])
    ak = network_kernels(_scores_net()).autocast
    assert ak is not None
    i = int(np.flatnonzero(ak.softmax)[0])
    mem = tuple(np.zeros(len(ak.fp32)) for _ in range(6))
    own = (np.where(ak.softmax, 2 * n, 0.0), np.where(ak.softmax, 3 * n, 0.0), *mem[2:])
    fp16, cast16 = autocast_memory(ak, own, "float16")  # type: ignore[arg-type]
    bf16, cast_bf = autocast_memory(ak, own, "bfloat16")  # type: ignore[arg-type]
    m = ak.cast_in[i]
    assert m > 0
    # float16: one kernel reading 16-bit x and writing fp32 y; backward writes a 16-bit dx
    assert fp16[2][i] + cast16[i] == pytest.approx(4 * 2 * n[0] - 2 * m) and fp16[4][i] == 0
    assert fp16[3][i] + cast16[i] == pytest.approx(4 * 3 * n[0] - 2 * m) and fp16[5][i] == 0
    # bfloat16: a cast kernel first (and its backward)
    assert bf16[2][i] + cast_bf[i] == pytest.approx(4 * 2 * n[0] + CAST_BYTES * m) and bf16[4][i] == 1
    assert bf16[3][i] + cast_bf[i] == pytest.approx(4 * 3 * n[0] + CAST_BYTES * m) and bf16[5][i] == 1


def _scores_net() -> Any:
    class Scores(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(8, 8)

        def forward(self, x: Any) -> Any:
            q = self.q(x)
            return torch.softmax(q @ q.transpose(-1, -2), dim=-1) @ q

    return import_module(Scores, "scores", (5, 8))


def test_off_autocast_and_cnns_nothing_moves() -> None:
    net = _net()
    lk = network_kernels(net)
    assert lk.autocast is not None
    mem = (lk.mem_elems_fwd, lk.mem_elems_bwd, lk.mem_bytes_extra_fwd, lk.mem_bytes_extra_bwd, lk.launches_fwd,
           lk.launches_bwd)
    same, cast = autocast_memory(lk.autocast, mem, "")
    assert all(a is b for a, b in zip(same, mem, strict=True)) and not cast.any()
    assert ShapeRules.of(HW, "fp32").autocast == ShapeRules.of(HW, "tf32").autocast == ""
    cnn = network_kernels(get_model("resnet50")).autocast
    assert cnn is not None and not cnn.fp32.any() and not cnn.cast_in.any() and not cnn.cast_out.any()
    assert FP32_KINDS == ("layernorm", "groupnorm", "softmax")


@pytest.mark.parametrize("precision", ["amp", "bf16", "fp32"])
@pytest.mark.parametrize(("spec", "gpus"), [("dp=1", 1), ("filter=2", 2), ("pp=2,mb=2", 2)])
def test_explain_prices_products_and_fp32_layers_as_predict(precision: str, spec: str, gpus: int) -> None:
    """explain's formula at the profile's values is predict's step on a network with batched
    products (one broadcast), fp32 layer norms and softmax and the casts around them."""
    ctx = context(import_module(lambda: ViT(64, 16, 96, 4, 2), "vit", (3, 64, 64)), HW, precision, "sgd")
    f = explain_plan(ctx, parse_strategy(spec, gpus), 32 * gpus)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)
    b = NetBuilder("broadcast", (3, 5, 6))
    q = b.norm(b.linear("input", 6), "layernorm", params=12, norm_elems=6)
    k = b.view(b.mean(q, (1, 5, 6)), (1, 6, 5), copy=True)  # shared by the three heads
    b.matmul(b.softmax(b.matmul(q, k)), b.mean(q, (1, 5, 6)))
    ctx = context(b.build(), HW, precision, "sgd")
    assert network_kernels(ctx.net).gemm_batch.max() == 3
    f = explain_plan(ctx, parse_strategy("dp=1", 1), 64)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)

"""Layer norm, group norm and softmax kernels (perfmodel.cost.norm_kernels) against the ops torch dispatches.

Oracle: small modules imported with torch.fx into the IR and run forward and backward in eager
PyTorch (CPU) under ``TorchDispatchMode``. Each layer is one op each way (``native_layer_norm`` /
``native_layer_norm_backward``, ``native_group_norm[_backward]``, ``_softmax`` /
``_softmax_backward_data``): the model's host ops must be that count, and its launches and bytes
that op's tensors (activation-sized ones as elements, fp32 statistics as bytes) plus the extra
passes the CUDA implementation makes inside the op, which a CPU trace cannot show (cited in
norm_kernels.py: the gamma/beta kernel re-reads dy and x; group norm's moments and
input-gradient kernels read x, and dy and x, before the elementwise pass).
"""

from __future__ import annotations

from typing import Any

import pytest

from perfmodel.cost.kernels import network_kernels
from perfmodel.cost.norm_kernels import STAT_BYTES, norm_kernels
from perfmodel.network.builder import NetBuilder

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from perfmodel.network.importers import import_module  # noqa: E402

nn = torch.nn
BATCH = 2
OPS = {  # the op each layer kind dispatches, forward and backward
    "layernorm": ("aten.native_layer_norm.default", "aten.native_layer_norm_backward.default"),
    "groupnorm": ("aten.native_group_norm.default", "aten.native_group_norm_backward.default"),
    "softmax": ("aten._softmax.default", "aten._softmax_backward_data.default"),
}


class Tokens(nn.Module):
    """A transformer's token path: linear, layer norm over the width, softmax over it."""

    def __init__(self, width: int, affine: bool = True) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.ln = nn.LayerNorm(width, elementwise_affine=affine)

    def forward(self, x: Any) -> Any:
        return torch.softmax(self.ln(self.fc(x)), dim=-1)


class Image(nn.Module):
    """A convolution, a group norm over its channels (spatial or one element per channel)."""

    def __init__(self, affine: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8, affine=affine)  # 2 x 2 statistics, not 8 weights

    def forward(self, x: Any) -> Any:
        return self.gn(self.conv(x))


class Trace(TorchDispatchMode):
    """Every op dispatched: (name, [(numel, itemsize) of tensor inputs], [... of tensor outputs])."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, list[tuple[int, int]], list[tuple[int, int]]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        size = [(a.numel(), a.element_size()) for a in args if isinstance(a, torch.Tensor)]
        self.ops.append((str(func), size, [(o.numel(), o.element_size()) for o in outs if isinstance(o, torch.Tensor)]))
        return out


def _run(model: Any, shape: tuple[int, ...]) -> tuple[Trace, Trace]:
    torch.manual_seed(0)
    model.train()
    fwd, bwd = Trace(), Trace()
    x = torch.randn(BATCH, *shape)
    with fwd:
        y = model(x)
    g = torch.randn_like(y)
    with bwd:
        y.backward(g)
    return fwd, bwd


def _io(trace: Trace, op: str, n: int, rows: int) -> tuple[int, float, float]:
    """(ops named ``op``, activation elements per sample they read and write, bytes per sample of
    their statistics tensors, ``rows`` per sample; weights and their gradients left out)."""
    calls = [(*ins, *outs) for name, ins, outs in trace.ops if name == op]
    elems = sum(k for t in calls for k, _ in t if k == BATCH * n)
    stats = sum(k * b for t in calls for k, b in t if k == BATCH * rows)
    return len(calls), elems / BATCH, stats / BATCH


CASES = [
    ("tokens", lambda: Tokens(12), (5, 12)),
    ("tokens_plain", lambda: Tokens(12, affine=False), (5, 12)),
    ("tokens_odd", lambda: Tokens(10), (3, 10)),  # 10 % 4: layer norm's two-kernel forward
    ("image", Image, (3, 6, 6)),
    ("image_plain", lambda: Image(affine=False), (3, 6, 6)),
]


@pytest.mark.parametrize(("name", "make", "shape"), CASES)
def test_norm_and_softmax_kernels_are_the_ops_torch_runs(name: str, make: Any, shape: tuple[int, ...]) -> None:
    net = import_module(make, name, shape)
    lk = network_kernels(net)
    fwd, bwd = _run(make(), shape)
    checked = 0
    for i, layer in enumerate(net.layers):
        if layer.kind not in OPS:
            continue
        n, affine = layer.out_elems, layer.params > 0
        rows = n // int(layer.attr("norm_elems")) if layer.kind == "layernorm" else int(layer.attr("groups"))
        calls_f, elems_f, stats_f = _io(fwd, OPS[layer.kind][0], n, rows)
        calls_b, elems_b, stats_b = _io(bwd, OPS[layer.kind][1], n, rows)
        assert (calls_f, calls_b) == (1, 1)
        assert (lk.host_ops_fwd[i], lk.host_ops_bwd[i]) == (calls_f, calls_b)
        if layer.kind == "softmax":  # one CUDA kernel per op: read x, write y; read y and dy, write dx
            assert (lk.launches_fwd[i], lk.launches_bwd[i]) == (1, 1)
            assert (lk.mem_elems_fwd[i], lk.mem_elems_bwd[i]) == (elems_f, elems_b) == (2 * n, 3 * n)
        elif layer.kind == "layernorm":
            width = int(layer.attr("norm_elems"))
            one = width % 4 == 0
            assert lk.launches_fwd[i] == (1 if one else 2)
            assert lk.launches_bwd[i] == 1 + affine  # dx, then the gamma/beta kernel
            assert lk.mem_elems_fwd[i] == elems_f + (0 if one else n)  # the moments kernel reads x once more
            assert lk.mem_elems_bwd[i] == elems_b + 2 * n * affine  # gamma/beta re-reads dy and x
            assert stats_f == STAT_BYTES * n / width  # mean and rstd, fp32, one each per row
            assert lk.mem_bytes_extra_fwd[i] == stats_f * (1 if one else 2)
            assert lk.mem_bytes_extra_bwd[i] == stats_b * (1 + affine)  # read by the dx and gamma/beta kernels
        else:  # group norm over a spatial map
            assert lk.launches_fwd[i] == 2 + affine and lk.launches_bwd[i] == 3 + 2 * affine
            assert lk.mem_elems_fwd[i] == elems_f + n  # moments read x, then normalise reads and writes
            assert lk.mem_elems_bwd[i] == elems_b + 2 * n  # input gradients read dy and x first
            assert stats_f == STAT_BYTES * layer.attr("groups")
            assert lk.mem_bytes_extra_fwd[i] == stats_f
        checked += 1
    assert checked == (2 if name.startswith("tokens") else 1)


def test_group_norm_of_vectors_and_an_unknown_kind() -> None:
    """One element per channel (``HxW == 1``): ``GroupNorm1dBackward``'s fused parameters read
    dy and x, the dx pass reads them with the output written, gamma/beta read them again."""
    b = NetBuilder("gn1d", (8,))
    x = b.norm("input", "groupnorm", 16, groups=4)
    b.norm(x, "groupnorm", 0, groups=4, name="plain")
    net = b.build()
    affine, plain = (norm_kernels(layer) for layer in net.layers)
    assert affine == (24.0, 56.0, 32.0, 32.0, 2, 3)
    assert plain == (24.0, 40.0, 32.0, 32.0, 2, 2)
    with pytest.raises(ValueError, match="not one of"):
        norm_kernels(b.build().layers[0].__class__("r", "act", ("input",), ((8,),), (8,), fn="relu"))

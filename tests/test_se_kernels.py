"""The squeeze-and-excitation multiply's kernels: a hand count and the ops eager PyTorch dispatches."""

from __future__ import annotations

from typing import Any

import pytest

from perfmodel.cost.kernels import layer_kernels
from perfmodel.network.builder import NetBuilder
from perfmodel.network.graph import Network

C, H, W, SQUEEZE = 8, 4, 4, 2
N_FULL = C * H * W  # elements per sample of the scaled tensor


def se_block(fused: bool) -> Network:
    """conv -> SE (pool, 1x1 convs, ReLU, sigmoid) -> scale, then + residual (``addcmul`` when fused)."""
    b = NetBuilder("se", (C, H, W))
    y = b.conv("input", C, 3, padding=1, name="conv")
    s = b.adaptive_avgpool(y, 1, name="pool")
    s = b.act(b.conv(s, SQUEEZE, 1, bias=True, name="fc1"), "relu", inplace=True, name="relu")
    s = b.act(b.conv(s, C, 1, bias=True, name="fc2"), "sigmoid", name="sigmoid")
    y = b.mul(y, s, name="scale", fused_add=fused)
    b.add(y, "input", name="add")
    return b.build()


def _mul_and_add(fused: bool) -> tuple[Any, int, int]:
    net = se_block(fused)
    first = [all(t == "input" for t in layer.inputs) for layer in net.layers]
    lk = layer_kernels(net.layers, first)
    names = [layer.name for layer in net.layers]
    return lk, names.index("scale"), names.index("add")


def _conv_sum(lk: Any) -> tuple[float, float]:
    """(elements, launches) of autograd's sum of the gradients of ``conv``'s output (layer 0), which
    the pooling and the scale both read (perfmodel.cost.gradient_sums)."""
    return float(lk.grad_sum_elems_bwd[0]), float(lk.grad_sums_bwd[0])


def test_hand_counted_plain_scale() -> None:
    """``x * s``: forward reads x (128) and s (8), writes 128; backward dy*s (2n), dy*x (3n), its
    sum over H, W (n); the sum of the pooling's and the multiply's gradients of x (3n) where x is
    produced (the convolution)."""
    lk, i, _ = _mul_and_add(False)
    assert lk.mem_elems_fwd[i] == 2 * 128 + 8
    assert lk.mem_elems_bwd[i] == (2 + 3 + 1) * 128
    assert (lk.launches_fwd[i], lk.launches_bwd[i], lk.host_ops_fwd[i]) == (1, 3, 1)
    assert _conv_sum(lk) == (3 * 128, 1)


def test_hand_counted_fused_scale() -> None:
    """``addcmul(r, x, s)``: with the add layer's 3n forward the whole op reads r, x, s and writes y
    (3 x 128 + 8); backward s*1 (tiny), dy*that (2n), x*1 (2n), dy*that (3n), sum (n); the fork's
    sum (3n) at the convolution."""
    lk, i, j = _mul_and_add(True)
    assert lk.mem_elems_fwd[i] + lk.mem_elems_fwd[j] == 3 * 128 + 8
    assert lk.mem_elems_bwd[i] == (2 + 2 + 3 + 1) * 128
    assert (lk.launches_fwd[i], lk.launches_bwd[i], lk.host_ops_fwd[i]) == (0, 5, 0)
    assert _conv_sum(lk) == (3 * 128, 1)


def test_unforked_operand_has_no_gradient_sum() -> None:
    """A broadcast multiply whose full-size operand has no other reader adds no gradient sum."""
    b = NetBuilder("m", (C, H, W))
    s = b.adaptive_avgpool("input", 1, name="pool")
    y = b.conv("input", C, 1, name="conv")
    b.mul(y, s, name="scale")
    net = b.build()
    lk = layer_kernels(net.layers, [all(t == "input" for t in la.inputs) for la in net.layers])
    i = [la.name for la in net.layers].index("scale")
    assert lk.mem_elems_bwd[i] == 6 * 128 and lk.launches_bwd[i] == 3
    assert not lk.grad_sums_bwd.any()  # the input is read twice, but carries no gradient


# --- oracle: the ops eager PyTorch dispatches for the same block (CPU; the CUDA ops are the same) ---

SCALE_OPS = ("aten.mul.Tensor", "aten.mul.Scalar", "aten.sum.dim_IntList", "aten.add.Tensor", "aten.addcmul.default")


def _trace(fused: bool, batch: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(forward, backward) ops of the scale and its gradient plumbing: (name, full-size tensors touched)."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    full = batch * N_FULL

    def touched(tensors: list[Any]) -> int:
        return sum(1 for t in tensors if isinstance(t, torch.Tensor) and t.numel() == full
                   and t.untyped_storage().nbytes() >= full * t.element_size())

    class Log(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[tuple[str, int]] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if str(func) in SCALE_OPS:
                self.ops.append((str(func), touched([*args, *outs])))
            return out

    torch.manual_seed(0)
    pool, sig = torch.nn.AdaptiveAvgPool2d(1), torch.nn.Sigmoid()
    fc1, fc2 = torch.nn.Conv2d(C, SQUEEZE, 1), torch.nn.Conv2d(SQUEEZE, C, 1)
    x = torch.randn(batch, C, H, W)  # the network input: no gradient, so its two readers add none
    y = torch.nn.functional.conv2d(x, torch.randn(C, C, 3, 3, requires_grad=True), padding=1)
    log = Log()
    with log:
        s = sig(fc2(torch.relu_(fc1(pool(y)))))
        out = torch.addcmul(x, y, s) if fused else y * s + x
        n_fwd = len(log.ops)
        out.backward(torch.ones_like(out))
    return log.ops[:n_fwd], log.ops[n_fwd:]


@pytest.mark.parametrize("fused", [False, True])
def test_torch_dispatches_what_is_priced(fused: bool) -> None:
    """Full-size passes and launches of the scale (with its add) in forward and backward, as the
    model prices them, equal those of the ops eager PyTorch dispatches for the same block."""
    fwd, bwd = _trace(fused, batch=2)
    lk, i, j = _mul_and_add(fused)
    # backward: the scale's own kernels, the add's (none) and the sum of the gradients of the
    # convolution's output, which the pooling and the scale read
    sum_elems, sums = _conv_sum(lk)
    assert sum(p for _, p in fwd) == (lk.mem_elems_fwd[i] + lk.mem_elems_fwd[j]) // N_FULL
    assert len(fwd) == lk.launches_fwd[i] + lk.launches_fwd[j]
    assert sum(p for _, p in bwd) == (lk.mem_elems_bwd[i] + lk.mem_elems_bwd[j] + sum_elems) / N_FULL
    assert len(bwd) == lk.launches_bwd[i] + lk.launches_bwd[j] + sums

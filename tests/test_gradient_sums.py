"""Autograd's gradient sums at forks (perfmodel.cost.gradient_sums) against the adds torch runs.

Oracle: small networks written as torchvision writes its blocks (a DenseNet block and transition,
Inception-v3's module A and module E's split branches, ResNet bottlenecks, an input read twice),
imported with torch.fx into the IR, priced, and run forward and backward in eager PyTorch (CPU)
under ``TorchDispatchMode``: every ``add`` the backward dispatches is one of autograd's gradient
sums (the layers' own backward ops are ``convolution_backward``, ``native_batch_norm_backward``,
``threshold_backward``, pooling backward and views), so its count, sizes and elements moved must
equal the model's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from split_layers import busiest_gpu_times

from perfmodel.cost.compute import layer_times
from perfmodel.cost.gradient_sums import extra_gradients
from perfmodel.cost.kernels import network_kernels
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.counts import compile_counts
from perfmodel.network.graph import Network
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.predict import context
from perfmodel.strategies.spec import parse_strategy

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch_nets import Bottleneck  # noqa: E402

from perfmodel.network.importers import import_module  # noqa: E402

nn = torch.nn
F = torch.nn.functional  # noqa: N816

BATCH = 2
ADDS = ("aten.add.Tensor", "aten.add_.Tensor")


class Basic(nn.Module):
    """torchvision's ``BasicConv2d``: convolution, batch norm, ReLU."""

    def __init__(self, cin: int, cout: int, k: int | tuple[int, int], pad: int | tuple[int, int] = 0) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(cin, cout, k, padding=pad, bias=False), nn.BatchNorm2d(cout)

    def forward(self, x: Any) -> Any:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class DenseBlock(nn.Module):
    """A stem, a dense block of 4 layers (each concatenates every earlier feature map, as
    torchvision's ``_DenseLayer.bn_function`` does), the block's output concatenation and a transition."""

    def __init__(self, c0: int = 8, growth: int = 4, layers: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c0, 3, padding=1, bias=False)
        self.layers = nn.ModuleList()
        for i in range(layers):
            c = c0 + i * growth
            self.layers.append(nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, 4 * growth, 1),
                                             nn.BatchNorm2d(4 * growth), nn.ReLU(inplace=True),
                                             nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)))
        c = c0 + layers * growth
        self.transition = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1),
                                        nn.AvgPool2d(2))

    def forward(self, x: Any) -> Any:
        features = [self.stem(x)]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return self.transition(torch.cat(features, 1))


class InceptionFork(nn.Module):
    """A stem, Inception-v3's module A (its input read by 4 branches) and module E's 3x3 branch
    (one tensor read by a 1x3 and a 3x1 convolution), as torchvision's ``InceptionA``/``InceptionE``."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = Basic(3, 8, 3, 1)
        self.b1, self.b5_1, self.b5_2 = Basic(8, 4, 1), Basic(8, 4, 1), Basic(4, 4, 5, 2)
        self.bd_1, self.bd_2, self.bd_3, self.bp = Basic(8, 4, 1), Basic(4, 6, 3, 1), Basic(6, 6, 3, 1), Basic(8, 2, 1)
        self.e_1, self.e_a, self.e_b = Basic(16, 6, 1), Basic(6, 4, (1, 3), (0, 1)), Basic(6, 4, (3, 1), (1, 0))

    def forward(self, x: Any) -> Any:
        x = self.stem(x)
        bp = self.bp(F.avg_pool2d(x, 3, stride=1, padding=1))
        y = torch.cat([self.b1(x), self.b5_2(self.b5_1(x)), self.bd_3(self.bd_2(self.bd_1(x))), bp], 1)
        e = self.e_1(y)
        return torch.cat([self.e_a(e), self.e_b(e)], 1)


class Residual(nn.Module):
    """Two ResNet bottlenecks (the first with a projection shortcut), after a stem."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = Basic(3, 16, 3, 1)
        self.blocks = nn.Sequential(Bottleneck(16, 8, 2), Bottleneck(32, 8, 1))

    def forward(self, x: Any) -> Any:
        return self.blocks(self.stem(x))


class InputTwice(nn.Module):
    """The network input read by two convolutions: it carries no gradient, so nothing is summed."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 4, 1)

    def forward(self, x: Any) -> Any:
        return torch.cat([self.a(x), self.b(x)], 1)


class Pieces(nn.Module):
    """One tensor chunked (one autograd node: a single gradient, no sum) and another sliced twice
    (two autograd nodes: their full-size gradients are summed)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(3, 8, 1)

    def forward(self, x: Any) -> Any:
        p, q = self.a(x).chunk(2, dim=1)
        y = self.b(x)
        return torch.cat([torch.relu(p), torch.sigmoid(q), torch.relu(y[:, :4]), torch.sigmoid(y[:, 4:])], 1)


def _backward_adds(model: Any, shape: tuple[int, ...]) -> list[tuple[int, int]]:
    """(output elements, elements read and written) of every add eager PyTorch dispatches in the
    backward of ``model`` (train mode, an input without gradient, a loss of ``sum``)."""
    class Log(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.adds: list[tuple[int, int]] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if str(func) in ADDS:
                ins = sum(a.numel() for a in args if isinstance(a, torch.Tensor))
                self.adds.append((out.numel(), ins + out.numel()))
            return out

    torch.manual_seed(0)
    model.train()
    y = model(torch.randn(BATCH, *shape))
    log = Log()
    with log:
        y.sum().backward()
    return log.adds


def _priced(net: Network) -> list[tuple[int, int]]:
    """(output elements, elements moved) of each gradient sum the model prices, at :data:`BATCH`."""
    lk = network_kernels(net)
    out = []
    for i, layer in enumerate(net.layers):
        k = int(lk.grad_sums_bwd[i])
        out += [(BATCH * layer.out_elems, int(BATCH * lk.grad_sum_elems_bwd[i]) // max(k, 1))] * k
    return out


@pytest.mark.parametrize(("make", "sums"), [(DenseBlock, 4 + 3 + 2 + 1), (InceptionFork, 3 + 1), (Residual, 2),
                                              (InputTwice, 0), (Pieces, 1)])
def test_priced_sums_are_the_adds_torch_runs(make: Any, sums: int) -> None:
    shape = (3, 8, 8)
    net = import_module(make, make.__name__, shape)
    priced, ran = _priced(net), _backward_adds(make(), shape)
    assert len(priced) == sums  # hand count: a DenseNet feature map read by every later concatenation
    assert sorted(priced) == sorted(ran)  # same sizes, each reading 2n and writing n


def test_densenet161_sums_follow_its_blocks() -> None:
    """torchvision's DenseNet-161 (Huang et al. 2017; growth 48, blocks 6/12/36/24, 96 stem
    channels, 56/28/14/7 pixels at 224): in a block of L layers the block input is read by the L
    layers' concatenations and the block's output one (L extra gradients), the j-th layer's new
    features by the L - j + 1 after it (L - j extra)."""
    c, extra, sums = 96, 0, 0
    for layers, side in zip((6, 12, 36, 24), (56, 28, 14, 7), strict=True):
        extra += side * side * (layers * c + 48 * layers * (layers - 1) // 2)
        sums += layers + layers * (layers - 1) // 2
        c = (c + 48 * layers) // 2
    lk = network_kernels(get_model("densenet161", 224))
    assert lk.grad_sums_bwd.sum() == sums
    assert lk.grad_sum_elems_bwd.sum() == 3 * extra  # read both gradients, write one


def test_unrelated_rows_sum_nothing() -> None:
    net = get_model("inception_v3", 299)
    assert extra_gradients(net.layers).sum() == 35 and not extra_gradients(net.layers, one_network=False).any()
    np.testing.assert_array_equal(network_kernels(net).grad_sums_bwd, extra_gradients(net.layers))


def _forked(c: int, f: int, hw: int) -> Network:
    """A ``c -> f`` 3x3 convolution ``L`` after a ReLU, whose output two ReLUs read (then added)."""
    b = NetBuilder("fork", (c, hw, hw))
    y = b.conv(b.act("input", "relu", name="r"), f, 3, padding=1, bias=False, name="L")
    b.add(b.act(y, "relu", name="a"), b.act(y, "sigmoid", name="s"), name="sum")
    return b.build()


@pytest.mark.parametrize("n", [2, 8])
def test_a_split_gpu_sums_the_gradients_of_its_share(n: int) -> None:
    """One GPU of a filter split computes ``ceil(F/n)`` of the forked tensor's channels and sums
    their gradients (the readers act per channel): ``L``'s backward, with the sum, costs what it
    costs in the network built with that many filters; a 2x2 spatial tile's, what it costs on a
    network of the tile's extent."""
    split = busiest_gpu_times(_forked(64, 60, 28), "v100-16gb-dgx1", "fp32", "filter", n)
    direct = busiest_gpu_times(_forked(64, math.ceil(60 / n), 28), "v100-16gb-dgx1", "fp32", None, 1)
    assert split == pytest.approx(direct, rel=1e-9)
    hw = load_hardware("a100-80gb-dgx")
    i = [la.name for la in _forked(64, 60, 28).layers].index("L")
    tile = layer_times(compile_counts(_forked(64, 60, 28)), hw, "amp", BATCH, s_h=2, s_w=2).bwd[i]
    whole = layer_times(compile_counts(_forked(64, 60, 14)), hw, "amp", BATCH).bwd[i]
    assert tile == pytest.approx(whole, rel=1e-9)


def test_explain_prices_the_sums_as_predict_does() -> None:
    """``explain``'s symbolic formula holds the same sums (on the producers, in their stages)."""
    ctx = context(get_model("densenet121", 224), load_hardware("v100-16gb-dgx1"), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy("pp=2,mb=4", 2), 32)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)

"""A transposed convolution runs the kernels of its matching convolution (the one whose input is
the transposed layer's output): its forward is that convolution's data gradient, its data
gradient the convolution's forward, its weight gradient the convolution's weight gradient
(PyTorch aten/src/ATen/native/cudnn/ConvShared.cpp). Oracle: the matching convolution priced as
a convolution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfmodel.cost.kernels import layer_kernels
from perfmodel.cost.work import kernel_work
from perfmodel.hardware.profile import KernelParams
from perfmodel.network.layers import Layer

BATCH = 8.0


def _pair(c_in: int, c_out: int, small: tuple[int, ...], big: tuple[int, ...], kernel: tuple[int, ...],
          stride: tuple[int, ...], padding: tuple[int, ...]) -> tuple[Layer, Layer]:
    """(transposed layer c_in@small -> c_out@big, the convolution c_out@big -> c_in@small)."""
    params = c_in * c_out * math.prod(kernel)
    dil = (1,) * len(kernel)
    t = Layer("t", "conv_transpose", ("a",), ((c_in, *small),), (c_out, *big), kernel=kernel, stride=stride,
              padding=padding, dilation=dil, params=params)
    m = Layer("m", "conv", ("b",), ((c_out, *big),), (c_in, *small), kernel=kernel, stride=stride,
              padding=padding, dilation=dil, params=params)
    return t, m


CASES = [
    (512, 256, (28, 28), (56, 56), (2, 2), (2, 2), (0, 0)),  # U-Net up-convolution: disjoint windows
    (12, 20, (14, 14), (28, 28), (3, 3), (2, 2), (1, 1)),  # overlapping, channels not multiples of 8
    (64, 32, (8, 8, 8), (16, 16, 16), (2, 2, 2), (2, 2, 2), (0, 0, 0)),  # 3-D
    (64, 64, (28, 28), (28, 28), (3, 3), (1, 1), (1, 1)),  # stride 1: Winograd applies as to the convolution
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("tensor_cores", [False, True])
def test_transposed_kernels_are_the_matching_convolutions(case, tensor_cores) -> None:
    t, m = _pair(*case)
    lk = layer_kernels([t, m], [False, False])
    for kp in (KernelParams(), KernelParams(dgrad_atomic_flops=500.0)):
        w = kernel_work(lk, kp, np.full(2, BATCH), tensor_cores)
        assert w.flops["fwd"][0] == pytest.approx(w.flops["dgrad"][1], rel=1e-12)
        assert w.flops["dgrad"][0] == pytest.approx(w.flops["fwd"][1], rel=1e-12)
        assert w.flops["wgrad"][0] == pytest.approx(w.flops["wgrad"][1], rel=1e-12)


def test_up_convolution_forward_does_its_own_multiply_adds() -> None:
    # 2x2/2 up-convolution: each input element meets 4 taps once, 2 * N*H*W * C_in * C_out * 4 FLOPs,
    # not the zero-inserted view's 4x that
    t, _ = _pair(*CASES[0])
    w = kernel_work(layer_kernels([t], [False]), KernelParams(), np.array([BATCH]), False)
    own = 2 * BATCH * 28 * 28 * 512 * 256 * 4
    assert own <= w.flops["fwd"][0] < 4 * own


def test_first_transposed_layer_has_no_data_gradient() -> None:
    t, _ = _pair(*CASES[0])
    lk = layer_kernels([t], [True])
    assert lk.n["dgrad"][0] == 0 and lk.n["fwd"][0] > 0 and lk.n["wgrad"][0] > 0

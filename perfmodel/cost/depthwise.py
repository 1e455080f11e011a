"""Depthwise convolutions priced per output element: a fixed cost per thread plus one per filter tap.

PyTorch runs a depthwise convolution (``groups == in_channels``, any channel multiplier) with its
own CUDA kernels, not cuDNN's GEMMs (pytorch/pytorch ``aten/src/ATen/native/cuda/DepthwiseConv2d.cu``
@ 00410ca9; in the PyTorch 1.0/1.1 that PipeDream profiled, ``aten/src/THCUNN/
SpatialDepthwiseConvolution.cu`` @ 051e2a50, which ``at::_convolution`` in
``aten/src/ATen/native/Convolution.cpp`` @ 00222118 called for every depthwise layer). What they
do, read in that source:

* forward, ``conv_depthwise2d_forward_kernel``: one thread per output element (a grid-stride loop
  over ``N*K*P*Q``). Each thread splits its linear index into ``n, c, h, w`` (three integer
  divisions), then walks the ``R*S`` window: per tap, a bounds check, a load of the input (a
  neighbour's load one column over, so mostly L1 hits) and of the weight, one FMA; then one store;
* data gradient, ``conv_depthwise2d_backward_kernel``: one thread per *input* element, the same
  index split, and for each of the ``multiplier x R*S`` taps a test of whether an output covers it
  (``(h + pad - kh) % stride``): every tap is visited whatever the stride, the FMA done for the
  ``1/stride^2`` that match;
* weight gradient, ``conv_depthwise2d_grad_weight_kernel``: one thread block per filter tap
  (``K*R*S`` blocks of ``min(32 N, 256)`` threads), its warps striding over the images and each
  warp's lanes over the ``P*Q`` outputs of an image (``idx % outputWidth``, ``idx / outputWidth``
  per element), loading the input and the output gradient and doing one FMA, then a block
  reduction: ``K*R*S*N*P*Q`` iterations, the last 32-lane pass of every image partly idle.

So each kernel costs, in FLOP-equivalents at the fp32 (CUDA-core) peak,

    forward     N*K*P*Q  x (O + R*S x 2/eta_dw)
    data grad   N*C*H*W  x (O + multiplier x R*S x 2/eta_dw)
    weight grad N*K*ceil(P*Q/32)*32 x R*S x W_it

with ``O`` (``depthwise_output_flops``) the fixed work of one thread (index split, bounds, store),
``eta_dw`` (``depthwise_efficiency``) the fraction of the fp32 peak the tap loop's FMAs reach
(two loads per FMA), and ``W_it`` (``depthwise_wgrad_flops``) one iteration of the weight
gradient's reduction (two loads, the index split of the element, the FMA): three numbers per
GPU generation, fitted by ``scripts/fit_kernel_params.py`` on PipeDream's NASNet rows. The cost
per FLOP falls with the window (the fixed ``O`` spread over more taps), which one efficiency
cannot follow. The memory-traffic floor (input read once, output written) is the caller's
(:func:`perfmodel.cost.kernel_model.mm_time`).

Half precision: PyTorch hands fp16 depthwise layers to cuDNN where it can (``use_cudnn_depthwise``
in ``aten/src/ATen/native/Convolution.cpp``: every channels-last layer, and fp16 shapes it
accepts). cuDNN's kernels are closed; they are priced as if a thread kept two neighbouring
channels of the channels-last layout as one ``half2``, one index split, bound check and issue
slot serving two outputs (NVIDIA Tesla V100 whitepaper: FP16 31.4 TFLOPS on CUDA cores vs FP32
15.7): half the fp32 work, an assumption. (The native kernels
accumulate fp16 in fp32, ``acc_type<Half>`` is float, and would not halve; no fp16 depthwise
kernel is measured in the shipped data, and the 1-GPU AMP EfficientNet runs of
``families_runs.csv`` come out 23-24% slow with only the tap FMAs halved, 6-8% fast with all.)
"""

from __future__ import annotations

import numpy as np

from ..hardware.profile import KernelParams
from .kernels import MM_SLOTS, LayerKernels

__all__ = ["depthwise_flops", "WGRAD_LANES"]

#: Smallest tap-loop efficiency priced (a profile's fraction may be as small as it likes; the
#: time stays finite)
_EFF_FLOOR = 1e-6

#: Lanes of the warp that strides over one image's ``P*Q`` outputs in the weight-gradient kernel
#: (``C10_WARP_SIZE``, 32 on NVIDIA GPUs): an image's last pass runs with ``P*Q mod 32`` lanes busy.
WGRAD_LANES = 32.0


def depthwise_flops(lk: LayerKernels, kp: KernelParams, scale: np.ndarray,
                    half_precision: bool = False) -> dict[str, np.ndarray]:
    """FLOP-equivalents at the fp32 peak of each depthwise kernel of every layer (module docstring),
    for ``scale`` samples (micro-batch x tile fraction) per layer; per slot of
    :data:`~perfmodel.cost.kernels.MM_SLOTS`. Only meaningful where ``lk.depthwise`` (the caller
    masks): there the forward GEMM view is ``m = P*Q`` outputs per channel, ``n`` the channel
    multiplier, ``k = R*S`` taps, in ``groups = C`` groups."""
    scale = np.asarray(scale, dtype=float)
    g, plane, mult, taps = lk.groups, lk.m["fwd"], lk.n["fwd"], lk.k["fwd"]
    outputs = g * plane * mult  # per sample
    inputs = lk.x_elems  # per sample: the input gradient's elements
    tap = 2.0 / max(kp.depthwise_efficiency, _EFF_FLOOR)
    per_thread = kp.depthwise_output_flops
    lanes = np.where(plane > 0, np.ceil(plane / WGRAD_LANES) * WGRAD_LANES / np.maximum(plane, 1.0), 1.0)
    work = {
        "fwd": outputs * (per_thread + taps * tap),
        "dgrad": inputs * (per_thread + mult * taps * tap),
        "wgrad": outputs * lanes * taps * kp.depthwise_wgrad_flops,
    }
    return {s: work[s] * scale * (0.5 if half_precision else 1.0) for s in MM_SLOTS}

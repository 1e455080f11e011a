"""The memory-bound kernels eager PyTorch runs for a broadcast multiply (squeeze-and-excitation scaling).

A squeeze-and-excitation block (Hu et al., "Squeeze-and-Excitation Networks", CVPR 2018) scales
each channel of ``x`` (``n`` elements per sample) by ``s`` (``c`` elements, one per channel):
``y = x * s``, where ``x`` also feeds the block's global pooling. Per sample, at the precision:

=====================  ==========================================  ==========================================
layer                  forward                                     backward
=====================  ==========================================  ==========================================
``x * s``              read ``n`` + ``c``, write ``n``: ``2n + c``  ``dx = dy * s``: ``2n``; ``ds = dy * x``:
                       (one launch)                                 ``3n``, summed over H, W: ``n`` (3 launches)
``addcmul(r, x, s)``   read ``r``, ``x``, ``s``, write: ``3n + c``  ``s * value`` (``c``), ``dy * that``: ``2n``;
(fused, NVIDIA's                                                   ``x * value``: ``2n``, ``dy * that``: ``3n``,
SE-ResNeXt)                                                        summed over H, W: ``n`` (5 launches)
=====================  ==========================================  ==========================================

The pooling's and the multiply's gradients of ``x`` are added (``3n``, one launch) where ``x`` is
produced, as every tensor with more than one reader (:mod:`.gradient_sums`).

Sources: PyTorch ``tools/autograd/derivatives.yaml`` (``mul.Tensor``: ``self: grad * other``,
``other: grad * self``; ``addcmul``: ``tensor1: grad * (tensor2 * value)``, ``tensor2: grad *
(tensor1 * value)``); the gradient of the broadcast operand is reduced to its shape by the
autograd engine (``torch/csrc/autograd/engine.cpp``, ``validate_outputs``: ``at::sum_to``), and
two gradients flowing into one tensor are added (``torch/csrc/autograd/input_buffer.cpp``,
``InputBuffer::add``). The list is checked against the ops eager PyTorch dispatches for one SE
block (tests/test_se_kernels.py, ``TorchDispatchMode`` on CPU; the CUDA kernels are the same ops).

The fused form is two IR layers, the multiply (``attr('fused_add')``) and the add of the residual:
the add keeps its own price (``3n`` forward, as ``out += residual``; no backward kernel), so the
multiply carries the rest: forward ``c`` (the scale read), no launch of its own; backward the 5
kernels above. Host: one op forward (none where fused, the add's op is
the ``addcmul``), one autograd node backward.
"""

from __future__ import annotations

from ..network.layers import Layer, numel

__all__ = ["mul_kernels"]


def mul_kernels(layer: Layer) -> tuple[float, float, int, int, int]:
    """(fwd elems, bwd elems, fwd launches, bwd launches, fwd host ops) per sample of a ``mul`` layer
    (module docstring)."""
    n = float(layer.out_elems)
    c = float(sum(numel(s) for s in layer.in_shapes)) - n  # the broadcast operand (n where both are full)
    if layer.attr("fused_add"):
        return c, 8 * n, 0, 5, 0
    return 2 * n + c, 6 * n, 1, 3, 1

"""The layers ``torch.autocast`` runs in fp32 at a 16-bit precision, and the casts it inserts around them.

Under ``torch.autocast("cuda", float16 | bfloat16)`` (precisions ``amp`` and ``bf16``) the ops of
autocast's *lower precision* list (``conv*``, ``linear``, ``matmul``, ``bmm``,
``scaled_dot_product_attention``) run at 16 bits, those of its *fp32* list cast their floating
inputs to fp32 and run and return fp32 (PyTorch ``aten/src/ATen/autocast_mode.cpp``, CUDA
kernels: ``KERNEL_CUDA(layer_norm, fp32)``, ``KERNEL_CUDA(native_layer_norm, fp32)``,
``KERNEL_CUDA(group_norm, fp32)``, ``softmax`` / ``log_softmax`` with ``fp32_set_opt_dtype``;
PyTorch AMP docs, "CUDA Ops that can autocast to float32": ``group_norm``, ``layer_norm``,
``log_softmax``, ``softmax``), and every other op runs in its inputs' type, a binary op's
promoted to the wider one (an fp32 parameter or tensor operand makes it fp32; a 0-dim or Python
scalar does not). CPU autocast differs: its fp32 list has no norm or softmax (``KERNEL_CPU``,
same file), so on CPU these run at 16 bits (``tests/test_autocast_fp32.py`` shows both policies).

So at ``amp`` / ``bf16``, per sample, ``n`` the layer's elements:

* a layer norm, group norm or softmax moves its tensors at 4 bytes, not the precision's 2
  (its kernels of :mod:`.norm_kernels`); where its input is 16-bit autocast first casts it
  (``_to_copy``: read 2, write 4 bytes per element, one launch) and the cast's backward casts the
  input gradient back (read 4, write 2). A softmax of a 16-bit input at ``float16`` runs no cast:
  ``at::softmax`` with ``dtype=float`` on a CUDA ``Half`` tensor calls ``_softmax(...,
  half_to_float=true)`` (``aten/src/ATen/native/SoftMax.cpp``), one kernel reading 16-bit and
  writing fp32, and its backward writes the 16-bit gradient (2 bytes less per element each way);
  ``bfloat16`` takes the cast;
* a 16-bit layer reading an fp32 activation (a norm's output, a residual stream promoted by an fp32
  position embedding) casts it down (read 4, write 2, one launch), and back in its backward.

Which activations are fp32 follows from these rules layer by layer (:func:`sixteen_bit`), from a
network input taken at the precision, as every other layer's kernels price it (an fp32 input
batch's cast, or the first layer's, is not priced).
Off autocast (``fp32``, ``tf32``) nothing changes, nor in a 16-bit model (``amp_runtime``
pytorch-half or mxnet-multi-precision), which runs every op at 16 bits: its
:class:`~perfmodel.cost.compute.ShapeRules` carry no autocast type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..network.layers import Layer, numel
from .norm_kernels import NORM_KINDS

__all__ = ["LOW_PRECISION_KINDS", "FP32_KINDS", "CAST_BYTES", "AUTOCAST_DTYPES", "AutocastKernels", "Memory",
           "sixteen_bit", "autocast_kernels", "autocast_memory"]

#: Layer kinds of autocast's lower-precision list.
LOW_PRECISION_KINDS = ("conv", "conv_transpose", "linear", "matmul", "attention")
#: Layer kinds of autocast's (CUDA) fp32 list.
FP32_KINDS = NORM_KINDS
#: Bytes one cast between 16 bits and fp32 moves per element (read one, write the other).
CAST_BYTES = 6.0
#: Bytes of an fp32 element.
FLOAT_BYTES = 4.0
#: The 16-bit type autocast runs at, per precision (``amp``: float16).
AUTOCAST_DTYPES = {"amp": "float16", "bf16": "bfloat16"}
#: Binary layers whose output takes the wider of their operands' types.
_PROMOTING = ("add", "mul", "concat")


@dataclass(frozen=True)
class AutocastKernels:
    """Per layer (arrays over layers, per sample): ``fp32`` runs in fp32 under autocast;
    ``softmax`` is a softmax; ``cast_in`` elements of its 16-bit input cast up first; ``cast_out``
    elements of fp32 activations a 16-bit layer casts down, in ``casts_out`` casts."""

    fp32: np.ndarray
    softmax: np.ndarray
    cast_in: np.ndarray
    cast_out: np.ndarray
    casts_out: np.ndarray


def sixteen_bit(layers: Sequence[Layer]) -> dict[str, bool]:
    """Tensor name -> whether autocast leaves it 16-bit (module docstring; the input is taken at 16 bits)."""
    bits = {"input": True}
    for layer in layers:
        ins = [bits.get(t, True) for t in layer.inputs]
        if layer.kind in LOW_PRECISION_KINDS:
            bits[layer.name] = True
        elif layer.kind in FP32_KINDS:
            bits[layer.name] = False
        elif layer.kind in _PROMOTING:  # a parameter operand (a class token) is an fp32 tensor
            bits[layer.name] = all(ins) and not layer.params
        elif layer.kind == "const_op":  # a tensor operand promotes, a scalar does not
            bits[layer.name] = ins[0] and not layer.params and layer.attr("operand_elems", 1.0) <= 1
        else:
            bits[layer.name] = ins[0]
    return bits


def autocast_kernels(layers: Sequence[Layer], one_network: bool = True) -> AutocastKernels:
    """The autocast descriptors of ``layers``; ``one_network`` False (unrelated measured rows):
    no casts, every input taken as 16-bit."""
    L = len(layers)
    fp32 = np.array([la.kind in FP32_KINDS for la in layers], dtype=bool)
    softmax = np.array([la.kind == "softmax" for la in layers], dtype=bool)
    cast_in, cast_out, casts_out = np.zeros(L), np.zeros(L), np.zeros(L)
    if one_network:
        bits = sixteen_bit(layers)
        for i, layer in enumerate(layers):
            if fp32[i] and bits.get(layer.inputs[0], True):
                cast_in[i] = numel(layer.in_shape)
            if layer.kind in LOW_PRECISION_KINDS:
                down = [numel(s) for t, s in zip(layer.inputs, layer.in_shapes, strict=True)
                        if not bits.get(t, True)]
                cast_out[i], casts_out[i] = sum(down), len(down)
    else:
        cast_in = np.where(fp32, [float(numel(la.in_shape)) for la in layers], 0.0)
    return AutocastKernels(fp32, softmax, cast_in, cast_out, casts_out)


Memory = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def autocast_memory(ak: AutocastKernels, mem: Memory, dtype: str) -> tuple[Memory, np.ndarray]:
    """``mem`` (per sample: elements fwd, bwd at the precision, extra bytes fwd, bwd, launches fwd,
    bwd of every layer's memory kernels) under autocast to ``dtype`` (module docstring; ``""``:
    no autocast, ``mem`` unchanged), fp32 layers' elements as bytes at 4 per element and the casts'
    launches added; and the bytes per sample the casts move each way, which scale with the layers'
    inputs (not their outputs, as ``mem`` does)."""
    if not dtype:
        return mem, np.zeros_like(ak.cast_in)
    ef, eb, xf, xb, lf, lb = mem
    fused = ak.softmax & (ak.cast_in > 0) & (dtype == "float16")  # half_to_float: reads 16-bit x / writes 16-bit dx
    cast = np.where(fused, 0.0, ak.cast_in)
    moved = CAST_BYTES * (cast + ak.cast_out) - np.where(fused, 2.0 * ak.cast_in, 0.0)
    casts = (cast > 0) + ak.casts_out
    up_f, up_b = np.where(ak.fp32, FLOAT_BYTES * ef, 0.0), np.where(ak.fp32, FLOAT_BYTES * eb, 0.0)
    return (np.where(ak.fp32, 0.0, ef), np.where(ak.fp32, 0.0, eb), xf + up_f, xb + up_b, lf + casts, lb + casts), moved

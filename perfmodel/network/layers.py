"""The layer IR: one frozen dataclass per layer, with shapes per sample and its parameters."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import NetworkError

__all__ = ["Layer", "Shape", "KINDS", "ACTIVATIONS", "CONST_OPS", "MATMUL_KINDS", "numel"]

#: A per-sample tensor shape: (C, H, W) for images, (C, D, H, W) for volumes, (F,) for vectors.
Shape = tuple[int, ...]

#: Every layer kind the IR knows; the cost model dispatches on these.
KINDS = frozenset(
    {
        "conv",  # 1-D, 2-D or 3-D convolution (by the length of ``kernel``)
        "conv_transpose",
        "linear",
        "batchnorm",
        "act",  # elementwise activation, ``fn`` says which
        "maxpool",
        "avgpool",
        "adaptive_avgpool",
        "add",
        "mul",  # broadcast multiply (squeeze-and-excitation scaling)
        "concat",
        "flatten",
        "dropout",
        "upsample",
        "layernorm",  # over the trailing ``attr('norm_elems')`` elements of each position
        "groupnorm",  # ``attr('groups')`` groups of channels (instance norm: one per channel)
        "adaptive_maxpool",
        "mean",  # a reduction (e.g. global average pooling written as ``x.mean((2, 3))``)
        "view",  # reshape, permute, transpose, slice, expand: no arithmetic, shares its input's storage
        "matmul",  # a product of two activations (``a @ b``, ``bmm``), ``attr('k')`` contracted
        "softmax",
        "attention",  # scaled_dot_product_attention of (q, k, v); flash-style memory
        "const_op",  # ``fn`` (add/mul/sub/div) of one activation and a parameter or constant tensor
        "lrn",  # cross-channel local response normalisation over ``attr('size')`` channels
    }
)

#: Activation functions of ``kind == "act"``.
ACTIVATIONS = frozenset({
    "relu", "relu6", "silu", "sigmoid", "hardswish", "hardsigmoid", "gelu", "tanh", "leaky_relu", "elu",
    "mish", "softplus", "hardtanh",
})

#: Functions of ``kind == "const_op"``.
CONST_OPS = frozenset({"add", "mul", "sub", "div"})

#: Kinds whose FLOPs count as convolution / matrix-multiply FLOPs.
MATMUL_KINDS = frozenset({"conv", "conv_transpose", "linear", "matmul", "attention"})


def numel(shape: Shape) -> int:
    """Number of elements of a per-sample shape."""
    return math.prod(shape)


@dataclass(frozen=True)
class Layer:
    """One layer of a network, with per-sample shapes.

    ``inputs`` names the tensors it reads: ``"input"`` for the network's input, else the
    name of the producing layer (a layer produces exactly one tensor, named like it).
    ``block`` names the chain link the layer belongs to (a residual, inception or dense
    block is one link); layers outside any block are links of their own.
    """

    name: str
    kind: str
    inputs: tuple[str, ...]
    in_shapes: tuple[Shape, ...]
    out_shape: Shape
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    groups: int = 1
    bias: bool = False
    params: int = 0
    fn: str = ""
    inplace: bool = False
    block: str = ""
    attrs: tuple[tuple[str, float], ...] = field(default=())

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise NetworkError(f"layer {self.name}: unknown kind '{self.kind}' (valid: {sorted(KINDS)})")
        if self.kind == "act" and self.fn not in ACTIVATIONS:
            raise NetworkError(f"layer {self.name}: unknown activation '{self.fn}' (valid: {sorted(ACTIVATIONS)})")
        if self.kind == "const_op" and self.fn not in CONST_OPS:
            raise NetworkError(f"layer {self.name}: unknown constant op '{self.fn}' (valid: {sorted(CONST_OPS)})")
        if len(self.inputs) != len(self.in_shapes) or not self.inputs:
            raise NetworkError(f"layer {self.name}: {len(self.inputs)} inputs but {len(self.in_shapes)} shapes")
        if any(d <= 0 for s in (*self.in_shapes, self.out_shape) for d in s):
            raise NetworkError(
                f"layer {self.name}: non-positive extent in shapes {self.in_shapes} -> {self.out_shape}"
                " (the input is too small for this network)"
            )
        if self.params < 0 or self.groups < 1:
            raise NetworkError(
                f"layer {self.name}: params {self.params} and groups {self.groups} must be >= 0 and >= 1"
            )

    @property
    def in_shape(self) -> Shape:
        """Shape of the first input."""
        return self.in_shapes[0]

    @property
    def spatial_dims(self) -> int:
        """Number of spatial dimensions of the output (0 for vectors, 2 for images, 3 for volumes)."""
        return len(self.out_shape) - 1

    @property
    def out_elems(self) -> int:
        return numel(self.out_shape)

    def attr(self, key: str, default: float = 0.0) -> float:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

"""ONNX nodes as IR layers, by operator type."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NoReturn

from .emit import Const, Emitter, UnsupportedOp, operand_shape, per_sample
from .onnx_checks import OnnxGraphError

__all__ = ["Node", "node_layer", "VIEW_OPS"]

_ACTS = {
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "LeakyRelu": "leaky_relu", "Elu": "elu",
    "HardSwish": "hardswish", "HardSigmoid": "hardsigmoid", "Gelu": "gelu", "Softplus": "softplus", "Mish": "mish",
}
_VIEWS = frozenset({
    "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather", "Expand", "Identity", "Cast",
    "Flatten", "Tile",
})
#: The view nodes whose strides the reader follows (:mod:`.onnx_views`).
VIEW_OPS = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather", "Expand", "Identity",
                      "Flatten", "Split"})


@dataclass
class Node:
    """One ONNX node being imported: its inputs as refs (activation names or constants)."""

    op: str
    attrs: dict[str, Any]
    ins: list[Any]
    out_shapes: list[tuple[int, ...] | None]
    batch: int
    em: Emitter
    name: str
    path: tuple[str, ...]
    where: str
    #: the numpy values of constant inputs (None where unknown or not constant)
    values: list[Any]
    #: a reshape that copies (its input's strides cannot be regrouped: :mod:`.onnx_views`), or a
    #: linear whose input ``aten::matmul`` copies to fold it into rows (:func:`.strides.rows_copy`)
    copy: bool = False
    #: the node's input tensor names, for messages
    names: tuple[str, ...] = ()

    def emit(self, method: str, *args: Any, **kwargs: Any) -> str:
        return self.em.emit(self.path, method, *args, name=self.name, **kwargs)

    def x(self) -> str:
        return next(a for a in self.ins if isinstance(a, str))

    def out(self, k: int = 0) -> tuple[int, ...]:
        s = self.out_shapes[k]
        if s is None:
            raise UnsupportedOp(f"operator {self.op} at {self.where}: ONNX shape inference left its output unknown")
        return per_sample(s, self.batch, self.where)

    def const(self, k: int) -> Const | None:
        a = self.ins[k] if k < len(self.ins) else None
        return a if isinstance(a, Const) else None

    def refuse(self, k: int, shape: tuple[int, ...], needs: str) -> NoReturn:
        """A weight (input ``k``) that disagrees with the activation this node reads."""
        x = self.names[self.ins.index(self.x())] if self.names else "its input"
        raise OnnxGraphError(f"{self.where} ({self.op}): {'weight' if k == 1 else 'bias'} "
                             f"'{self.names[k] if self.names else k}' has shape {shape}, which {needs}; its input "
                             f"'{x}' has per-sample shape {self.em.builder.shape(self.x())}")

    def scalar(self, k: int, default: float, last: bool = False) -> float:
        """The first (or ``last``) element of constant input ``k``, else ``default``."""
        arr = self.values[k] if k < len(self.values) else None
        if arr is None or not arr.size:
            return default
        flat = arr.reshape(-1)
        return float(flat[-1] if last else flat[0])


def _pads(n: Node, nd: int) -> tuple[int, ...]:
    pads = list(n.attrs.get("pads", [0] * 2 * nd))
    if n.attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET") or pads[:nd] != pads[nd:]:
        raise UnsupportedOp(f"operator {n.op} at {n.where}: asymmetric or automatic padding {pads}")
    return tuple(pads[:nd])


def _conv(n: Node) -> str:
    w = n.const(1)
    if w is None or w.shape is None:
        raise UnsupportedOp(f"operator {n.op} at {n.where}: the weight is not a constant")
    n.em.new_params(w, *(c for c in [n.const(2)] if c))
    k = tuple(w.shape[2:])
    nd = len(k)
    g = int(n.attrs.get("group", 1))
    _check_conv(n, w.shape, g)
    s, d = tuple(n.attrs.get("strides", [1] * nd)), tuple(n.attrs.get("dilations", [1] * nd))
    bias = len(n.ins) > 2 and n.ins[2] is not None
    if n.op == "Conv":
        return n.emit("conv", n.x(), w.shape[0], k, s, _pads(n, nd), d, g, bias)
    op = tuple(n.attrs.get("output_padding", [0] * nd))
    return n.emit("conv_transpose", n.x(), w.shape[1] * g, k, s, _pads(n, nd), op, g, bias, d)


def _check_conv(n: Node, w: tuple[int, ...], g: int) -> None:
    """The weight's rank, its channels against the input's and the groups, the bias's length."""
    xs = n.em.builder.shape(n.x())
    if len(w) != len(xs) + 1:
        n.refuse(1, w, f"is for a {len(w) - 2}-D convolution (rank {len(w)})")
    cin, out = (w[1] * g, w[0]) if n.op == "Conv" else (w[0], w[1] * g)
    if g < 1 or xs[0] != cin:
        per = f"{w[1]} per group x {g} group{'s' * (g != 1)}" if n.op == "Conv" else "its first dimension"
        n.refuse(1, w, f"needs {cin} input channels ({per})")
    if n.op == "Conv" and out % g:
        n.refuse(1, w, f"gives {out} output channels, not divisible by {g} groups")
    b = n.const(2)
    if b is not None and b.shape is not None and tuple(b.shape) != (out,):
        n.refuse(2, tuple(b.shape), f"should be ({out},), one per output channel")


def _linear(n: Node) -> str:
    w = n.const(1)
    if w is None or w.shape is None or len(w.shape) != 2:
        if n.op == "MatMul" and isinstance(n.ins[1], str):
            return n.emit("matmul", n.ins[0], n.ins[1])
        raise UnsupportedOp(f"operator {n.op} at {n.where}: a product with a constant left operand")
    extra = [c for c in [n.const(2)] if c]
    trans = n.op == "Gemm" and n.attrs.get("transB", 0)
    x = n.x()
    inner = w.shape[1] if trans else w.shape[0]
    if n.em.builder.shape(x)[-1] != inner:
        n.refuse(1, tuple(w.shape), f"multiplies vectors of {inner} features{' (transB=1)' if trans else ''}")
    n.em.new_params(w, *extra)
    if n.copy:  # aten::matmul copies tokens it cannot fold into the GEMM's rows as a view
        x = n.em.emit(n.path, "view", x, n.em.builder.shape(x), copy=True, name=f"{n.name}.in_copy")
    return n.emit("linear", x, w.shape[0] if trans else w.shape[1], bool(extra))


def _arith(n: Node) -> str:
    a, b = n.ins[0], n.ins[1]
    if isinstance(a, str) and isinstance(b, str):
        return n.emit("add", a, b) if n.op in ("Add", "Sub") else n.emit("mul", a, b)
    k = b if isinstance(a, str) else a
    rank = len(n.out_shapes[0] or ())
    assert isinstance(k, Const)
    return n.emit("const_op", n.x(), n.op.lower(), operand_shape(k, rank), n.em.new_params(k))


def _norm(n: Node) -> str:
    x = n.x()
    if n.op == "BatchNormalization":
        n.em.new_params(*(c for c in (n.const(1), n.const(2)) if c))
        return n.emit("bn", x, True)
    params = n.em.new_params(*(c for c in (n.const(1), n.const(2)) if c))
    shape = n.em.builder.shape(x)
    if n.op == "LayerNormalization":
        axis = int(n.attrs.get("axis", -1))
        axis = axis % (len(shape) + 1) - 1  # per-sample axis
        return n.emit("norm", x, "layernorm", params, math.prod(shape[axis:]))
    groups = int(n.attrs.get("num_groups", shape[0])) if n.op == "GroupNormalization" else shape[0]
    return n.emit("norm", x, "groupnorm", params, 0, groups)


def _concat(n: Node) -> str:
    rank = len(n.out_shapes[0] or ())
    axis = int(n.attrs.get("axis", 1)) % rank - 1
    if axis < 0:
        raise UnsupportedOp(f"operator Concat at {n.where}: concatenating along the batch dimension")
    acts = [a for a in n.ins if isinstance(a, str)]
    consts = [a for a in n.ins if isinstance(a, Const)]
    extent = sum(operand_shape(c, rank)[axis] for c in consts)
    return n.emit("concat", acts, dim=axis, const_extent=extent, params=n.em.new_params(*consts))


def _pool(n: Node) -> str:
    k = tuple(n.attrs["kernel_shape"])
    nd = len(k)
    s = tuple(n.attrs.get("strides", [1] * nd))
    ceil = bool(n.attrs.get("ceil_mode", 0))
    if n.op == "MaxPool":
        return n.emit("maxpool", n.x(), k, s, _pads(n, nd), tuple(n.attrs.get("dilations", [1] * nd)), ceil)
    return n.emit("avgpool", n.x(), k, s, _pads(n, nd), ceil)


def node_layer(n: Node) -> Any:
    """The IR layer(s) of ONNX node ``n`` (a tuple for several outputs)."""
    op, x = n.op, n.x()
    if op in ("Conv", "ConvTranspose"):
        return _conv(n)
    if op in ("Gemm", "MatMul"):
        return _linear(n)
    if op in ("Add", "Sub", "Mul", "Div"):
        return _arith(n)
    if op in ("BatchNormalization", "LayerNormalization", "GroupNormalization", "InstanceNormalization"):
        return _norm(n)
    if op in _ACTS:
        return n.emit("act", x, _ACTS[op])
    if op == "Clip":
        lo, hi = n.scalar(1, float(n.attrs.get("min", -math.inf))), n.scalar(2, float(n.attrs.get("max", math.inf)))
        return n.emit("act", x, "relu6" if (lo, hi) == (0.0, 6.0) else "hardtanh")
    if op == "Dropout":
        ratio = n.scalar(1, float(n.attrs.get("ratio", 0.5)))
        training = n.scalar(2, 0.0)
        return n.emit("dropout", x, ratio) if ratio and training else x
    if op in ("MaxPool", "AveragePool"):
        return _pool(n)
    if op in ("GlobalAveragePool", "GlobalMaxPool"):
        return n.emit("adaptive_avgpool" if op == "GlobalAveragePool" else "adaptive_maxpool", x, 1)
    if op in ("ReduceMean", "ReduceSum", "ReduceMax"):
        return n.emit("mean", x, n.out())
    if op == "Concat":
        return _concat(n)
    if op == "Flatten" and int(n.attrs.get("axis", 1)) == 1 and not n.copy:
        return n.emit("flatten", x)
    if op in _VIEWS:
        return n.emit("view", x, n.out(), copy=n.copy)
    if op == "Split":
        return tuple(n.em.emit(n.path, "view", x, n.out(k), name=f"{n.name}.{k}", piece=k)
                     for k in range(len(n.out_shapes)))
    if op in ("Softmax", "LogSoftmax"):
        return n.emit("softmax", x)
    if op in ("Resize", "Upsample"):
        ins = n.em.builder.shape(x)
        scale = n.out()[-1] // ins[-1] if n.out_shapes[0] else int(n.scalar(2 if op == "Resize" else 1, 0.0, last=True))
        if scale < 1:
            raise UnsupportedOp(f"operator {op} at {n.where}: its scale is not a constant")
        mode = n.attrs.get("mode", b"nearest")
        return n.emit("upsample", x, scale, "bilinear" if mode in (b"linear", "linear") else "nearest")
    hint = " (export with opset_version >= 20 so that GELU is one Gelu node)" if op == "Erf" else ""
    raise UnsupportedOp(f"operator {op} at {n.where} cannot be priced by perfmodel's IR{hint}")

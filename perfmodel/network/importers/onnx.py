"""An ONNX graph read with the ``onnx`` package (shapes by ONNX's inference) into the network IR; no torch."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ...errors import DataError, UsageError
from ..builder import NetBuilder
from ..graph import Network
from ..layers import Shape
from .emit import TRACE_BATCH, Const, Emitter, UnsupportedOp, per_sample
from .onnx_fold import Folder
from .onnx_ops import Node, node_layer

__all__ = ["import_onnx", "ONNX_MISSING"]

ONNX_MISSING = "needs the onnx package to read an ONNX file: pip install 'perfmodel[onnx]'"


def _onnx() -> Any:
    try:
        import onnx
        import onnx.numpy_helper
        import onnx.reference
        import onnx.shape_inference
    except ImportError:
        raise DataError(ONNX_MISSING) from None
    return onnx


def import_onnx(
    path: Path, image_size: int | None = None, in_channels: int | None = None, input_shape: Shape | None = None
) -> Network:
    """The network of the ONNX file ``path``; dynamic input extents take the given sizes."""
    onnx = _onnx()
    try:
        model = onnx.load(str(path))
    except Exception as e:
        raise DataError(f"cannot read ONNX file '{path}': {type(e).__name__}: {e}") from None
    g = model.graph
    inits = {t.name: tuple(t.dims) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if len(inputs) != 1:
        raise DataError(f"{path}: the graph has {len(inputs)} inputs; perfmodel prices networks with one input")
    sample = _input_shape(path, inputs[0], image_size, in_channels, input_shape)
    batch = inputs[0].type.tensor_type.shape.dim[0]
    b = batch.dim_value or TRACE_BATCH
    batch.Clear()
    batch.dim_value = b
    for d, v in zip(inputs[0].type.tensor_type.shape.dim[1:], sample, strict=True):
        d.Clear()
        d.dim_value = v
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True).graph
    except Exception as e:
        raise DataError(f"{path}: ONNX shape inference failed: {type(e).__name__}: {e}") from None
    shapes: dict[str, tuple[int, ...] | None] = dict(inits)
    types = {t.name: t.data_type for t in g.initializer}
    for vi in (*inferred.value_info, *inferred.output, *inferred.input):
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = tuple(d.dim_value for d in dims) if all(d.dim_value > 0 for d in dims) else None
        types[vi.name] = vi.type.tensor_type.elem_type
    name = path.stem
    em = Emitter(NetBuilder(name, sample, source=f"imported from {path}"))
    refs: dict[str, Any] = {inputs[0].name: "input"}
    for i, t in enumerate(g.initializer):
        refs[t.name] = Const(t, inits[t.name], ((i, math.prod(inits[t.name])),))
    try:
        _walk(onnx, g, refs, Folder(onnx, model, shapes, types), b, em)
    except UnsupportedOp as e:
        raise UnsupportedOp(f"{path}: {e}") from None
    return em.network()


#: Ops whose result depends on their input's shape only, not on its values.
_SHAPE_OPS = frozenset({"Shape", "Size", "EyeLike"})


def _input_shape(path: Path, inp: Any, image_size: int | None, in_channels: int | None,
                 input_shape: Shape | None) -> Shape:
    """The per-sample input: the file's extents, with dynamic ones from the options (224 default)."""
    dims = list(inp.type.tensor_type.shape.dim)[1:]
    fixed = [d.dim_value if d.dim_value > 0 else None for d in dims]
    want: list[int | None] = list(input_shape) if input_shape is not None else \
        [in_channels, *([image_size] * (len(fixed) - 1))]
    if len(want) != len(fixed):
        raise UsageError(f"{path}: the input has {len(fixed)} dimensions per sample, --input-shape gives {len(want)}")
    out = []
    for k, (f, w) in enumerate(zip(fixed, want, strict=True)):
        if f is not None and w is not None and f != w:
            raise UsageError(f"{path}: input dimension {k + 1} is fixed at {f} in the file, not {w}")
        out.append(f if f is not None else w if w is not None else (3 if k == 0 else 224))
    return tuple(out)


def _proto(onnx: Any, v: Any) -> Any:
    return None if v is None else onnx.numpy_helper.from_array(v)


def _consumers(g: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for n in g.node:
        for t in n.input:
            out.setdefault(t, []).append(n)
    return out


def _bias_add(n: Any, ins: list[Any], refs: dict[str, Any],
              consumers: dict[str, list[Any]]) -> tuple[Any, Const] | None:
    """``(Add node, bias)`` where ``n`` is the ``MatMul`` of an activation by a 2-D constant whose
    only reader adds a 1-D constant of its output width: how torch.onnx exports ``nn.Linear`` on
    inputs of more than two dimensions (``MatMul`` + ``Add``; ``Gemm`` carries the bias on 2-D ones)."""
    if n.op_type != "MatMul" or len(ins) != 2 or not isinstance(ins[0], str):
        return None
    w = ins[1]
    readers = consumers.get(n.output[0], [])
    if not isinstance(w, Const) or w.shape is None or len(w.shape) != 2 or len(readers) != 1:
        return None
    add = readers[0]
    if add.op_type != "Add" or len(add.input) != 2:
        return None
    other = next((t for t in add.input if t != n.output[0]), None)
    b = refs.get(other) if other else None
    if not isinstance(b, Const) or b.shape is None or tuple(b.shape) != (w.shape[1],):
        return None
    return add, b


def _sdpa(g: Any, consumers: dict[str, list[Any]]) -> tuple[dict[str, tuple[str, str, str]], set[str]]:
    """torch.onnx's spelling of ``scaled_dot_product_attention``: ``Mul(q, Sqrt(scale))`` and
    ``Mul(Transpose(k), Sqrt(scale))`` (the scale split over both operands), ``MatMul``, ``Softmax``,
    ``MatMul`` by ``v``. Returns the last ``MatMul``'s output -> ``(q, k, v)`` tensor names, and the
    outputs of the other nodes, which the fused layer replaces. A product written out in the
    module (scaled after the ``MatMul``, or by a constant) does not match and stays explicit."""
    producer = {t: n for n in g.node for t in n.output}

    def only(t: str) -> Any:
        readers = consumers.get(t, [])
        return readers[0] if len(readers) == 1 else None

    def scaled(t: str) -> str | None:  # the activation a Mul(x, Sqrt(...)) read by one node scales
        mul = producer.get(t)
        if mul is None or mul.op_type != "Mul" or len(mul.input) != 2 or only(t) is None:
            return None
        kinds = [getattr(producer.get(x), "op_type", "") for x in mul.input]
        return mul.input[1 - kinds.index("Sqrt")] if kinds.count("Sqrt") == 1 else None

    found: dict[str, tuple[str, str, str]] = {}
    replaced: set[str] = set()
    for s in g.node:
        m1, m2 = producer.get(s.input[0]) if s.op_type == "Softmax" else None, only(s.output[0])
        if m1 is None or m1.op_type != "MatMul" or only(m1.output[0]) is not s or m2 is None:
            continue
        if m2.op_type != "MatMul" or m2.input[0] != s.output[0]:
            continue
        q, kt = scaled(m1.input[0]), scaled(m1.input[1])
        tr = producer.get(kt) if kt else None
        perm = list(next((a.ints for a in tr.attribute if a.name == "perm"), [])) if tr is not None else []
        if q is None or tr is None or tr.op_type != "Transpose" or only(kt or "") is None or len(perm) < 2:
            continue
        if perm[-2:] != [len(perm) - 1, len(perm) - 2] or perm[:-2] != list(range(len(perm) - 2)):
            continue
        found[m2.output[0]] = (q, tr.input[0], m2.input[1])
        replaced |= {m1.input[0], m1.input[1], tr.output[0], m1.output[0], s.output[0]}
    return found, replaced


def _walk(onnx: Any, g: Any, refs: dict[str, Any], fold: Folder, batch: int, em: Emitter) -> None:
    shapes = fold.shapes
    consumers = _consumers(g)
    fused: dict[str, str] = {}  # Mul output -> fused activation, for x * sigmoid(x)
    skip: set[str] = set()
    for n in g.node:
        if n.op_type in ("Sigmoid", "HardSigmoid") and len(consumers.get(n.output[0], [])) == 1:
            m = consumers[n.output[0]][0]
            if m.op_type == "Mul" and set(m.input) == {n.input[0], n.output[0]}:
                fused[m.output[0]] = "silu" if n.op_type == "Sigmoid" else "hardswish"
                skip.add(n.output[0])
    attention, replaced = _sdpa(g, consumers)
    skip |= replaced
    taken: set[str] = set()
    alias: dict[str, str] = {}  # a bias Add's output -> the MatMul output it is folded into
    for i, n in enumerate(g.node):
        ins = [refs.get(t) if t else None for t in n.input]
        if n.output[0] in skip:
            continue
        if n.output[0] in alias:
            refs[n.output[0]] = refs[alias[n.output[0]]]
            continue
        bias = _bias_add(n, ins, refs, consumers)
        if bias is not None:  # nn.Linear exported as MatMul + Add: one linear layer with its bias
            add, const = bias
            alias[add.output[0]] = n.output[0]
            ins = [*ins, const]
        if not any(isinstance(a, str) for a in ins) or n.op_type in _SHAPE_OPS:
            fold.constant_node(n)
            for t in n.output:
                refs[t] = Const(_proto(onnx, fold.values.get(t)), shapes.get(t),
                                tuple(p for a in ins if isinstance(a, Const) for p in a.params))
            continue
        fold.infer(n)
        comps = [c for c in n.name.split("/") if c] or [f"{n.op_type}_{i}"]
        lname = "/".join(comps)
        while lname in taken:
            lname += "'"
        taken.add(lname)
        path = tuple("/".join(comps[: k + 1]) for k in range(len(comps) - 1))
        node = Node(n.op_type, {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}, ins,
                    [shapes.get(t) for t in n.output], batch, em, lname, path, f"node '{n.name or lname}'",
                    [fold.value(t) if t else None for t in n.input])
        if n.output[0] in fused:
            out: Any = node.emit("act", next(a for a in ins if isinstance(a, str)), fused[n.output[0]])
        elif n.output[0] in attention:
            out = node.emit("attention", *(refs[t] for t in attention[n.output[0]]))
        else:
            out = node_layer(node)
        outs = out if isinstance(out, tuple) else (out,)
        for t, o in zip(n.output, outs, strict=False):
            refs[t] = o
            known = shapes.get(t)
            if isinstance(o, str) and o != "input" and known:
                em.check(o, per_sample(known, batch, node.where), node.where)
            elif isinstance(o, str) and o != "input":
                shapes[t] = (batch, *em.builder.shape(o))
        for t in n.output[len(outs):]:
            refs[t] = Const(None, shapes.get(t))


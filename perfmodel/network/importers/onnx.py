"""An ONNX graph read with the ``onnx`` package (shapes by ONNX's inference) into the network IR; no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import DataError, UsageError
from ...limits import MAX_IMAGE_SIZE
from ..builder import NetBuilder
from ..graph import Network
from ..layers import Shape
from .emit import TRACE_BATCH, Const, Emitter, UnsupportedOp, per_sample
from .mha import MhaCall, emit_self_attention
from .onnx_checks import OnnxGraphError, check_operands, check_opset, load_model, topological
from .onnx_fold import Folder
from .onnx_mha import MhaMatch, find_mha
from .onnx_ops import VIEW_OPS, Node, node_layer
from .onnx_views import Layouts, unbinds
from .strides import contiguous, permuted, rows_copy

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
    model = load_model(onnx, path)
    check_opset(onnx, path, model)
    g = model.graph
    inits = {t.name: tuple(t.dims) for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    if not inputs:
        what = "is empty (no operators, no inputs)" if not g.node else "has no input (every tensor is a constant)"
        raise DataError(f"{path}: the graph {what}; perfmodel prices networks with one input")
    if len(inputs) != 1:
        raise DataError(f"{path}: the graph has {len(inputs)} inputs; perfmodel prices networks with one input")
    topological(path, g, {i.name for i in g.input} | set(inits))
    sample, dynamic = _input_shape(path, inputs[0], image_size, in_channels, input_shape)
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
        dims = vi.type.tensor_type.shape.dim  # no shape field: the rank is unknown, not a scalar
        known = vi.type.tensor_type.HasField("shape") and all(d.dim_value > 0 for d in dims)
        shapes[vi.name] = tuple(d.dim_value for d in dims) if known else None
        types[vi.name] = vi.type.tensor_type.elem_type
    name = path.stem
    em = Emitter(NetBuilder(name, sample, source=f"imported from {path}{dynamic}"))
    refs: dict[str, Any] = {inputs[0].name: "input"}
    for i, t in enumerate(g.initializer):
        refs[t.name] = Const(t, inits[t.name], ((i, math.prod(inits[t.name])),))
    try:
        _walk(onnx, g, refs, Folder(onnx, model, shapes, types), b, em)
    except (UnsupportedOp, OnnxGraphError) as e:
        raise type(e)(f"{path}: {e}") from None
    return em.network()


#: Ops whose result depends on their input's shape only, not on its values.
_SHAPE_OPS = frozenset({"Shape", "Size", "EyeLike"})


def _input_shape(path: Path, inp: Any, image_size: int | None, in_channels: int | None,
                 input_shape: Shape | None) -> tuple[Shape, str]:
    """The per-sample input: the file's extents, with dynamic ones from the options (3 channels and
    224 by default); and the words the network's source adds naming the dynamic ones."""
    dims = list(inp.type.tensor_type.shape.dim)
    if len(dims) < 2:
        what = f"rank {len(dims)}" if inp.type.tensor_type.HasField("shape") else "no shape"
        raise DataError(f"{path}: input '{inp.name}' has {what}; perfmodel needs a batch dimension "
                        "and at least one per-sample dimension")
    for k, d in enumerate(dims):
        if d.HasField("dim_value") and not 0 < d.dim_value <= (MAX_IMAGE_SIZE if k else d.dim_value):
            valid = f"1 to {MAX_IMAGE_SIZE:,}" if k else "1 or more, or a symbolic batch"
            raise DataError(f"{path}: input '{inp.name}' dimension {k} is {d.dim_value:,} in the file "
                            f"(valid: {valid})")
    fixed = [d.dim_value if d.HasField("dim_value") else None for d in dims[1:]]
    want: list[int | None] = list(input_shape) if input_shape is not None else \
        [in_channels, *([image_size] * (len(fixed) - 1))]
    if len(want) != len(fixed):
        raise UsageError(f"{path}: the input has {len(fixed)} dimensions per sample, --input-shape gives {len(want)}")
    out: list[int] = []
    taken: dict[str, str] = {}  # each dynamic dimension's words -> where its extent came from
    for k, (f, w) in enumerate(zip(fixed, want, strict=True)):
        if f is not None and w is not None and f != w:
            raise UsageError(f"{path}: input dimension {k + 1} is fixed at {f} in the file, not {w}")
        out.append(f if f is not None else w if w is not None else (3 if k == 0 else 224))
        if f is None:
            taken[f"{dims[k + 1].dim_param or f'dimension {k + 1}'}={out[-1]}"] = \
                "--input-shape" if input_shape is not None else "default" if w is None else \
                "--in-channels" if k == 0 else "--image-size"
    return tuple(out), _dynamic_words(taken)


def _dynamic_words(taken: dict[str, str]) -> str:
    """``; dynamic input dimensions H=224, W=224 (...)``: what the source says of them."""
    if not taken:
        return ""
    origins = set(taken.values())
    dims = ", ".join(taken) if len(origins) == 1 else ", ".join(f"{d} ({o})" for d, o in taken.items())
    said = f"; dynamic input dimensions {dims}"
    if "default" in origins:
        return said + " (perfmodel's default: --image-size, --in-channels or --input-shape set them)"
    return said + (f" (from {origins.pop()})" if len(origins) == 1 else "")


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
    ``Dropout`` with ``dropout_p > 0`` (inside the fused kernel), ``MatMul`` by ``v``. Returns the
    last ``MatMul``'s output -> ``(q, k, v)`` tensor names, and the outputs of the other nodes,
    which the fused layer replaces. A product written out in the module (scaled after the
    ``MatMul``, or by a constant) does not match and stays explicit."""
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
        drop = m2 if m2.op_type == "Dropout" else None  # dropout_p > 0 in training: inside the fused kernel
        m2 = only(drop.output[0]) if drop is not None else m2
        if m2 is None or m2.op_type != "MatMul" or m2.input[0] != (drop or s).output[0]:
            continue
        q, kt = scaled(m1.input[0]), scaled(m1.input[1])
        tr = producer.get(kt) if kt else None
        perm = list(next((a.ints for a in tr.attribute if a.name == "perm"), [])) if tr is not None else []
        if q is None or tr is None or tr.op_type != "Transpose" or only(kt or "") is None or len(perm) < 2:
            continue
        if perm[-2:] != [len(perm) - 1, len(perm) - 2] or perm[:-2] != list(range(len(perm) - 2)):
            continue
        found[m2.output[0]] = (q, tr.input[0], m2.input[1])
        replaced |= {m1.input[0], m1.input[1], tr.output[0], m1.output[0], s.output[0], *(drop.output if drop else ())}
    return found, replaced


@dataclass
class _Reading:
    """What the walk knows beyond the refs: fused spellings found up front, layouts, names."""

    fused: dict[str, str]  # Mul output -> fused activation, for x * sigmoid(x)
    skip: set[str]
    attention: dict[str, tuple[str, str, str]]
    mha: dict[str, MhaMatch]  # by exit tensor
    unbound: dict[str, str]  # Squeeze output -> Split output (unbind)
    layouts: Layouts
    alias: dict[str, str] = field(default_factory=dict)  # a bias Add's output -> its MatMul's
    taken: set[str] = field(default_factory=set)


def _prepare(onnx: Any, g: Any, consumers: dict[str, list[Any]], shapes: dict[str, Any]) -> _Reading:
    fused: dict[str, str] = {}
    skip: set[str] = set()
    for n in g.node:
        if n.op_type in ("Sigmoid", "HardSigmoid") and len(consumers.get(n.output[0], [])) == 1:
            m = consumers[n.output[0]][0]
            if m.op_type == "Mul" and set(m.input) == {n.input[0], n.output[0]}:
                fused[m.output[0]] = "silu" if n.op_type == "Sigmoid" else "hardswish"
                skip.add(n.output[0])
    attention, replaced = _sdpa(g, consumers)
    mha = {m.exit: m for m in find_mha(onnx, g, consumers, attention, shapes)}
    for m in mha.values():
        skip |= m.inside
    return _Reading(fused, skip | replaced, attention, mha, unbinds(g, consumers, shapes), Layouts(shapes))


def _name(n: Any, i: int, taken: set[str]) -> tuple[str, tuple[str, ...]]:
    """A unique layer name from the node's scope name, and its module path."""
    comps = [c for c in n.name.split("/") if c] or [f"{n.op_type}_{i}"]
    lname = "/".join(comps)
    while lname in taken:
        lname += "'"
    taken.add(lname)
    return lname, tuple("/".join(comps[: k + 1]) for k in range(len(comps) - 1))


def _mha_layers(m: MhaMatch, refs: dict[str, Any], r: _Reading, em: Emitter, i: int) -> str:
    """The layers eager PyTorch runs for one exported ``nn.MultiheadAttention`` (:mod:`.mha`)."""
    consts = [refs[t] for t in m.params if t and isinstance(refs.get(t), Const)]
    em.new_params(*consts)
    st, shape = r.layouts.of(m.x), r.layouts.shapes.get(m.x)
    if st is not None and shape is not None and m.batch_first:
        st, shape = permuted(st, (1, 0, 2)), tuple(permuted(shape, (1, 0, 2)))
    copy_input = st is not None and shape is not None and rows_copy(shape, st)
    spec = MhaCall(m.embed, m.heads, bool(m.params[1]), bool(m.params[3]), m.need_weights,
                   dropout=m.dropout, copy_input=copy_input)
    base = m.scope or f"MultiheadAttention_{i}"
    path = tuple("/".join(base.split("/")[: k + 1]) for k in range(base.count("/") + 1))
    out, _ = emit_self_attention(em, path, base, refs[m.x], spec)
    full = r.layouts.shapes.get(m.exit)
    if m.exit_transposed and full is not None and len(full) == 3:  # torch returns the transposed view
        r.layouts.strides[m.exit] = permuted(contiguous(permuted(full, (1, 0, 2))), (1, 0, 2))
    return out


def _walk(onnx: Any, g: Any, refs: dict[str, Any], fold: Folder, batch: int, em: Emitter) -> None:
    shapes = fold.shapes
    consumers = _consumers(g)
    r = _prepare(onnx, g, consumers, shapes)
    for i, n in enumerate(g.node):
        ins = [refs.get(t) if t else None for t in n.input]
        if n.output[0] in r.skip:
            continue
        if n.output[0] in r.alias or n.output[0] in r.unbound:
            src = r.alias.get(n.output[0]) or r.unbound[n.output[0]]
            refs[n.output[0]] = refs[src]
            r.layouts.view(n.op_type, {}, src, n.output[:1])
            continue
        if n.output[0] in r.mha:  # the module's layers, emitted at the node writing its output
            ins = [_mha_layers(r.mha[n.output[0]], refs, r, em, i)]
        bias = _bias_add(n, ins, refs, consumers)
        if bias is not None:  # nn.Linear exported as MatMul + Add: one linear layer with its bias
            add, const = bias
            r.alias[add.output[0]] = n.output[0]
            ins = [*ins, const]
        if not any(isinstance(a, str) for a in ins) or n.op_type in _SHAPE_OPS:
            fold.constant_node(n)
            for t in n.output:
                refs[t] = Const(_proto(onnx, fold.values.get(t)), shapes.get(t),
                                tuple(p for a in ins if isinstance(a, Const) for p in a.params))
            continue
        fold.infer(n)
        outs = _layers(onnx, n, i, ins, refs, fold, batch, em, r)
        for t, o in zip(n.output, outs, strict=False):
            refs[t] = o
            known = shapes.get(t)
            if isinstance(o, str) and o != "input" and known:
                em.check(o, per_sample(known, batch, f"node '{n.name or t}'"), f"node '{n.name or t}'")
            elif isinstance(o, str) and o != "input":
                shapes[t] = (batch, *em.builder.shape(o))
        for t in n.output[len(outs):]:
            refs[t] = Const(None, shapes.get(t))


def _layers(onnx: Any, n: Any, i: int, ins: list[Any], refs: dict[str, Any], fold: Folder, batch: int,
            em: Emitter, r: _Reading) -> tuple[Any, ...]:
    """The IR layers of one node reading an activation; its outputs' refs."""
    if n.output[0] in r.mha:
        return (ins[0],)
    shapes = fold.shapes
    lname, path = _name(n, i, r.taken)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
    values = [fold.value(t) if t else None for t in n.input]
    x = next((t for t, a in zip(n.input, ins, strict=False) if isinstance(a, str)), "")
    check_operands(onnx, n, x, fold.types, f"node '{n.name or lname}'")
    copy = r.layouts.view(n.op_type, attrs, x, n.output, values) \
        if n.op_type in VIEW_OPS else n.op_type == "MatMul" and r.layouts.rows_copy(x)
    out_shapes = [shapes.get(t) for t in n.output]
    if n.op_type == "Split":  # pieces of an unbind: emitted squeezed
        squeezed = {v: k for k, v in r.unbound.items()}
        out_shapes = [shapes.get(squeezed.get(t, t)) for t in n.output]
    node = Node(n.op_type, attrs, ins, out_shapes, batch, em, lname, path, f"node '{n.name or lname}'",
                values, copy, tuple(n.input))
    if n.output[0] in r.fused:
        out: Any = node.emit("act", node.x(), r.fused[n.output[0]])
    elif n.output[0] in r.attention:
        q, k, v = r.attention[n.output[0]]
        out = node.emit("attention", refs[q], refs[k], refs[v])
        r.layouts.attention(q, n.output[0])
    else:
        out = node_layer(node)
    return out if isinstance(out, tuple) else (out,)

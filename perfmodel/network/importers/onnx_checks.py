"""What the ONNX reader refuses before and while it reads a graph, each in one line naming what is
wrong: a file over protobuf's 2 GiB limit, external data outside the model's folder or past the
end of its file, an opset newer than the installed onnx knows, a node reading a tensor nothing
defines, a cycle, and string or integer tensors where training reads floating-point ones."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import DataError, NetworkError
from ...io import check_range, read_bounded, read_range

__all__ = ["MAX_ONNX_BYTES", "MAX_FOLD_ELEMS", "OnnxGraphError", "load_model", "check_opset", "topological",
           "check_operands", "type_name"]

#: protobuf's limit for one serialized message: the file of one ``ModelProto``.
MAX_ONNX_BYTES = 1 << 31
#: Constant subgraphs larger than this are not evaluated (only shape arithmetic needs folding),
#: and external tensors larger than this are not read (a weight's shape is all the reader needs).
MAX_FOLD_ELEMS = 1_000_000
#: The operators whose every operand (input, weight, bias) training reads as floating point.
_PRODUCTS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
#: Those that only move or index values: integer tensors pass (token ids into a Gather, a Cast).
_MOVES = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather", "Expand", "Identity",
                    "Cast", "Flatten", "Tile", "Split", "Concat"})
_SUB_BYTE = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2}


class OnnxGraphError(NetworkError):
    """An ONNX node whose tensors disagree (a weight's shape or type against its input); the
    reader puts the file's path in front."""


def type_name(onnx: Any, elem_type: int) -> str:
    try:
        return str(onnx.TensorProto.DataType.Name(elem_type))
    except ValueError:
        return f"type {elem_type}"


def load_model(onnx: Any, path: Path) -> Any:
    """The ``ModelProto`` in ``path`` (at most 2 GiB), its small external tensors read in (bounded)."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # read_bounded says why
    if size > MAX_ONNX_BYTES:
        raise DataError(f"cannot read ONNX file '{path}': {size:,} bytes, over protobuf's limit of "
                        f"{MAX_ONNX_BYTES:,} (2 GiB) for one model; a larger model keeps its weights in "
                        "external data files (torch.onnx.export(..., external_data=True), "
                        "onnx.save_model(..., save_as_external_data=True))")
    data = read_bounded(path, MAX_ONNX_BYTES, "an ONNX file")
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:
        raise DataError(f"cannot read ONNX file '{path}': {type(e).__name__}: {e}") from None
    _external(onnx, model, path)
    return model


def _tensors(g: Any) -> Iterator[Any]:
    yield from g.initializer
    for n in g.node:
        for a in n.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors


def _nbytes(onnx: Any, t: Any) -> int | None:
    """The bytes of ``t``'s values by its shape and type; None for strings and unknown types."""
    name = type_name(onnx, t.data_type)
    try:
        bits = _SUB_BYTE.get(name) or 8 * onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except Exception:
        return None
    return None if name in ("STRING", "UNDEFINED") else -(-math.prod(t.dims) * bits // 8)


def _external(onnx: Any, model: Any, path: Path) -> None:
    """Checks every tensor holds the values its shape needs: inline, or in an external file under
    the model's folder, not read for a weight (only its shape is needed); external tensors small
    enough to be folded (shape arithmetic) are read in, 2 GiB at most in all."""
    base = path.resolve().parent
    budget = MAX_ONNX_BYTES
    for t in _tensors(model.graph):
        where = f"{path}: tensor '{t.name}' of shape {tuple(t.dims)} and type {type_name(onnx, t.data_type)}"
        if any(d < 0 for d in t.dims):
            raise DataError(f"{where}: a negative dimension")
        if not onnx.external_data_helper.uses_external_data(t):
            _check_inline(onnx, t, where)
            continue
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        f = (base / loc).resolve()
        if not loc or Path(loc).is_absolute() or not f.is_relative_to(base):
            raise DataError(f"{where}: its external data file '{loc}' is not under the model's folder {base}")
        need = _nbytes(onnx, t)
        try:
            offset, length = int(info.get("offset") or 0), int(info.get("length") or (need or 0))
        except ValueError:
            raise DataError(f"{where}: external data offset {info.get('offset')!r} or length "
                            f"{info.get('length')!r} is not a number") from None
        if need is None or length != need:
            raise DataError(f"{where}: {length:,} bytes of external data, its values take "
                            f"{'no fixed size' if need is None else f'{need:,}'}")
        what = f"the external data of tensor '{t.name}' ({path.name})"
        if math.prod(t.dims) > MAX_FOLD_ELEMS:  # a weight: its shape is all the reader needs
            check_range(f, offset, length, what)  # the file holds it; nothing is read
            continue
        t.raw_data = read_range(f, offset, length, budget, what)
        budget -= length
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]


def _check_inline(onnx: Any, t: Any, where: str) -> None:
    """Refuses a tensor stored in the file with fewer or more values than its shape holds."""
    name, n = type_name(onnx, t.data_type), math.prod(t.dims)
    if t.HasField("raw_data"):
        need = _nbytes(onnx, t)
        if need is not None and len(t.raw_data) != need:
            raise DataError(f"{where}: {len(t.raw_data):,} bytes of data, its values take {need:,}")
        return
    try:
        stored = len(getattr(t, onnx.helper.tensor_dtype_to_field(t.data_type)))
    except Exception:
        return  # a type onnx does not know: its operators refuse it
    per = 2 if name.startswith("COMPLEX") else 1
    if name not in _SUB_BYTE and stored != n * per:
        raise DataError(f"{where}: {stored:,} values stored, its shape holds {n * per:,}")


def check_opset(onnx: Any, path: Path, model: Any) -> None:
    """Refuses an ONNX opset the installed onnx does not know (its operators' shapes are unknown)."""
    newest = int(onnx.defs.onnx_opset_version())
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and not 1 <= o.version <= newest:
            raise DataError(f"{path}: the model imports ONNX opset {o.version}, but the installed onnx "
                            f"{onnx.__version__} knows opsets 1 to {newest} (export with an opset_version "
                            "in that range, or upgrade onnx)")


def _label(n: Any, i: int) -> str:
    return f"'{n.name or f'{n.op_type}_{i}'}' ({n.op_type})"


def topological(path: Path, g: Any, defined: set[str]) -> None:
    """Puts ``g``'s nodes in an order where each reads only tensors written before it (the file's
    own order when it is one). Refuses a tensor written twice, a node reading a tensor that no
    node, initializer or graph input (``defined``) defines, and a cycle, naming its nodes."""
    nodes = list(g.node)
    producer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for t in (t for t in n.output if t):
            if t in producer or t in defined:
                j = producer.get(t)
                first = "the graph (an input or initializer)" if j is None else f"node {_label(nodes[j], j)}"
                raise DataError(f"{path}: tensor '{t}' is written by {first} and by node {_label(n, i)}")
            producer[t] = i
    for i, n in enumerate(nodes):
        for t in n.input:
            if t and t not in defined and t not in producer:
                raise DataError(f"{path}: node {_label(n, i)} reads tensor '{t}', which no node, "
                                "initializer or graph input defines")
    preds = [{producer[t] for t in n.input if t in producer} for n in nodes]
    readers: list[list[int]] = [[] for _ in nodes]
    for i, ps in enumerate(preds):
        for p in ps:
            readers[p].append(i)
    waiting = [len(ps) for ps in preds]
    ready = [i for i, w in enumerate(waiting) if w == 0]
    order: list[int] = []
    while ready:  # Kahn's, lowest index first: a sorted file keeps its order
        i = heapq.heappop(ready)
        order.append(i)
        for r in readers[i]:
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, r)
    if len(order) < len(nodes):
        raise DataError(f"{path}: the graph has a cycle through nodes {_cycle(nodes, preds, set(order))} "
                        "(an ONNX graph is acyclic)")
    if order != sorted(order):
        del g.node[:]
        g.node.extend(nodes[i] for i in order)


def _cycle(nodes: list[Any], preds: list[set[int]], done: set[int]) -> str:
    """``a -> b -> a``: a cycle among the nodes Kahn's order could not reach (each has a
    predecessor among them: walking back from any one repeats a node)."""
    i = min(set(range(len(nodes))) - done)
    seen: list[int] = []
    while i not in seen:
        seen.append(i)
        i = min(p for p in preds[i] if p not in done)
    loop = seen[seen.index(i):][::-1]  # walked backwards: reversed, a node's reader follows it
    first = loop.index(min(loop))  # from the node the file lists first
    loop = loop[first:] + loop[:first]
    words = [_label(nodes[k], k) for k in (*loop, loop[0])]
    return " -> ".join(words if len(words) <= 12 else [*words[:5], f"... ({len(loop)} nodes)", *words[-5:]])


def check_operands(onnx: Any, n: Any, x: str, types: dict[str, int], where: str) -> None:
    """Refuses a node training cannot run in floating point: a string operand anywhere, a
    convolution or product with an operand (input, weight, bias) of another type, or any other
    priced node reading an integer activation ``x`` (an integer input reaches the layers as indices
    through a Gather, as token ids do, or through a Cast)."""
    for k, t in enumerate(n.input):
        name = type_name(onnx, types.get(t, 0)) if t else "UNDEFINED"
        floating = name == "UNDEFINED" or name.startswith(("FLOAT", "DOUBLE", "BFLOAT"))
        checked = n.op_type not in _MOVES and (t == x or n.op_type in _PRODUCTS)
        if name == "STRING" or (checked and not floating):
            role = "input" if t == x else ("weight" if k == 1 else "bias") if n.op_type in _PRODUCTS else "operand"
            why = "text, not numbers" if name == "STRING" else \
                "not floating point (integer inputs can only be indices, read by a Gather, or Cast to a float first)"
            raise OnnxGraphError(f"{where} ({n.op_type}) reads {role} '{t}' of type {name}: {why}; "
                                 "perfmodel prices floating-point training")

"""Values and shapes ONNX's whole-graph inference leaves unknown: shape arithmetic folded node by node."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .onnx_checks import MAX_FOLD_ELEMS, OnnxGraphError

__all__ = ["Folder", "MAX_FOLD_ELEMS"]


class Folder:
    """Full tensor shapes (with the batch) and small constant values, filled in walk order."""

    def __init__(self, onnx: Any, model: Any, shapes: dict[str, tuple[int, ...] | None],
                 elem_types: dict[str, int]) -> None:
        self.onnx = onnx
        self.opsets = list(model.opset_import)
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 18)
        self.shapes = shapes
        self.types = elem_types
        self.inits = {t.name: t for t in model.graph.initializer}
        self.values: dict[str, Any] = {}

    def value(self, name: str) -> Any:
        """The numpy value of a constant tensor, or None when unknown or large."""
        if name in self.values:
            return self.values[name]
        t = self.inits.get(name)
        if t is None or math.prod(t.dims) > MAX_FOLD_ELEMS:
            return None
        try:
            self.values[name] = self.onnx.numpy_helper.to_array(t)
        except Exception as e:
            raise OnnxGraphError(f"initializer '{name}' of shape {tuple(t.dims)} cannot be read: "
                                 f"{type(e).__name__}: {e}") from None
        return self.values[name]

    def constant_node(self, node: Any) -> None:
        """Evaluate a node of constants (or the shape of an activation) when its inputs are known."""
        if node.op_type == "Shape" and self.shapes.get(node.input[0]) is not None:
            shape = self.shapes[node.input[0]]
            assert shape is not None
            start = next((a.i for a in node.attribute if a.name == "start"), 0)
            end = next((a.i for a in node.attribute if a.name == "end"), len(shape))
            self._set(node.output[0], np.array(shape[start:end], dtype=np.int64))
            return
        if node.op_type == "Constant":
            t = next((a.t for a in node.attribute if a.name == "value"), None)
            if t is not None and math.prod(t.dims) <= MAX_FOLD_ELEMS:
                self._set(node.output[0], self.onnx.numpy_helper.to_array(t))
            return
        feeds = {t: self.value(t) for t in node.input if t}
        if any(v is None for v in feeds.values()):
            return
        try:
            outs = self.onnx.reference.ReferenceEvaluator(node).run(None, feeds)
        except Exception:
            return
        for name, v in zip(node.output, outs, strict=False):
            self._set(name, v)

    def _set(self, name: str, v: Any) -> None:
        self.values[name] = v
        self.shapes[name] = tuple(int(d) for d in v.shape)
        self.types[name] = self.onnx.helper.np_dtype_to_tensor_dtype(v.dtype)

    def infer(self, node: Any) -> None:
        """Shapes of ``node``'s outputs from its inputs' shapes and constant values."""
        if all(self.shapes.get(t) is not None for t in node.output):
            return
        onnx = self.onnx
        try:
            schema = onnx.defs.get_schema(node.op_type, self.opset, node.domain)
            types = {t: onnx.helper.make_tensor_type_proto(self.types.get(t, 1), self.shapes[t])
                     for t in node.input if t and self.shapes.get(t) is not None}
            data = {t: onnx.numpy_helper.from_array(v, t) for t in node.input
                    if t and (v := self.value(t)) is not None}
            out = onnx.shape_inference.infer_node_outputs(schema, node, types, data, opset_imports=self.opsets)
        except Exception:
            return
        for name, tp in out.items():
            dims = tp.tensor_type.shape.dim
            if dims and all(d.dim_value > 0 for d in dims) and self.shapes.get(name) is None:
                self.shapes[name] = tuple(d.dim_value for d in dims)
                self.types[name] = tp.tensor_type.elem_type

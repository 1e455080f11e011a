"""ONNX view nodes as the torch ops they were exported from: strides followed, unbind read back.

ONNX values have no layout, torch's views do: an exported ``Transpose`` followed by a ``Reshape``
is ``x.transpose(...).reshape(...)``, which copies in eager PyTorch when the transposed strides
cannot be regrouped (:mod:`.strides`), and is free otherwise. :class:`Layouts` follows the
strides of every activation through the view nodes in walk order (every other node writes a
contiguous tensor, ``scaled_dot_product_attention`` the layout its fused kernels write), so
that a ``Reshape`` copies exactly where the torch module's ``reshape`` does.

torch.onnx spells ``x.unbind(d)`` (one op, one view per piece) as ``Split`` along ``d`` into
pieces of extent 1 and a ``Squeeze`` of each: :func:`unbinds` finds the pair, and the reader
emits the pieces squeezed, one view each, as the traced module's reading does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .strides import Strides, attention_out_strides, contiguous, permuted, rows_copy, view_strides

__all__ = ["Layouts", "unbinds", "RESHAPES"]

#: Nodes that are ``reshape``/``view``/``flatten``/``squeeze``/``unsqueeze`` in torch.
RESHAPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})


class Layouts:
    """The strides of each activation tensor (by ONNX name; absent: contiguous)."""

    def __init__(self, shapes: dict[str, tuple[int, ...] | None]) -> None:
        self.shapes = shapes
        self.strides: dict[str, Strides] = {}

    def of(self, name: str) -> Strides | None:
        shape = self.shapes.get(name)
        return None if shape is None else self.strides.get(name, contiguous(shape))

    def view(self, op: str, attrs: dict[str, Any], x: str, outs: Sequence[str], inputs: Sequence[Any] = ()) -> bool:
        """Follow view node ``op`` from ``x`` to ``outs`` (``inputs``: the node's constant input values,
        None where unknown); whether it copies (a reshape that is not a view of ``x``'s strides)."""
        old, st = self.shapes.get(x), self.of(x)
        new = [self.shapes.get(t) for t in outs]
        if old is None or st is None or any(s is None for s in new):
            return False
        if op in RESHAPES:
            got = view_strides(old, st, new[0] or ())
            if got is not None:
                self.strides[outs[0]] = got
            return got is None
        if op == "Transpose":
            perm = list(attrs.get("perm", range(len(old) - 1, -1, -1)))
            self.strides[outs[0]] = permuted(st, perm)
        elif op == "Slice":  # x[..., a:b:step]: the stride of each sliced axis times its step
            self.strides[outs[0]] = _sliced(st, inputs)
        elif op in ("Split", "Identity"):
            for t in outs:
                self.strides[t] = st
        elif op == "Gather" and len(inputs) > 1 and getattr(inputs[1], "ndim", 1) == 0:
            axis = int(attrs.get("axis", 0)) % len(old)
            self.strides[outs[0]] = st[:axis] + st[axis + 1 :]
        elif op == "Expand":
            shape = new[0] or ()
            lead = len(shape) - len(old)
            self.strides[outs[0]] = tuple(0 if k < lead or old[k - lead] != n else st[k - lead]
                                          for k, n in enumerate(shape))
        return False

    def rows_copy(self, x: str) -> bool:
        """Whether a product of ``x`` by a matrix copies it first (:func:`.strides.rows_copy`)."""
        shape, st = self.shapes.get(x), self.of(x)
        return shape is not None and st is not None and rows_copy(shape, st)

    def attention(self, q: str, out: str) -> None:
        """The output of a fused ``scaled_dot_product_attention`` on ``q``."""
        qs, st, shape = self.shapes.get(q), self.of(q), self.shapes.get(out)
        if qs is not None and st is not None and shape is not None:
            self.strides[out] = attention_out_strides(qs, st, shape)


def _sliced(strides: Strides, inputs: Sequence[Any]) -> Strides:
    """The strides of ``Slice`` (opset 10+: ``data, starts, ends, axes, steps``) of a tensor with
    ``strides``; steps absent: unchanged."""
    steps = inputs[4] if len(inputs) > 4 else None
    if steps is None:
        return strides
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else range(len(steps))
    out = list(strides)
    for a, k in zip(axes, steps, strict=False):
        out[int(a) % len(out)] *= abs(int(k))
    return tuple(out)


def unbinds(g: Any, consumers: dict[str, list[Any]], shapes: dict[str, tuple[int, ...] | None]) -> dict[str, str]:
    """``Squeeze`` output -> ``Split`` output it squeezes, for every ``Split`` whose pieces have
    extent 1 along the split axis and are each read by one ``Squeeze`` (``x.unbind(axis)``)."""
    out: dict[str, str] = {}
    for n in g.node:
        if n.op_type != "Split":
            continue
        axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
        pair: dict[str, str] = {}
        for t in n.output:
            shape, readers = shapes.get(t), consumers.get(t, [])
            if shape is None or len(readers) != 1 or readers[0].op_type != "Squeeze" or shape[axis] != 1:
                break
            sq = shapes.get(readers[0].output[0])
            if sq is None or len(sq) != len(shape) - 1:
                break
            pair[readers[0].output[0]] = t
        else:
            out.update(pair)
    return out

"""``nn.MultiheadAttention`` as torch.onnx (TorchScript) exports it, found to be read as one module.

``F.multi_head_attention_forward`` is traced into: the packed in-projection (``MatMul`` by the
transposed ``(3E, E)`` weight, ``Add`` of the bias), ``Reshape`` (unflatten to ``(3, E)``),
``Unsqueeze``, ``Transpose``, ``Squeeze`` and three ``Gather`` (``q``, ``k``, ``v``), the heads
split by ``Reshape``/``Transpose`` chains, the attention core (without weights torch.onnx's
spelling of ``scaled_dot_product_attention``; with them ``Mul`` by the scale, ``MatMul`` by
``k^T``, ``Softmax``, ``Dropout`` when ``p > 0``, ``MatMul`` by ``v``), the heads merged by
``Transpose``/``Reshape``, the out-projection (``Gemm``, or ``MatMul`` + ``Add``) and the
``Reshape`` (and with ``batch_first`` the ``Transpose``) back to tokens. The in-projection's
signature (its reshape to ``(3, E)`` and the three gathers) marks a module; the rest must then
follow, or the reader names the node that does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .emit import UnsupportedOp

__all__ = ["MhaMatch", "find_mha"]

_VIEWS = frozenset({"Reshape", "Transpose", "Unsqueeze", "Squeeze"})


@dataclass
class MhaMatch:
    """One ``nn.MultiheadAttention`` call in the graph."""

    x: str  #: the tensor the module reads
    batch_first: bool  #: the in-projection reads ``x`` transposed to sequence-first
    exit: str  #: the tensor holding the module's output
    scope: str  #: the module's scope name (``layer/self_attn``)
    embed: int
    heads: int
    need_weights: bool
    dropout: float
    #: weight and bias tensor names of the in- and out-projection (bias "" when absent)
    params: tuple[str, ...]
    #: outputs of the nodes the module's layers replace
    inside: set[str] = field(default_factory=set)
    #: ``exit`` is ``batch_first``'s ``transpose(1, 0)`` of the sequence-first output: a view, not
    #: contiguous (a later product by a matrix copies it, as eager does)
    exit_transposed: bool = False


class _Graph:
    def __init__(self, onnx: Any, g: Any, consumers: dict[str, list[Any]], inits: dict[str, Any]) -> None:
        self.onnx = onnx
        self.producer = {t: n for n in g.node for t in n.output}
        self.consumers, self.inits = consumers, inits

    def scalar(self, t: str, default: float) -> float:
        """The value of a one-element constant (an initializer or a ``Constant`` node)."""
        n = self.producer.get(t)
        proto = self.inits.get(t) if n is None else next((a.t for a in n.attribute if a.name == "value"), None) \
            if n.op_type == "Constant" else None
        if proto is None:
            return default
        v = self.onnx.numpy_helper.to_array(proto).reshape(-1)
        return float(v[0]) if v.size == 1 else default

    def readers(self, t: str) -> list[Any]:
        """The nodes reading ``t``'s values (not those reading only its shape)."""
        return [n for n in self.consumers.get(t, []) if n.op_type not in ("Shape", "Size")]

    def only(self, t: str, op: str | tuple[str, ...]) -> Any:
        rs = self.readers(t)
        ops = (op,) if isinstance(op, str) else op
        return rs[0] if len(rs) == 1 and rs[0].op_type in ops else None

    def weight(self, t: str) -> tuple[str, tuple[int, ...]] | None:
        """``(initializer, (in, out) features)`` of a linear's right operand ``Transpose(W)`` or ``W``."""
        n = self.producer.get(t)
        if n is not None and n.op_type == "Transpose" and n.input[0] in self.inits:
            return n.input[0], tuple(reversed(self.inits[n.input[0]].dims))
        return (t, tuple(self.inits[t].dims)) if t in self.inits else None


def _scope(n: Any) -> str:
    return n.name.rsplit("/", 1)[0].strip("/") if "/" in n.name else ""


def _attr(n: Any, name: str, default: Any = None) -> Any:
    a = next((a for a in n.attribute if a.name == name), None)
    if a is None:
        return default
    return list(a.ints) if a.ints else a.i


#: What the attention core's spelling may differ by in a real export, said with a core mismatch.
_NOT_READ = "; attn_mask, key_padding_mask, add_bias_kv and add_zero_attn are not read"


def _fail(n: Any, expected: str, core: bool = False) -> UnsupportedOp:
    return UnsupportedOp(f"node '{n.name}' ({n.op_type}) of an exported nn.MultiheadAttention: expected {expected}"
                         + (_NOT_READ if core else ""))


def _chain(g: _Graph, t: str, inside: set[str]) -> list[str]:
    """Follow single-reader view nodes from ``t``: the tensors reached, ``t`` first."""
    out = [t]
    while (n := g.only(out[-1], tuple(_VIEWS))) is not None:
        inside.add(n.output[0])
        out.append(n.output[0])
    return out


def _packed(g: _Graph, mm: Any) -> tuple[str, list[str], set[str], int] | None:
    """The in-projection's signature from ``MatMul`` ``mm``: ``(bias, [q, k, v] gathers, inside, E)``."""
    w = g.weight(mm.input[1])
    if w is None or len(w[1]) != 2 or w[1][0] * 3 != w[1][1]:
        return None
    inside = {mm.output[0]}
    t, bias = mm.output[0], ""
    add = g.only(t, "Add")
    if add is not None:
        bias = next((i for i in add.input if i != t), "")
        if bias not in g.inits:
            return None
        t = add.output[0]
        inside.add(t)
    for op in ("Reshape", "Unsqueeze", "Transpose", "Squeeze"):
        n = g.only(t, op)
        if n is None:
            return None
        t = n.output[0]
        inside.add(t)
    gathers = g.readers(t)
    if len(gathers) != 3 or any(n.op_type != "Gather" for n in gathers):
        return None
    return bias, [n.output[0] for n in gathers], inside, w[1][0]


def _core(g: _Graph, chains: list[list[str]], attention: dict[str, tuple[str, str, str]],
          inside: set[str]) -> tuple[str, bool, float]:
    """The attention core reading the three head-split ``chains``: ``(output, need_weights, dropout)``."""
    for out, qkv in attention.items():  # without weights: the sdpa spelling
        if all(t in c for t, c in zip(qkv, chains, strict=True)):
            inside.add(out)
            return out, False, 0.0
    ends = [c[-1] for c in chains]
    mul = g.only(ends[0], "Mul")
    if mul is None:
        n = g.readers(ends[0])
        raise _fail(n[0] if n else g.producer[ends[0]], "scaled_dot_product_attention of the split heads, "
                    "or q scaled by a constant (need_weights=True)", core=True)
    inside.add(mul.output[0])
    scores = g.only(mul.output[0], "MatMul")
    if scores is None or scores.input[1] != ends[1]:
        raise _fail(mul, "MatMul of the scaled q by k transposed", core=True)
    soft = g.only(scores.output[0], "Softmax")
    if soft is None:
        raise _fail(scores, "Softmax of the scores read by nothing else", core=True)
    inside |= {scores.output[0], soft.output[0]}
    t, p = soft.output[0], 0.0
    drop = g.only(t, "Dropout")
    if drop is not None:
        p = g.scalar(drop.input[1] if len(drop.input) > 1 else "", float(_attr(drop, "ratio", 0.5)))
        t = drop.output[0]
        inside.add(t)
    ctx = g.only(t, "MatMul")
    if ctx is None or ctx.input[1] != ends[2]:
        raise _fail(soft, "MatMul of the attention weights by v, the weights read by nothing else (returned "
                    "weights used by the model are not read)", core=True)
    inside.add(ctx.output[0])
    return ctx.output[0], True, p


def _out_proj(g: _Graph, t: str, embed: int, inside: set[str]) -> tuple[str, str, str]:
    """From the core's output: merge views, the out-projection; ``(its output, weight, bias)``."""
    t = _chain(g, t, inside)[-1]
    n = g.only(t, ("Gemm", "MatMul"))
    w = g.weight(n.input[1]) if n is not None else None
    if n is None or w is None or w[1] != (embed, embed) or n.op_type == "Gemm" and not _attr(n, "transB", 0):
        rs = g.readers(t)
        raise _fail(rs[0] if rs else g.producer[t], f"the out-projection: a product by a ({embed}, {embed}) weight")
    inside.add(n.output[0])
    bias = n.input[2] if n.op_type == "Gemm" and len(n.input) > 2 else ""
    out = n.output[0]
    add = g.only(out, "Add") if n.op_type == "MatMul" else None
    if add is not None and (other := next((i for i in add.input if i != out), "")) in g.inits:
        bias, out = other, add.output[0]
        inside.add(out)
    return out, w[0], bias


def find_mha(onnx: Any, g: Any, consumers: dict[str, list[Any]], attention: dict[str, tuple[str, str, str]],
             shapes: dict[str, tuple[int, ...] | None]) -> list[MhaMatch]:
    """Every exported ``nn.MultiheadAttention`` self-attention (``attention``: the sdpa spellings
    found, by output; ``shapes``: full tensor shapes, for the head count)."""
    gr = _Graph(onnx, g, consumers, {t.name: t for t in g.initializer})
    _refuse_split_projections(gr)
    found = []
    for mm in g.node:
        if mm.op_type != "MatMul" or (packed := _packed(gr, mm)) is None:
            continue
        bias_in, qkv, inside, embed = packed
        scope = _scope(mm)
        x = mm.input[0]
        tr = gr.producer.get(x)
        batch_first = tr is not None and tr.op_type == "Transpose" and _scope(tr) == scope and \
            _attr(tr, "perm") == [1, 0, 2] and len(gr.readers(x)) == 1
        if batch_first:
            inside.add(x)
        chains = [_chain(gr, t, inside) for t in qkv]
        core, need_weights, p = _core(gr, chains, attention, inside)
        head_dim = (shapes.get(chains[0][-1]) or (0,))[-1]
        if not head_dim or embed % head_dim:
            raise _fail(gr.producer[chains[0][-1]], f"q split into heads of a width dividing {embed}")
        heads = embed // head_dim
        out, w_out, bias_out = _out_proj(gr, core, embed, inside)
        rs = gr.readers(out)
        if len(rs) != 1 or rs[0].op_type != "Reshape":
            raise _fail(rs[0] if rs else gr.producer[out], "a Reshape of the out-projection back to tokens")
        exit_ = rs[0].output[0]
        # batch_first's transpose back (the one in may be fused with the user's)
        tr_out = gr.only(exit_, "Transpose")
        transposed = tr_out is not None and _scope(tr_out) == scope and _attr(tr_out, "perm") == [1, 0, 2]
        if transposed:
            exit_ = tr_out.output[0]
        inside |= {rs[0].output[0], exit_}
        inside.discard(exit_)
        src = tr.input[0] if batch_first and tr is not None else x
        found.append(MhaMatch(src, batch_first, exit_, scope, embed, heads, need_weights, p,
                              (mm.input[1], bias_in, w_out, bias_out), inside, transposed))
    return found


#: Parameter names of ``nn.MultiheadAttention``'s separate projections (``kdim`` or ``vdim`` not
#: the embedding's); torch.onnx names initializers by module path, ``<path>.<parameter>``.
_SEPARATE = (".q_proj_weight", ".k_proj_weight", ".v_proj_weight")


def _refuse_split_projections(g: _Graph) -> None:
    """Refuse, naming the module, the exports this reader does not match: a cross-attention
    (``key`` not ``query``: the packed ``in_proj_weight`` is sliced into a query and a key/value
    projection) and separate projections. Without this the first of their nodes that shape
    inference leaves unknown would be named instead, which says nothing of why."""
    for name in g.inits:
        sliced = name.endswith(".in_proj_weight") and any(n.op_type == "Slice" for n in g.readers(name))
        if sliced or name.endswith(_SEPARATE):
            module = name.rsplit(".", 1)[0]
            what = "a cross-attention (key and value not the query)" if sliced else "separate q/k/v projections"
            raise UnsupportedOp(f"nn.MultiheadAttention '{module}' is exported as {what}, which the ONNX reader "
                                f"does not read; import the torch module instead (perfmodel show FILE.py:FACTORY)")

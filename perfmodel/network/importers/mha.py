"""``nn.MultiheadAttention``'s self-attention as the layers eager PyTorch runs for it (both importers).

``torch.nn.functional.multi_head_attention_forward`` (PyTorch 2.x, training mode, no mask), as
counted by a ``TorchDispatchMode`` on CPU (``tests/test_onnx_mha.py`` checks it):

* the packed in-projection ``linear(x, in_proj_weight, in_proj_bias)``: one GEMM; when ``x`` is
  not contiguous (``batch_first`` transposes the input to sequence-first) ``aten::matmul`` first
  copies it (``clone``) to fold the token dimensions into the GEMM's rows;
* ``unflatten(-1, (3, E)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()``: a copy of the
  whole projection, then ``q``, ``k``, ``v`` as views of it split into heads;
* without weights (``need_weights=False``): ``scaled_dot_product_attention``, whose output
  follows ``q``'s layout, so the head merge ``permute(2, 0, 1, 3).contiguous()`` is a view;
* with weights: ``q`` scaled by ``sqrt(1 / d)`` (one elementwise kernel), ``bmm(q, k^T)``,
  softmax, dropout (training, ``p > 0``), ``bmm`` by ``v``, the head merge
  ``transpose(0, 1).contiguous()`` (a copy), and the weights averaged over the heads
  (``average_attn_weights``: one ``mean`` kernel);
* the out-projection ``linear``: one GEMM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .emit import Emitter

__all__ = ["MhaCall", "emit_self_attention", "emit_separate_attention"]


@dataclass(frozen=True)
class MhaCall:
    """What pricing one ``nn.MultiheadAttention`` call needs to know."""

    embed: int
    heads: int
    in_bias: bool
    out_bias: bool
    need_weights: bool
    average_weights: bool = True
    dropout: float = 0.0
    #: the in-projection reads a non-contiguous tensor (``aten::matmul`` copies it first)
    copy_input: bool = False
    #: ``is_causal`` with its causal ``attn_mask`` and no weights: ``F.multi_head_attention_forward``
    #: drops the mask and runs a causal ``scaled_dot_product_attention``
    causal: bool = False


def emit_self_attention(em: Emitter, path: tuple[str, ...], base: str, x: str,
                        a: MhaCall) -> tuple[str, str | None]:
    """Emit the layers of one self-attention call on tokens ``x`` (per sample ``(L, E)``);
    returns the output's name and the returned weights' (None without weights)."""
    e, h = a.embed, a.heads
    length = em.builder.shape(x)[0]
    d = e // h
    emit = em.tagged(path, base)

    if a.copy_input:
        x = emit("view", x, (length, e), copy=True, tag="in_copy")
    qkv = emit("linear", x, 3 * e, a.in_bias, tag="in_proj")
    packed = emit("view", qkv, (3, length, e), copy=True, tag="qkv")
    q, k, v = (emit("view", packed, (h, length, d), tag=t) for t in ("q", "k", "v"))
    return _core(emit, (q, k, v), (length, length), (length, e), a)


def emit_separate_attention(em: Emitter, path: tuple[str, ...], base: str, qkv: tuple[str, str, str],
                            lengths: tuple[int, int], a: MhaCall,
                            copies: tuple[bool, bool, bool] = (False, False, False),
                            packed_kv: bool = False) -> tuple[str, str | None]:
    """Cross-attention or separate projections (``q``, ``k``, ``v`` of ``lengths`` ``(L, S)``), as
    ``multi_head_attention_forward`` runs them: ``aten::matmul``'s copy of each projection input that
    is not contiguous (``copies``), one linear each, or where ``k`` is ``v`` with the packed weight
    (``packed_kv``: ``_in_projection_packed``) one ``2E`` linear whose unflattened halves are copied
    contiguous; then the core as above.
    Returns the output's name and the returned weights' (None without weights)."""
    e, h = a.embed, a.heads
    lq, lk = lengths
    b = em.builder
    emit = em.tagged(path, base)

    def proj(t: str, n: int, tag: str, copy: bool) -> str:
        src = emit("view", t, b.shape(t), copy=True, tag=f"{tag}_in_copy") if copy else t
        return emit("linear", src, n, a.in_bias, tag=f"{tag}_proj")

    qs = emit("view", proj(qkv[0], e, "q", copies[0]), (h, lq, e // h), tag="q")
    if packed_kv:  # one kv projection, unflatten(-1, (2, E))...contiguous(): a copy
        packed = emit("view", proj(qkv[1], 2 * e, "kv", copies[1]), (2, lk, e), copy=True, tag="kv")
        ks, vs = (emit("view", packed, (h, lk, e // h), tag=t) for t in ("k", "v"))
    else:
        ks, vs = (emit("view", proj(t, e, tag, cp), (h, lk, e // h), tag=tag)
                  for t, tag, cp in ((qkv[1], "k", copies[1]), (qkv[2], "v", copies[2])))
    return _core(emit, (qs, ks, vs), lengths, b.shape(qkv[0]), a)


def _core(emit: Callable[..., str], qkv: tuple[str, str, str], lengths: tuple[int, int],
          merged: tuple[int, ...], a: MhaCall) -> tuple[str, str | None]:
    """The heads' attention on ``q, k, v`` (``(H, L, d)``, ``(H, S, d)``), merged to ``merged``, and
    the out-projection: returns the output's name and the returned weights' (None without)."""
    q, k, v = qkv
    lq, lk = lengths
    h = a.heads
    weights = None
    if a.need_weights:  # the weights are materialised: q scaled, two products, softmax and dropout; the merge copies
        q = emit("const_op", q, "mul", (), tag="q_scaled")
        w = emit("softmax", emit("matmul", q, emit("view", k, (h, a.embed // h, lk), tag="kT"), tag="scores"),
                 tag="softmax")
        if a.dropout:
            w = emit("dropout", w, a.dropout, tag="dropout")
        o = emit("view", emit("matmul", w, v, tag="context"), merged, copy=True, tag="merge")
        weights = emit("mean", w, (lq, lk), tag="mean_weights") if a.average_weights else w
    else:
        o = emit("view", emit("attention", q, k, v, tag="attn", causal=a.causal), merged, tag="merge")
    return emit("linear", o, a.embed, a.out_bias, tag="out_proj"), weights

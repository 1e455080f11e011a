"""torch.fx attention calls as IR layers: ``nn.MultiheadAttention`` and torchvision's Swin window attention."""

from __future__ import annotations

from typing import Any

from .emit import TRACE_BATCH, Const, UnsupportedOp, operand_shape
from .fx_ctx import Ctx, const_value
from .mha import MhaCall, emit_self_attention, emit_separate_attention
from .strides import seq_first_copy

__all__ = ["mha_layer", "swin_attention"]


def mha_layer(c: Ctx, mod: Any) -> tuple[str, Any]:
    """``nn.MultiheadAttention`` (self- or cross-attention, packed or separate projections); a
    packed self-attention is what eager PyTorch runs for it (:mod:`.mha`)."""
    q, k, v = (c.arg(i, key) for i, key in enumerate(("query", "key", "value")))
    pad, mask, hint = (const_value(c.arg(i, key)) for i, key in ((3, "key_padding_mask"), (5, "attn_mask"),
                                                                   (7, "is_causal")))
    need_weights = c.kwargs.get("need_weights", True) if len(c.args) < 5 else c.args[4]
    average = c.kwargs.get("average_attn_weights", True) if len(c.args) < 7 else c.args[6]
    # F.multi_head_attention_forward drops a causal mask given with is_causal=True when no weights
    # and no padding mask are asked for, and runs a causal scaled_dot_product_attention
    causal = hint is True and mask is not None and pad is None and not need_weights
    if not all(isinstance(t, str) for t in (q, k, v)) or pad is not None or (mask is not None or hint) and not causal:
        raise UnsupportedOp(f"operator nn.MultiheadAttention at {c.where}: only activation inputs without masks, "
                            f"or a causal attn_mask with is_causal=True and need_weights=False")
    _sequence_first(c, mod, (q, k))
    bias = mod.in_proj_bias is not None
    if q == k == v and mod._qkv_same_embed_dim:
        a = MhaCall(mod.embed_dim, mod.num_heads, bias, mod.out_proj.bias is not None, bool(need_weights),
                    bool(average), float(mod.dropout), seq_first_copy(c.first, mod.batch_first), causal=causal)
        out, weights = emit_self_attention(c.em, c.path, c.name, q, a)
        return out, weights if weights is not None else Const(None)
    b = c.em.builder
    lq, lk = (b.shape(q)[0], b.shape(k)[0]) if not mod.batch_first else (b.shape(q)[-2], b.shape(k)[-2])
    a = MhaCall(mod.embed_dim, mod.num_heads, bias, mod.out_proj.bias is not None, bool(need_weights),
                bool(average), float(mod.dropout), causal=causal)
    cq, ck, cv = (seq_first_copy(c.traced.get(t), mod.batch_first) for t in (q, k, v))
    packed_kv = k == v and mod._qkv_same_embed_dim
    out, weights = emit_separate_attention(c.em, c.path, c.name, (q, k, v), (lq, lk), a, (cq, ck, cv), packed_kv)
    return out, weights if weights is not None else Const(None)


def _sequence_first(c: Ctx, mod: Any, refs: tuple[str, ...]) -> None:
    """Refuse a ``batch_first=False`` attention fed batch-first tensors: it reads ``(L, N, E)``, so
    eager PyTorch would attend over the batch, mixing the samples (no per-sample cost)."""
    for t in refs:
        f = c.traced.get(t)
        if mod.batch_first or f is None or f.dim() != 3 or f.shape[0] != TRACE_BATCH or f.shape[1] == TRACE_BATCH:
            continue
        raise UnsupportedOp(f"operator nn.MultiheadAttention at {c.where}: batch_first=False reads (sequence, "
                            f"batch, embedding), but its input is batch-first (traced {tuple(f.shape)}): eager "
                            f"PyTorch would attend across the samples; pass batch_first=True or transpose(0, 1) it")


def swin_attention(c: Ctx, x: str) -> str:
    """torchvision's ``shifted_window_attention`` (Swin v1 and v2), written out as IR layers:
    windows of the padded map, one qkv projection, two products per window and head with the
    relative position bias (and v2's cosine scaling) added, softmax, output projection."""
    em, base = c.em, c.name
    h, w, ch = em.builder.shape(x)
    ws, heads = [int(v) for v in const_value(c.arg(4, "window_size"))], int(const_value(c.arg(5, "num_heads")))
    qkv_w, proj_w, rpb = c.arg(1, "qkv_weight"), c.arg(2, "proj_weight"), c.arg(3, "relative_position_bias")
    qkv_b, proj_b, logit = c.arg(9, "qkv_bias"), c.arg(10, "proj_bias"), c.arg(11, "logit_scale")
    training = bool(const_value(c.arg(12, "training", True)))
    att_p, out_p = float(const_value(c.arg(7, "attention_dropout", 0.0))), float(const_value(c.arg(8, "dropout", 0.0)))
    ph, pw = -(-h // ws[0]) * ws[0], -(-w // ws[1]) * ws[1]
    nw, n, hd = (ph // ws[0]) * (pw // ws[1]), ws[0] * ws[1], ch // heads

    emit = em.tagged(c.path, base)
    em.new_params(*(k for k in (qkv_w, qkv_b, proj_w, proj_b) if isinstance(k, Const)))
    tokens = emit("view", x, (nw, n, ch), copy=True, tag="windows")
    qkv = emit("linear", tokens, 3 * ch, isinstance(qkv_b, Const), tag="qkv")
    q, k, v = (emit("view", qkv, (nw, heads, n, hd), tag=t) for t in ("q", "k", "v"))
    if isinstance(logit, Const):  # v2: cosine attention, scaled per head
        q, k = emit("const_op", q, "div", (nw, heads, n, 1), tag="q_norm"), emit(
            "const_op", k, "div", (nw, heads, n, 1), tag="k_norm")
    else:
        q = emit("const_op", q, "mul", (), tag="q_scaled")
    attn = emit("matmul", q, emit("view", k, (nw, heads, hd, n), tag="kT"), tag="scores")
    if isinstance(logit, Const):
        attn = emit("const_op", attn, "mul", (heads, 1, 1), em.new_params(logit), tag="logit_scale")
    bias = rpb if isinstance(rpb, Const) else Const(None, (1, heads, n, n))
    attn = emit("const_op", attn, "add", operand_shape(bias, 4)[-3:], em.new_params(bias), tag="position_bias")
    attn = emit("softmax", attn, tag="softmax")
    if att_p and training:
        attn = emit("dropout", attn, att_p, tag="attn_dropout")
    out = emit("view", emit("matmul", attn, v, tag="context"), (nw, n, ch), copy=True, tag="merge")
    out = emit("linear", out, ch, isinstance(proj_b, Const), tag="proj")
    if out_p and training:
        out = emit("dropout", out, out_p, tag="dropout")
    return c.emit("view", out, (h, w, ch), copy=True)

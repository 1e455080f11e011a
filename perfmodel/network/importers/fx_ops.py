"""torch.fx nodes as IR layers: one function per operator family, dispatched by module type or function."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from ...errors import DataError
from .emit import TRACE_BATCH, Const, Emitter, UnsupportedOp, operand_shape
from .mha import MhaCall, emit_self_attention, emit_separate_attention
from .strides import rows_copy, seq_first_copy

__all__ = ["Ctx", "module_layer", "function_layer", "ACT_MODULES", "ACT_FUNCTIONS"]

#: torch.nn activation modules -> the IR's activation names.
ACT_MODULES = {
    "ReLU": "relu", "ReLU6": "relu6", "SiLU": "silu", "Sigmoid": "sigmoid", "Hardswish": "hardswish",
    "Hardsigmoid": "hardsigmoid", "GELU": "gelu", "Tanh": "tanh", "LeakyReLU": "leaky_relu", "ELU": "elu",
    "Mish": "mish", "Softplus": "softplus", "Hardtanh": "hardtanh",
}

#: Function and method names of activations (a trailing ``_`` is the in-place form).
ACT_FUNCTIONS = {
    "relu": "relu", "relu6": "relu6", "silu": "silu", "sigmoid": "sigmoid", "hardswish": "hardswish",
    "hardsigmoid": "hardsigmoid", "gelu": "gelu", "tanh": "tanh", "leaky_relu": "leaky_relu", "elu": "elu",
    "mish": "mish", "softplus": "softplus", "hardtanh": "hardtanh",
}

_VIEWS = frozenset({
    "view", "reshape", "permute", "transpose", "contiguous", "squeeze", "unsqueeze", "expand", "expand_as",
    "getitem", "flatten", "unflatten", "t", "narrow", "select", "chunk", "split", "unbind", "clone", "detach",
    "to", "float", "type_as", "movedim", "swapaxes", "repeat_interleave_view", "view_as", "reshape_as",
})
_NEW_TENSORS = frozenset({
    "new_empty", "new_zeros", "new_ones", "new_full", "empty_like", "zeros_like", "ones_like", "rand_like",
    "randn_like", "full_like", "bernoulli", "bernoulli_", "size", "dim", "numel", "getattr",
})
_ARITH = {"add": "add", "iadd": "add", "sub": "sub", "isub": "sub", "mul": "mul", "imul": "mul",
          "truediv": "div", "itruediv": "div", "div": "div"}


class Ctx:
    """One node being imported: its arguments as refs, its traced result and where it is."""

    def __init__(self, em: Emitter, name: str, path: tuple[str, ...], where: str, args: list[Any],
                 kwargs: dict[str, Any], result: Any, ps: Callable[[Any], tuple[int, ...]], rank: int) -> None:
        self.em, self.name, self.path, self.where = em, name, path, where
        self.args, self.kwargs, self.result, self.ps = args, kwargs, result, ps
        #: the full rank (with the batch) of the first activation argument
        self.rank = rank
        #: whether a reshape-like op copied its input (set by the tracer from the traced tensors)
        self.copies: bool | None = None
        #: the traced value of the first activation argument (set by the tracer)
        self.first: Any = None
        #: the traced values of the activation arguments, by ref (set by the tracer)
        self.traced: dict[str, Any] = {}

    def emit(self, method: str, *args: Any, **kwargs: Any) -> str:
        return self.em.emit(self.path, method, *args, name=self.name, **kwargs)

    def arg(self, i: int, key: str, default: Any = None) -> Any:
        if i < len(self.args):
            return self.args[i]
        return self.kwargs.get(key, default)

    def out_shape(self) -> tuple[int, ...]:
        return self.ps(self.result)

    def sample_dim(self, dim: int) -> int | None:
        """The per-sample index of full-rank dimension ``dim`` of the first activation argument, or
        None for its batch dimension: the first of extent ``TRACE_BATCH``, as :func:`.emit.per_sample`
        finds it (dimension 1 of a sequence-first tensor), else dimension 0 folding the batch in."""
        d = dim % self.rank
        shape = tuple(self.first.shape) if self.first is not None else (TRACE_BATCH,)
        if TRACE_BATCH not in shape:  # the batch folded into dimension 0, which keeps its place
            return None if d == 0 else d
        b = shape.index(TRACE_BATCH)
        return None if d == b else d - (d > b)

    def view(self, x: str) -> str:
        return self.emit("view", x, self.out_shape())


def _value(v: Any) -> Any:
    return v.value if isinstance(v, Const) else v


def _acts(args: list[Any]) -> list[str]:
    return [a for a in args if isinstance(a, str)]


def _pool_size(c: Ctx, x: str, size: Any) -> tuple[int, ...]:
    """An adaptive pool's output extents (``None`` keeps the input's)."""
    ins = c.em.builder.shape(x)[1:]
    sizes = (size,) * len(ins) if isinstance(size, int) or size is None else tuple(size)
    return tuple(i if s is None else int(s) for s, i in zip(sizes, ins, strict=True))


def _reduced(c: Ctx, x: str) -> tuple[int, ...]:
    """The per-sample shape of ``x.mean(dims, keepdim)`` / ``sum`` / ``amax``."""
    ins = c.em.builder.shape(x)
    dims = _value(c.arg(1, "dim"))
    keep = bool(_value(c.arg(2, "keepdim", False)))
    if dims is None:
        raise UnsupportedOp(f"operator mean at {c.where}: a reduction over the batch dimension")
    mapped = {c.sample_dim(d) for d in ((dims,) if isinstance(dims, int) else dims)}
    if None in mapped:
        raise UnsupportedOp(f"operator mean at {c.where}: a reduction over the batch dimension")
    dims = {d for d in mapped if d is not None}
    out = tuple(1 if i in dims else e for i, e in enumerate(ins)) if keep else \
        tuple(e for i, e in enumerate(ins) if i not in dims)
    return out or (1,)


_WEIGHTED = ("Conv", "ConvTranspose", "Linear", "BatchNorm", "SyncBatchNorm", "LayerNorm", "GroupNorm", "InstanceNorm")


def module_layer(c: Ctx, mod: Any, x: Any) -> Any:
    """The IR layer(s) for a call of the torch.nn module ``mod`` on activation ``x``; a module with
    weights must hold the parameters the IR infers from its input's shape."""
    out = _module_layer(c, mod, x)
    if type(mod).__name__.startswith(_WEIGHTED) and isinstance(out, str):
        have, want = sum(p.numel() for p in mod.parameters()), c.em.builder.layer(out).params
        if have != want:
            raise DataError(f"{c.where}: nn.{type(mod).__name__} holds {have:,} parameters, but on its input "
                            f"of shape {c.em.builder.shape(x)} it would hold {want:,} (wrong input size?)")
    return out


def _module_layer(c: Ctx, mod: Any, x: Any) -> Any:
    t = type(mod).__name__
    nd = int(t[-2]) if t[-2:] in ("1d", "2d", "3d") and t.startswith(("Conv", "MaxPool", "AvgPool", "Adaptive")) else 0
    if nd and len(c.em.builder.shape(x)) != nd + 1:
        raise DataError(f"{c.where}: nn.{t} needs a per-sample input of {nd + 1} dimensions, gets shape "
                        f"{c.em.builder.shape(x)} (see --input-shape)")
    if t in ("Conv1d", "Conv2d", "Conv3d"):
        pad = mod.padding
        if isinstance(pad, str):  # 'same' / 'valid'
            pad = tuple(d * (k - 1) // 2 for k, d in zip(mod.kernel_size, mod.dilation, strict=True)) \
                if pad == "same" else 0
        return c.emit("conv", x, mod.out_channels, mod.kernel_size, mod.stride, pad, mod.dilation, mod.groups,
                      mod.bias is not None)
    if t in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"):
        return c.emit("conv_transpose", x, mod.out_channels, mod.kernel_size, mod.stride, mod.padding,
                      mod.output_padding, mod.groups, mod.bias is not None, mod.dilation)
    if t == "Linear":
        return c.emit("linear", _rows(c, x), mod.out_features, mod.bias is not None)
    if t in ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"):
        return c.emit("bn", x, mod.affine)
    if t == "LayerNorm":
        return c.emit("norm", x, "layernorm", _own_params(mod), math.prod(mod.normalized_shape))
    if t == "GroupNorm":
        return c.emit("norm", x, "groupnorm", _own_params(mod), 0, mod.num_groups)
    if t in ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"):
        return c.emit("norm", x, "groupnorm", _own_params(mod), 0, c.em.builder.shape(x)[0])
    if t in ACT_MODULES:
        return c.emit("act", x, ACT_MODULES[t], bool(getattr(mod, "inplace", False)))
    if t in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"):
        return x if mod.p == 0 else c.emit("dropout", x, mod.p, bool(mod.inplace))
    if t == "Identity":
        return x
    if t in ("MaxPool1d", "MaxPool2d", "MaxPool3d") and not mod.return_indices:
        return c.emit("maxpool", x, mod.kernel_size, mod.stride, mod.padding, mod.dilation, mod.ceil_mode)
    if t in ("AvgPool1d", "AvgPool2d", "AvgPool3d"):
        return c.emit("avgpool", x, mod.kernel_size, mod.stride, mod.padding, mod.ceil_mode)
    if t.startswith("AdaptiveAvgPool"):
        return c.emit("adaptive_avgpool", x, _pool_size(c, x, mod.output_size))
    if t.startswith("AdaptiveMaxPool") and not mod.return_indices:
        return c.emit("adaptive_maxpool", x, _pool_size(c, x, mod.output_size))
    if t == "Flatten":
        return c.emit("flatten", x) if mod.start_dim == 1 and mod.end_dim == -1 else c.view(x)
    if t == "Unflatten":
        return c.view(x)
    if t in ("Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"):
        return _upsample(c, x, "nearest" if t == "UpsamplingNearest2d" else
                         "bilinear" if t == "UpsamplingBilinear2d" else mod.mode, mod.scale_factor, mod.size)
    if t in ("Softmax", "LogSoftmax", "Softmax2d"):
        return c.emit("softmax", x)
    if t == "MultiheadAttention":
        return _mha(c, mod)
    raise UnsupportedOp(f"operator nn.{t} at {c.where} cannot be priced by perfmodel's IR")


def _own_params(mod: Any) -> int:
    return sum(p.numel() for p in mod.parameters(recurse=False))


def _upsample(c: Ctx, x: str, mode: str, scale_factor: Any, size: Any) -> str:
    ins = c.em.builder.shape(x)
    if size is not None:
        sizes = (size,) * (len(ins) - 1) if isinstance(size, int) else tuple(size)
        scales = {s / i for s, i in zip(sizes, ins[1:], strict=True)}
    else:
        scales = {float(f) for f in ((scale_factor,) if isinstance(scale_factor, (int, float)) else scale_factor)}
    scale = int(next(iter(scales)))
    if len(scales) != 1 or scale != next(iter(scales)) or scale < 1:
        raise UnsupportedOp(f"operator interpolate at {c.where}: scales {sorted(scales)} are not one integer")
    return c.emit("upsample", x, scale, "bilinear" if mode in ("bilinear", "trilinear", "bicubic") else "nearest")


def _mha(c: Ctx, mod: Any) -> tuple[str, Any]:
    """``nn.MultiheadAttention`` (self- or cross-attention, packed or separate projections); a
    packed self-attention is what eager PyTorch runs for it (:mod:`.mha`)."""
    q, k, v = (c.arg(i, key) for i, key in enumerate(("query", "key", "value")))
    given = [_value(c.arg(i, key)) for i, key in ((3, "key_padding_mask"), (5, "attn_mask"), (7, "is_causal"))]
    masked = any(g is not None and g is not False for g in given)
    if not all(isinstance(t, str) for t in (q, k, v)) or masked:
        raise UnsupportedOp(f"operator nn.MultiheadAttention at {c.where}: only activation inputs without masks")
    _sequence_first(c, mod, (q, k))
    need_weights = c.kwargs.get("need_weights", True) if len(c.args) < 5 else c.args[4]
    average = c.kwargs.get("average_attn_weights", True) if len(c.args) < 7 else c.args[6]
    bias = mod.in_proj_bias is not None
    if q == k == v and mod._qkv_same_embed_dim:
        a = MhaCall(mod.embed_dim, mod.num_heads, bias, mod.out_proj.bias is not None, bool(need_weights),
                    bool(average), float(mod.dropout), seq_first_copy(c.first, mod.batch_first))
        out, weights = emit_self_attention(c.em, c.path, c.name, q, a)
        return out, weights if weights is not None else Const(None)
    b = c.em.builder
    lq, lk = (b.shape(q)[0], b.shape(k)[0]) if not mod.batch_first else (b.shape(q)[-2], b.shape(k)[-2])
    a = MhaCall(mod.embed_dim, mod.num_heads, bias, mod.out_proj.bias is not None, bool(need_weights),
                bool(average), float(mod.dropout))
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


def _swin(c: Ctx, x: str) -> str:
    """torchvision's ``shifted_window_attention`` (Swin v1 and v2), written out as IR layers:
    windows of the padded map, one qkv projection, two products per window and head with the
    relative position bias (and v2's cosine scaling) added, softmax, output projection."""
    em, base = c.em, c.name
    h, w, ch = em.builder.shape(x)
    ws, heads = [int(v) for v in _value(c.arg(4, "window_size"))], int(_value(c.arg(5, "num_heads")))
    qkv_w, proj_w, rpb = c.arg(1, "qkv_weight"), c.arg(2, "proj_weight"), c.arg(3, "relative_position_bias")
    qkv_b, proj_b, logit = c.arg(9, "qkv_bias"), c.arg(10, "proj_bias"), c.arg(11, "logit_scale")
    training = bool(_value(c.arg(12, "training", True)))
    att_p, out_p = float(_value(c.arg(7, "attention_dropout", 0.0))), float(_value(c.arg(8, "dropout", 0.0)))
    ph, pw = -(-h // ws[0]) * ws[0], -(-w // ws[1]) * ws[1]
    nw, n, hd = (ph // ws[0]) * (pw // ws[1]), ws[0] * ws[1], ch // heads

    def emit(method: str, *args: Any, tag: str, **kw: Any) -> str:
        return em.emit(c.path, method, *args, name=f"{base}.{tag}", **kw)

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


def _arith(c: Ctx, fn: str, a: Any, b: Any, inplace: bool) -> Any:
    if isinstance(a, str) and isinstance(b, str):
        if fn in ("add", "sub"):
            return c.emit("add", a, b, inplace)
        return c.emit("mul", a, b)
    x, k = (a, b) if isinstance(a, str) else (b, a)
    const = k if isinstance(k, Const) else Const(k, None)
    rank = max(c.rank, len(const.shape or ()))
    return c.emit("const_op", x, fn, operand_shape(const, rank), c.em.new_params(const))


def _cat(c: Ctx) -> str:
    items = list(c.arg(0, "tensors"))
    dim = int(c.arg(1, "dim", 0))
    rank = c.rank
    sd = c.sample_dim(dim)
    if sd is None:
        raise UnsupportedOp(f"operator cat at {c.where}: concatenating along the batch dimension")
    d = sd
    acts = _acts(items)
    consts = [t for t in items if isinstance(t, Const)]
    extent = sum(operand_shape(k, rank)[d] for k in consts)
    if len(acts) == 1 and not consts:
        return acts[0]
    return c.emit("concat", acts, dim=d, const_extent=extent, params=c.em.new_params(*consts))


def _rows(c: Ctx, x: str) -> str:
    """``x``, or the copy ``aten::matmul`` makes of it to fold its tokens into a GEMM's rows."""
    f = c.first
    if f is None or not rows_copy(tuple(f.shape), tuple(f.stride())):
        return x
    return c.em.emit(c.path, "view", x, c.em.builder.shape(x), copy=True, name=f"{c.name}.in_copy")


def _matmul(c: Ctx, a: Any, b: Any) -> str:
    if isinstance(a, str) and isinstance(b, str):
        return c.emit("matmul", a, b)
    if isinstance(a, str) and isinstance(b, Const) and b.shape is not None and len(b.shape) == 2:
        c.em.new_params(b)
        return c.emit("linear", _rows(c, a), b.shape[1], False)
    raise UnsupportedOp(f"operator matmul at {c.where}: a constant left operand cannot be priced")


def _norm_fn(c: Ctx, base: str, x: str) -> str:
    consts = [v for v in (*c.args[1:], *c.kwargs.values()) if isinstance(v, Const)]
    params = c.em.new_params(*consts)
    if base == "layer_norm":
        return c.emit("norm", x, "layernorm", params, math.prod(_value(c.arg(1, "normalized_shape"))))
    if base == "group_norm":
        return c.emit("norm", x, "groupnorm", params, 0, int(_value(c.arg(1, "num_groups"))))
    return c.emit("bn", x, params > 0)


def function_layer(c: Ctx, fname: str) -> Any:
    """The IR layer for a function or method ``fname`` with at least one activation argument."""
    base = fname.rstrip("_") if fname not in ("__add__", "__mul__") else fname.strip("_")
    inplace = fname.endswith("_") and not fname.startswith("_") or fname.startswith("i") and base in _ARITH
    x = next(a for a in c.args if isinstance(a, str)) if _acts(c.args) else None
    if base in _ARITH or base in ("radd", "rmul", "rsub", "rtruediv"):
        fn = _ARITH.get(base, _ARITH.get(base[1:], "add"))
        return _arith(c, fn, c.args[0], c.args[1], inplace and isinstance(c.args[1], str))
    if base in ("cat", "concat", "concatenate"):
        return _cat(c)
    if base in ACT_FUNCTIONS and x is not None:
        return c.emit("act", x, ACT_FUNCTIONS[base], inplace or bool(_value(c.kwargs.get("inplace", False))))
    if x is None:
        raise UnsupportedOp(f"operator {fname} at {c.where}: activations inside containers cannot be priced")
    if base in _VIEWS:
        if base == "flatten" and len(c.out_shape()) == 1 and c.copies is False:
            return c.emit("flatten", x)
        return c.emit("view", x, c.out_shape(), copy=bool(c.copies))
    if base in ("matmul", "bmm", "mm"):
        return _matmul(c, c.args[0], c.args[1])
    if base in ("softmax", "log_softmax"):
        return c.emit("softmax", x)
    if base == "scaled_dot_product_attention":
        return c.emit("attention", *c.args[:3])
    if base == "shifted_window_attention":
        return _swin(c, x)
    if base == "_patch_merging_pad":  # torchvision's Swin: 2x2 neighbours stacked on the channels
        h, w, ch = c.em.builder.shape(x)
        return c.emit("view", x, (-(-h // 2), -(-w // 2), 4 * ch), copy=True)
    if base == "stochastic_depth":  # torchvision.ops: each sample's branch kept or dropped (drop path)
        p, train = float(_value(c.arg(1, "p", 0.0))), bool(_value(c.arg(3, "training", True)))
        if not p or not train:
            return x
        return c.emit("const_op", x, "mul", (1,) * len(c.em.builder.shape(x)), 0)
    if base in ("dropout", "dropout1d", "dropout2d", "dropout3d"):
        p, train = float(_value(c.arg(1, "p", 0.5))), bool(_value(c.arg(2, "training", True)))
        return c.emit("dropout", x, p) if p and train else x
    if base in ("mean", "sum", "amax"):
        return c.emit("mean", x, _reduced(c, x))
    if base in ("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"):
        return c.emit("adaptive_avgpool", x, _pool_size(c, x, _value(c.arg(1, "output_size"))))
    if base in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
        k = _value(c.arg(1, "kernel_size"))
        s = _value(c.arg(2, "stride")) or k
        p = _value(c.arg(3, "padding", 0))
        if base.startswith("max"):
            return c.emit("maxpool", x, k, s, p, _value(c.arg(4, "dilation", 1)), bool(_value(c.arg(5, "ceil_mode"))))
        return c.emit("avgpool", x, k, s, p, bool(_value(c.arg(4, "ceil_mode"))))
    if base in ("interpolate", "upsample"):
        return _upsample(c, x, str(_value(c.arg(3, "mode", "nearest"))), _value(c.arg(2, "scale_factor")),
                         _value(c.arg(1, "size")))
    if base in ("layer_norm", "group_norm", "batch_norm"):
        return _norm_fn(c, base, x)
    raise UnsupportedOp(f"operator {fname} at {c.where} cannot be priced by perfmodel's IR")


#: Modules run for real on meta tensors while tracing (their meta kernels are native, or their
#: output layout is not simply batch-first); the others get an empty tensor of the IR's shape.
RUN_MODULES = frozenset({"Flatten", "Unflatten", "Identity", "MultiheadAttention", "MaxPool1d", "MaxPool2d",
                         "MaxPool3d"})


def runs_for_real(op: str, fname: str) -> bool:
    """Whether a node is executed on meta tensors rather than given the IR's output shape: views
    (their shapes come from torch) and ops the IR does not price (to report them, not a torch error)."""
    if op == "call_module":
        return fname in RUN_MODULES
    base = fname.rstrip("_")
    return base in _VIEWS or base in ("chunk", "split", "unbind", "tensor_split", "getitem")


def function_name(target: Any) -> str:
    """A call_function / call_method target as a plain name (``operator.add`` -> ``add``)."""
    if isinstance(target, str):
        return target
    if target is operator.getitem:
        return "getitem"
    return str(getattr(target, "__name__", target))


def creates_constant(fname: str) -> bool:
    """Whether the op makes a tensor or value that does not depend on its inputs' values."""
    return fname.rstrip("_") in _NEW_TENSORS or fname in _NEW_TENSORS

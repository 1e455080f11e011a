"""torch.fx nodes as IR layers: one function per operator family, dispatched by module type or function."""

from __future__ import annotations

import math
import operator
from typing import Any

from ...errors import DataError
from .emit import Const, UnsupportedOp, operand_shape
from .fx_attention import mha_layer, swin_attention
from .fx_ctx import Ctx
from .fx_ctx import const_value as _value
from .strides import rows_copy

__all__ = ["module_layer", "function_layer", "ACT_MODULES", "ACT_FUNCTIONS"]

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
        return mha_layer(c, mod)
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
    d = c.sample_dim(dim)
    if d is None:
        raise UnsupportedOp(f"operator cat at {c.where}: concatenating along the batch dimension")
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
        if c.arg(3, "attn_mask") is not None:  # an additive or boolean mask: not a flash kernel's input
            raise UnsupportedOp(f"operator scaled_dot_product_attention at {c.where}: attn_mask is not read "
                                f"(perfmodel prices unmasked or is_causal attention)")
        return c.emit("attention", *c.args[:3], causal=bool(_value(c.arg(5, "is_causal", False))))
    if base == "shifted_window_attention":
        return swin_attention(c, x)
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

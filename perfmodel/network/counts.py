"""Symbolic per-layer counts (FLOPs, parameters, traffic, saved activations) and their compiled form.

Every count is a sympy expression of the batch ``b`` and the spatial split factors
``s_d, s_h, s_w`` (a tile of a spatially decomposed layer has ``1/s`` of each extent), so a
spatial split is a substitution. Every count has the form
``b * (c_0 + c_2 / (s_h*s_w) + c_3 / (s_d*s_h*s_w))`` (whole tensors, 2-D tiles, 3-D tiles),
so :func:`compile_counts` keeps the three integer coefficients of each count in arrays and
evaluates all layers at once with numpy; the sympy expressions are built from the same
coefficients, only when asked for (``CompiledCounts.counts``, used by ``explain``).

FLOP conventions (1 multiply-add = 2 FLOPs):

* convolution: ``2 * out_elems * (C_in / groups) * prod(kernel)``; transposed convolution
  ``2 * in_elems * (C_out / groups) * prod(kernel)``; linear ``2 * in * out``. These are the
  ``matmul`` FLOPs, the convention of ``torch.utils.flop_counter`` and of published GFLOPs
  tables (no bias, no elementwise ops).
* backward: input gradient and weight gradient each cost the forward matmul FLOPs (the two
  transposed products of the same sizes); the first layer (reading the network input) has
  no input gradient.
* total forward FLOPs add the bias and the elementwise ops with the per-element counts of
  :data:`ELEMENTWISE_FLOPS` (conventions; elementwise layers are memory-bound, so the
  roofline prices them by bytes and these counts hardly matter).

Saved activations follow what autograd keeps: convolution, linear and batch-norm keep their
input; ReLU, sigmoid and tanh their output; the other activations their input; max-pooling
its input and int64 indices; average pooling its input; a broadcast multiply both operands;
dropout a one-byte mask (Dropout2d/3d: one fp32 scale per channel); add, concat, flatten and
nearest upsampling nothing. Storage is
counted once: in-place ops and views share their input's storage, except that an in-place
activation whose backward reads its input (ReLU6, SiLU, ...; not ReLU, sigmoid, tanh) makes
autograd save a copy of that input. The loss is excluded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import numpy as np
import sympy as sp

from .graph import Network
from .layers import MATMUL_KINDS, Layer, numel

__all__ = [
    "B",
    "S_D",
    "S_H",
    "S_W",
    "LayerCounts",
    "CompiledCounts",
    "layer_counts",
    "network_counts",
    "saved_storages",
    "compile_counts",
    "ELEMENTWISE_FLOPS",
    "COUNT_FIELDS",
]

#: The batch (samples on one device) and the spatial split factors of a tile.
B, S_D, S_H, S_W = sp.symbols("b s_d s_h s_w", positive=True)

#: Forward FLOPs per output element of elementwise ops (backward: twice as many).
ELEMENTWISE_FLOPS: dict[str, int] = {
    "relu": 1, "relu6": 2, "sigmoid": 4, "tanh": 4, "silu": 5, "hardswish": 5,
    "hardsigmoid": 3, "gelu": 8, "batchnorm": 8, "add": 1, "mul": 1, "dropout": 2,
    "leaky_relu": 2, "elu": 5, "mish": 8, "softplus": 5, "hardtanh": 2,
    "layernorm": 8, "groupnorm": 8, "softmax": 5, "const_op": 1,
}

_SAVES_OUTPUT = frozenset({"relu", "sigmoid", "tanh"})
#: In-place activations whose backward reads their result (no copy of the input is kept).
_INPLACE_SAVES_OUTPUT = frozenset({"leaky_relu", "elu"})

#: The fields of :class:`LayerCounts` that are expressions (in the order compiled).
COUNT_FIELDS = (
    "fwd_flops",
    "fwd_matmul_flops",
    "bwd_input_flops",
    "bwd_weight_flops",
    "fwd_mem_elems",
    "bwd_mem_elems",
    "saved_elems",
    "saved_extra_bytes",
    "out_elems",
)
_FIELD = {f: i for i, f in enumerate(COUNT_FIELDS)}


def _scale_column(ndim: int) -> int:
    """Which coefficient a tensor with ``ndim`` spatial dimensions scales: 0 whole, 1 by 2-D tile, 2 by 3-D tile."""
    return 1 if ndim == 2 else 2 if ndim == 3 else 0


#: The factor of each coefficient column (see :func:`_scale_column`).
_COLUMN_SCALES: tuple[sp.Expr, sp.Expr, sp.Expr] = (sp.Integer(1), 1 / (S_H * S_W), 1 / (S_D * S_H * S_W))


@dataclass(frozen=True)
class LayerCounts:
    """Counts of one layer for a batch ``b`` on one tile (sympy expressions; params an int)."""

    name: str
    kind: str
    params: int
    fwd_flops: sp.Expr
    fwd_matmul_flops: sp.Expr
    bwd_input_flops: sp.Expr
    bwd_weight_flops: sp.Expr
    fwd_mem_elems: sp.Expr
    bwd_mem_elems: sp.Expr
    saved_elems: sp.Expr
    saved_extra_bytes: sp.Expr
    out_elems: sp.Expr


def _matmul_flops_per_sample(layer: Layer) -> int:
    if layer.kind == "conv":
        return 2 * layer.out_elems * (layer.in_shape[0] // layer.groups) * math.prod(layer.kernel)
    if layer.kind == "conv_transpose":
        return 2 * numel(layer.in_shape) * (layer.out_shape[0] // layer.groups) * math.prod(layer.kernel)
    if layer.kind == "linear":
        return 2 * numel(layer.in_shape) * layer.out_shape[-1]
    if layer.kind == "matmul":
        return 2 * layer.out_elems * int(layer.attr("k"))
    if layer.kind == "attention":  # q @ k^T, then the weights @ v
        rows = layer.out_elems // layer.out_shape[-1]
        return 2 * rows * int(layer.attr("s")) * (int(layer.attr("e")) + layer.out_shape[-1])
    return 0


def _elementwise_bwd_flops(layer: Layer) -> int:
    """Backward FLOPs per sample of an elementwise layer: twice its forward's, except an add's, which
    passes ``dy`` on to each operand (PyTorch ``derivatives.yaml``, ``add.Tensor``) and only sums a
    broadcast operand's gradient to its shape (autograd's ``validate_outputs``: ``at::sum_to``)."""
    n_out = layer.out_elems
    if layer.kind == "add":
        return n_out * sum(1 for s in layer.in_shapes if numel(s) < n_out)
    return 2 * ELEMENTWISE_FLOPS[layer.kind] * n_out


def layer_coefficients(layer: Layer, first: bool, saved_storages: dict[str, int]) -> np.ndarray:
    """The counts of ``layer`` per sample as coefficients, shape ``(len(COUNT_FIELDS), 3)``: column
    0 of whole tensors, 1 of tensors split by a 2-D tile, 2 by a 3-D tile; ``saved_storages`` maps
    each tensor storage this layer is the first to save to its elements per sample (see
    :func:`saved_storages`)."""
    so = _scale_column(layer.spatial_dims)
    si = _scale_column(len(layer.in_shape) - 1)
    n_out = layer.out_elems
    n_in = sum(numel(s) for s in layer.in_shapes)
    kind = layer.kind
    mm = _matmul_flops_per_sample(layer)
    ew = 0
    bwd_ew = 0
    if kind == "attention":  # scaling and softmax of the score matrix (5 FLOPs per score)
        ew = 5 * mm // (2 * (int(layer.attr("e")) + layer.out_shape[-1]))
        bwd_ew = 2 * ew
    elif kind in MATMUL_KINDS:
        ew = n_out if layer.bias else 0
        bwd_ew = n_out if layer.bias else 0
    elif kind == "act":
        ew, bwd_ew = ELEMENTWISE_FLOPS[layer.fn] * n_out, 2 * ELEMENTWISE_FLOPS[layer.fn] * n_out
    elif kind in ("batchnorm", "add", "mul", "dropout", "layernorm", "groupnorm", "softmax", "const_op"):
        ew, bwd_ew = ELEMENTWISE_FLOPS[kind] * n_out, _elementwise_bwd_flops(layer)
    elif kind in ("maxpool", "avgpool"):
        ew, bwd_ew = math.prod(layer.kernel) * n_out, n_out
    elif kind in ("adaptive_avgpool", "adaptive_maxpool", "mean"):
        ew, bwd_ew = numel(layer.in_shape), numel(layer.in_shape)
    elif kind == "upsample":
        ew = 4 * n_out if layer.attr("bilinear") else 0
        bwd_ew = ew
    elif kind == "lrn":  # a square and an add per channel of the window, then scale, power, divide
        ew, bwd_ew = (2 * int(layer.attr("size")) + 4) * n_out, (4 * int(layer.attr("size")) + 8) * n_out
    # activation traffic in elements (weights are priced separately from ``params``)
    if kind in MATMUL_KINDS:
        fwd_mem, bwd_mem = n_in + n_out, (n_out + n_in) if first else 2 * (n_out + n_in)
    elif kind in ("batchnorm", "layernorm", "groupnorm"):
        fwd_mem, bwd_mem = 3 * n_out, 4 * n_out
    elif kind in ("act", "dropout", "softmax", "const_op", "lrn"):  # cuDNN's LRN backward reads x, y and dy
        fwd_mem, bwd_mem = 2 * n_out, (4 if kind == "lrn" else 3) * n_out
    elif kind in ("add", "mul", "maxpool", "avgpool", "adaptive_avgpool", "adaptive_maxpool", "mean", "upsample"):
        fwd_mem, bwd_mem = n_in + n_out, n_in + n_out
    elif kind == "concat":
        fwd_mem, bwd_mem = 2 * n_out, 0
    elif kind == "view" and layer.attr("copy"):  # a reshape that has to copy
        fwd_mem, bwd_mem = 2 * n_out, 2 * n_out
    else:  # flatten and view: no data moves
        fwd_mem, bwd_mem = 0, 0
    bwd_in = 0 if first else mm
    # a product of two activations has two operand gradients; the second is priced as the "weight" one
    bwd_w = mm if layer.params or kind in ("matmul", "attention") else 0
    coef = np.zeros((len(COUNT_FIELDS), 3))
    # saved activations: this layer's first-saved storages scale like its input or output
    for storage, elems in saved_storages.items():
        coef[_FIELD["saved_elems"], so if storage == layer.name else si] += elems
    extra = 0
    if kind in ("maxpool", "adaptive_maxpool"):
        extra = 8 * n_out  # int64 indices
    elif kind == "attention":
        extra = 4 * (n_out // layer.out_shape[-1])  # fp32 log-sum-exp per query row
    elif kind == "dropout" and layer.attr("channelwise"):
        # nn.Dropout2d/3d multiply by a (N, C, 1, 1) noise tensor, saved for backward (fp32)
        extra = 4 * layer.out_shape[0]
    elif kind == "dropout":
        extra = n_out  # bool mask
    for f, v in (
        ("fwd_flops", mm + ew),
        ("fwd_matmul_flops", mm),
        ("bwd_input_flops", bwd_in + bwd_ew),
        ("bwd_weight_flops", bwd_w),
        ("fwd_mem_elems", fwd_mem),
        ("bwd_mem_elems", bwd_mem),
        ("saved_extra_bytes", extra),
        ("out_elems", n_out),
    ):
        coef[_FIELD[f], so] = v
    if kind == "dropout" and layer.attr("channelwise"):  # per channel: not split by spatial tiles
        coef[_FIELD["saved_extra_bytes"], so] = 0
        coef[_FIELD["saved_extra_bytes"], 0] = extra
    return coef


def _expr(c: np.ndarray) -> sp.Expr:
    """``b * (c_0 + c_2/(s_h*s_w) + c_3/(s_d*s_h*s_w))`` for one count's three coefficients."""
    return B * sp.Add(*(sp.Integer(int(v)) * scale for v, scale in zip(c, _COLUMN_SCALES, strict=True) if v))


def _layer_counts(layer: Layer, coef: np.ndarray) -> LayerCounts:
    exprs = {f: _expr(coef[i]) for i, f in enumerate(COUNT_FIELDS)}
    return LayerCounts(name=layer.name, kind=layer.kind, params=layer.params, **exprs)


def layer_counts(layer: Layer, first: bool, saved_storages: dict[str, int]) -> LayerCounts:
    """The symbolic counts of ``layer`` (see :func:`layer_coefficients`)."""
    return _layer_counts(layer, layer_coefficients(layer, first, saved_storages))


def _storage_of(net: Network) -> dict[str, str]:
    """Tensor -> the storage it lives in (in-place ops and views share their input's)."""
    storage: dict[str, str] = {"input": "input"}
    for layer in net.layers:
        aliases = layer.inplace or layer.kind == "flatten" or layer.kind == "view" and not layer.attr("copy")
        storage[layer.name] = storage[layer.inputs[0]] if aliases else layer.name
    return storage


def _saved_tensors(layer: Layer) -> tuple[str, ...]:
    kind = layer.kind
    if kind in ("matmul", "mul"):
        return layer.inputs
    if kind == "attention":  # flash / memory-efficient kernels keep q, k, v and the output
        return (*layer.inputs, layer.name)
    if kind in MATMUL_KINDS or kind in (
        "batchnorm", "layernorm", "groupnorm", "maxpool", "avgpool", "adaptive_avgpool", "adaptive_maxpool"
    ):
        return (layer.inputs[0],)
    if kind == "act":
        return (layer.name,) if layer.fn in _SAVES_OUTPUT or layer.inplace else (layer.inputs[0],)
    if kind == "softmax":
        return (layer.name,)
    if kind == "lrn":  # its backward reads the input and the output
        return (layer.inputs[0], layer.name)
    if kind == "const_op" and layer.fn in ("mul", "div") and layer.params:
        return (layer.inputs[0],)  # the parameter's gradient reads the activation
    return ()


def saved_storages(net: Network) -> list[dict[str, int]]:
    """Per layer: the storages it is the first to save (keyed by the tensor it saves), with elements."""
    storage = _storage_of(net)
    seen: set[str] = set()
    out: list[dict[str, int]] = []
    for layer in net.layers:
        mine: dict[str, int] = {}
        for t in _saved_tensors(layer):
            st = storage[t]
            if layer.kind == "act" and layer.inplace and layer.fn not in _SAVES_OUTPUT | _INPLACE_SAVES_OUTPUT:
                st = f"{layer.name}#clone"  # autograd saves a copy of the input it overwrites
            if st in seen or t == "input":
                continue  # the network input is data, not an activation kept by autograd
            seen.add(st)
            # a view (a slice, a head of a packed q/k/v) keeps its whole storage alive
            mine[t] = numel(net.shape_of(t if st.endswith("#clone") else st))
        out.append(mine)
    return out


def _network_coefficients(net: Network) -> np.ndarray:
    """Coefficients of every layer, shape ``(len(COUNT_FIELDS), 3, n_layers)``."""
    saved = saved_storages(net)
    per_layer = [
        layer_coefficients(layer, all(t == "input" for t in layer.inputs), saved[i])
        for i, layer in enumerate(net.layers)
    ]
    return np.stack(per_layer, axis=-1) if per_layer else np.zeros((len(COUNT_FIELDS), 3, 0))


def network_counts(net: Network) -> tuple[LayerCounts, ...]:
    """The symbolic counts of every layer of ``net``."""
    coef = _network_coefficients(net)
    return tuple(_layer_counts(layer, coef[:, :, i]) for i, layer in enumerate(net.layers))


@dataclass(frozen=True, eq=False)
class CompiledCounts:
    """Numeric counts of a network: ``evaluate(b, s_d, s_h, s_w)`` returns a dict of per-layer arrays."""

    network: Network
    coefficients: np.ndarray = field(repr=False)
    params: np.ndarray = field(repr=False)
    kinds: tuple[str, ...] = field(repr=False)

    @cached_property
    def counts(self) -> tuple[LayerCounts, ...]:
        """The sympy expressions of every layer (built on first use)."""
        return tuple(_layer_counts(layer, self.coefficients[:, :, i]) for i, layer in enumerate(self.network.layers))

    def evaluate(
        self, b: float = 1.0, s_d: float = 1.0, s_h: float = 1.0, s_w: float = 1.0
    ) -> dict[str, np.ndarray]:
        c = self.coefficients
        rows = b * (c[:, 0] + c[:, 1] / (s_h * s_w) + c[:, 2] / (s_d * s_h * s_w))
        return {f: rows[i] for i, f in enumerate(COUNT_FIELDS)}

    def total(self, field: str, b: float = 1.0) -> float:
        return float(self.evaluate(b)[field].sum())


@lru_cache(maxsize=64)
def compile_counts(net: Network) -> CompiledCounts:
    """The coefficients of every layer's counts in arrays (cached per network)."""
    coef = _network_coefficients(net)
    params = np.array([layer.params for layer in net.layers], dtype=float)
    return CompiledCounts(net, coef, params, tuple(layer.kind for layer in net.layers))

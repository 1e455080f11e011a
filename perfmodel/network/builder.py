"""A builder that infers shapes and parameter counts as a network is written layer by layer."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ..errors import NetworkError
from .graph import Network
from .layers import Layer, Shape

__all__ = ["NetBuilder"]

IntOrTuple = int | Sequence[int]


def _tup(v: IntOrTuple, n: int) -> tuple[int, ...]:
    if isinstance(v, int):
        return (v,) * n
    t = tuple(v)
    if len(t) != n:
        raise NetworkError(f"expected {n} values, got {t}")
    return t


def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size (torch/nn/functional pooling_output_shape)."""
    num = size + 2 * p - d * (k - 1) - 1
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


class NetBuilder:
    """Write a network as a program; each method adds one layer and returns its tensor name.

    >>> b = NetBuilder("tiny", (3, 32, 32))
    >>> x = b.conv("input", 16, 3, padding=1)
    >>> x = b.act(b.bn(x), "relu")
    >>> net = b.build()
    """

    def __init__(self, name: str, input_shape: Shape, source: str = "") -> None:
        self.name = name
        self.input_shape = tuple(input_shape)
        self.source = source
        self._layers: list[Layer] = []
        self._shapes: dict[str, Shape] = {"input": self.input_shape}
        self._block = ""
        self._counter: dict[str, int] = {}

    # -- bookkeeping -------------------------------------------------------------------
    def shape(self, x: str) -> Shape:
        try:
            return self._shapes[x]
        except KeyError:
            raise NetworkError(f"{self.name}: unknown tensor '{x}'") from None

    def layer(self, name: str) -> Layer:
        """The layer that produced tensor ``name``."""
        for layer in reversed(self._layers):
            if layer.name == name:
                return layer
        raise NetworkError(f"{self.name}: no layer '{name}'")

    def _name(self, kind: str, name: str | None) -> str:
        if name is None:
            n = self._counter.get(kind, 0)
            self._counter[kind] = n + 1
            name = f"{self._block + '.' if self._block else ''}{kind}{n}"
        if name in self._shapes:
            raise NetworkError(f"{self.name}: duplicate layer name '{name}'")
        return name

    def _add(self, layer: Layer) -> str:
        self._layers.append(layer)
        self._shapes[layer.name] = layer.out_shape
        return layer.name

    @contextmanager
    def block(self, name: str) -> Iterator[None]:
        """Layers added inside form one link of the chain (blocks do not nest)."""
        outer = self._block
        self._block = outer if outer else name
        try:
            yield
        finally:
            self._block = outer

    def build(self) -> Network:
        return Network(self.name, self.input_shape, tuple(self._layers), self.source)

    # -- layers ------------------------------------------------------------------------
    def conv(
        self,
        x: str,
        out_channels: int,
        kernel: IntOrTuple,
        stride: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        dilation: IntOrTuple = 1,
        groups: int = 1,
        bias: bool = True,
        name: str | None = None,
    ) -> str:
        """``nn.Conv1d`` / ``nn.Conv2d`` / ``nn.Conv3d`` (by the input's rank)."""
        ins = self.shape(x)
        n = len(ins) - 1
        if n not in (1, 2, 3):
            raise NetworkError(f"{self.name}: conv on a tensor of shape {ins}")
        k, s, p, d = _tup(kernel, n), _tup(stride, n), _tup(padding, n), _tup(dilation, n)
        cin = ins[0]
        if cin % groups or out_channels % groups:
            raise NetworkError(f"{self.name}: channels {cin}->{out_channels} not divisible by groups {groups}")
        spatial = tuple(
            (ins[1 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(n)
        )
        params = out_channels * (cin // groups) * math.prod(k) + (out_channels if bias else 0)
        return self._add(
            Layer(self._name("conv", name), "conv", (x,), (ins,), (out_channels, *spatial),
                  k, s, p, d, groups, bias, params, block=self._block)
        )

    def conv_transpose(
        self,
        x: str,
        out_channels: int,
        kernel: IntOrTuple,
        stride: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        output_padding: IntOrTuple = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: IntOrTuple = 1,
        name: str | None = None,
    ) -> str:
        """``nn.ConvTranspose1d`` / ``2d`` / ``3d``."""
        ins = self.shape(x)
        n = len(ins) - 1
        if n not in (1, 2, 3):
            raise NetworkError(f"{self.name}: transposed conv on a tensor of shape {ins}")
        k, s, p, op = _tup(kernel, n), _tup(stride, n), _tup(padding, n), _tup(output_padding, n)
        d = _tup(dilation, n)
        cin = ins[0]
        if cin % groups or out_channels % groups:
            raise NetworkError(f"{self.name}: channels {cin}->{out_channels} not divisible by groups {groups}")
        spatial = tuple((ins[1 + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1 for i in range(n))
        params = cin * (out_channels // groups) * math.prod(k) + (out_channels if bias else 0)
        return self._add(
            Layer(self._name("convt", name), "conv_transpose", (x,), (ins,), (out_channels, *spatial),
                  k, s, p, d, groups, bias, params, block=self._block)
        )

    def linear(self, x: str, out_features: int, bias: bool = True, name: str | None = None) -> str:
        """``nn.Linear`` on the last dimension (a vector, or every token of a ``(T, D)`` tensor)."""
        ins = self.shape(x)
        params = ins[-1] * out_features + (out_features if bias else 0)
        return self._add(
            Layer(self._name("fc", name), "linear", (x,), (ins,), (*ins[:-1], out_features),
                  bias=bias, params=params, block=self._block)
        )

    def bn(self, x: str, affine: bool = True, name: str | None = None) -> str:
        """``nn.BatchNorm2d/3d`` (weight and bias are parameters; running stats are buffers)."""
        ins = self.shape(x)
        return self._add(
            Layer(self._name("bn", name), "batchnorm", (x,), (ins,), ins,
                  params=2 * ins[0] if affine else 0, block=self._block)
        )

    def lrn(self, x: str, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0,
            name: str | None = None) -> str:
        """``nn.LocalResponseNorm`` (Torch7's ``SpatialCrossMapLRN``, cuDNN's cross-channel LRN):
        each element divided by ``(k + alpha / size * sum of squares over size channels) ** beta``."""
        ins = self.shape(x)
        if size < 1:
            raise NetworkError(f"{self.name}: LRN size {size} (valid: 1 or more channels)")
        attrs = (("size", float(size)), ("alpha", alpha), ("beta", beta), ("k", k))
        return self._add(Layer(self._name("lrn", name), "lrn", (x,), (ins,), ins, block=self._block, attrs=attrs))

    def act(self, x: str, fn: str = "relu", inplace: bool = False, name: str | None = None) -> str:
        ins = self.shape(x)
        return self._add(
            Layer(self._name(fn, name), "act", (x,), (ins,), ins, fn=fn, inplace=inplace, block=self._block)
        )

    def maxpool(
        self,
        x: str,
        kernel: IntOrTuple,
        stride: IntOrTuple | None = None,
        padding: IntOrTuple = 0,
        dilation: IntOrTuple = 1,
        ceil_mode: bool = False,
        name: str | None = None,
    ) -> str:
        return self._pool("maxpool", x, kernel, stride, padding, dilation, ceil_mode, name)

    def avgpool(
        self,
        x: str,
        kernel: IntOrTuple,
        stride: IntOrTuple | None = None,
        padding: IntOrTuple = 0,
        ceil_mode: bool = False,
        name: str | None = None,
    ) -> str:
        return self._pool("avgpool", x, kernel, stride, padding, 1, ceil_mode, name)

    def _pool(
        self,
        kind: str,
        x: str,
        kernel: IntOrTuple,
        stride: IntOrTuple | None,
        padding: IntOrTuple,
        dilation: IntOrTuple,
        ceil_mode: bool,
        name: str | None,
    ) -> str:
        ins = self.shape(x)
        n = len(ins) - 1
        k = _tup(kernel, n)
        s = _tup(stride, n) if stride is not None else k
        p, d = _tup(padding, n), _tup(dilation, n)
        spatial = tuple(_pool_out(ins[1 + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(n))
        return self._add(
            Layer(self._name(kind, name), kind, (x,), (ins,), (ins[0], *spatial), k, s, p, d,
                  block=self._block, attrs=(("ceil_mode", float(ceil_mode)),))
        )

    def adaptive_avgpool(self, x: str, output_size: IntOrTuple = 1, name: str | None = None) -> str:
        ins = self.shape(x)
        n = len(ins) - 1
        out = _tup(output_size, n)
        return self._add(
            Layer(self._name("avgpool", name), "adaptive_avgpool", (x,), (ins,), (ins[0], *out),
                  block=self._block)
        )

    def add(self, a: str, b: str, inplace: bool = False, name: str | None = None) -> str:
        """``a + b`` of two activations (broadcast like torch)."""
        sa, sb = self.shape(a), self.shape(b)
        out = _broadcast(sa, sb, self.name)
        return self._add(Layer(self._name("add", name), "add", (a, b), (sa, sb), out, inplace=inplace,
                               block=self._block))

    def mul(self, a: str, b: str, name: str | None = None, fused_add: bool = False) -> str:
        """Broadcast multiply ``a * b`` where ``b`` is (C, 1, 1) or equal to ``a`` (SE scaling);
        ``fused_add``: the product is added to a residual by one ``addcmul`` (the add is the next layer)."""
        sa, sb = self.shape(a), self.shape(b)
        out = _broadcast(sa, sb, self.name)
        attrs = (("fused_add", 1.0),) if fused_add else ()
        return self._add(Layer(self._name("mul", name), "mul", (a, b), (sa, sb), out, block=self._block,
                               attrs=attrs))

    def concat(
        self, xs: Sequence[str], name: str | None = None, dim: int = 0, const_extent: int = 0, params: int = 0
    ) -> str:
        """Concatenate along per-sample dimension ``dim`` (0: channels); ``const_extent`` more
        entries along it come from a parameter or constant (a class token) with ``params``
        trainable elements."""
        shapes = [self.shape(x) for x in xs]
        if any(len(s) != len(shapes[0]) or s[:dim] + s[dim + 1:] != shapes[0][:dim] + shapes[0][dim + 1:]
               for s in shapes) or not 0 <= dim < len(shapes[0]):
            raise NetworkError(f"{self.name}: concat of shapes {shapes} along dimension {dim}")
        out = (*shapes[0][:dim], sum(s[dim] for s in shapes) + const_extent, *shapes[0][dim + 1:])
        attrs = (("dim", float(dim)),) if dim else ()
        return self._add(Layer(self._name("cat", name), "concat", tuple(xs), tuple(shapes), out,
                               params=params, block=self._block, attrs=attrs))

    def flatten(self, x: str, name: str | None = None) -> str:
        ins = self.shape(x)
        return self._add(Layer(self._name("flatten", name), "flatten", (x,), (ins,), (math.prod(ins),),
                               block=self._block))

    def dropout(
        self, x: str, p: float = 0.5, inplace: bool = False, name: str | None = None, channelwise: bool = False
    ) -> str:
        """Dropout; ``channelwise`` zeroes whole channels (``nn.Dropout2d``/``3d``), keeping a
        per-channel scale for backward instead of a per-element mask."""
        ins = self.shape(x)
        attrs: tuple[tuple[str, float], ...] = (("p", p),) + ((("channelwise", 1.0),) if channelwise else ())
        return self._add(Layer(self._name("dropout", name), "dropout", (x,), (ins,), ins, inplace=inplace,
                               block=self._block, attrs=attrs))

    def upsample(self, x: str, scale: int = 2, mode: str = "nearest", name: str | None = None) -> str:
        ins = self.shape(x)
        out = (ins[0], *(d * scale for d in ins[1:]))
        return self._add(Layer(self._name("up", name), "upsample", (x,), (ins,), out, block=self._block,
                               attrs=(("scale", float(scale)), ("bilinear", float(mode == "bilinear")))))

    def norm(
        self, x: str, kind: str, params: int, norm_elems: int = 0, groups: int = 1, name: str | None = None
    ) -> str:
        """``nn.LayerNorm`` (``kind="layernorm"``, over the last ``norm_elems`` elements) or
        ``nn.GroupNorm`` / ``nn.InstanceNorm`` (``kind="groupnorm"``, ``groups`` groups) with
        ``params`` affine parameters (weight and bias; 0 without them)."""
        if kind not in ("layernorm", "groupnorm"):
            raise NetworkError(f"{self.name}: norm kind '{kind}' (valid: layernorm, groupnorm)")
        ins = self.shape(x)
        if kind == "groupnorm" and ins[0] % groups:
            raise NetworkError(f"{self.name}: {ins[0]} channels not divisible by {groups} groups")
        return self._add(
            Layer(self._name(kind[:-4] + "norm", name), kind, (x,), (ins,), ins, params=params,
                  block=self._block, attrs=(("norm_elems", float(norm_elems)), ("groups", float(groups))))
        )

    def view(self, x: str, shape: Shape, copy: bool = False, name: str | None = None, piece: int = 0) -> str:
        """A reshape, permute, transpose, slice or expand to ``shape`` per sample (no arithmetic);
        ``copy``: the data is copied into a new tensor (a reshape of a non-contiguous tensor);
        ``piece``: the index of this view among the pieces of one ``chunk``/``split``/``unbind``
        (one autograd node, which sends ``x`` a single gradient)."""
        ins = self.shape(x)
        attrs = ((("copy", 1.0),) if copy else ()) + ((("split_piece", float(piece)),) if piece else ())
        return self._add(Layer(self._name("view", name), "view", (x,), (ins,), tuple(shape), block=self._block,
                               attrs=attrs))

    def mean(self, x: str, shape: Shape, name: str | None = None) -> str:
        """A mean (or sum) reduction of ``x`` to ``shape`` per sample."""
        ins = self.shape(x)
        return self._add(Layer(self._name("mean", name), "mean", (x,), (ins,), tuple(shape), block=self._block))

    def adaptive_maxpool(self, x: str, output_size: IntOrTuple = 1, name: str | None = None) -> str:
        ins = self.shape(x)
        out = _tup(output_size, len(ins) - 1)
        return self._add(Layer(self._name("maxpool", name), "adaptive_maxpool", (x,), (ins,), (ins[0], *out),
                               block=self._block))

    def matmul(self, a: str, b: str, name: str | None = None) -> str:
        """``a @ b`` of two activations with batch dimensions broadcast (``torch.matmul`` rules)."""
        sa, sb = self.shape(a), self.shape(b)
        if len(sa) < 2 or len(sb) < 2 or sa[-1] != sb[-2]:
            raise NetworkError(f"{self.name}: matmul of shapes {sa} and {sb}")
        lead = _broadcast(sa[:-2], sb[:-2], self.name)
        out = (*lead, sa[-2], sb[-1])
        return self._add(Layer(self._name("matmul", name), "matmul", (a, b), (sa, sb), out, block=self._block,
                               attrs=(("k", float(sa[-1])),)))

    def softmax(self, x: str, name: str | None = None) -> str:
        ins = self.shape(x)
        return self._add(Layer(self._name("softmax", name), "softmax", (x,), (ins,), ins, block=self._block))

    def attention(self, q: str, k: str, v: str, name: str | None = None, causal: bool = False) -> str:
        """``scaled_dot_product_attention(q, k, v, is_causal=causal)``: shapes ``(..., L, E)``, ``(..., S, E)``,
        ``(..., S, Ev)``; ``causal``: query ``i`` attends to keys ``j <= i`` only (torch's top-left alignment)."""
        sq, sk, sv = self.shape(q), self.shape(k), self.shape(v)
        if min(len(sq), len(sk), len(sv)) < 2 or sq[-1] != sk[-1] or sk[-2] != sv[-2]:
            raise NetworkError(f"{self.name}: attention of shapes {sq}, {sk}, {sv}")
        out = (*_broadcast(sq[:-2], sv[:-2], self.name), sq[-2], sv[-1])
        attrs = (("s", float(sk[-2])), ("e", float(sq[-1]))) + ((("causal", 1.0),) if causal else ())
        return self._add(Layer(self._name("attn", name), "attention", (q, k, v), (sq, sk, sv), out,
                               block=self._block, attrs=attrs))

    def const_op(self, x: str, fn: str, operand_shape: Shape, params: int = 0, name: str | None = None) -> str:
        """``x fn c`` for a parameter or constant tensor ``c`` of per-sample ``operand_shape``
        broadcast against ``x`` (layer scale, position embedding, drop-path noise; a scalar has
        shape ``()``); ``params`` counts the trainable elements behind ``c``."""
        ins = self.shape(x)
        out = _broadcast(ins, tuple(operand_shape), self.name)
        return self._add(Layer(self._name(fn, name), "const_op", (x,), (ins,), out, params=params, fn=fn,
                               block=self._block, attrs=(("operand_elems", float(math.prod(operand_shape))),)))


def _broadcast(a: Shape, b: Shape, where: str) -> Shape:
    """``torch`` broadcasting of two shapes."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            raise NetworkError(f"{where}: shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)

"""How every layer's output channels split into n parts: filter parallelism's per-GPU shares."""

from __future__ import annotations

from dataclasses import dataclass

from .graph import Network
from .layers import MATMUL_KINDS, Layer, numel

__all__ = ["Share", "LayerSplit", "blocks", "aligned_groups", "channel_window", "mixes_all_channels", "halo_reads",
           "channel_split"]

#: The output channels of one part of a layer: disjoint ``(lo, hi)`` intervals, in order (one
#: interval except for a concatenation, whose part takes part ``j`` of each input).
Share = tuple[tuple[int, int], ...]


def blocks(channels: int, n: int) -> tuple[Share, ...]:
    """``n`` contiguous blocks of ``ceil(channels / n)`` channels, the last ones short or empty.

    Part ``j`` holds ``[j * b, min(channels, (j + 1) * b))`` with ``b = ceil(channels / n)``:
    6 channels over 4 parts are ``0:2, 2:4, 4:6`` and an empty fourth part.
    """
    b = -(-channels // n)
    return tuple(((lo, min(channels, lo + b)),) if lo < channels else () for lo in range(0, n * b, b))


def aligned_groups(layer: Layer, n: int) -> bool:
    """A grouped convolution whose groups split evenly over ``n`` parts: part ``j`` of its output
    reads only part ``j`` of its input (depthwise convolutions), so it follows its input's split."""
    return layer.kind in MATMUL_KINDS and layer.kind != "linear" and layer.groups > 1 and layer.groups % n == 0


def channel_window(layer: Layer) -> tuple[int, int]:
    """Channels below and above its own that each output channel of ``layer`` reads from its input:
    a cross-channel LRN over ``size`` channels reads ``size // 2`` below and ``(size - 1) // 2``
    above (``torch.nn.LocalResponseNorm`` pads its channel axis so; Torch7's ``SpatialCrossMapLRN``
    and cuDNN's cross-channel LRN centre the same window for the odd sizes of the zoo's models);
    (0, 0) for every other layer."""
    if layer.kind != "lrn":
        return (0, 0)
    size = int(layer.attr("size"))
    return (size // 2, (size - 1) // 2)


def mixes_all_channels(layer: Layer) -> bool:
    """A layer whose every output channel depends on all input channels although it is not a matmul:
    a softmax over a per-sample vector (the classifier's), whose max and sum run over the whole row.
    A softmax over a tensor of more axes is taken over its last axis (``F.softmax(x, dim=-1)`` in
    attention, ONNX ``Softmax``'s default axis), which a channel split does not cut."""
    return layer.kind == "softmax" and len(layer.in_shape) == 1


def halo_reads(ls: LayerSplit, j: int) -> Share:
    """The channels of its input that part ``j`` of ``ls`` reads beyond its own share (its
    :attr:`LayerSplit.halo` on each side of each interval, inside the tensor), in order."""
    below, above = ls.halo
    own: set[int] = set()
    for lo, hi in ls.parts[j]:
        own.update(range(lo, hi))
    need: set[int] = set()
    for lo, hi in ls.parts[j]:
        need.update(range(max(0, lo - below), min(ls.channels, hi + above)))
    extra = sorted(need - own)
    runs: list[tuple[int, int]] = []
    for c in extra:
        if runs and runs[-1][1] == c:
            runs[-1] = (runs[-1][0], c + 1)
        else:
            runs.append((c, c + 1))
    return tuple(runs)


@dataclass(frozen=True)
class LayerSplit:
    """How one layer's output channels split into ``n`` parts.

    ``role`` is ``own`` (a convolution or linear layer that computes its own ``blocks`` of
    output channels from its whole input: filter parallelism), ``follow`` (a layer acting per
    channel, or a grouped convolution with :func:`aligned_groups`: its part ``j`` is computed
    from part ``j`` of its split inputs) or ``whole`` (not split: one part, every channel).
    ``parts`` has ``n`` shares when split (some may be empty), else one. ``aligned[i]`` says
    whether part ``j`` reads only part ``j`` of input ``i`` (plus, with a ``halo``, that many
    channels below and above each of its intervals: :func:`channel_window`, :func:`halo_reads`);
    otherwise it reads all of it.
    """

    role: str
    channels: int
    parts: tuple[Share, ...]
    aligned: tuple[bool, ...]
    halo: tuple[int, int] = (0, 0)

    @property
    def split(self) -> bool:
        return self.role != "whole"

    def size(self, j: int) -> int:
        """Channels in part ``j``."""
        return sum(hi - lo for lo, hi in self.parts[j])

    @property
    def largest_fraction(self) -> float:
        """The fraction of the channels the largest part holds (``ceil(C/n)/C`` for ``blocks``)."""
        return max(self.size(j) for j in range(len(self.parts))) / self.channels


def _whole(layer: Layer) -> LayerSplit:
    c = layer.out_shape[0]
    return LayerSplit("whole", c, (((0, c),),), (False,) * len(layer.inputs))


def channel_split(net: Network, n: int, split_matmul: bool = True) -> tuple[LayerSplit, ...]:
    """The split of every layer of ``net`` over ``n`` parts, in layer order.

    * A convolution or linear layer computes ``blocks(F, n)`` of its ``F`` output channels
      from its whole input (``own``), unless ``split_matmul`` is false (channel parallelism:
      its output is whole); a grouped convolution with :func:`aligned_groups` instead follows
      its input, part ``j`` from input part ``j``, and is split either way.
    * Any other layer is split when one of its inputs is, and follows it: a layer acting per
      channel (batch norm, activation, pooling, add, mul, dropout, upsample) takes the parts
      of its first split input, a cross-channel LRN too with the neighbouring channels of its
      window as a ``halo`` (:func:`channel_window`); a classifier's softmax, which needs its
      whole row (:func:`mixes_all_channels`), computes its own ``blocks`` from its whole input
      like a convolution (``own``); a flatten takes its input's parts, channel ``c`` becoming the
      features ``c * HW .. (c + 1) * HW``; a concatenation's part ``j`` is part ``j`` of each
      input (the ``blocks`` of an input that is not split), at that input's offset.
    * Layers that read only tensors that are not split are whole.

    With ``n == 1`` every layer is whole.
    """
    out: list[LayerSplit] = []
    by_name: dict[str, LayerSplit] = {}

    def parts_of(t: str, channels: int) -> tuple[Share, ...]:
        s = by_name.get(t)
        return s.parts if s is not None and s.split else blocks(channels, n)

    def is_split(t: str) -> bool:
        s = by_name.get(t)
        return s is not None and s.split

    for layer in net.layers:
        c = layer.out_shape[0]
        ins = layer.inputs
        if n == 1:
            ls = _whole(layer)
        elif aligned_groups(layer, n):
            mine = blocks(c, n)
            src = blocks(layer.in_shape[0], n)
            ls = LayerSplit("follow", c, mine, tuple(is_split(t) and by_name[t].parts == src for t in ins))
        elif layer.kind in MATMUL_KINDS:
            ls = LayerSplit("own", c, blocks(c, n), (False,) * len(ins)) if split_matmul else _whole(layer)
        elif not any(is_split(t) for t in ins):
            ls = _whole(layer)
        elif mixes_all_channels(layer):
            ls = LayerSplit("own", c, blocks(c, n), (False,) * len(ins))
        elif layer.kind == "concat":
            parts: list[Share] = []
            for j in range(n):
                share: list[tuple[int, int]] = []
                offset = 0
                for t, shape in zip(ins, layer.in_shapes, strict=True):
                    share.extend((offset + lo, offset + hi) for lo, hi in parts_of(t, shape[0])[j])
                    offset += shape[0]
                parts.append(tuple(share))
            ls = LayerSplit("follow", c, tuple(parts), tuple(is_split(t) for t in ins))
        elif layer.kind == "flatten":
            per = numel(layer.in_shape) // layer.in_shape[0]
            src_parts = parts_of(ins[0], layer.in_shape[0])
            scaled = tuple(tuple((lo * per, hi * per) for lo, hi in share) for share in src_parts)
            ls = LayerSplit("follow", c, scaled, (True,))
        else:
            first = next(t for t in ins if is_split(t))
            src_parts = parts_of(first, c)
            if by_name[first].channels != c:  # not a per-channel layer after all: its own blocks
                src_parts = blocks(c, n)
            ls = LayerSplit(
                "follow", c, src_parts, tuple(is_split(t) and by_name[t].parts == src_parts for t in ins),
                channel_window(layer),
            )
        out.append(ls)
        by_name[layer.name] = ls
    return tuple(out)

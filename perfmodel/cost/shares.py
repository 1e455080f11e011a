"""Each tensor's share of a layer on one GPU of a filter or channel split, and the bytes it moves.

A split does not shrink a layer's tensors alike (:func:`perfmodel.strategies.channels.split_plan`):

* filter split (a GPU computes ``f = ceil(F/n)/F`` of the ``F`` output channels): it reads the
  whole input ``x`` (all-gathered), writes ``f`` of the output ``y``; backward it reads ``f`` of
  ``dy`` and writes a partial sum of the whole ``dx`` (reduce-scattered after); it does ``f`` of
  the FLOPs;
* channel split (``f = ceil(C/n)/C`` of the ``C`` input channels): it reads ``f`` of ``x`` and
  writes a partial sum of the whole ``y`` (all-reduced after); backward it reads the whole ``dy``
  and writes ``f`` of ``dx``; ``f`` of the FLOPs;
* a layer acting per channel on a split tensor: ``f`` of everything; a replicated layer: all.

So ``x`` and ``dx`` take the input's share, ``y`` and ``dy`` the output's, and every GEMM kernel
of a convolution or linear layer (forward: x in, y out; data gradient: dy in, dx out; weight
gradient: x and dy in) moves ``|x| * share_x + |y| * share_y`` elements, as does each pair of
NCHW<->NHWC transposes around it (:mod:`.layout`). :func:`operand_elems` is that count, the one
place both use. Filters take their own share through the per-layer parameters the caller
passes (``f_par``: ``ceil(F/n)/F`` or ``ceil(C/n)/C`` of the weights).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels import LayerKernels

__all__ = ["TensorShares", "operand_elems"]


@dataclass(frozen=True, eq=False)
class TensorShares:
    """Per layer, the fraction of its input (``x``, and ``dx``), of its output (``y``, and ``dy``)
    and of its FLOPs (``work``) one GPU touches (module docstring); all ones without a split."""

    x: np.ndarray
    y: np.ndarray
    work: np.ndarray

    @classmethod
    def whole(cls, layers: int) -> TensorShares:
        """No split: every tensor and all the work."""
        ones = np.ones(layers)
        return cls(ones, ones, ones)


def operand_elems(lk: LayerKernels, scale: np.ndarray, shares: TensorShares | None = None) -> np.ndarray:
    """Activation elements one GEMM kernel of each layer reads and writes (and one pair of
    transposes around it moves): ``(|x| * share_x + |y| * share_y) * scale``, ``scale`` the
    micro-batch times the tile fraction; zero for layers without GEMM kernels."""
    scale = np.asarray(scale, dtype=float)
    if shares is None:
        return np.asarray((lk.x_elems + lk.y_elems) * scale)
    return np.asarray((lk.x_elems * shares.x + lk.y_elems * shares.y) * scale)

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
NCHW<->NHWC transposes around it (:mod:`.layout`), a grouped layer's only at the channels of the
groups it runs. :func:`operand_elems` is that count, the one
place both use. Filters take their own share through the per-layer parameters the caller
passes (``f_par``: ``ceil(F/n)/F`` or ``ceil(C/n)/C`` of the weights).

The per-GPU problem of a split IS a smaller layer: ``ceil(F/n)`` filters (filter split),
``ceil(C/n)`` input channels (channel split), or ``ceil(G/n)`` of the groups of a grouped
convolution whose groups follow a split tensor. :func:`per_gpu_kernels` gives its kernel
descriptors: the share of the underlying convolution's ``K`` (output channels) and ``C`` (input
channels; swapped for a transposed layer) enters each GEMM view on its own side
(:func:`~perfmodel.cost.kernels.layer_kernels`): forward ``n = K``, ``k = C*R*S``; data gradient
``n = C``, ``k = K*R*S``; weight gradient ``m = K``, ``n = C*R*S``. So a filter split narrows
the forward's columns, the data gradient's reduction and the weight gradient's rows, a channel
split the forward's reduction, the data gradient's columns and the weight gradient's columns;
the batch side (``N*P*Q``) stays whole, and the tensor-core padding sees the per-GPU channels.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .kernels import MM_SLOTS, LayerKernels, slot_roles
from .rounding import snap_whole

__all__ = ["TensorShares", "operand_elems", "per_gpu_kernels"]


@dataclass(frozen=True, eq=False)
class TensorShares:
    """Per layer, the fraction of its input (``x``, and ``dx``) and of its output (``y``, and
    ``dy``) one GPU touches (module docstring); all ones without a split. Its FLOPs follow from
    the smaller layer it runs (:func:`per_gpu_kernels`)."""

    x: np.ndarray
    y: np.ndarray


def operand_elems(lk: LayerKernels, scale: np.ndarray, shares: TensorShares | None = None) -> np.ndarray:
    """Activation elements one GEMM kernel of each layer reads and writes (and one pair of
    transposes around it moves): ``(|x| * share_x + |y| * share_y) * scale``, ``scale`` the
    micro-batch times the tile fraction; zero for layers without GEMM kernels. A grouped layer's
    GPU moves only its groups' channels (:func:`_operand_shares`), whatever share of the tensor
    the split gives it (a filter split's whole gathered input, a channel split's whole output)."""
    scale = np.asarray(scale, dtype=float)
    if shares is None:
        return np.asarray((lk.x_elems + lk.y_elems) * scale)
    sx, sy = _operand_shares(lk, shares)
    return np.asarray((lk.x_elems * sx + lk.y_elems * sy) * scale)


#: Which side of each GEMM view the underlying convolution's ``K`` and ``C`` enter, per kernel
#: (module docstring): ``(K side, C side)`` as indices into ``(m, n, k)``.
_CHANNEL_SIDES = {"fwd": (1, 2), "dgrad": (2, 1), "wgrad": (0, 1)}


def _group_shares(groups: np.ndarray, r_in: np.ndarray,
                  r_out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Share of a grouped layer's groups one GPU runs, and of each group's input and output
    channels: a split's block of ``r`` of the channels touches ``ceil(G r)`` whole groups (one
    at least), each at its full width on the side not split and at ``r G / ceil(G r)`` on the
    split side (both sides when the layer follows a split tensor); ungrouped layers: ``(1, r_in,
    r_out)``."""
    grouped = groups > 1
    g = np.maximum(groups, 1.0)
    r_split = np.minimum(r_in, r_out)
    g_gpu = np.where(grouped, np.ceil(snap_whole(g * r_split)), g)
    r_g = g_gpu / g
    fill = np.where(grouped, np.minimum(r_split / r_g, 1.0), 1.0)
    per_in = np.where(grouped, np.where(r_in <= r_out, fill, 1.0), r_in)
    per_out = np.where(grouped, np.where(r_out <= r_in, fill, 1.0), r_out)
    return r_g, per_in, per_out


def _channel_shares(lk: LayerKernels, shares: TensorShares) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_group_shares` of the per-GPU channels: ``shares.x`` of the input's, ``shares.y`` of the output's."""
    r_in = np.where(lk.c_in > 0, snap_whole(lk.c_in * shares.x) / np.maximum(lk.c_in, 1.0), 1.0)
    r_out = np.where(lk.c_out > 0, snap_whole(lk.c_out * shares.y) / np.maximum(lk.c_out, 1.0), 1.0)
    return _group_shares(lk.groups, r_in, r_out)


def _operand_shares(lk: LayerKernels, shares: TensorShares,
                    groups: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The fractions of its input and output one GPU's GEMM kernels of each layer move: the
    tensors' shares, or for a grouped layer only the channels of the groups it runs (``groups``:
    :func:`_channel_shares`, computed when None)."""
    r_g, r_in, r_out = _channel_shares(lk, shares) if groups is None else groups
    grouped = lk.groups > 1
    return (np.where(grouped, np.minimum(shares.x, r_g * r_in), shares.x),
            np.where(grouped, np.minimum(shares.y, r_g * r_out), shares.y))


def per_gpu_kernels(lk: LayerKernels, shares: TensorShares) -> LayerKernels:
    """The kernel descriptors of the smaller layers one GPU of a filter/channel split runs (module
    docstring): the channels at their shares (``shares.x`` of the input's, ``shares.y`` of the
    output's), each GEMM view narrowed on the side those channels enter, a grouped layer run as
    the whole groups its channels touch (:func:`_group_shares`), and the activations each GEMM
    kernel moves at their tensors' shares. Memory-bound kernels are left
    whole (:func:`~perfmodel.cost.work.kernel_work` prices them at the output's share)."""
    r_g, r_in, r_out = groups = _channel_shares(lk, shares)
    c_in, c_out = snap_whole(lk.c_in * r_g * r_in), snap_whole(lk.c_out * r_g * r_out)
    r_c = np.where(lk.transposed, r_out, r_in)  # per group, of the underlying convolution's C
    r_k = np.where(lk.transposed, r_in, r_out)  # and of its K
    dims: tuple[dict[str, np.ndarray], ...] = (dict(lk.m), dict(lk.n), dict(lk.k))
    for s in MM_SLOTS:
        role = slot_roles(lk, s)
        for r, (k_side, c_side) in _CHANNEL_SIDES.items():
            at = role == r
            for d in range(3):
                ratio = np.where(at & (d == k_side), r_k, 1.0) * np.where(at & (d == c_side), r_c, 1.0)
                dims[d][s] = snap_whole(dims[d][s] * ratio)
    sx, sy = _operand_shares(lk, shares, groups)  # a grouped layer's GPU: only its groups' channels
    x_elems, y_elems = lk.x_elems * sx, lk.y_elems * sy
    return dataclasses.replace(
        lk, m=dims[0], n=dims[1], k=dims[2], c_in=c_in, c_out=c_out, groups=lk.groups * r_g,
        dgrad_sum_n=snap_whole(lk.dgrad_sum_n * r_c), dgrad_sum_k=snap_whole(lk.dgrad_sum_k * r_k),
        x_elems=x_elems, y_elems=y_elems,
    )

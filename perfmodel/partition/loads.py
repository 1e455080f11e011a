"""The compute time of each part of a partition: one kernel per layer over the channels it holds.

A part's GPU runs, for every layer it holds units of, ONE smaller layer over all those units'
channels (its blocks of filters from the whole input, or the channels of its input it follows),
not one layer per unit: the blocks of one layer that land in one part are one block. Each such
block is priced as :func:`~perfmodel.partition.hypergraph.unit_times` prices a unit (the layer
one GPU of a filter split runs, :mod:`perfmodel.cost.shares`), at the step's own batch, so the
fixed costs of a kernel (launch, host dispatch, a small problem's poor tile fill) are paid once
per step, not once per ``WEIGHT_BATCH`` samples. With unit ``j`` of every layer in part ``j``
(filter parallelism's layout over the hypergraph's groups) a part's load is what ``predict
--strategy filter=g`` prices that GPU's compute at. A block's kernel runs as if its channels
were contiguous; the copies that make its inputs and messages contiguous are priced apart
(:mod:`perfmodel.partition.gathers`) and added to the part's load by the partition report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hardware import Hardware
from ..network import Network
from ..network.channel_split import channel_split
from .hypergraph import Hypergraph, unit_times

__all__ = ["PartBlocks", "part_blocks", "part_seconds"]


@dataclass(frozen=True, eq=False)
class PartBlocks:
    """The blocks a partition runs: block ``i`` is layer ``layer[i]`` on part ``part[i]``, over
    ``share[i]`` of the layer's output channels (the sum of its units' shares there)."""

    part: np.ndarray
    layer: np.ndarray
    share: np.ndarray


def part_blocks(hg: Hypergraph, assignment: np.ndarray, parts: int) -> PartBlocks:
    """One block per (part, layer) pair holding at least one unit (linear in units): its share
    is the channels of its units over the layer's, exactly 1 where the part holds them all."""
    a = np.asarray(assignment, dtype=np.int64)
    if a.shape != hg.unit_layer.shape or (a.size and (a.min() < 0 or a.max() >= parts)):
        raise ValueError(f"assignment must give each of the {hg.unit_layer.size} units a part in 0..{parts - 1} "
                         f"(got {a.size} labels in {a.min(initial=0)}..{a.max(initial=0)})")
    n_layers = int(hg.unit_layer.max(initial=-1)) + 1
    keys, inverse = np.unique(a * n_layers + hg.unit_layer, return_inverse=True)
    layer = keys % n_layers
    share = np.bincount(inverse, weights=hg.unit_share, minlength=len(keys))
    units = np.bincount(inverse, minlength=len(keys))
    whole = np.bincount(hg.unit_layer, minlength=n_layers)[layer] == units  # every unit of its layer
    return PartBlocks(part=keys // n_layers, layer=layer, share=np.where(whole, 1.0, np.minimum(share, 1.0)))


def part_seconds(net: Network, hg: Hypergraph, assignment: np.ndarray, parts: int, hw: Hardware | None,
                 precision: str, batch: int) -> np.ndarray:
    """Forward plus backward seconds each of ``parts`` parts takes for ``batch`` samples on ``hw``
    (None: the reference profile) at ``precision``: the sum over the layers it holds of one block
    (:func:`part_blocks`) priced as the smaller layer one GPU of filter parallelism runs
    (:func:`~perfmodel.partition.hypergraph.unit_times` at ``batch``), with ``hg``'s cuDNN and
    memory format: its kernels only (the copies that pack its channel blocks into contiguous
    buffers are :func:`~perfmodel.partition.gathers.copy_seconds`). ``net`` is the network ``hg``
    was built from."""
    if hg.num_units and len(net.layers) <= int(hg.unit_layer.max()):
        raise ValueError(f"hypergraph of {hg.num_units} units is not of network {net.name}")
    blocks = part_blocks(hg, assignment, parts)
    splits = channel_split(net, hg.groups)
    lt = unit_times(net, splits, blocks.layer, blocks.share, precision, hg.cudnn_major, hg.memory_format, hw,
                    batch=batch)
    return np.bincount(blocks.part, weights=(lt.fwd + lt.bwd) * batch, minlength=parts)

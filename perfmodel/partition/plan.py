"""Partitions of a network's hypergraph: KaHyPar's (cached) and the contiguous pipeline cut."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..cost.cudnn_gpus import check_cudnn_for_gpu
from ..cost.grouped import DEFAULT_CUDNN_MAJOR
from ..cost.layout import DEFAULT_MEMORY_FORMAT
from ..errors import UsageError
from ..hardware import Hardware
from ..network import Network
from .hypergraph import GRANULARITIES, WEIGHT_BATCH, Hypergraph, build_hypergraph, channel_groups_for
from .kahypar_backend import kahypar_partition
from .metrics import imbalance, km1_volume, part_loads
from .stages import partition_min_max

__all__ = [
    "DEFAULT_EPSILON",
    "DEFAULT_SEED",
    "Partition",
    "hypergraph_partition",
    "contiguous_partition",
    "network_hypergraph",
    "network_partition",
    "check_parts",
    "MAX_CHANNEL_PARTS",
    "clear_cache",
]

#: KaHyPar's allowed imbalance by default (max part weight <= 1.03 x the ideal).
DEFAULT_EPSILON = 0.03

#: KaHyPar's random seed: fixed, so the same inputs give the same partition.
DEFAULT_SEED = 42

_CACHE_SIZE = 256
_CACHE: OrderedDict[tuple[object, ...], Partition] = OrderedDict()


@dataclass(frozen=True, eq=False)
class Partition:
    """An assignment of every unit of ``hypergraph`` to one of ``parts`` parts.

    ``method`` is ``hypergraph`` (KaHyPar) or ``contiguous`` (the best contiguous cut of
    the chain of links). ``seconds`` is how long KaHyPar took (0 for the contiguous cut
    and for cached partitions reused).
    """

    hypergraph: Hypergraph
    parts: int
    assignment: np.ndarray
    method: str
    epsilon: float
    seed: int
    seconds: float = 0.0

    @cached_property
    def loads_s_per_sample(self) -> np.ndarray:
        """Forward+backward seconds per sample of each part as the partitioner balances them (its
        units' :attr:`~.hypergraph.Hypergraph.weight_seconds`; a part's GPU's own time, one kernel
        per layer at the step's batch, is :func:`.loads.part_seconds`)."""
        return part_loads(self.hypergraph.weight_seconds, self.assignment, self.parts)

    @cached_property
    def weight_loads(self) -> np.ndarray:
        """Integer (partitioner) weight of each part."""
        return part_loads(self.hypergraph.unit_weights, self.assignment, self.parts).astype(
            np.int64
        )

    @property
    def imbalance(self) -> float:
        """``max part load / mean part load - 1`` on :attr:`loads_s_per_sample`."""
        return imbalance(self.loads_s_per_sample)

    @cached_property
    def volume_bytes_per_sample(self) -> float:
        """Bytes all parts together send per sample (sum over nets of bytes x (lambda - 1))."""
        return km1_volume(self.hypergraph, self.assignment, self.parts)

    @cached_property
    def sent_bytes_per_sample(self) -> np.ndarray:
        """Bytes each part sends per sample: activations to the other parts that read them,
        and the gradients (partial sums) of the tensors it reads from other parts."""
        hg, a = self.hypergraph, self.assignment
        sent = np.zeros(self.parts)
        half = hg.net_bytes / 2
        for i in range(hg.num_nets):
            pins = hg.net_pins(i)
            src = a[pins[0]]
            others = np.unique(a[pins])
            others = others[others != src]
            sent[src] += half[i] * len(others)
            sent[others] += half[i]
        return sent

    @property
    def unit_parts(self) -> dict[str, int]:
        """Unit name -> its part."""
        return {n: int(p) for n, p in zip(self.hypergraph.unit_names, self.assignment, strict=True)}


#: The most parts a channel-granularity partition is cut into. KaHyPar's k-way time grows with the
#: parts and the units (2 per part per convolution/linear layer): resnet50 took 1.4 s at 16 parts,
#: 20 s at 64 (20,989 units) and 258 s at 128 (37,498 units) on the project's 2-core machine
#: (review of 2026-11-24, ``perfmodel partition resnet50 --parts K --granularity channel``).
MAX_CHANNEL_PARTS = 64


def check_parts(parts: int, hg: Hypergraph) -> None:
    """Raise :class:`UsageError` unless ``2 <= parts <= units`` (and at most
    :data:`MAX_CHANNEL_PARTS` at channel granularity)."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 2:
        raise UsageError(f"parts must be an integer >= 2, got {parts!r}")
    if hg.granularity == "channel" and parts > MAX_CHANNEL_PARTS:
        raise UsageError(
            f"{parts} parts at channel granularity is more than {MAX_CHANNEL_PARTS}: {hg.model}'s "
            f"{hg.num_units:,} units would take KaHyPar minutes (valid: 2..{MAX_CHANNEL_PARTS}, "
            "or use --granularity layer)"
        )
    if parts > hg.num_units:
        raise UsageError(
            f"{hg.model} has only {hg.num_units} units at {hg.granularity} granularity, "
            f"so it cannot be split into {parts} parts (valid: 2..{hg.num_units}"
            + (", or use --granularity channel)" if hg.granularity == "layer" else ")")
        )


def _check_epsilon(epsilon: float) -> None:
    if not (0.0 < epsilon < 1.0):
        raise UsageError(f"epsilon must be in (0, 1), got {epsilon}")


def hypergraph_partition(
    hg: Hypergraph, parts: int, epsilon: float = DEFAULT_EPSILON, seed: int = DEFAULT_SEED
) -> Partition:
    """KaHyPar's partition of ``hg`` into ``parts`` parts (cached on the hypergraph's content)."""
    check_parts(parts, hg)
    _check_epsilon(epsilon)
    key = (
        hg.model,
        hg.granularity,
        hg.groups,
        hg.elem_bytes,
        parts,
        float(epsilon),
        int(seed),
        hg.unit_weights.tobytes(),
        hg.pins.tobytes(),
        hg.offsets.tobytes(),
        hg.net_bytes.tobytes(),
    )
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return Partition(hg, parts, hit.assignment, "hypergraph", epsilon, seed, 0.0)
    t0 = time.perf_counter()
    assignment = kahypar_partition(hg, parts, epsilon, seed)
    assignment.setflags(write=False)
    p = Partition(hg, parts, assignment, "hypergraph", epsilon, seed, time.perf_counter() - t0)
    _CACHE[key] = p
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return p


def clear_cache() -> None:
    """Forget every cached partition."""
    _CACHE.clear()


def contiguous_partition(net: Network, hg: Hypergraph, parts: int) -> Partition | None:
    """The best contiguous split of the chain of links, as a pipeline cuts it: the stages'
    largest compute time (its whole layers', :attr:`Hypergraph.layer_seconds` where known) is
    minimal (:func:`partition_min_max`). None if the chain has fewer links than ``parts``."""
    check_parts(parts, hg)
    links = net.links
    if parts > len(links):
        return None
    layer_s = (hg.layer_seconds if hg.layer_seconds is not None
               else np.bincount(hg.unit_layer, weights=hg.unit_seconds, minlength=len(net.layers)))
    costs = [float(layer_s[lk.start : lk.stop].sum()) for lk in links]
    runs = partition_min_max(costs, parts)
    stage_of_link = np.repeat(np.arange(parts), runs)
    stage_of_layer = np.zeros(len(net.layers), dtype=np.int64)
    for lk in links:
        stage_of_layer[lk.start : lk.stop] = stage_of_link[lk.index]
    assignment = stage_of_layer[hg.unit_layer]
    assignment.setflags(write=False)
    return Partition(hg, parts, assignment, "contiguous", 0.0, 0, 0.0)


def network_hypergraph(
    net: Network, hw: Hardware | None, precision: str, parts: int, granularity: str,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR, memory_format: str = DEFAULT_MEMORY_FORMAT,
    batch: int = WEIGHT_BATCH,
) -> Hypergraph:
    """The hypergraph of ``net`` for a ``parts``-way split at ``granularity``, weighted by the
    compute times on ``hw`` (``None``: on the reference profile, whatever the profile priced)
    for ``batch`` samples with the grouped convolutions of cuDNN ``cudnn_major`` and the
    activations in ``memory_format``."""
    if granularity not in GRANULARITIES:
        raise UsageError(f"unknown granularity '{granularity}' (valid: {', '.join(GRANULARITIES)})")
    if hw is not None:  # a cuDNN that never ran on the GPU describes no run (network_partition too)
        check_cudnn_for_gpu(cudnn_major, hw)
    return build_hypergraph(net, hw, precision, granularity, channel_groups_for(parts), cudnn_major, memory_format,
                            batch)


def network_partition(
    net: Network,
    hw: Hardware | None,
    precision: str,
    parts: int,
    granularity: str = "layer",
    epsilon: float = DEFAULT_EPSILON,
    seed: int = DEFAULT_SEED,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    batch: int = WEIGHT_BATCH,
) -> Partition:
    """KaHyPar's ``parts``-way partition of ``net`` at ``granularity`` (cached per network,
    weights, ``parts``, granularity, ``epsilon`` and seed), its units weighted by their compute
    times for ``batch`` samples (the batch each part runs: a part's time does not grow linearly
    with it) on ``hw`` (``None``: on the reference profile, so the same for every profile) with
    grouped convolutions as cuDNN ``cudnn_major`` runs them and the activations in ``memory_format``."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 2:
        raise UsageError(f"parts must be an integer >= 2, got {parts!r}")
    hg = network_hypergraph(net, hw, precision, parts, granularity, cudnn_major, memory_format, batch)
    return hypergraph_partition(hg, parts, epsilon, seed)

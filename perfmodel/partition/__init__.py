"""Hypergraph-partitioned model parallelism: a network's hypergraph, KaHyPar, and the baselines."""

from __future__ import annotations

from .compare import PartitionReport, SplitSummary, data_parallel_volume_bytes, partition_report
from .hypergraph import GRANULARITIES, Hypergraph, build_hypergraph
from .loads import part_seconds
from .metrics import connectivity, imbalance, km1_volume, part_loads
from .plan import (
    DEFAULT_EPSILON,
    DEFAULT_SEED,
    Partition,
    contiguous_partition,
    hypergraph_partition,
    network_partition,
)

__all__ = [
    "GRANULARITIES",
    "DEFAULT_EPSILON",
    "DEFAULT_SEED",
    "Hypergraph",
    "Partition",
    "PartitionReport",
    "SplitSummary",
    "build_hypergraph",
    "connectivity",
    "contiguous_partition",
    "data_parallel_volume_bytes",
    "hypergraph_partition",
    "imbalance",
    "km1_volume",
    "network_partition",
    "part_loads",
    "part_seconds",
    "partition_report",
]

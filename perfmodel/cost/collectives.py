"""Collectives on a hierarchical system: which tier a group of GPUs talks over, and the time."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import StrategyError
from ..hardware import Hardware
from . import formulas as f

__all__ = ["Group", "allreduce", "allgather", "reduce_scatter", "point_to_point", "ALGORITHMS"]

ALGORITHMS = ("ring", "tree", "hierarchical")


@dataclass(frozen=True)
class Group:
    """A communicating group of ``size`` GPUs, ``per_node`` of them in each node it spans.

    ``sharing`` is how many GPUs of a node talk over the network at the same time (their
    node's network bandwidth is shared among them); by default all the node's GPUs.
    """

    size: int
    per_node: int
    sharing: int = 0

    @property
    def nodes(self) -> int:
        return max(1, self.size // max(1, self.per_node))

    @staticmethod
    def place(size: int, stride: int, hw: Hardware) -> Group:
        """A group of ``size`` GPUs whose ranks are ``stride`` apart (inner degrees fill a node first)."""
        g = hw.gpus_per_node
        if stride >= g:
            per_node = 1
        else:
            per_node = max(1, min(size, g // stride))
        return Group(size, per_node, sharing=g)


def _inter_bw_per_gpu(hw: Hardware, group: Group) -> float:
    """The network bandwidth one GPU of the group gets: its node's, shared by ``sharing`` GPUs."""
    sharing = group.sharing or hw.gpus_per_node
    return hw.inter.effective_bandwidth_bytes_per_s / min(sharing, hw.gpus_per_node)


def allreduce(n_bytes: float, group: Group, hw: Hardware, algorithm: str = "ring") -> float:
    """Seconds to allreduce ``n_bytes`` over ``group`` with ``algorithm``."""
    p = group.size
    if p <= 1 or n_bytes <= 0:
        return 0.0
    bw_in = hw.intra.effective_bandwidth_bytes_per_s
    a_in, a_out = hw.intra.latency_s, hw.inter.latency_s
    if group.nodes <= 1:
        if algorithm == "tree":
            return float(f.tree_allreduce(n_bytes, p, bw_in, a_in))
        return float(f.ring_allreduce(n_bytes, p, bw_in, a_in))
    # across nodes: a channel per GPU of the node, each over that GPU's share of the network
    bw_out = group.per_node * _inter_bw_per_gpu(hw, group)
    bw = min(bw_in, bw_out)
    if algorithm == "ring":
        return float(f.ring_allreduce(n_bytes, p, bw, a_out))
    if algorithm == "tree":
        return float(f.tree_allreduce(n_bytes, p, bw, a_out))
    if algorithm == "hierarchical":
        # reduce-scatter inside the node, allreduce of a 1/per_node shard across nodes, allgather
        k, q = group.nodes, group.per_node
        inside = 2 * f.ring_reduce_scatter(n_bytes, q, bw_in, a_in) if q > 1 else 0.0
        across = f.ring_allreduce(n_bytes / q, k, _inter_bw_per_gpu(hw, group), a_out)
        return float(inside + across)
    raise StrategyError(f"unknown allreduce algorithm '{algorithm}' (valid: {', '.join(ALGORITHMS)})")


def allgather(n_bytes_total: float, group: Group, hw: Hardware) -> float:
    """Seconds to allgather ``n_bytes_total`` (the gathered size) over ``group``."""
    if group.size <= 1:
        return 0.0
    bw, alpha = _bw_alpha(group, hw)
    return float(f.ring_allgather(n_bytes_total, group.size, bw, alpha))


def reduce_scatter(n_bytes_total: float, group: Group, hw: Hardware) -> float:
    if group.size <= 1:
        return 0.0
    bw, alpha = _bw_alpha(group, hw)
    return float(f.ring_reduce_scatter(n_bytes_total, group.size, bw, alpha))


def point_to_point(n_bytes: float, hw: Hardware, across_nodes: bool) -> float:
    """Seconds to send ``n_bytes`` from one GPU to another (a pipeline cut, a halo)."""
    if n_bytes <= 0:
        return 0.0
    if across_nodes:
        bw = hw.inter.effective_bandwidth_bytes_per_s / hw.gpus_per_node
        return float(f.p2p(n_bytes, bw, hw.inter.latency_s))
    return float(f.p2p(n_bytes, hw.intra.effective_bandwidth_bytes_per_s, hw.intra.latency_s))


def _bw_alpha(group: Group, hw: Hardware) -> tuple[float, float]:
    if group.nodes <= 1:
        return hw.intra.effective_bandwidth_bytes_per_s, hw.intra.latency_s
    bw = min(hw.intra.effective_bandwidth_bytes_per_s, group.per_node * _inter_bw_per_gpu(hw, group))
    return bw, hw.inter.latency_s

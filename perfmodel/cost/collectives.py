"""Collectives on a hierarchical system: which tier a group of GPUs talks over, and the time.

Each collective is written once as an expression over :class:`LinkParams`, which hold
either the profile's numbers (``predict``) or sympy symbols (``explain``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy as sp

from ..errors import StrategyError
from ..hardware import Hardware
from . import formulas as f

__all__ = [
    "Group",
    "LinkParams",
    "link_params",
    "link_symbols",
    "allreduce",
    "allreduce_expr",
    "ring_tier",
    "allgather",
    "reduce_scatter",
    "point_to_point",
    "p2p_expr",
    "ALGORITHMS",
]

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


@dataclass(frozen=True)
class LinkParams:
    """Effective bandwidths (bytes/s) and latencies (s): intra-node per GPU, network per GPU."""

    bw_intra: Any
    alpha_intra: Any
    bw_net_per_gpu: Any
    alpha_net: Any


def link_params(hw: Hardware, group: Group | None = None) -> LinkParams:
    """The profile's numbers; the node's network bandwidth is shared by ``group.sharing`` GPUs."""
    sharing = (group.sharing if group and group.sharing else 0) or hw.gpus_per_node
    return LinkParams(
        hw.intra.effective_bandwidth_bytes_per_s,
        hw.intra.latency_s,
        hw.inter.effective_bandwidth_bytes_per_s / min(sharing, hw.gpus_per_node),
        hw.inter.latency_s,
    )


def link_symbols() -> LinkParams:
    """Named symbols for :func:`allreduce_expr` (``explain``)."""
    return LinkParams(*sp.symbols("beta_intra alpha_intra beta_net alpha_net", positive=True))


def ring_tier(group: Group, lp: LinkParams) -> tuple[Any, Any]:
    """(bandwidth, latency) a ring or tree over ``group`` runs at (numbers or sympy, by ``lp``).

    In one node, the intra-node link; across nodes, one channel per GPU of the node, each over
    that GPU's share of the network, and never faster than the intra-node link.
    """
    if group.nodes <= 1:
        return lp.bw_intra, lp.alpha_intra
    return f.smin(lp.bw_intra, group.per_node * lp.bw_net_per_gpu), lp.alpha_net


def allreduce_expr(n_bytes: Any, group: Group, lp: LinkParams, algorithm: str = "ring") -> Any:
    """Seconds to allreduce ``n_bytes`` over ``group`` (numbers or sympy, by ``lp``)."""
    p = group.size
    if p <= 1:
        return 0
    if group.nodes <= 1 or algorithm in ("ring", "tree"):
        bw, alpha = ring_tier(group, lp)
        fn = f.tree_allreduce if algorithm == "tree" else f.ring_allreduce
        return fn(n_bytes, p, bw, alpha)
    if algorithm == "hierarchical":
        # reduce-scatter inside the node, allreduce of a 1/per_node shard across nodes, allgather
        k, q = group.nodes, group.per_node
        inside = 2 * f.ring_reduce_scatter(n_bytes, q, lp.bw_intra, lp.alpha_intra) if q > 1 else 0
        return inside + f.ring_allreduce(n_bytes / q, k, lp.bw_net_per_gpu, lp.alpha_net)
    raise StrategyError(f"unknown allreduce algorithm '{algorithm}' (valid: {', '.join(ALGORITHMS)})")


def allreduce(n_bytes: float, group: Group, hw: Hardware, algorithm: str = "ring") -> float:
    """Seconds to allreduce ``n_bytes`` over ``group`` with ``algorithm``."""
    if group.size <= 1 or n_bytes <= 0:
        return 0.0
    return float(allreduce_expr(n_bytes, group, link_params(hw, group), algorithm))


def allgather(n_bytes_total: float, group: Group, hw: Hardware) -> float:
    """Seconds to allgather ``n_bytes_total`` (the gathered size) over ``group``."""
    if group.size <= 1:
        return 0.0
    bw, alpha = ring_tier(group, link_params(hw, group))
    return float(f.ring_allgather(n_bytes_total, group.size, bw, alpha))


def reduce_scatter(n_bytes_total: float, group: Group, hw: Hardware) -> float:
    """Seconds to reduce-scatter ``n_bytes_total`` over ``group``."""
    if group.size <= 1:
        return 0.0
    bw, alpha = ring_tier(group, link_params(hw, group))
    return float(f.ring_reduce_scatter(n_bytes_total, group.size, bw, alpha))


def p2p_expr(n_bytes: Any, lp: LinkParams, across_nodes: bool) -> Any:
    """Seconds to send ``n_bytes`` from one GPU to another over the node's or the network's
    link (numbers or sympy, by ``lp``)."""
    if across_nodes:
        return f.p2p(n_bytes, lp.bw_net_per_gpu, lp.alpha_net)
    return f.p2p(n_bytes, lp.bw_intra, lp.alpha_intra)


def point_to_point(n_bytes: float, hw: Hardware, across_nodes: bool) -> float:
    """Seconds to send ``n_bytes`` from one GPU to another (a pipeline cut, a halo)."""
    if n_bytes <= 0:
        return 0.0
    return float(p2p_expr(n_bytes, link_params(hw), across_nodes))


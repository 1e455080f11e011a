"""Collectives on a hierarchical system: which tier a group of GPUs talks over, and the time.

Each collective is written once as an expression over :class:`LinkParams`, which hold
either the profile's numbers (``predict``) or sympy symbols (``explain``). Latencies follow
NCCL's own tuning model (src/graph/tuning.cc, ``ncclTopoTuneModel``, read at NCCL 2.30.7):
every collective pays a base latency once (``baseLatencies``: Ring and Tree with the Simple
protocol large buffers use, 8.4 us), then one per-hop latency per step of its algorithm, the
steps that cross nodes at the network's latency and the others at the node link's. A ring
allreduce takes ``2 (p - 1)`` steps of which ``2 (nodes - 1)`` cross nodes; a ring all-gather
or reduce-scatter (NCCL's only algorithm for them on the systems profiled here) ``p - 1`` of
which ``nodes - 1`` do; a tree allreduce a chain inside each node and ``log2(nodes)`` network
hops, up and down. :func:`contention` and :func:`memory_contention_s` are what a collective
takes from compute running beside it (NCCL's thread blocks hold SMs; its traffic takes
device-memory bandwidth).
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
    "gather_expr",
    "collective_expr",
    "COLLECTIVES",
    "link_bytes",
    "ring_tier",
    "allgather",
    "reduce_scatter",
    "point_to_point",
    "p2p_expr",
    "ALGORITHMS",
    "contention",
    "memory_contention_s",
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
        """Nodes the group spans: a partly filled node counts (12 GPUs at 8 per node: 2)."""
        return max(1, -(-self.size // max(1, self.per_node)))


@dataclass(frozen=True)
class LinkParams:
    """Effective bandwidths (bytes/s) and latencies (s): intra-node per GPU, network per GPU;
    a collective's base latency (s); the extra compute seconds per second of compute that runs
    beside a collective because NCCL holds SMs, in a node and across nodes (``C / (S - C)``
    for C channels on S SMs); device-memory bytes per byte on the link, and the device's
    memory bandwidth (bytes/s). Defaults: none of these costs (a bare alpha-beta link)."""

    bw_intra: Any
    alpha_intra: Any
    bw_net_per_gpu: Any
    alpha_net: Any
    alpha_base: Any = 0
    sm_intra: Any = 0
    sm_net: Any = 0
    mem_passes: Any = 0
    beta_mem: Any = 1

    #: The symbol of each field in ``explain`` (:func:`link_symbols`).
    SYMBOL_NAMES = ("beta_intra", "alpha_intra", "beta_net", "alpha_net", "alpha_0", "gamma_intra", "gamma_net",
                    "kappa", "beta_mem")


def link_params(hw: Hardware, group: Group | None = None) -> LinkParams:
    """The profile's numbers; the node's network bandwidth is shared by ``group.sharing`` GPUs."""
    sharing = (group.sharing if group and group.sharing else 0) or hw.gpus_per_node
    c, sms = hw.collectives, hw.kernels.sm_count
    return LinkParams(
        hw.intra.effective_bandwidth_bytes_per_s,
        hw.intra.latency_s,
        hw.inter.effective_bandwidth_bytes_per_s / min(sharing, hw.gpus_per_node),
        hw.inter.latency_s,
        c.base_latency_s,
        c.channels_intra / (sms - c.channels_intra),
        c.channels_net / (sms - c.channels_net),
        c.memory_passes,
        hw.device.memory_bandwidth_bytes_per_s,
    )


def link_symbols() -> LinkParams:
    """Named symbols for :func:`allreduce_expr` (``explain``); ``beta_mem`` is the compute
    formulas' own memory-bandwidth symbol."""
    return LinkParams(*sp.symbols(" ".join(LinkParams.SYMBOL_NAMES), positive=True))


def ring_tier(group: Group, lp: LinkParams) -> tuple[Any, Any]:
    """(bandwidth, latency) a ring or tree over ``group`` runs at (numbers or sympy, by ``lp``).

    In one node, the intra-node link; across nodes, one channel per GPU of the node, each over
    that GPU's share of the network, and never faster than the intra-node link.
    """
    if group.nodes <= 1:
        return lp.bw_intra, lp.alpha_intra
    return f.smin(lp.bw_intra, group.per_node * lp.bw_net_per_gpu), lp.alpha_net


def allreduce_expr(n_bytes: Any, group: Group, lp: LinkParams, algorithm: str = "ring") -> Any:
    """Seconds to allreduce ``n_bytes`` over ``group`` (numbers or sympy, by ``lp``).

    Ring: ``2 (p - 1)/p n/beta`` plus NCCL's latency, ``alpha_0 + 2 (p - nodes) alpha_intra
    + 2 (nodes - 1) alpha_net``; tree: ``2 n/beta`` plus ``alpha_0 + 2 ((q - 1) alpha_intra
    + log2(nodes) alpha_net)`` for q GPUs per node (NCCL's tree is a chain inside a node);
    hierarchical: a reduce-scatter and an allgather in the node around a ring allreduce of a
    1/q shard across nodes, three collectives.
    """
    p = group.size
    if p <= 1:
        return 0
    k = group.nodes
    q = max(1, min(group.per_node, p))  # GPUs of the group in a (full) node
    if algorithm in ("ring", "tree") or k <= 1:
        bw, _ = ring_tier(group, lp)
        if algorithm == "tree":
            hops = 2 * ((q - 1) * lp.alpha_intra + (f.log2(k) * lp.alpha_net if k > 1 else 0))
            return lp.alpha_base + 2 * n_bytes / bw + hops
        return lp.alpha_base + 2 * (p - 1) / p * n_bytes / bw + _ring_hops(group, lp, 2)
    if algorithm == "hierarchical":
        inside = 2 * (f.ring_reduce_scatter(n_bytes, q, lp.bw_intra, lp.alpha_intra) + lp.alpha_base) if q > 1 else 0
        return inside + lp.alpha_base + f.ring_allreduce(n_bytes / q, k, lp.bw_net_per_gpu, lp.alpha_net)
    raise StrategyError(f"unknown allreduce algorithm '{algorithm}' (valid: {', '.join(ALGORITHMS)})")


def _ring_hops(group: Group, lp: LinkParams, rounds: int) -> Any:
    """NCCL's per-hop latencies of a ring taking ``rounds (p - 1)`` steps over ``group``: the
    ``rounds (nodes - 1)`` steps that cross nodes at ``alpha_net``, the others at
    ``alpha_intra`` (tuning.cc: ``(nsteps - nInterSteps) * intraLat + nInterSteps * interLat``)."""
    k = group.nodes
    return rounds * (group.size - k) * lp.alpha_intra + (rounds * (k - 1) * lp.alpha_net if k > 1 else 0)


def gather_expr(n_bytes_total: Any, group: Group, lp: LinkParams) -> Any:
    """Seconds of a ring all-gather (or reduce-scatter: the same steps, the same cost) of
    ``n_bytes_total`` (the gathered size) over ``group`` (numbers or sympy, by ``lp``):
    ``alpha_0 + (p - 1)/p * n/beta + (p - k) alpha_intra + (k - 1) alpha_net`` for k nodes,
    NCCL's ring model with ``p - 1`` steps, ``k - 1`` of them across nodes (tuning.cc)."""
    p = group.size
    if p <= 1:
        return 0
    bw, _ = ring_tier(group, lp)
    return lp.alpha_base + (p - 1) / p * n_bytes_total / bw + _ring_hops(group, lp, 1)


#: The collectives a split group runs (filter/channel exchanges), priced by :func:`collective_expr`.
COLLECTIVES = ("allgather", "reduce_scatter", "allreduce")


def collective_expr(op: str, n_bytes: Any, group: Group, lp: LinkParams) -> Any:
    """Seconds of one ring collective ``op`` (one of :data:`COLLECTIVES`) of ``n_bytes`` (the
    gathered or reduced size) over ``group``, NCCL's base and per-hop latencies included."""
    if op == "allreduce":
        return allreduce_expr(n_bytes, group, lp, "ring")
    if op in ("allgather", "reduce_scatter"):
        return gather_expr(n_bytes, group, lp)
    raise StrategyError(f"unknown collective '{op}' (valid: {', '.join(COLLECTIVES)})")


def contention(group: Group, lp: LinkParams) -> Any:
    """Extra seconds per second of compute that runs on the SMs an allreduce over ``group``
    leaves (numbers or sympy, by ``lp``; 0 for one GPU): NCCL runs one thread block per
    channel, each on an SM no compute kernel shares (NCCL maintainers, NVIDIA/nccl issue
    #689), so compute runs on ``S - C`` of ``S`` SMs, ``C / (S - C)`` longer (``gamma_intra``
    in a node, ``gamma_net`` across nodes)."""
    if group.size <= 1:
        return 0
    return lp.sm_intra if group.nodes <= 1 else lp.sm_net


def link_bytes(n_bytes: Any, group: Group, algorithm: str = "ring") -> Any:
    """Bytes a GPU of ``group`` sends over its links in one allreduce of ``n_bytes`` with
    ``algorithm`` (numbers or sympy): the numerator of the algorithm's bandwidth term in
    :func:`allreduce_expr`. Ring: ``2 (p - 1)/p n`` (a reduce-scatter and an all-gather);
    tree: ``2 n`` (NCCL's chain in a node and double binary tree across nodes: every GPU
    passes the whole buffer up, reduced, and down again, half per tree); hierarchical: a
    reduce-scatter and an all-gather in the node, ``2 (q - 1)/q n``, around a ring allreduce
    of the ``n/q`` shard across the k nodes, ``2 (k - 1)/k n/q`` (for full nodes, ``p = k q``,
    the ring's ``2 (p - 1)/p n`` again, by other links); 0 for one GPU."""
    p = group.size
    if p <= 1:
        return 0
    k = group.nodes
    if algorithm == "tree":
        return 2 * n_bytes
    if algorithm == "hierarchical" and k > 1:
        q = max(1, min(group.per_node, p))
        return 2 * (q - 1) / q * n_bytes + 2 * (k - 1) / k * n_bytes / q
    if algorithm in ALGORITHMS:
        return 2 * (p - 1) / p * n_bytes
    raise StrategyError(f"unknown allreduce algorithm '{algorithm}' (valid: {', '.join(ALGORITHMS)})")


def memory_contention_s(n_bytes: Any, group: Group, lp: LinkParams, algorithm: str, eta_mem: Any) -> Any:
    """Seconds of device-memory bandwidth an allreduce of ``n_bytes`` over ``group`` with
    ``algorithm`` takes from compute (numbers or sympy): every byte a GPU sends over its link
    (:func:`link_bytes`, the algorithm's own) costs ``kappa`` bytes of memory traffic (stored,
    read back, reduced with the user's data: NVIDIA/nccl issue #1428), at the bandwidth the
    compute's memory kernels reach, ``beta_mem * eta_mem`` (the device's peak times the memory
    efficiency ``eta_mem`` of the plan's precision, as :mod:`perfmodel.cost.compute` prices
    them)."""
    if group.size <= 1:
        return 0
    return lp.mem_passes * link_bytes(n_bytes, group, algorithm) / (lp.beta_mem * eta_mem)


def allreduce(
    n_bytes: float, group: Group, hw: Hardware, algorithm: str = "ring", links: LinkParams | None = None
) -> float:
    """Seconds to allreduce ``n_bytes`` over ``group`` with ``algorithm`` (``links``: the
    profile's :func:`link_params` for ``group``, when the caller holds them already)."""
    if group.size <= 1 or n_bytes <= 0:
        return 0.0
    return float(allreduce_expr(n_bytes, group, link_params(hw, group) if links is None else links, algorithm))


def allgather(n_bytes_total: float, group: Group, hw: Hardware) -> float:
    """Seconds to allgather ``n_bytes_total`` (the gathered size) over ``group`` (:func:`gather_expr`)."""
    if group.size <= 1:
        return 0.0
    return float(gather_expr(n_bytes_total, group, link_params(hw, group)))


def reduce_scatter(n_bytes_total: float, group: Group, hw: Hardware) -> float:
    """Seconds to reduce-scatter ``n_bytes_total`` over ``group`` (:func:`gather_expr`)."""
    if group.size <= 1:
        return 0.0
    return float(gather_expr(n_bytes_total, group, link_params(hw, group)))


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


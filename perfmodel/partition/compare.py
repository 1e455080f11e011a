"""The hypergraph partition of a network against the contiguous split and data parallelism."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cost.compute import GRAD_BYTES_PER_PARAM
from ..cost.grouped import DEFAULT_CUDNN_MAJOR, check_cudnn_major, cudnn_assumption
from ..cost.layout import DEFAULT_MEMORY_FORMAT, check_memory_format, memory_format_assumption
from ..errors import BatchSplitError, UsageError
from ..hardware import Hardware, check_precision, load_hardware
from ..limits import MAX_BATCH, MAX_SEED, check_count, shown
from ..network import Network, get_model
from .gathers import channel_copies, copy_seconds
from .hypergraph import Hypergraph
from .loads import part_seconds
from .metrics import imbalance, is_acyclic, max_allowed_weight, part_loads, quotient_edges
from .plan import (
    DEFAULT_EPSILON,
    DEFAULT_SEED,
    Partition,
    contiguous_partition,
    hypergraph_partition,
    network_hypergraph,
)

__all__ = [
    "VOLUME_DEFINITION",
    "DP_DEFINITION",
    "SplitSummary",
    "PartitionReport",
    "partition_report",
    "data_parallel_volume_bytes",
]

VOLUME_DEFINITION = (
    "bytes sent between devices in one training step, summed over all devices: every tensor a "
    "part reads from another part crosses once forward (activation) and once backward (its "
    "gradient), at the global batch; sum over tensors of 2 x elements x bytes/element x "
    "batch x (parts it spans - 1)"
)

DP_DEFINITION = (
    "ring allreduce of the fp32 gradients over the same K devices for the same step: each "
    "device sends 2(K-1)/K x gradient bytes, summed over the K devices: 2(K-1) x 4 B x parameters"
)


def data_parallel_volume_bytes(params: float, parts: int) -> float:
    """Bytes all ``parts`` devices send in one ring allreduce of the fp32 gradients."""
    return 2.0 * (parts - 1) * params * GRAD_BYTES_PER_PARAM


@dataclass(frozen=True)
class SplitSummary:
    """One way of splitting the network over the devices, for one step at the global batch."""

    method: str
    comm_volume_bytes: float
    comm_volume_per_device_bytes: float
    max_device_sent_bytes: float
    imbalance: float | None
    part_loads_s: tuple[float, ...]
    part_params: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "comm_volume_bytes": self.comm_volume_bytes,
            "comm_volume_per_device_bytes": self.comm_volume_per_device_bytes,
            "max_device_sent_bytes": self.max_device_sent_bytes,
            "imbalance": self.imbalance,
            "part_loads_s": list(self.part_loads_s),
            "part_params": list(self.part_params),
        }


def _summary(p: Partition, batch: int, params_per_unit: np.ndarray, loads_s: np.ndarray) -> SplitSummary:
    """``p`` at the global ``batch``, its parts taking ``loads_s`` seconds (:func:`.loads.part_seconds`)."""
    total = p.volume_bytes_per_sample * batch
    return SplitSummary(
        method=p.method,
        comm_volume_bytes=total,
        comm_volume_per_device_bytes=total / p.parts,
        max_device_sent_bytes=float(p.sent_bytes_per_sample.max()) * batch,
        imbalance=imbalance(loads_s),
        part_loads_s=tuple(float(x) for x in loads_s),
        part_params=tuple(float(x) for x in part_loads(params_per_unit, p.assignment, p.parts)),
    )


@dataclass(frozen=True)
class PartitionReport:
    """A hypergraph partition and its two baselines, at one global batch."""

    model: str
    hardware: str
    precision: str
    granularity: str
    parts: int
    epsilon: float
    seed: int
    global_batch: int
    units: int
    nets: int
    params: float
    partition_seconds: float
    hypergraph: SplitSummary
    contiguous: SplitSummary | None
    data_parallel_volume_bytes: float
    assignment: dict[str, int]
    quotient_edges: tuple[tuple[int, int], ...]
    heaviest_part_over_bound: float
    heaviest_unit_over_bound: float
    notes: dict[str, str] = field(default_factory=dict)
    cudnn_major: int = DEFAULT_CUDNN_MAJOR
    memory_format: str = DEFAULT_MEMORY_FORMAT

    @property
    def assumptions(self) -> dict[str, str]:
        """The software the units' weights assume, in words."""
        return {"cudnn": cudnn_assumption(self.cudnn_major),
                "memory_format": memory_format_assumption(self.memory_format)}

    @property
    def balanced(self) -> bool:
        """Whether the partition meets KaHyPar's bound ``(1 + eps) x ceil(total / K)``."""
        return self.heaviest_part_over_bound <= 1.0

    @property
    def data_parallel_per_device_bytes(self) -> float:
        return self.data_parallel_volume_bytes / self.parts

    @property
    def reduction_vs_data_parallel(self) -> float:
        """``1 - partition volume / data-parallel volume`` (negative: the partition sends more)."""
        dp = self.data_parallel_volume_bytes
        return 1.0 - self.hypergraph.comm_volume_bytes / dp if dp > 0 else 0.0

    @property
    def break_even_batch(self) -> float:
        """The global batch at which the partition sends as much as data parallelism."""
        per_sample = self.hypergraph.comm_volume_bytes / self.global_batch
        return self.data_parallel_volume_bytes / per_sample if per_sample > 0 else float("inf")

    @property
    def acyclic(self) -> bool:
        """Whether the parts' quotient graph (part -> parts reading its tensors) has no cycle."""
        return is_acyclic(self.parts, self.quotient_edges)

    def to_dict(self) -> dict[str, Any]:
        c = self.contiguous
        return {
            "model": self.model,
            "hardware": self.hardware,
            "precision": self.precision,
            "granularity": self.granularity,
            "parts": self.parts,
            "epsilon": self.epsilon,
            "seed": self.seed,
            "global_batch": self.global_batch,
            "units": self.units,
            "nets": self.nets,
            "params": self.params,
            "partition_seconds": self.partition_seconds,
            "comm_volume_bytes": self.hypergraph.comm_volume_bytes,
            "comm_volume_per_device_bytes": self.hypergraph.comm_volume_per_device_bytes,
            "max_device_sent_bytes": self.hypergraph.max_device_sent_bytes,
            "imbalance": self.hypergraph.imbalance,
            "part_loads_s": list(self.hypergraph.part_loads_s),
            "part_params": list(self.hypergraph.part_params),
            "reduction_vs_data_parallel": (self.reduction_vs_data_parallel if self.data_parallel_volume_bytes > 0
                                           else None),  # no parameters: nothing to compare with
            "reduction_vs_contiguous": (
                1.0 - self.hypergraph.comm_volume_bytes / c.comm_volume_bytes
                if c is not None and c.comm_volume_bytes > 0
                else None
            ),
            "break_even_global_batch": self.break_even_batch if math.isfinite(self.break_even_batch) else None,
            "balance": {
                "met": self.balanced,
                "heaviest_part_over_bound": self.heaviest_part_over_bound,
                "heaviest_unit_over_bound": self.heaviest_unit_over_bound,
            },
            "quotient_graph": {
                "edges": [list(e) for e in self.quotient_edges],
                "acyclic": self.acyclic,
            },
            "assignment": dict(self.assignment),
            "baselines": {
                "contiguous": None if c is None else c.to_dict(),
                "data_parallel": {
                    "method": "data_parallel",
                    "comm_volume_bytes": self.data_parallel_volume_bytes,
                    "comm_volume_per_device_bytes": self.data_parallel_per_device_bytes,
                    "imbalance": 0.0,
                },
            },
            "definitions": dict(self.notes),
            "cudnn_major": self.cudnn_major,
            "memory_format": self.memory_format,
            "assumptions": dict(self.assumptions),
        }


def partition_report(
    model: str | Network,
    parts: int,
    granularity: str = "layer",
    epsilon: float = DEFAULT_EPSILON,
    global_batch: int = 256,
    hardware: str | Hardware = "a100-80gb-dgx",
    precision: str = "amp",
    image_size: int | None = None,
    seed: int = DEFAULT_SEED,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
) -> PartitionReport:
    """Partition ``model`` into ``parts`` parts with KaHyPar and compare with the baselines, its
    units weighted by their compute times with grouped convolutions as cuDNN ``cudnn_major`` runs
    them (:mod:`perfmodel.cost.grouped`; 5 to 9, default 9) and the activations in
    ``memory_format`` (:mod:`perfmodel.cost.layout`; nchw or nhwc, default nchw)."""
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise BatchSplitError(f"global batch must be a positive integer, got {shown(global_batch)}")
    if global_batch > MAX_BATCH:
        raise BatchSplitError(
            f"global batch {shown(global_batch)} is too large (valid: 1 to {MAX_BATCH:,} samples per step)"
        )
    check_count("seed", seed, MAX_SEED, minimum=0)
    major, fmt = check_cudnn_major(cudnn_major), check_memory_format(memory_format)
    check_precision(precision)
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 2:
        raise UsageError(f"parts must be an integer >= 2, got {parts!r}")
    net = model if isinstance(model, Network) else get_model(model, image_size)
    hw = load_hardware(hardware)
    # units weighted at the batch the parts run, as mp=K plans weight theirs at their micro-batch
    hg = network_hypergraph(net, hw, precision, parts, granularity, major, fmt, global_batch)  # checks cuDNN
    hp = hypergraph_partition(hg, parts, epsilon, seed)
    cp = contiguous_partition(net, hg, parts)

    def loads(p: Partition) -> np.ndarray:
        copies = copy_seconds(channel_copies(net, hg, p.assignment), parts, hw, precision, global_batch)
        total: np.ndarray = part_seconds(net, hg, p.assignment, parts, hw, precision, global_batch) + copies
        return total

    params_unit = hg.layer_values(net_params(net))
    bound = max_allowed_weight(int(hg.unit_weights.sum()), parts, epsilon)
    notes = _notes(hg, epsilon, seed, global_batch)
    return PartitionReport(
        model=net.name,
        hardware=hw.name,
        precision=precision,
        granularity=granularity,
        parts=parts,
        epsilon=epsilon,
        seed=seed,
        global_batch=global_batch,
        units=hg.num_units,
        nets=hg.num_nets,
        params=float(net.params),
        partition_seconds=hp.seconds,
        hypergraph=_summary(hp, global_batch, params_unit, loads(hp)),
        contiguous=None if cp is None else _summary(cp, global_batch, params_unit, loads(cp)),
        data_parallel_volume_bytes=data_parallel_volume_bytes(net.params, parts),
        assignment=hp.unit_parts,
        quotient_edges=quotient_edges(hg, hp.assignment),
        heaviest_part_over_bound=float(hp.weight_loads.max()) / bound,
        heaviest_unit_over_bound=float(hg.unit_weights.max()) / bound,
        notes=notes,
        cudnn_major=major,
        memory_format=fmt,
    )


def _notes(hg: Hypergraph, epsilon: float, seed: int, global_batch: int) -> dict[str, str]:
    """The report's definitions, in words."""
    weight_batch, granularity = hg.batch, hg.granularity
    notes = {
        "comm_volume_bytes": VOLUME_DEFINITION,
        "data_parallel": DP_DEFINITION,
        "imbalance": "max part load / mean part load - 1, on predicted forward+backward seconds",
        "part_loads_s": f"forward+backward seconds of each part per step, priced at the global batch "
        f"({global_batch}): per layer, one kernel over all the channels the part holds of it",
        "partitioner": f"KaHyPar direct k-way, objective km1 (connectivity - 1), "
        f"epsilon {epsilon}, seed {seed}; "
        "vertex weights: predicted compute time of each unit's layer times its share of the layer's "
        f"channels, at batch {weight_batch}, the batch the parts run (mp=K plans weight theirs at their "
        "micro-batch) (memory is not a second constraint: KaHyPar balances one weight)",
        "contiguous": "the chain of links cut into K runs minimising the slowest run (as pipeline "
        "parallelism cuts it), measured on the same hypergraph",
        "balance": "KaHyPar's bound: heaviest part <= (1 + epsilon) x ceil(total / K) on integer "
        "weights (predicted seconds scaled); a unit heavier than the bound makes it unreachable",
        "excluded": "the network input (each part reads it from the host) and the loss",
    }
    if granularity == "channel":
        notes["units"] = (f"the channels of filter={hg.groups}'s GPUs; a part runs the units it holds of a layer "
                          "as one smaller layer (its filters from the whole input, or the channels it follows), "
                          "priced as predict prices a filter-split GPU's layer, plus the copies (torch.cat) "
                          "that pack channel blocks into contiguous buffers before a layer reads them or a "
                          "message sends them, forward and backward")
    return notes


def net_params(net: Network) -> np.ndarray:
    """Parameters of every layer of ``net``."""
    return np.array([float(layer.params) for layer in net.layers])

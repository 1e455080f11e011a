"""Run KaHyPar (direct k-way, (lambda - 1) objective) on a :class:`Hypergraph`."""

from __future__ import annotations

from importlib import resources
from typing import Any

import numpy as np

from ..errors import PartitionError
from .hypergraph import Hypergraph

__all__ = [
    "CONFIG_NAME",
    "INSTALL_HINT",
    "kahypar_partition",
    "kahypar_available",
    "kahypar_net_weights",
]

#: The KaHyPar preset shipped inside this package (KaHyPar's wheel ships none).
CONFIG_NAME = "km1_config.ini"

INSTALL_HINT = "install it with `pip install kahypar`"

#: KaHyPar's weights are 32-bit signed integers; keep every possible objective below this.
_INT_LIMIT = 2**30


def _module() -> Any:
    try:
        import kahypar
    except ImportError as exc:
        raise PartitionError(
            f"the hypergraph partitioner KaHyPar is not installed; {INSTALL_HINT}"
        ) from exc
    return kahypar


def kahypar_available() -> bool:
    """Whether the ``kahypar`` module can be imported."""
    try:
        _module()
    except PartitionError:
        return False
    return True


def kahypar_net_weights(hg: Hypergraph, parts: int) -> np.ndarray:
    """Integer net weights for KaHyPar: bytes per sample, scaled down only if the (lambda - 1)
    objective could overflow 32 bits."""
    worst = float(hg.net_bytes.sum()) * (parts - 1)
    scale = max(1.0, worst / _INT_LIMIT)
    return np.maximum(1, np.rint(hg.net_bytes / scale)).astype(np.int64)


def kahypar_partition(hg: Hypergraph, parts: int, epsilon: float, seed: int) -> np.ndarray:
    """The part (0..parts-1) of every unit, minimising (lambda - 1) under KaHyPar's balance bound
    ``max part weight <= (1 + epsilon) x ceil(total weight / parts)``."""
    kahypar = _module()
    if parts < 2 or parts > hg.num_units:
        raise PartitionError(f"cannot cut {hg.num_units} units into {parts} parts")
    if hg.num_nets == 0:
        raise PartitionError(f"{hg.model} has no tensors between its units to partition")
    try:
        with resources.as_file(resources.files(__package__) / CONFIG_NAME) as path:
            if not path.is_file():
                raise PartitionError(
                    f"KaHyPar preset {CONFIG_NAME} is missing from the perfmodel.partition package"
                )
            h = kahypar.Hypergraph(
                hg.num_units,
                hg.num_nets,
                [int(x) for x in hg.offsets],
                [int(x) for x in hg.pins],
                parts,
                [int(x) for x in kahypar_net_weights(hg, parts)],
                [int(x) for x in hg.unit_weights],
            )
            ctx = kahypar.Context()
            ctx.loadINIconfiguration(str(path))
            ctx.setK(parts)
            ctx.setEpsilon(float(epsilon))
            ctx.setSeed(int(seed))
            ctx.suppressOutput(True)
            kahypar.partition(h, ctx)
            blocks = np.array([h.blockID(i) for i in range(hg.num_units)], dtype=np.int64)
    except PartitionError:
        raise
    except (RuntimeError, ValueError, TypeError) as exc:
        raise PartitionError(f"KaHyPar failed on {hg.model} ({parts} parts): {exc}") from exc
    if blocks.min() < 0 or blocks.max() >= parts:
        raise PartitionError(f"KaHyPar left units of {hg.model} unassigned ({parts} parts)")
    return blocks

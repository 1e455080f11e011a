"""Models and hardware for notebooks: zoo networks by name, profiles changed in memory by what-ifs."""

from __future__ import annotations

from typing import Any

from ..hardware import DEFAULT_HARDWARE, Hardware
from ..hardware import load_hardware as _load_hardware
from ..network import Network, get_model
from ..search.enumerate import KINDS
from .args import check_hardware, check_image_size, check_model

__all__ = ["load_model", "load_hardware", "available_kinds"]


def load_model(name: str | Network, image_size: int | None = None) -> Network:
    """The zoo network ``name`` (a string, see ``perfmodel models``) at ``image_size`` pixels
    (an integer from 1 to 1,000,000; default: its evaluation size); a :class:`Network` passes."""
    model = check_model(name)
    if isinstance(model, Network):
        return model
    return get_model(model, check_image_size(image_size))


def load_hardware(name_or_path: str | Hardware = DEFAULT_HARDWARE, **what_if: Any) -> Hardware:
    """A hardware profile by name or path, changed in memory by ``what_if`` (nothing is written).

    ``name_or_path`` is a shipped profile name, a ``.toml`` path or a :class:`Hardware`.
    ``what_if`` takes the keys of :meth:`~perfmodel.hardware.Hardware.what_if`, e.g.
    ``inter_bandwidth_scale=2`` (a twice faster inter-node network), ``gpus_per_node=16``,
    ``peak_scale=1.5``, ``intra={"latency_s": 1e-6}`` or ``collectives={"channels_intra": 8}``
    (a dict changes those fields of the part: ``intra``, ``inter``, ``device``, ``kernels``,
    ``collectives``; an unknown field names the valid ones). Scales are finite numbers > 0 (>= 0 for
    latencies) and every changed field must stay in its physical range
    (:data:`perfmodel.hardware.ranges.RANGES`), else :class:`~perfmodel.errors.ProfileError`.
    """
    hw = _load_hardware(check_hardware(name_or_path))
    return hw.what_if(**what_if) if what_if else hw


def available_kinds() -> tuple[str, ...]:
    """The plan search's strategy kinds (every kind is installed with perfmodel)."""
    return KINDS

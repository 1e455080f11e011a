"""Where a measured row ran: rows of an exported program run on the CPU are shown, never scored."""

from __future__ import annotations

from .measurements import Measurement

__all__ = ["CPU_ROLE", "CPU_REASON", "ran_on_cpu"]

#: The validation role of a row that ran on the CPU (``device`` column ``cpu``).
CPU_ROLE = "cpu run"
#: Why such a row is not scored.
CPU_REASON = (
    "ran on the CPU (device column): shown beside the GPU profile's prediction, not scored, "
    "not used for speedups or calibration"
)


def ran_on_cpu(m: Measurement) -> bool:
    """True when the row's optional ``device`` column says ``cpu`` (``perfmodel export`` writes it)."""
    return m.columns.get("device", "").strip().lower() == "cpu"

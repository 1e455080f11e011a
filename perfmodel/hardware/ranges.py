"""The physical range of every number a hardware profile holds: one table, checked everywhere.

The TOML loader, the dataclasses (so the Python API and what-ifs too) and ``explain --set``
check values against :data:`RANGES` by field name. The bounds are wide on purpose (about
three decades beyond any machine of 2016-2026 either way) and only keep out numbers the model
cannot price: zeros where a value divides, ``1e-300`` bandwidths that make a step infinite,
``1e308`` costs, NaN and infinity. ``hardware_profiles/template.toml`` lists them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ProfileError
from ..limits import shown

__all__ = [
    "Range", "RANGES", "check_value", "in_range", "describe", "given_text", "kind_text", "check_text",
    "check_schema_version", "SCHEMA_VERSION",
]

#: The schema of hardware profiles this perfmodel reads (``schema_version``).
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Range:
    """Valid values ``low <= x <= high`` (``low < x`` when ``open_low``); ``span`` in human units;
    ``noun`` what the value is, where that says more than "a number" (an efficiency: a fraction)."""

    low: float
    high: float
    span: str
    open_low: bool = False
    noun: str = ""

    def holds(self, x: float) -> bool:
        return math.isfinite(x) and (x > self.low if self.open_low else x >= self.low) and x <= self.high

    def text(self) -> str:
        if self.noun:
            return f"{self.noun} from {self.low:g} to {self.high:g}"
        sign = "> 0" if self.open_low or self.low > 0 else ">= 0"
        return f"a number {sign}, within {self.span}"


#: An efficiency: at most 1, and at least 1e-4, three decades below the smallest shipped one
#: (depthwise_efficiency 0.107): 1e-300 priced a step of 4.6e302 ms, or infinity with small peaks.
_FRACTION = Range(1e-4, 1.0, "1e-4 to 1", noun="a fraction")

#: Valid values by field name (the last part of a dotted TOML field; ``peak`` is every entry
#: of ``device.peak_flops_per_s``). A field missing here only has to be finite.
RANGES: dict[str, Range] = {
    "memory_bytes": Range(2.0**20, 2.0**50, "1 MiB to 1 PiB"),
    "memory_bandwidth_bytes_per_s": Range(1e6, 1e15, "1e6 to 1e15 bytes/s (1 MB/s to 1 PB/s)"),
    "peak": Range(1e6, 1e18, "1e6 to 1e18 FLOP/s"),
    "bandwidth_bytes_per_s": Range(1e3, 1e15, "1e3 to 1e15 bytes/s (1 kB/s to 1 PB/s)"),
    "latency_s": Range(0.0, 1.0, "0 to 1 s"),
    "efficiency": _FRACTION,
    "conv": _FRACTION,
    "linear": _FRACTION,
    "memory": _FRACTION,
    "half_work_flops": Range(0.0, 1e15, "0 to 1e15 FLOP"),
    "kernel_launch_s": Range(0.0, 0.1, "0 to 0.1 s"),
    "framework_reserve_bytes": Range(0.0, 2.0**50, "0 to 1 PiB"),
    # the kernel model's per-generation numbers ([efficiency.kernels]; sm_count is an integer field)
    "tile_half_intensity": Range(0.0, 1e4, "0 to 1e4 FLOP/byte", open_low=True),
    "tile_half_intensity_tensor_cores": Range(0.0, 1e4, "0 to 1e4 FLOP/byte", open_low=True),
    "tile_half_intensity_gemm": Range(0.0, 1e4, "0 to 1e4 FLOP/byte", open_low=True),
    "winograd_gain": Range(0.0, 100.0, "0 to 100", open_low=True),
    "winograd_min_channels": Range(0.0, 1e6, "0 to 1e6 channels", open_low=True),
    "winograd_transform_flops": Range(0.0, 1e6, "0 to 1e6 FLOP per pixel and channel"),
    "wgrad_efficiency": _FRACTION,
    "wgrad_efficiency_tensor_cores": _FRACTION,
    "wgrad_split_efficiency": _FRACTION,
    "wgrad_split_efficiency_tensor_cores": _FRACTION,
    "depthwise_efficiency": _FRACTION,
    "host_op_s": Range(0.0, 0.1, "0 to 0.1 s"),
    "step_overhead_s": Range(0.0, 1.0, "0 to 1 s"),
    # NCCL's collectives ([collectives]; the channel counts are integer fields)
    "base_latency_s": Range(0.0, 0.1, "0 to 0.1 s"),
    "memory_passes": Range(0.0, 100.0, "0 to 100 bytes per byte"),
    # physical floors: a memory access takes at least a nanosecond, an SM holds at least one request
    "memory_latency_s": Range(1e-9, 1e-4, "1 ns to 100 us"),
    "sector_slots_per_sm": Range(1.0, 1e6, "1 to 1e6 sectors"),
    # depthwise convolutions' work per output element and per weight-gradient iteration
    "depthwise_output_flops": Range(0.0, 1e6, "0 to 1e6 FLOP per output element"),
    "depthwise_wgrad_flops": Range(0.0, 1e6, "0 to 1e6 FLOP per tap and output element"),
    # weight-gradient split-K: at least one slice, at least one pass over the output tile
    "wgrad_max_split": Range(1.0, 1e6, "1 to 1e6 slices"),
    "wgrad_tile_passes": Range(1.0, 1e3, "1 to 1000 passes"),
    # data-gradient atomic adds (sum of products), FLOP-equivalents at the matmul peak
    "dgrad_atomic_flops": Range(0.0, 1e6, "0 to 1e6 FLOP per atomic add"),
    "per_gpu_hour": Range(0.0, 1e6, "0 to 1e6 (currency units per GPU-hour)"),
}


def describe(name: str) -> str:
    """The valid values of field ``name`` as text (``a finite number`` if it has no range)."""
    r = RANGES.get(name)
    return "a finite number" if r is None else r.text()


def check_value(where: str, name: str, value: object) -> float:
    """``value`` as a float if it is a number in ``name``'s range, else :class:`ProfileError`.

    ``where`` starts the message (the file and dotted field, or the dataclass).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"{where}: expected {describe(name)}, got {given_text(value)}")
    try:
        x = float(value)
    except OverflowError:
        raise ProfileError(f"{where}: expected {describe(name)}, got {given_text(value)}") from None
    r = RANGES.get(name)
    if not math.isfinite(x) or (r is not None and not r.holds(x)):
        raise ProfileError(f"{where}: expected {describe(name)}, got {given_text(value)}")
    return x


def in_range(where: str, **values: float) -> None:
    """Each value is in its field's physical range (:data:`RANGES`); ``where`` names the table."""
    for k, v in values.items():
        check_value(f"{where}: field '{k}'", k, v)


def check_text(where: str, value: object) -> str:
    """``value`` if it is a non-empty string (a profile's name, description, source, currency)."""
    if not isinstance(value, str) or not value.strip():
        raise ProfileError(f"{where}: expected a non-empty string, got {kind_text(value)}")
    return value


def check_schema_version(where: str, value: object) -> int:
    """``value`` if it is the integer :data:`SCHEMA_VERSION`."""
    if isinstance(value, bool) or not isinstance(value, int) or value != SCHEMA_VERSION:
        raise ProfileError(f"{where}: expected the integer {SCHEMA_VERSION} (the schema this perfmodel reads), "
                           f"got {kind_text(value)}")
    return value


def kind_text(value: object) -> str:
    """What was given: :func:`given_text`, with a plain number's type named (``int 2``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{type(value).__name__} {shown(value, 40)}"
    return given_text(value)


def given_text(value: object) -> str:
    """What was given, in the loader's words (``nothing (missing)``, ``a string ('x')``, a number)."""
    if value is None:
        return "nothing (missing)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"a string ({shown(value, 40)})"
    if isinstance(value, int) and abs(value) >= 10**24:
        return f"an integer of about {int(abs(value).bit_length() * math.log10(2)) + 1} digits"
    if isinstance(value, (dict, list)):
        return "a table" if isinstance(value, dict) else "an array"
    return shown(value, 40)

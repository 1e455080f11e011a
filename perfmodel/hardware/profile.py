"""Hardware profiles: a device, a node of devices, the network between nodes, efficiencies as data.

Units are SI throughout: bytes, seconds, FLOP/s, bytes/s. The TOML schema that fills these
dataclasses is documented field by field in ``hardware_profiles/template.toml``. Every field is
checked when a profile is built (by the loader or a what-if), and so are the fields that bound
one another: a device's 16-bit and TF32 peaks above its fp32 one, the framework's reserve below
the device's memory, NCCL's channels below the SMs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from ..errors import ProfileError, UsageError, did_you_mean
from ..limits import shown
from ..units import GIB
from .params import CollectiveParams, KernelParams
from .ranges import (
    SCHEMA_VERSION,
    check_schema_version,
    check_text,
    check_value,
    given_text,
    in_range,
    kind_text,
)

__all__ = [
    "PRECISIONS",
    "precision_hint",
    "unknown_precision",
    "check_precision",
    "TOPOLOGIES",
    "Device",
    "LinkTier",
    "ComputeEfficiency",
    "KernelParams",
    "CollectiveParams",
    "Hardware",
    "PEAK_KEY",
]

#: Training precisions and the peak they run convolutions and matmuls at.
PRECISIONS = ("fp32", "tf32", "amp", "bf16")
#: Names people give a precision that perfmodel spells otherwise (framework and paper names).
_PRECISION_ALIASES = {"fp16": "amp", "float16": "amp", "half": "amp", "mixed": "amp", "16-mixed": "amp",
                      "float32": "fp32", "single": "fp32", "bfloat16": "bf16", "bf16-mixed": "bf16"}


def precision_hint(name: object) -> str:
    """``"; fp16 is amp here (...)"`` where ``name`` is another name of one of :data:`PRECISIONS`, else ``""``."""
    target = _PRECISION_ALIASES.get(str(name).strip().lower())
    if target is None:
        return ""
    what = (" (16-bit tensor-core math with fp32 master weights; amp runtime pytorch-half for a model.half() run)"
            if target == "amp" else "")
    return f"; {name} is {target} here{what}"


def unknown_precision(name: object) -> str:
    """The one line for a precision not in :data:`PRECISIONS`: the name (cut to a short line), the
    valid ones, and the precision it is another name of (:func:`precision_hint`) or the closest."""
    hint = precision_hint(name) or (did_you_mean(name, PRECISIONS) if isinstance(name, str) else "")
    return f"unknown precision {shown(name, 40)} (valid: {', '.join(PRECISIONS)}){hint}"


def check_precision(name: object) -> str:
    """``name`` if it is one of :data:`PRECISIONS`, else a usage error of :func:`unknown_precision`."""
    if isinstance(name, str) and name in PRECISIONS:
        return name
    raise UsageError(unknown_precision(name))


#: Which entry of ``peak_flops_per_s`` each precision's convolutions and matmuls use.
PEAK_KEY = {"fp32": "fp32", "tf32": "tf32", "amp": "fp16", "bf16": "bf16"}
#: Interconnect topologies a link tier may name (informational; the cost model reads the
#: bandwidth, latency and efficiency). ``full-mesh``: every GPU pair of the node has direct
#: links (e.g. 4 V100 SXM2 with two NVLinks per pair); ``cube-mesh``: the DGX-1 hybrid cube-mesh.
TOPOLOGIES = ("nvswitch", "cube-mesh", "full-mesh", "pcie", "ethernet", "infiniband", "fat-tree")


@dataclass(frozen=True)
class Device:
    """One accelerator: peaks per precision class, memory capacity and bandwidth.

    A peak other than fp32's must be above it (``hardware_profiles/template.toml``: omit a peak the
    GPU does not run faster than fp32; its precisions then run at fp32's).
    """

    name: str
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: Mapping[str, float]

    def __post_init__(self) -> None:
        in_range(f"device {self.name}", memory_bytes=self.memory_bytes,
                 memory_bandwidth_bytes_per_s=self.memory_bandwidth_bytes_per_s)
        peaks = self.peak_flops_per_s
        if not isinstance(peaks, Mapping):
            raise ProfileError(f"device {self.name}: peak_flops_per_s must be a table of FLOP/s by "
                               f"precision class, got {given_text(peaks)}")
        if "fp32" not in peaks:
            raise ProfileError(f"device {self.name}: peak_flops_per_s needs at least 'fp32'")
        valid = list(dict.fromkeys(PEAK_KEY.values()))
        for k, v in peaks.items():
            if k not in valid:
                raise ProfileError(f"device {self.name}: peak_flops_per_s has no class {shown(k, 40)} "
                                   f"(valid: {', '.join(valid)}){did_you_mean(str(k), valid)}")
            check_value(f"device {self.name}: field 'peak_flops_per_s.{k}'", "peak", v)
        slow = [k for k in valid if k in peaks and k != "fp32" and peaks[k] <= peaks["fp32"]]
        if slow:
            raise ProfileError(
                f"device {self.name}: peak_flops_per_s.{slow[0]} = {peaks[slow[0]]:.4g} FLOP/s is not above "
                f"peak_flops_per_s.fp32 = {peaks['fp32']:.4g} (omit a peak the GPU does not run faster than "
                f"fp32: its precisions then run at fp32's; hardware_profiles/template.toml)")
        object.__setattr__(self, "peak_flops_per_s", MappingProxyType(dict(peaks)))

    def peak(self, precision: str) -> float:
        """Peak FLOP/s of convolutions and matmuls at ``precision`` (falls back to fp32)."""
        return self.peak_flops_per_s.get(PEAK_KEY[precision], self.peak_flops_per_s["fp32"])


@dataclass(frozen=True)
class LinkTier:
    """A tier of the interconnect (alpha-beta): time = latency + bytes / (bandwidth * efficiency).

    Intra-node: ``bandwidth_bytes_per_s`` is one GPU's, in one direction. Inter-node: one
    node's, in one direction (the sum over its network ports).
    """

    bandwidth_bytes_per_s: float
    latency_s: float
    efficiency: float
    topology: str

    def __post_init__(self) -> None:
        in_range("link", bandwidth_bytes_per_s=self.bandwidth_bytes_per_s, latency_s=self.latency_s)
        in_range("link", efficiency=self.efficiency)
        if self.topology not in TOPOLOGIES:
            raise ProfileError(
                f"link: topology '{self.topology}' is not one of {', '.join(TOPOLOGIES)}"
            )

    @property
    def effective_bandwidth_bytes_per_s(self) -> float:
        return self.bandwidth_bytes_per_s * self.efficiency


@dataclass(frozen=True)
class ComputeEfficiency:
    """Achievable fractions of peak for one precision (Hockney's n_1/2 model of work size).

    A kernel of ``w`` FLOPs reaches ``max_fraction * w / (w + half_work_flops)`` of peak:
    small kernels (small tiles, small batches) run further from peak.
    """

    conv: float
    linear: float
    memory: float
    half_work_flops: float

    def __post_init__(self) -> None:
        in_range("efficiency", conv=self.conv, linear=self.linear, memory=self.memory,
                  half_work_flops=self.half_work_flops)


@dataclass(frozen=True)
class Hardware:
    """A whole system: a device type, ``gpus_per_node`` of them per node, and the link tiers."""

    name: str
    description: str
    device: Device
    gpus_per_node: int
    intra: LinkTier
    inter: LinkTier
    compute: Mapping[str, ComputeEfficiency]
    kernel_launch_s: float
    framework_reserve_bytes: float
    max_nodes: int = 4096
    kernels: KernelParams = field(default_factory=KernelParams)
    collectives: CollectiveParams = field(default_factory=CollectiveParams)
    sources: Mapping[str, str] = field(default_factory=dict)
    path: str = ""
    schema_version: int = SCHEMA_VERSION
    #: optional list price of one GPU for one hour, in ``price_currency`` (source in ``sources["price"]``)
    price_per_gpu_hour: float | None = None
    price_currency: str = "USD"

    def __post_init__(self) -> None:
        check_text("field 'name'", self.name)
        check_text(f"{self.name}: field 'description'", self.description)
        for part, kind in _PARTS.items():
            if not isinstance(getattr(self, part), kind):
                raise ProfileError(f"{self.name}: {part} must be a {kind.__name__}, "
                                   f"got {given_text(getattr(self, part))}")
        g = self.gpus_per_node
        if isinstance(g, bool) or not isinstance(g, int) or not 1 <= g <= 1_000_000:
            raise ProfileError(
                f"{self.name}: gpus_per_node must be an integer from 1 to 1,000,000, got {g!r:.40}"
            )
        if not isinstance(self.compute, Mapping) or not all(
                isinstance(c, ComputeEfficiency) for c in self.compute.values()):
            raise ProfileError(f"{self.name}: compute must map precisions to ComputeEfficiency, "
                               f"got {shown(self.compute, 40)}")
        missing = [p for p in PRECISIONS if p not in self.compute]
        if missing:
            raise ProfileError(f"{self.name}: efficiency.compute lacks precisions {missing}")
        in_range(self.name, kernel_launch_s=self.kernel_launch_s, framework_reserve_bytes=self.framework_reserve_bytes)
        n = self.max_nodes
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1_000_000:
            raise ProfileError(f"{self.name}: max_nodes must be an integer from 1 to 1,000,000, got {n!r:.40}")
        _check_record(self)
        _check_across(self)
        object.__setattr__(self, "compute", MappingProxyType(dict(self.compute)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def max_gpus(self) -> int:
        return self.gpus_per_node * self.max_nodes

    def what_if(self, **changes: Any) -> Hardware:
        """A copy with fields changed, for what-if analysis without writing files.

        ``self`` is left unchanged. Keys are

        * ``*_scale`` multipliers: ``intra_bandwidth_scale``, ``inter_bandwidth_scale``,
          ``intra_latency_scale``, ``inter_latency_scale``, ``peak_scale`` (every peak),
          ``memory_bandwidth_scale``;
        * ``memory_bytes=...`` (the device's capacity);
        * ``intra={...}`` / ``inter={...}`` / ``device={...}`` / ``kernels={...}`` /
          ``collectives={...}``: fields of that part (:class:`LinkTier`, :class:`Device`,
          :class:`KernelParams`, :class:`CollectiveParams`) to replace, or a whole new part;
        * any field of :class:`Hardware` (``gpus_per_node=4``, ``max_nodes=2``, ...).

        The copy's name records the changes (``name=...`` names it instead). NumPy numbers count
        as Python ones. The changes are applied together, then the copy is checked as a loaded
        profile is (every field, and the fields that bound one another); an unknown key or a value
        a field does not take raises :class:`ProfileError` naming the key and the value.
        """
        return _what_if(self, changes) if changes else self


def _check_record(hw: Hardware) -> None:
    """The fields that describe a profile rather than the machine, checked as the loader checks them."""
    where = f"{hw.name}: field"
    if not isinstance(hw.path, str):
        raise ProfileError(f"{where} 'path': expected a string (the profile's file, '' for none), "
                           f"got {kind_text(hw.path)}")
    if not isinstance(hw.sources, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in hw.sources.items()):
        raise ProfileError(f"{where} 'sources': expected a table of source strings by part, "
                           f"got {shown(hw.sources, 40)}")
    check_schema_version(f"{where} 'schema_version'", hw.schema_version)
    if hw.price_per_gpu_hour is not None:
        check_value(f"{where} 'price.per_gpu_hour'", "per_gpu_hour", hw.price_per_gpu_hour)
    check_text(f"{where} 'price.currency'", hw.price_currency)


def _check_across(hw: Hardware) -> None:
    """The fields that bound one another: the framework's reserve below the device's memory, NCCL's
    channels below the SMs."""
    reserve, memory = hw.framework_reserve_bytes, hw.device.memory_bytes
    if reserve >= memory:
        raise ProfileError(
            f"{hw.name}: efficiency.framework_reserve_bytes = {reserve:,.0f} ({reserve / GIB:.2f} GiB) must be below "
            f"device.memory_bytes = {memory:,.0f} ({memory / GIB:.2f} GiB): no memory would be left to train in")
    sms = hw.kernels.sm_count
    for k in ("channels_intra", "channels_net"):
        if getattr(hw.collectives, k) >= sms:
            raise ProfileError(f"{hw.name}: collectives.{k} = {getattr(hw.collectives, k)} must be below "
                               f"efficiency.kernels.sm_count = {sms} (NCCL holds one SM per channel)")


#: The parts of a :class:`Hardware` that are records of their own (what-ifs replace their fields).
_PARTS: dict[str, type] = {"intra": LinkTier, "inter": LinkTier, "device": Device,
                           "kernels": KernelParams, "collectives": CollectiveParams}

_LINK_SCALES = {
    "intra_bandwidth_scale": ("intra", "bandwidth_bytes_per_s"),
    "inter_bandwidth_scale": ("inter", "bandwidth_bytes_per_s"),
    "intra_latency_scale": ("intra", "latency_s"),
    "inter_latency_scale": ("inter", "latency_s"),
}


def _what_if_keys() -> list[str]:
    return sorted([*_LINK_SCALES, "peak_scale", "memory_bandwidth_scale", "memory_bytes",
                   *(f.name for f in dataclasses.fields(Hardware))])


def _what_if(hw: Hardware, changes: Mapping[str, Any]) -> Hardware:
    """:meth:`Hardware.what_if`: the ``changes`` applied together to ``hw``'s fields, then checked once."""
    valid = _what_if_keys()
    fields = {f.name: getattr(hw, f.name) for f in dataclasses.fields(Hardware)}
    for key, value in changes.items():
        if key not in valid:  # the closest keys where some are close, else every key
            hint = did_you_mean(key, valid) or f" (valid: {', '.join(valid)})"
            raise ProfileError(f"what-if: unknown field {shown(key, 40)}{hint}")
        try:
            _apply_change(fields, key, _plain(value))
        except ProfileError as e:
            raise ProfileError(f"what-if {key}={shown(value, 60)} on {hw.name}: {e}") from None
    try:
        new = Hardware(**fields)  # under its own name (or the one given): a message names it once
    except ProfileError as e:
        said = ", ".join(f"{k}={shown(v, 40)}" for k, v in changes.items())
        said = said if len(said) <= 160 else said[:150] + " ..."
        raise ProfileError(f"what-if {said} on {hw.name}: {str(e).removeprefix(f'{hw.name}: ')}") from None
    if "name" in changes:
        return new
    return dataclasses.replace(new, name=f"{hw.name} (what-if: {', '.join(f'{k}={v}' for k, v in changes.items())})")


def _plain(value: Any) -> Any:
    """``value`` with NumPy scalars made Python ones (in dicts too): ``np.int64(4)`` is the integer 4."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _scale(key: str, value: Any) -> float:
    """A what-if multiplier: a finite number > 0 (>= 0 for a latency, which may be zero); the
    scaled field's range is checked after."""
    low = ">= 0" if "latency" in key else "> 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"{key} must be a number {low}, got {kind_text(value)}")
    x = float(value) if abs(value) < 1e300 else math.inf
    if not math.isfinite(x) or x < 0 or (x == 0 and low == "> 0"):
        raise ProfileError(f"{key} must be a finite number {low}, got {value!r:.40}")
    return x


def _changed_part(part: Any, key: str, value: Any) -> Any:
    """``part`` (``key`` of a profile: a link tier, the device, ...) with the fields of mapping
    ``value`` replaced (the part's dataclass checks them), or ``value`` itself if it is such a part."""
    kind = _PARTS[key]
    if isinstance(value, kind):
        return value
    valid = [f.name for f in dataclasses.fields(kind)]
    if not isinstance(value, Mapping):
        raise ProfileError(f"{key} must be a {kind.__name__} or a dict of its fields "
                           f"({', '.join(valid)}), got {given_text(value)}")
    for name in value:
        if name not in valid:
            hint = did_you_mean(name, valid) if isinstance(name, str) else ""
            listed = valid if len(valid) <= 12 else [*valid[:12], f"and {len(valid) - 12} more"]
            raise ProfileError(f"{key} has no field {shown(name, 40)} (valid: {', '.join(listed)}){hint}")
    return dataclasses.replace(part, **value)


def _apply_change(fields: dict[str, Any], key: str, value: Any) -> None:
    """One what-if change (see :meth:`Hardware.what_if`) to a profile's ``fields``; a scaled link
    field is checked here, so that the message names the tier."""
    if key.endswith("_scale"):
        value = _scale(key, value)
    device = fields["device"]
    if key in _LINK_SCALES:
        tier_name, field_name = _LINK_SCALES[key]
        tier = fields[tier_name]
        old = getattr(tier, field_name)
        new = check_value(f"{tier_name}.{field_name} ({old:g} x {value:g})", field_name, old * value)
        fields[tier_name] = dataclasses.replace(tier, **{field_name: new})
    elif key == "peak_scale":
        peaks = {k: v * value for k, v in device.peak_flops_per_s.items()}
        fields["device"] = dataclasses.replace(device, peak_flops_per_s=peaks)
    elif key == "memory_bandwidth_scale":
        bw = device.memory_bandwidth_bytes_per_s * value
        fields["device"] = dataclasses.replace(device, memory_bandwidth_bytes_per_s=bw)
    elif key == "memory_bytes":
        fields["device"] = dataclasses.replace(device, memory_bytes=value)
    elif key in _PARTS:
        fields[key] = _changed_part(fields[key], key, value)
    else:
        fields[key] = value

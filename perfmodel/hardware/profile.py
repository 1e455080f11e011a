"""Hardware profiles: a device, a node of devices, the network between nodes, efficiencies as data.

Units are SI throughout: bytes, seconds, FLOP/s, bytes/s. The TOML schema that fills these
dataclasses is documented field by field in ``hardware_profiles/template.toml``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import ProfileError, closest_names
from ..limits import shown
from .ranges import check_value, given_text

__all__ = [
    "PRECISIONS",
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
#: Which entry of ``peak_flops_per_s`` each precision's convolutions and matmuls use.
PEAK_KEY = {"fp32": "fp32", "tf32": "tf32", "amp": "fp16", "bf16": "bf16"}
#: Interconnect topologies a link tier may name (informational; the cost model reads the
#: bandwidth, latency and efficiency). ``full-mesh``: every GPU pair of the node has direct
#: links (e.g. 4 V100 SXM2 with two NVLinks per pair); ``cube-mesh``: the DGX-1 hybrid cube-mesh.
TOPOLOGIES = ("nvswitch", "cube-mesh", "full-mesh", "pcie", "ethernet", "infiniband", "fat-tree")


def _in_range(where: str, **values: float) -> None:
    """Each value is in its field's physical range (:data:`~perfmodel.hardware.ranges.RANGES`)."""
    for k, v in values.items():
        check_value(f"{where}: field '{k}'", k, v)


@dataclass(frozen=True)
class Device:
    """One accelerator: peaks per precision class, memory capacity and bandwidth."""

    name: str
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: Mapping[str, float]

    def __post_init__(self) -> None:
        _in_range(f"device {self.name}", memory_bytes=self.memory_bytes,
                  memory_bandwidth_bytes_per_s=self.memory_bandwidth_bytes_per_s)
        if not isinstance(self.peak_flops_per_s, Mapping):
            raise ProfileError(f"device {self.name}: peak_flops_per_s must be a table of FLOP/s by "
                               f"precision class, got {given_text(self.peak_flops_per_s)}")
        if "fp32" not in self.peak_flops_per_s:
            raise ProfileError(f"device {self.name}: peak_flops_per_s needs at least 'fp32'")
        for k, v in self.peak_flops_per_s.items():
            check_value(f"device {self.name}: field 'peak_flops_per_s.{k}'", "peak", v)
        object.__setattr__(self, "peak_flops_per_s", MappingProxyType(dict(self.peak_flops_per_s)))

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
        _in_range("link", bandwidth_bytes_per_s=self.bandwidth_bytes_per_s, latency_s=self.latency_s)
        _in_range("link", efficiency=self.efficiency)
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
        _in_range("efficiency", conv=self.conv, linear=self.linear, memory=self.memory,
                  half_work_flops=self.half_work_flops)


@dataclass(frozen=True)
class KernelParams:
    """Per-GPU-generation numbers of the kernel-level compute model (``[efficiency.kernels]``).

    Meanings, units and sources: ``hardware_profiles/template.toml``; how each is used:
    :mod:`perfmodel.cost.efficiency` and :mod:`perfmodel.cost.work`. Defaults: a Volta-class
    GPU (80 SMs) with the values fitted on V100 (``scripts/fit_kernel_params.py``).
    """

    sm_count: int = 80
    tile_half_intensity: float = 12.9
    winograd_gain: float = 2.78
    winograd_min_channels: float = 1.0
    winograd_transform_flops: float = 201.0
    wgrad_efficiency: float = 0.984
    wgrad_efficiency_tensor_cores: float = 1.0
    wgrad_split_efficiency: float = 0.525
    wgrad_split_efficiency_tensor_cores: float = 0.456
    depthwise_efficiency: float = 0.107
    host_op_s: float = 1.0e-5
    step_overhead_s: float = 3.0e-4
    #: the latency bound of window kernels (perfmodel.cost.work.window_path_loads): effective
    #: latency of one window load (fitted on V100), resident threads per SM (CUDA C++ Programming
    #: Guide, compute capabilities 6.0-9.0: 2048) and the 32-byte sector requests an SM keeps in
    #: flight (fitted on V100)
    memory_latency_s: float = 5.28e-07
    threads_per_sm: int = 2048
    sector_slots_per_sm: float = 369.0
    #: depthwise convolutions priced per output element (perfmodel.cost.depthwise): FLOP-equivalents
    #: at the fp32 peak of one thread's fixed work, and of one weight-gradient reduction iteration
    #: (fitted on V100; depthwise_efficiency above is the tap loop's FMA rate)
    depthwise_output_flops: float = 358.0
    depthwise_wgrad_flops: float = 84.2
    #: convolution weight-gradient split-K (perfmodel.cost.work): the most slices a kernel splits
    #: its N*P*Q reduction into per output tile, and the passes over its output tile (partial
    #: tiles written and reduced, or atomically added); fitted per generation (defaults: V100's)
    wgrad_max_split: float = 17.0
    wgrad_tile_passes: float = 26.6
    #: FLOP-equivalents at the matmul peak of one atomic add of a data gradient computed as a sum
    #: of products (perfmodel.cost.work); fitted on the P100 (144); the default is not fitted: the
    #: V100's DeepBench rows leave it undetermined (fitted alone it ran to 736 with no MAPE gain;
    #: 29.8 in a full volta-fp32 refit), so V100 and later profiles keep 30
    dgrad_atomic_flops: float = 30.0
    #: the tile intensity I_1/2 of tensor-core kernels (tf32, amp, bf16) where it differs from the
    #: CUDA-core one above; None: the same. A tensor-core precision's conv/linear efficiencies are
    #: fitted together with the shape rule's I_1/2 (scripts/fit_kernel_params.py volta-amp); a
    #: profile borrowing another generation's tensor-core efficiencies keeps the I_1/2 they were
    #: fitted with (Ampere/Hopper: Volta's), not its own CUDA-core fit's
    tile_half_intensity_tensor_cores: float | None = None
    #: the tile intensity I_1/2 of cuBLAS GEMMs (linear layers) on CUDA cores where it differs from
    #: the convolutions' above; None: the same (perfmodel.cost.tile_intensity); fitted per generation
    tile_half_intensity_gemm: float | None = None

    def half_intensity(self, tensor_cores: bool, gemm: bool = False) -> float:
        """I_1/2 of the shape rule for kernels on tensor cores or on CUDA cores (``gemm``: of a
        cuBLAS GEMM rather than an implicit-GEMM convolution)."""
        tc = self.tile_half_intensity_tensor_cores
        if tensor_cores:
            return tc if tc is not None else self.tile_half_intensity
        g = self.tile_half_intensity_gemm
        return g if gemm and g is not None else self.tile_half_intensity

    def __post_init__(self) -> None:
        if isinstance(self.sm_count, bool) or not isinstance(self.sm_count, int) or self.sm_count < 1:
            raise ProfileError(f"efficiency.kernels: 'sm_count' must be a positive integer, got {self.sm_count!r}")
        t = self.threads_per_sm
        if isinstance(t, bool) or not isinstance(t, int) or t < 1:
            raise ProfileError(f"efficiency.kernels: 'threads_per_sm' must be a positive integer, got {t!r}")
        _in_range("efficiency.kernels", tile_half_intensity=self.tile_half_intensity,
                  winograd_gain=self.winograd_gain, winograd_min_channels=self.winograd_min_channels,
                  winograd_transform_flops=self.winograd_transform_flops,
                  wgrad_efficiency=self.wgrad_efficiency,
                  wgrad_efficiency_tensor_cores=self.wgrad_efficiency_tensor_cores,
                  wgrad_split_efficiency=self.wgrad_split_efficiency,
                  wgrad_split_efficiency_tensor_cores=self.wgrad_split_efficiency_tensor_cores,
                  depthwise_efficiency=self.depthwise_efficiency, host_op_s=self.host_op_s,
                  step_overhead_s=self.step_overhead_s, memory_latency_s=self.memory_latency_s,
                  sector_slots_per_sm=self.sector_slots_per_sm,
                  depthwise_output_flops=self.depthwise_output_flops,
                  depthwise_wgrad_flops=self.depthwise_wgrad_flops, wgrad_max_split=self.wgrad_max_split,
                  wgrad_tile_passes=self.wgrad_tile_passes, dgrad_atomic_flops=self.dgrad_atomic_flops)
        if self.tile_half_intensity_tensor_cores is not None:
            _in_range("efficiency.kernels", tile_half_intensity_tensor_cores=self.tile_half_intensity_tensor_cores)
        if self.tile_half_intensity_gemm is not None:
            _in_range("efficiency.kernels", tile_half_intensity_gemm=self.tile_half_intensity_gemm)


@dataclass(frozen=True)
class CollectiveParams:
    """How NCCL's collectives share the GPU with compute, and their fixed cost (``[collectives]``).

    ``channels_intra`` / ``channels_net``: SMs an allreduce holds inside a node / across nodes
    (NCCL runs one thread block per channel, on an SM of its own); ``base_latency_s``: the
    fixed cost of launching one collective; ``memory_passes``: bytes of device memory traffic
    per byte a collective moves over its link. Meanings and sources:
    ``hardware_profiles/template.toml``; used by :mod:`perfmodel.cost.collectives`. Defaults:
    NCCL's tuning model and a PCIe system's 2 channels (the fewest NCCL launches).
    """

    channels_intra: int = 2
    channels_net: int = 2
    base_latency_s: float = 8.4e-6
    memory_passes: float = 3.0

    def __post_init__(self) -> None:
        for k in ("channels_intra", "channels_net"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1024:
                raise ProfileError(f"collectives: '{k}' must be an integer from 1 to 1,024, got {v!r:.40}")
        _in_range("collectives", base_latency_s=self.base_latency_s, memory_passes=self.memory_passes)


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
    schema_version: int = 1
    #: optional list price of one GPU for one hour, in ``price_currency`` (source in ``sources["price"]``)
    price_per_gpu_hour: float | None = None
    price_currency: str = "USD"

    def __post_init__(self) -> None:
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
        _in_range(self.name, kernel_launch_s=self.kernel_launch_s,
                  framework_reserve_bytes=self.framework_reserve_bytes)
        n = self.max_nodes
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 1_000_000:
            raise ProfileError(f"{self.name}: max_nodes must be an integer from 1 to 1,000,000, got {n!r:.40}")
        sms = self.kernels.sm_count
        for k in ("channels_intra", "channels_net"):
            if getattr(self.collectives, k) >= sms:
                raise ProfileError(f"{self.name}: collectives.{k} = {getattr(self.collectives, k)} must be below "
                                   f"efficiency.kernels.sm_count = {sms} (NCCL holds one SM per channel)")
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

        The copy's name records the changes. An unknown key raises :class:`ProfileError`.
        """
        hw = self
        for key, value in changes.items():
            hw = _apply_change(hw, key, value)
        if changes:
            what = ", ".join(f"{k}={v}" for k, v in changes.items())
            hw = dataclasses.replace(hw, name=f"{self.name} (what-if: {what})")
        return hw


#: The parts of a :class:`Hardware` that are records of their own (what-ifs replace their fields).
_PARTS: dict[str, type] = {"intra": LinkTier, "inter": LinkTier, "device": Device,
                           "kernels": KernelParams, "collectives": CollectiveParams}

_LINK_SCALES = {
    "intra_bandwidth_scale": ("intra", "bandwidth_bytes_per_s"),
    "inter_bandwidth_scale": ("inter", "bandwidth_bytes_per_s"),
    "intra_latency_scale": ("intra", "latency_s"),
    "inter_latency_scale": ("inter", "latency_s"),
}


def _scale(key: str, value: Any) -> float:
    """A what-if multiplier: a finite number > 0 (>= 0 for a latency, which may be zero); the
    scaled field's range is checked after."""
    low = ">= 0" if "latency" in key else "> 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"what-if: {key} must be a number {low}, got {value!r:.40}")
    x = float(value) if abs(value) < 1e300 else math.inf
    if not math.isfinite(x) or x < 0 or (x == 0 and low == "> 0"):
        raise ProfileError(f"what-if: {key} must be a finite number {low}, got {value!r:.40}")
    return x


def _changed_part(hw: Hardware, key: str, value: Any) -> Any:
    """Part ``key`` of ``hw`` (a link tier, the device, ...) with the fields of mapping ``value``
    replaced (the part's dataclass checks them), or ``value`` itself if it is such a part."""
    kind = _PARTS[key]
    if isinstance(value, kind):
        return value
    valid = [f.name for f in dataclasses.fields(kind)]
    if not isinstance(value, Mapping):
        raise ProfileError(f"what-if: {key} must be a {kind.__name__} or a dict of its fields "
                           f"({', '.join(valid)}), got {given_text(value)}")
    for name in value:
        if name not in valid:
            near = closest_names(name, valid) if isinstance(name, str) else []
            hint = f"did you mean {' or '.join(near)}? " if near else ""
            listed = valid if len(valid) <= 12 else [*valid[:12], f"and {len(valid) - 12} more"]
            raise ProfileError(f"what-if: {key} has no field {shown(name, 40)} "
                               f"({hint}valid: {', '.join(listed)})")
    return dataclasses.replace(getattr(hw, key), **value)


def _apply_change(hw: Hardware, key: str, value: Any) -> Hardware:
    """One what-if change (see :meth:`Hardware.what_if`)."""
    if key.endswith("_scale"):
        value = _scale(key, value)
    if key in _LINK_SCALES:
        tier_name, field_name = _LINK_SCALES[key]
        tier = getattr(hw, tier_name)
        new_tier = dataclasses.replace(tier, **{field_name: getattr(tier, field_name) * value})
        return dataclasses.replace(hw, **{tier_name: new_tier})
    if key == "peak_scale":
        peaks = {k: v * value for k, v in hw.device.peak_flops_per_s.items()}
        device = dataclasses.replace(hw.device, peak_flops_per_s=peaks)
        return dataclasses.replace(hw, device=device)
    if key == "memory_bandwidth_scale":
        bw = hw.device.memory_bandwidth_bytes_per_s * value
        device = dataclasses.replace(hw.device, memory_bandwidth_bytes_per_s=bw)
        return dataclasses.replace(hw, device=device)
    if key == "memory_bytes":
        return dataclasses.replace(hw, device=dataclasses.replace(hw.device, memory_bytes=value))
    if key in _PARTS:
        return dataclasses.replace(hw, **{key: _changed_part(hw, key, value)})
    if key in {f.name for f in dataclasses.fields(Hardware)}:
        return dataclasses.replace(hw, **{key: value})
    valid = sorted([*_LINK_SCALES, "peak_scale", "memory_bandwidth_scale", "memory_bytes",
                    *(f.name for f in dataclasses.fields(Hardware))])
    raise ProfileError(f"what-if: unknown field '{key}' (valid: {', '.join(valid)})")

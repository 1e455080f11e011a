"""Load hardware profiles from TOML with strict validation.

Every error is a :class:`~perfmodel.errors.ProfileError` whose message names the file, the
field (dotted path) and what was expected. Unknown keys are rejected so that a typo
(``bandwith_bytes_per_s``) fails loudly instead of silently falling back to nothing. The
schema is documented field by field in ``hardware_profiles/template.toml``.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ProfileError, UnknownNameError
from ..io import MAX_PROFILE_BYTES, read_bounded
from ..limits import MAX_GPUS, shown
from .profile import (
    PEAK_KEY,
    PRECISIONS,
    TOPOLOGIES,
    CollectiveParams,
    ComputeEfficiency,
    Device,
    Hardware,
    KernelParams,
    LinkTier,
)
from .ranges import SCHEMA_VERSION, check_schema_version, check_text, check_value, kind_text

__all__ = [
    "load_profile",
    "load_hardware",
    "parse_profile",
    "profile_names",
    "profiles_dir",
    "SCHEMA_VERSION",
    "DEFAULT_HARDWARE",
    "DEFAULT_MAX_NODES",
    "REFERENCE_PROFILE",
]

DEFAULT_HARDWARE = "a100-80gb-dgx"
#: The shipped profile on which profile-independent choices are made (an mp plan's partition,
#: an automatic pipeline split), so that a faster device or link never changes them.
REFERENCE_PROFILE = DEFAULT_HARDWARE
#: ``network.max_nodes`` when a profile does not give one.
DEFAULT_MAX_NODES = 4096

#: Keys each table accepts; anything else is rejected with its name (catches typos).
_TOP_KEYS = {"schema_version", "name", "description", "source", "device", "node", "network",
             "efficiency", "collectives", "price"}
_COLLECTIVE_KEYS = {"channels_intra", "channels_net", "base_latency_s", "memory_passes", "source"}
_PRICE_KEYS = {"per_gpu_hour", "currency", "date", "source"}
_DEVICE_KEYS = {"name", "memory_bytes", "memory_bandwidth_bytes_per_s", "peak_flops_per_s",
                "source"}
_PEAK_KEYS = set(PEAK_KEY.values()) | {"source"}
_NODE_KEYS = {"gpus_per_node", "link", "source"}
_LINK_KEYS = {"bandwidth_bytes_per_s", "latency_s", "efficiency", "topology", "source"}
_NETWORK_KEYS = _LINK_KEYS | {"max_nodes"}
_EFFICIENCY_KEYS = {"kernel_launch_s", "framework_reserve_bytes", "compute", "kernels", "source"}
_KERNEL_KEYS = {"sm_count", "tile_half_intensity", "winograd_gain", "winograd_min_channels",
                "winograd_transform_flops",
                "wgrad_efficiency", "wgrad_efficiency_tensor_cores", "wgrad_split_efficiency",
                "wgrad_split_efficiency_tensor_cores", "depthwise_efficiency",
                "host_op_s", "step_overhead_s", "source", "memory_latency_s", "threads_per_sm",
                "sector_slots_per_sm", "depthwise_output_flops", "depthwise_wgrad_flops", "wgrad_max_split",
                "wgrad_tile_passes", "dgrad_atomic_flops", "tile_half_intensity_tensor_cores",
                "tile_half_intensity_gemm"}
_COMPUTE_KEYS = set(PRECISIONS) | {"source"}
_PRECISION_KEYS = {"conv", "linear", "memory", "half_work_flops", "source"}


def profiles_dir() -> Path:
    """The folder of shipped profiles: inside the installed package, else the source checkout's."""
    try:
        d = Path(str(resources.files("perfmodel.hardware_profiles")))
        if d.is_dir() and any(d.glob("*.toml")):
            return d
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "hardware_profiles"


def profile_names() -> list[str]:
    """Names of the shipped profiles (file stems), without the ``template``."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml") if p.stem != "template")


class _Reader:
    """Typed access to one TOML table; every error names the file and the dotted field."""

    def __init__(self, file: str, table: dict[str, Any], prefix: str = "") -> None:
        self.file, self.table, self.prefix = file, table, prefix

    def where(self, key: str) -> str:
        return f"{self.file}: field '{self.prefix}{key}'"

    def fail(self, key: str, expected: str, got: object) -> ProfileError:
        return ProfileError(f"{self.where(key)}: expected {expected}, got {kind_text(got)}")

    def only(self, allowed: set[str]) -> None:
        """Reject keys outside ``allowed`` (typos, fields of another schema version)."""
        unknown = sorted(set(self.table) - allowed)
        if unknown:
            allowed_list = ", ".join(sorted(allowed))
            where = self.where(unknown[0])
            raise ProfileError(f"{where}: unknown field (allowed here: {allowed_list})")

    def sub(self, key: str) -> _Reader:
        v = self.table.get(key)
        if not isinstance(v, dict):
            raise self.fail(key, "a table", v)
        return _Reader(self.file, v, f"{self.prefix}{key}.")

    def num(self, key: str, range_name: str = "") -> float:
        """A number in the physical range of ``range_name`` (default: ``key``) from :data:`RANGES`."""
        return check_value(self.where(key), range_name or key, self.table.get(key))

    def integer(self, key: str, maximum: int = MAX_GPUS) -> int:
        """A positive integer ``<= maximum`` (a count of GPUs or nodes: at most ``MAX_GPUS``)."""
        v = self.table.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise self.fail(key, "a positive integer", v)
        if v > maximum:
            raise self.fail(key, f"a positive integer <= {maximum:,}", v)
        return v

    def text(self, key: str) -> str:
        return check_text(self.where(key), self.table.get(key))

    def choice(self, key: str, valid: tuple[str, ...]) -> str:
        v = self.table.get(key)
        if not isinstance(v, str) or v not in valid:
            raise self.fail(key, f"one of {', '.join(valid)}", v)
        return v


def _tier(r: _Reader, sources: dict[str, str], source_key: str) -> LinkTier:
    if "source" in r.table:
        sources[source_key] = r.text("source")
    return LinkTier(
        bandwidth_bytes_per_s=r.num("bandwidth_bytes_per_s"),
        latency_s=r.num("latency_s"),
        efficiency=r.num("efficiency"),
        topology=r.choice("topology", TOPOLOGIES),
    )


def _collectives(r: _Reader, sources: dict[str, str]) -> CollectiveParams:
    """The optional ``[collectives]`` table (a missing key takes :class:`CollectiveParams`' default)."""
    if "collectives" not in r.table:
        return CollectiveParams()
    c = r.sub("collectives")
    c.only(_COLLECTIVE_KEYS)
    if "source" in c.table:
        sources["collectives"] = c.text("source")
    values: dict[str, Any] = {k: (c.integer(k, 1024) if k.startswith("channels") else c.num(k))
                              for k in sorted(c.table) if k != "source"}
    return CollectiveParams(**values)


def parse_profile(data: dict[str, Any], file: str) -> Hardware:
    """Build a :class:`Hardware` from parsed TOML ``data`` (``file`` names it in errors)."""
    if not isinstance(data, dict):
        raise ProfileError(f"{file}: expected a TOML table at the top level, got {kind_text(data)}")
    check_schema_version(f"{file}: field 'schema_version'", data.get("schema_version"))
    r = _Reader(file, data)
    r.only(_TOP_KEYS)
    try:
        return _build(r, data, file)
    except ProfileError as e:  # a check of the dataclasses (across fields too): add the file
        if str(e).startswith(file):
            raise
        raise ProfileError(f"{file}: {e}") from None


def _build(r: _Reader, data: dict[str, Any], file: str) -> Hardware:
    """The profile of the top-level table ``r`` (see :func:`parse_profile`)."""
    name = r.text("name")
    description = r.text("description")
    sources: dict[str, str] = {"profile": r.text("source")}
    device = _device(r, sources)
    gpus_per_node, intra, inter, max_nodes = _tiers(r, sources)
    eff, compute, kernel_values = _efficiency(r, sources)
    collectives = _collectives(r, sources)
    price, currency = _price(r, data, sources)
    return Hardware(
        name=name,
        description=description,
        device=device,
        gpus_per_node=gpus_per_node,
        intra=intra,
        inter=inter,
        compute=compute,
        kernel_launch_s=eff.num("kernel_launch_s"),
        framework_reserve_bytes=eff.num("framework_reserve_bytes"),
        max_nodes=max_nodes,
        kernels=KernelParams(**kernel_values),
        collectives=collectives,
        sources=sources,
        path=file,
        schema_version=SCHEMA_VERSION,
        price_per_gpu_hour=price,
        price_currency=currency,
    )


def load_profile(path: str | Path) -> Hardware:
    """Load and validate the TOML profile at ``path`` (a regular file of at most 1 MiB).

    A UTF-8 byte-order mark is skipped. The profile's ``name`` must equal the file name
    without ``.toml``, as ``hardware_profiles/template.toml`` says, so that a result naming
    the hardware names the file it came from.
    """
    p = Path(path)
    raw = read_bounded(p, MAX_PROFILE_BYTES, "hardware profile", ProfileError)
    if not raw.strip():
        raise ProfileError(f"{p}: empty file; expected a TOML hardware profile "
                           f"(see hardware_profiles/template.toml)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ProfileError(f"{p}: not a text TOML file (byte {e.start} is not UTF-8); "
                           f"expected a TOML hardware profile") from None
    if "\x00" in text:
        raise ProfileError(f"{p}: not a text TOML file (contains NUL bytes); "
                           f"expected a TOML hardware profile")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"{p}: not valid TOML ({e})") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise ProfileError(f"{p}: not a usable TOML profile ({shown(str(e), 80)})") from None
    hw = parse_profile(data, str(p))
    if hw.name != p.stem:
        raise ProfileError(
            f"{p}: field 'name': expected the file name without .toml ('{p.stem[:60]}'), "
            f"got {shown(hw.name, 60)} (hardware_profiles/template.toml: the name must equal the file name)"
        )
    return hw


_CACHE: dict[str, Hardware] = {}


def load_hardware(name_or_path: str | Path | Hardware = DEFAULT_HARDWARE) -> Hardware:
    """A shipped profile by name, or a profile file by path; a :class:`Hardware` passes through.

    Shipped profiles are cached by name; files given by path are read afresh every time.
    An unknown name raises :class:`~perfmodel.errors.UnknownNameError` with the closest names.
    """
    if isinstance(name_or_path, Hardware):
        return name_or_path
    s = str(name_or_path)
    if isinstance(name_or_path, Path) or s.endswith(".toml") or "/" in s or "\\" in s:
        if s.endswith(".toml") and not Path(s).exists() and s[: -len(".toml")] in profile_names():
            raise ProfileError(f"{s}: no such file here; the shipped profile is named {s[: -len('.toml')]} "
                               f"(without .toml)")
        return load_profile(s)
    if s in _CACHE:
        return _CACHE[s]
    f = profiles_dir() / f"{s}.toml"
    if s == "template" or not f.is_file():
        if Path(s).is_file():  # a profile file in the working directory, named without .toml
            return load_profile(s)
        raise UnknownNameError("hardware", s, profile_names())
    hw = load_profile(f)
    _CACHE[s] = hw
    return hw


def _device(r: _Reader, sources: dict[str, str]) -> Device:
    """The ``[device]`` table with its peaks."""
    dev = r.sub("device")
    dev.only(_DEVICE_KEYS)
    sources["device"] = dev.text("source")
    peaks_r = dev.sub("peak_flops_per_s")
    peaks_r.only(_PEAK_KEYS)
    if "fp32" not in peaks_r.table:
        raise peaks_r.fail("fp32", "a number (every device needs its fp32 peak)", None)
    peaks = {k: peaks_r.num(k, "peak") for k in sorted(peaks_r.table) if k != "source"}
    if "source" in peaks_r.table:
        sources["peak_flops_per_s"] = peaks_r.text("source")
    return Device(dev.text("name"), dev.num("memory_bytes"), dev.num("memory_bandwidth_bytes_per_s"), peaks)


def _tiers(r: _Reader, sources: dict[str, str]) -> tuple[int, LinkTier, LinkTier, int]:
    """(GPUs per node, the node's link, the network, the most nodes) from ``[node]`` and ``[network]``."""
    node = r.sub("node")
    node.only(_NODE_KEYS)
    sources["node"] = node.text("source")
    gpus_per_node = node.integer("gpus_per_node")
    link = node.sub("link")
    link.only(_LINK_KEYS)
    intra = _tier(link, sources, "link")
    net = r.sub("network")
    net.only(_NETWORK_KEYS)
    sources["network"] = net.text("source")
    inter = _tier(net, sources, "network")
    max_nodes = net.integer("max_nodes") if "max_nodes" in net.table else DEFAULT_MAX_NODES
    return gpus_per_node, intra, inter, max_nodes


def _efficiency(r: _Reader, sources: dict[str, str]) -> tuple[_Reader, dict[str, ComputeEfficiency], dict[str, Any]]:
    """(the ``[efficiency]`` reader, each precision's efficiencies, the kernel model's numbers given)."""
    eff = r.sub("efficiency")
    eff.only(_EFFICIENCY_KEYS)
    sources["efficiency"] = eff.text("source")
    comp = eff.sub("compute")
    comp.only(_COMPUTE_KEYS)
    compute: dict[str, ComputeEfficiency] = {}
    for p in PRECISIONS:
        c = comp.sub(p)
        c.only(_PRECISION_KEYS)
        if "source" in c.table:
            c.text("source")
        compute[p] = ComputeEfficiency(
            conv=c.num("conv"), linear=c.num("linear"), memory=c.num("memory"), half_work_flops=c.num("half_work_flops")
        )
    kernel_values: dict[str, Any] = {}
    if "kernels" in eff.table:  # optional: the kernel model's per-generation numbers
        kr = eff.sub("kernels")
        kr.only(_KERNEL_KEYS)
        if "source" in kr.table:
            sources["kernels"] = kr.text("source")
        kernel_values = {k: (kr.integer(k, 100_000) if k in ("sm_count", "threads_per_sm") else kr.num(k))
                         for k in sorted(kr.table) if k != "source"}
    return eff, compute, kernel_values


def _price(r: _Reader, data: dict[str, Any], sources: dict[str, str]) -> tuple[float | None, str]:
    """The optional ``[price]`` table: a list price per GPU-hour, cited and dated."""
    if "price" not in data:
        return None, "USD"
    pr = r.sub("price")
    pr.only(_PRICE_KEYS)
    price, currency = pr.num("per_gpu_hour"), pr.text("currency")
    sources["price"] = pr.text("source")
    sources["price_date"] = pr.text("date")
    return price, currency

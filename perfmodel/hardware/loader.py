"""Load hardware profiles from TOML with strict validation; the shipped profiles live in the package."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ProfileError, UnknownNameError
from .profile import PRECISIONS, ComputeEfficiency, Device, Hardware, LinkTier

__all__ = ["load_profile", "load_hardware", "profile_names", "profiles_dir", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
DEFAULT_HARDWARE = "a100-80gb-dgx"


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
    return sorted(p.stem for p in profiles_dir().glob("*.toml") if p.stem != "template")


class _Reader:
    """Typed access to a TOML table that names the file and field on every error."""

    def __init__(self, file: str, table: dict[str, Any], prefix: str = "") -> None:
        self.file, self.table, self.prefix = file, table, prefix

    def _where(self, key: str) -> str:
        return f"{self.file}: field '{self.prefix}{key}'"

    def sub(self, key: str) -> _Reader:
        v = self.table.get(key)
        if not isinstance(v, dict):
            raise ProfileError(f"{self._where(key)}: expected a table, got {_kind(v)}")
        return _Reader(self.file, v, f"{self.prefix}{key}.")

    def num(self, key: str, minimum: float = 0.0, strict: bool = True) -> float:
        v = self.table.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ProfileError(f"{self._where(key)}: expected a number, got {_kind(v)}")
        if v != v or v in (float("inf"), float("-inf")) or (v <= minimum if strict else v < minimum):
            raise ProfileError(f"{self._where(key)}: expected a number {'>' if strict else '>='} {minimum}, got {v}")
        return float(v)

    def integer(self, key: str) -> int:
        v = self.table.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ProfileError(f"{self._where(key)}: expected a positive integer, got {_kind(v)} {v!r}")
        return v

    def text(self, key: str) -> str:
        v = self.table.get(key)
        if not isinstance(v, str) or not v.strip():
            raise ProfileError(f"{self._where(key)}: expected a non-empty string, got {_kind(v)}")
        return v


def _kind(v: object) -> str:
    return "nothing (missing)" if v is None else type(v).__name__


def _tier(r: _Reader) -> LinkTier:
    try:
        return LinkTier(
            bandwidth_bytes_per_s=r.num("bandwidth_bytes_per_s"),
            latency_s=r.num("latency_s", strict=False),
            efficiency=r.num("efficiency"),
            topology=r.text("topology"),
        )
    except ProfileError as e:
        if str(e).startswith(r.file):
            raise
        raise ProfileError(f"{r.file}: [{r.prefix.rstrip('.')}] {e}") from None


def parse_profile(data: dict[str, Any], file: str) -> Hardware:
    """Build a :class:`Hardware` from parsed TOML ``data`` (``file`` names it in errors)."""
    r = _Reader(file, data)
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ProfileError(f"{file}: field 'schema_version': expected {SCHEMA_VERSION}, got {version!r}")
    name = r.text("name")
    sources: dict[str, str] = {"profile": r.text("source")}
    dev = r.sub("device")
    sources["device"] = dev.text("source")
    peaks_r = dev.sub("peak_flops_per_s")
    peaks = {k: peaks_r.num(k) for k in peaks_r.table if k != "source"}
    if "fp32" not in peaks:
        raise ProfileError(f"{file}: field 'device.peak_flops_per_s.fp32': expected a number, got nothing (missing)")
    if "source" in peaks_r.table:
        sources["peak_flops_per_s"] = peaks_r.text("source")
    device = Device(dev.text("name"), dev.num("memory_bytes"), dev.num("memory_bandwidth_bytes_per_s"), peaks)
    node = r.sub("node")
    sources["node"] = node.text("source")
    net = r.sub("network")
    sources["network"] = net.text("source")
    eff = r.sub("efficiency")
    sources["efficiency"] = eff.text("source")
    comp = eff.sub("compute")
    compute: dict[str, ComputeEfficiency] = {}
    for p in PRECISIONS:
        c = comp.sub(p)
        compute[p] = ComputeEfficiency(c.num("conv"), c.num("linear"), c.num("memory"),
                                       c.num("half_work_flops", strict=False))
    for frac_key in ("conv", "linear", "memory"):
        for p in PRECISIONS:
            if getattr(compute[p], frac_key) > 1:
                raise ProfileError(f"{file}: field 'efficiency.compute.{p}.{frac_key}': expected a fraction <= 1")
    try:
        return Hardware(
            name=name,
            description=r.text("description"),
            device=device,
            gpus_per_node=node.integer("gpus_per_node"),
            intra=_tier(node.sub("link")),
            inter=_tier(net),
            compute=compute,
            kernel_launch_s=eff.num("kernel_launch_s", strict=False),
            framework_reserve_bytes=eff.num("framework_reserve_bytes", strict=False),
            max_nodes=net.integer("max_nodes") if "max_nodes" in net.table else 4096,
            sources=sources,
            path=file,
            schema_version=SCHEMA_VERSION,
        )
    except ProfileError as e:
        if str(e).startswith(file):
            raise
        raise ProfileError(f"{file}: {e}") from None


def load_profile(path: str | Path) -> Hardware:
    """Load and validate the TOML profile at ``path``."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise ProfileError(f"{p}: cannot read hardware profile ({e.strerror or e})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ProfileError(f"{p}: not a text TOML file (not UTF-8)") from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"{p}: not valid TOML ({e})") from None
    return parse_profile(data, str(p))


_CACHE: dict[str, Hardware] = {}


def load_hardware(name_or_path: str | Path | Hardware = DEFAULT_HARDWARE) -> Hardware:
    """A shipped profile by name, or a profile file by path; a :class:`Hardware` passes through."""
    if isinstance(name_or_path, Hardware):
        return name_or_path
    s = str(name_or_path)
    if s in _CACHE:
        return _CACHE[s]
    if s.endswith(".toml") or "/" in s or Path(s).is_file():
        hw = load_profile(s)
    else:
        f = profiles_dir() / f"{s}.toml"
        if not f.is_file() or s == "template":
            raise UnknownNameError("hardware", s, profile_names())
        hw = load_profile(f)
    _CACHE[s] = hw
    return hw

"""Hardware profiles: dataclasses, the strict TOML loader and the shipped profiles."""

from __future__ import annotations

from .loader import (
    DEFAULT_HARDWARE,
    REFERENCE_PROFILE,
    load_hardware,
    load_profile,
    parse_profile,
    profile_names,
    profiles_dir,
)
from .profile import (
    PRECISIONS,
    CollectiveParams,
    ComputeEfficiency,
    Device,
    Hardware,
    LinkTier,
    check_precision,
    precision_hint,
    unknown_precision,
)

__all__ = [
    "DEFAULT_HARDWARE",
    "PRECISIONS",
    "REFERENCE_PROFILE",
    "CollectiveParams",
    "ComputeEfficiency",
    "Device",
    "Hardware",
    "LinkTier",
    "check_precision",
    "load_hardware",
    "load_profile",
    "parse_profile",
    "precision_hint",
    "profile_names",
    "profiles_dir",
    "unknown_precision",
]

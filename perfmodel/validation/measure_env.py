"""What a measurement ran on: library versions, platform, device and driver."""

from __future__ import annotations

import datetime
import platform
import subprocess
from typing import Any

from ..cost.grouped import CUDNN_MAJORS, DEFAULT_CUDNN_MAJOR, check_cudnn_major, cudnn_assumption
from ..errors import UsageError

__all__ = ["device_name", "environment", "loaded_cudnn", "cudnn_version_text", "cudnn_major_of_version",
           "pricing_cudnn"]

#: Where cuDNN 9's ``CUDNN_VERSION`` encoding starts. cuDNN 8 and earlier encode
#: ``major * 1000 + minor * 100 + patch`` (cudnn_version.h / cudnn.h of those releases: 8.9.2 is
#: 8902, 7.6.5 is 7605, 5.1.10 is 5110); cuDNN 9.0.0 changed it to ``major * 10000 + minor * 100 +
#: patch`` (NVIDIA cuDNN developer guide, "Version Checking Against CUDNN_VERSION"; 9.1.0 is 90100,
#: so code that kept the old rule read it as "90.1": opencv/opencv PR #25841 and openxla/xla
#: PR #9843, 2024). The old encoding stays below 10000 (its last major was 8) and the new one
#: starts at 90000, so every number reads one way.
NEW_ENCODING_FROM = 10000


def _split_version(version: int) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a ``CUDNN_VERSION`` integer in either encoding."""
    if isinstance(version, bool) or not isinstance(version, int) or version < 1000:
        raise UsageError(f"not a cuDNN version number: {version!r} (expected e.g. 8902 or 90100)")
    if version >= NEW_ENCODING_FROM:
        return version // 10000, version // 100 % 100, version % 100
    return version // 1000, version // 100 % 10, version % 100


def cudnn_version_text(version: int) -> str:
    """``8902`` -> ``8.9.2``, ``90100`` -> ``9.1.0`` (both encodings, :data:`NEW_ENCODING_FROM`)."""
    return ".".join(map(str, _split_version(version)))


def cudnn_major_of_version(version: int) -> int:
    """The major version of ``torch.backends.cudnn.version()``'s integer: ``8902`` -> 8, ``90100`` -> 9."""
    return _split_version(version)[0]


def pricing_cudnn(loaded: str | None, override: int | None) -> tuple[int, str]:
    """The cuDNN major a measured run is priced with, and the assumption line that says why.

    ``loaded``: the ``cudnn`` entry of :func:`environment` (``torch.backends.cudnn.version()``;
    absent on the CPU or without cuDNN); ``override``: ``--cudnn``, which wins. A loaded major
    perfmodel does not model is priced as the nearest one it does (said in the line)."""
    version = int(loaded) if loaded and loaded.isdigit() and int(loaded) >= 1000 else None
    if override is not None:
        override = check_cudnn_major(override)
        said = f" (torch loaded cuDNN {cudnn_version_text(version)})" if version else ""
        return override, f"{cudnn_assumption(override)}; given by --cudnn{said}"
    if version is None:
        return DEFAULT_CUDNN_MAJOR, (f"{cudnn_assumption(DEFAULT_CUDNN_MAJOR)}; torch loaded no cuDNN (a CPU run or a "
                                     "build without it): the default")
    major = cudnn_major_of_version(version)
    used = min(max(major, CUDNN_MAJORS[0]), CUDNN_MAJORS[-1])
    nearest = "" if used == major else f", priced as {used}, the nearest major perfmodel models"
    return used, f"{cudnn_assumption(used)}; the cuDNN torch loaded: {cudnn_version_text(version)}{nearest}"


def device_name(torch: Any, device: str) -> str:
    """The GPU's name on ``cuda``, else the CPU's."""
    name = torch.cuda.get_device_name(0) if device == "cuda" else (platform.processor() or platform.machine())
    return str(name)


def loaded_cudnn(torch: Any) -> int | None:
    """``torch.backends.cudnn.version()``: the cuDNN loaded at run time, None without one (on
    ROCm builds the call reports MIOpen's version, which is not a cuDNN)."""
    version = torch.backends.cudnn.version()
    if isinstance(version, int) and version >= 1000 and not getattr(torch.version, "hip", None):
        return version
    return None


def environment(torch: Any, device: str) -> dict[str, str]:
    """Versions (torch, Python; CUDA, cuDNN and driver on a GPU), platform, date, and the GPU or
    the CPU and its threads."""
    env = {
        "torch": str(torch.__version__),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.date.today().isoformat(),
    }
    if device == "cuda":
        env["cuda"] = str(torch.version.cuda)
        env["gpu"] = str(torch.cuda.get_device_name(0))
        version = loaded_cudnn(torch)
        if version is not None:
            env["cudnn"] = str(version)
            env["cudnn_version"] = cudnn_version_text(version)
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
            env["driver"] = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
        except (OSError, subprocess.SubprocessError):
            env["driver"] = ""
    else:
        env["cpu"] = platform.processor() or platform.machine()
        env["threads"] = str(torch.get_num_threads())
    return env

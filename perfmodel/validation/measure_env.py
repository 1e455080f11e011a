"""What a measurement ran on: library versions, platform, device and driver."""

from __future__ import annotations

import datetime
import platform
import subprocess
from typing import Any

__all__ = ["device_name", "environment"]


def device_name(torch: Any, device: str) -> str:
    """The GPU's name on ``cuda``, else the CPU's."""
    name = torch.cuda.get_device_name(0) if device == "cuda" else (platform.processor() or platform.machine())
    return str(name)


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
        env["cudnn"] = str(torch.backends.cudnn.version())
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

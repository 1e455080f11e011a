"""Which cuDNN major versions ever ran on each GPU architecture: impossible pairs are usage errors.

A plan priced with a cuDNN that never supported its GPU describes no run, so ``--cudnn`` (and
``cudnn_major=``) is checked against the profile's GPU, recognised from its device name:

* **Pascal** (P100, P40, GeForce GTX 1080 and 1080 Ti, TITAN X (Pascal)): every major perfmodel prices (5-9). cuDNN 5
  was the first release for Pascal (NVIDIA's cuDNN "What's New" page, cuDNN 5: "training up to
  44% faster on a single Pascal GPU", "FP16 routines on Pascal GPUs"); jcjohnson/cnn-benchmarks
  ran cuDNN 5.0.05 and 5.1.05 on the GTX 1080 and TITAN X (Pascal), tf_cnn_benchmarks' 2017 P100
  rows cuDNN 5.1 (TensorFlow's benchmarks page), DeepBench's P100 sheets cuDNN 6.0.21 (its
  ``specs.csv``), and the cuDNN 9.0.0 Support Matrix still lists NVIDIA Pascal (compute
  capability 6.0/6.1).
* **Volta** (V100, TITAN V): cuDNN >= 7. cuDNN 7.0.1 release notes: "the first release to support the
  Volta GPU architecture" and "the first to support the Tensor Core operations".
* **Ampere** (A100): cuDNN >= 8. The cuDNN Support Matrix (8.2.2 edition, covering 8.0.0 onwards)
  lists the "NVIDIA Ampere GPU architecture" only for cuDNN 8 with CUDA 11; its cuDNN 7.6.x rows
  list Turing, Volta, Xavier, Pascal, Maxwell and Kepler.
* **Hopper** (H100, H200): cuDNN >= 8. The cuDNN 8.9.1 Support Matrix lists NVIDIA Hopper
  (compute capability 9.0); the 8.4.0 one (April 2022) does not list it, so the first 8.x minor
  with Hopper lies between 8.4.1 and 8.9.1 (not pinned here: perfmodel prices majors).

The generation comes from :func:`perfmodel.hardware.generation.generation` (the one recogniser,
also the validation groups'); a device name it does not know, or a generation not listed here
(Turing, Ada, Blackwell), is not checked.
:data:`~perfmodel.cost.grouped.DEFAULT_CUDNN_MAJOR` (9) runs on all four, so a default is never
rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from ..hardware import Hardware
from ..hardware.generation import generation
from .grouped import CUDNN_MAJORS

__all__ = ["GpuArchitecture", "ARCHITECTURES", "architecture_of", "check_cudnn_for_gpu"]


@dataclass(frozen=True)
class GpuArchitecture:
    """A GPU generation (:func:`~perfmodel.hardware.generation.generation`'s name in ``key``), the
    oldest cuDNN major that ran on it, and where that is stated."""

    name: str
    key: str
    min_cudnn_major: int
    source: str


ARCHITECTURES: tuple[GpuArchitecture, ...] = (
    GpuArchitecture("Pascal", "pascal", 5,
                    "cuDNN 9.0.0 Support Matrix lists Pascal; 2017 P100 runs used cuDNN 5.1"),
    GpuArchitecture("Volta", "volta", 7, "cuDNN 7.0.1 release notes"),
    GpuArchitecture("Ampere", "ampere", 8,
                    "cuDNN Support Matrix: Ampere from cuDNN 8.0 with CUDA 11, absent from 7.6.x"),
    GpuArchitecture("Hopper", "hopper", 8,
                    "cuDNN 8.9.1 Support Matrix lists Hopper, 8.4.0's does not"),
)


def architecture_of(device_name: str) -> GpuArchitecture | None:
    """The architecture of a profile's GPU from its device name (``NVIDIA A100-SXM4-80GB``), or None."""
    gen = generation(device_name)
    return next((arch for arch in ARCHITECTURES if arch.key == gen), None)


def check_cudnn_for_gpu(major: int, hw: Hardware) -> int:
    """``major`` if cuDNN ``major`` ever ran on profile ``hw``'s GPU, else a
    :class:`~perfmodel.errors.UsageError` with the minimum, its source and the valid choices."""
    arch = architecture_of(hw.device.name)
    if arch is None or major >= arch.min_cudnn_major:
        return major
    valid = [m for m in CUDNN_MAJORS if m >= arch.min_cudnn_major]
    choices = ", ".join(map(str, valid[:-1])) + f" or {valid[-1]}" if len(valid) > 1 else str(valid[0])
    raise UsageError(
        f"cuDNN {major} cannot run on {hw.name}'s {hw.device.name} ({arch.name} needs cuDNN >= {arch.min_cudnn_major}: "
        f"{arch.source}); choose --cudnn {choices}"
    )

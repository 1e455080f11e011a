"""cuDNN 7.0 on Volta: fp32 convolutions slower than the cuDNN 7.6 kernels Volta's numbers describe.

The Volta profiles' convolution numbers were fitted on DeepBench's V100 sheets measured with cuDNN
7.6.2 (``baidu-research/DeepBench`` @ ``da81ba7``, results of ``30c5115``, 2019-10, CUDA 10.1.243)
and PipeDream's profiles (cuDNN 7.6.0). DeepBench's first V100 results (@ ``ec79df0``, 2017-11-29:
CUDA 9.0.103, cuDNN "7", driver 384.81, a DGX-1; a 7.0.x: the release notes of 7.0.5, the last 7.0,
are dated December 2017) timed the same 94 convolution problems with the same ``conv_bench.cu`` fp32
path (``cudnnFind*`` picks each algorithm, NCHW; both sheets record the same forward algorithm for
all 90 distinct problems), so their ratio is what the software (cuDNN 7.0 to 7.6.2, CUDA 9.0 to
10.1, driver 384 to 418) changed on the same kind of GPU. Over the 90 distinct problems
(``perfmodel/data/kernels_deepbench_v100_2017_conv.csv`` against the V100 fp32 rows of
``kernels_deepbench_conv.csv``) the 2017 kernels took, as a geometric mean, 1.233x the 2019 time
forward (90 kernels), 1.202x for the data gradient (80) and 1.061x for the weight gradient (90):
1.162x over all 260 (``tests/test_cudnn_release.py`` recomputes it from the two files).

A run that states a cuDNN 7.0.x on a Volta GPU in fp32 is priced with its convolutions' matmul
efficiency divided by that factor (:func:`release_hardware`); memory-bound kernels, linear layers
(cuBLAS) and every other precision keep the profile's numbers. DeepBench's 2017 fp16 sheet is not
used: it forces the tensor-op algorithms with a true-half compute type (``time_cnn<uint16_t,
uint16_t>``, NCHW), a configuration PyTorch 0.3 (fp32 compute type, ``cudnnFind`` over every
algorithm) does not run (``perfmodel/data/MEASUREMENTS.md``, u39kun).
"""

from __future__ import annotations

import dataclasses

from ..hardware import Hardware
from ..hardware.generation import generation

__all__ = ["CUDNN70_VOLTA_FP32_SLOWDOWN", "SLOW_RELEASE", "release_hardware"]

#: Geometric mean over DeepBench's 260 V100 fp32 convolution kernels of the cuDNN 7 (2017) time
#: over the cuDNN 7.6.2 (2019) time of the same problem (module docstring).
CUDNN70_VOLTA_FP32_SLOWDOWN = 1.162
#: The cuDNN release (major, minor) the factor describes.
SLOW_RELEASE = (7, 0)


def release_hardware(hw: Hardware, precision: str, release: tuple[int, int] | None) -> Hardware:
    """``hw`` as cuDNN ``release`` runs its convolutions at ``precision``: a Volta GPU under
    cuDNN 7.0 in fp32 gets its convolution efficiency over :data:`CUDNN70_VOLTA_FP32_SLOWDOWN`;
    anything else (no release stated, another GPU generation or precision) is ``hw`` itself."""
    if release != SLOW_RELEASE or precision != "fp32" or generation(hw.device.name) != "volta":
        return hw
    eff = hw.compute.get(precision)
    if eff is None:
        return hw
    slower = dataclasses.replace(eff, conv=eff.conv / CUDNN70_VOLTA_FP32_SLOWDOWN)
    return dataclasses.replace(hw, compute={**hw.compute, precision: slower})

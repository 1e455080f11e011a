"""Grouped convolutions (1 < groups < channels) as the kernels each cuDNN major version runs.

A ResNeXt-style convolution of ``C -> K`` channels in ``g`` groups is ``g`` independent
``C/g -> K/g`` convolutions. How a library runs them depends on its era:

* **cuDNN < 7**: no group support in the API; PyTorch loops over the groups itself, one cuDNN
  call per group (pytorch/pytorch issue #3958, 2017: "group convolution on CuDNN 6"; the ATen
  ``ConvolutionDescriptor::set`` of PyTorch 1.0 sets the group count only under
  ``#if CUDNN_VERSION >= 7000``);
* **cuDNN 7.x**: ``cudnnSetConvolutionGroupCount`` (new in cuDNN 7.0.1, release notes: "perform
  convolution groups in the convolution layers in a single API call") and PyTorch 1.0/1.1 uses
  it, but inside the library only special cases had kernels covering all groups in one launch;
  the general case runs the groups one after another (NVIDIA's engineer in
  facebookarchive/caffe2 PR #1079, 2017: "in best case special kernels that handle all groups in
  one shot will be used, worst case all groups ... run in streams"; cuDNN 7.3.0's release notes
  optimise grouped kernels for *depthwise* NHWC layers only; pytorch/pytorch issue #10290, 2018:
  a ResNeXt grouped convolution on a Titan V is slower than a Python loop over per-group
  convolutions; issue #15513, 2019: cuDNN's grouped kernels "for other cases are not very fast");
* **cuDNN >= 8**: grouped implicit-GEMM kernels whose grid covers every group (the single-kernel
  rule of :func:`~perfmodel.cost.efficiency.gemm_shape_efficiency`, ``groups x`` the tiles of one
  group quantised together into waves).

So before cuDNN 8 each group is priced as its own call of an ordinary ``C/g -> K/g``
convolution: its own tile and wave quantisation (a group whose tiles fill a fraction of a wave
still takes the whole wave), its own launch, forward, data gradient and weight gradient alike,
and Winograd where an ungrouped layer of that shape may use it; the FLOPs are the same. A looped
layer is ``groups`` times its one-group layer priced alone (``tests/test_grouped_winograd.py``).
Why each group is an ordinary convolution in those majors:

* cuDNN 5/6: the framework's loop hands cuDNN one group at a time through an ungrouped
  descriptor, so cuDNN's algorithm search sees an ordinary convolution and may pick Winograd.
  soumith/cudnn.torch ``SpatialConvolution.lua`` @ f746b794 (the Torch7 bindings jcjohnson's
  cnn-benchmarks ran AlexNet's grouped layers with): the filter descriptor is one group's
  ``nOutputPlane/groups x nInputPlane/groups``, the algorithms are found on one group's input and
  output slices, and ``cudnnConvolutionForward`` / ``BackwardData`` / ``BackwardFilter`` run once
  per group at its offsets; Caffe2 v0.8.1 likewise ("It's just a loop. Serialized in the same
  stream": facebookarchive/caffe2 issue #1077, 2017);
* cuDNN 7: NVIDIA's engineer in the group-count PR (facebookarchive/caffe2 PR #1079, 2017): in
  the worst case the groups "run in streams", and the new routine's performance is expected to be
  ``>=`` "the old loop over groups": at least that loop, which is what is priced.

From cuDNN 8 cuDNN's own call covers all groups in one kernel and Winograd stays off grouped
layers (as before; pytorch/pytorch issue #73764, 2022: a grouped convolution slower than its
groups run as separate convolutions). That measured gap is why, from cuDNN 8, a grouped layer is
priced as the faster of two implementations: cuDNN's one kernel, and one ordinary call per group
(the loop above, priced exactly as before cuDNN 8; its launches included), chosen per layer by
its forward plus backward time (:func:`~perfmodel.cost.compute.layer_seconds`). The loop is what
frameworks ran before cuDNN 7 (cudnn.torch and Caffe2 above: one ungrouped call per group at the
group's offsets, no copies) and what users of cuDNN 8 write to get it back (issue #73764's separate
convolutions; apache/tvm PR #10423, 2022: a StyleGAN generator with its grouped convolutions
split into ungrouped cuDNN calls 59 -> 49 ms). It is also exactly what a filter or channel split
of a layer whose groups divide over the GPUs runs: each GPU's share of the groups is an
ordinary convolution when it holds one group (a ``groups=1`` ``nn.Conv2d``, which cuDNN may run
with Winograd), so without the loop one GPU would be priced at a kernel slower than the same work
spread over two (BVLC AlexNet ``filter=2`` at fp32 and cuDNN 8/9: 2.28x on two V100s). Speedup
is measured against the best implementation one GPU can run (Grama, Gupta, Karypis and Kumar,
"Introduction to Parallel Computing", 2nd ed., 2003, section 5.2.3: against the best sequential
algorithm), and it is then never above the GPU count
(``tests/test_grouped_split_properties.py``). Depthwise layers (``groups == channels``) run
PyTorch's own kernels in every era (:mod:`.depthwise`), and ungrouped layers are unaffected.
"""

from __future__ import annotations

import numpy as np

from ..errors import UsageError

__all__ = ["CUDNN_MAJORS", "DEFAULT_CUDNN_MAJOR", "FIRST_GROUPED_KERNEL_MAJOR", "check_cudnn_major",
           "loops_groups", "may_loop", "loop_candidates", "kernel_groups", "extra_launches", "cudnn_assumption"]

#: cuDNN major versions perfmodel knows how grouped convolutions run under (5: DeepBench's
#: Maxwell sheets; 6: its Pascal sheets and 2017 TensorFlow benchmarks; 7: PyTorch 1.0-1.5 and
#: NGC <= 20.03; 8: NGC 20.06-23.xx, PyTorch 1.6-2.2 wheels; 9: PyTorch >= 2.3 wheels).
CUDNN_MAJORS: tuple[int, ...] = (5, 6, 7, 8, 9)
#: What a plan assumes unless told: the cuDNN of today's framework builds.
DEFAULT_CUDNN_MAJOR = 9
#: The first major version whose grouped convolutions run one kernel for all groups.
FIRST_GROUPED_KERNEL_MAJOR = 8


def check_cudnn_major(major: int) -> int:
    """``major`` if perfmodel knows it, else a :class:`~perfmodel.errors.UsageError` naming the choices."""
    if isinstance(major, bool) or not isinstance(major, (int, np.integer)) or int(major) not in CUDNN_MAJORS:
        raise UsageError(f"unknown cuDNN major version {major!r} (valid: {', '.join(map(str, CUDNN_MAJORS))})")
    return int(major)


def loops_groups(major: int) -> bool:
    """Whether cuDNN ``major`` runs a grouped convolution as one kernel per group."""
    return check_cudnn_major(major) < FIRST_GROUPED_KERNEL_MAJOR


def may_loop(major: int) -> bool:
    """Whether under cuDNN ``major`` a grouped layer may also run as a loop of ordinary calls, one
    per group, beside cuDNN's one kernel (from cuDNN 8; before, cuDNN's call is that loop)."""
    return not loops_groups(major)


def _grouped(groups: np.ndarray, depthwise: np.ndarray) -> np.ndarray:
    """Per layer: grouped (``groups > 1``) and not depthwise."""
    return np.asarray((np.asarray(groups) > 1) & ~np.asarray(depthwise, dtype=bool))


def loop_candidates(groups: np.ndarray, depthwise: np.ndarray, major: int) -> np.ndarray:
    """Per layer: a grouped, non-depthwise layer that cuDNN ``major`` runs as one kernel and a
    loop of per-group calls could run faster (:func:`may_loop`)."""
    return np.asarray(_grouped(groups, depthwise) & may_loop(major))


def _looped(groups: np.ndarray, depthwise: np.ndarray, major: int, loop: bool) -> np.ndarray:
    """Per layer: a grouped, non-depthwise layer whose groups run as separate kernels (cuDNN's
    own loop before 8, or the loop of per-group calls where ``loop``)."""
    return np.asarray(_grouped(groups, depthwise) & (loops_groups(major) or loop))


def kernel_groups(groups: np.ndarray, depthwise: np.ndarray, major: int, loop: bool = False) -> np.ndarray:
    """The groups one kernel of each layer covers: all of them, or 1 where the groups loop
    (the ``groups`` the shape rule quantises tiles and waves over); ``loop``: every grouped
    layer runs as the loop of per-group calls (:func:`may_loop`)."""
    g = np.asarray(groups, dtype=float)
    return np.asarray(np.where(_looped(g, depthwise, major, loop), 1.0, g))


def extra_launches(groups: np.ndarray, depthwise: np.ndarray, major: int, gemm_kernels: np.ndarray,
                   loop: bool = False) -> np.ndarray:
    """Launches beyond one per GEMM kernel: ``groups - 1`` more for each of a looped layer's
    ``gemm_kernels`` (forward: 1; backward: data and weight gradients present)."""
    g = np.asarray(groups, dtype=float)
    looped = _looped(g, depthwise, major, loop)
    return np.asarray(np.where(looped, (g - 1.0) * np.asarray(gemm_kernels, dtype=float), 0.0))


def cudnn_assumption(major: int) -> str:
    """The era in words, for every output's assumptions and ``explain``."""
    how = ("one kernel per group (its own tiles, waves and launch)" if loops_groups(major)
           else "one kernel for all groups, or one ordinary call per group where that is faster (a loop "
                "over the groups, what a filter/channel split of the groups runs)")
    return (f"cuDNN {major}.x: grouped convolutions (1 < groups < channels) run {how}; "
            f"set --cudnn to the run's version (valid: {', '.join(map(str, CUDNN_MAJORS))})")

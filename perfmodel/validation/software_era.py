"""The cuDNN major version and memory format a measured run used, read from its source and notes.

Grouped convolutions are priced as the run's cuDNN executes them (:mod:`perfmodel.cost.grouped`),
so each measured row is priced with the version its source states, in this order:

1. an explicit ``cuDNN N`` in the framework, source or notes (tf_cnn_benchmarks' 2017 DGX-1
   rows: "CUDA 8 / cuDNN 5.1", from TensorFlow's benchmarks page);
2. an NGC container ``YY.MM`` (``NGC 21.03``, ``pytorch-21.03``, ``mxnet-20.12``, ``20.06-tf1``):
   20.06 and later ship cuDNN 8 (NVIDIA Frameworks Support Matrix and container release notes:
   PyTorch/TensorFlow/MXNet 20.06 cuDNN 8.0.1, 20.12 cuDNN 8.0.5, 21.03 cuDNN 8.1.1), 20.03 and
   earlier cuDNN 7 (19.05 cuDNN 7.6.0, 19.10 7.6.4, 20.03 7.6.5);
3. a PyTorch 1.0-1.5 release (``PyTorch 1.3``: its CUDA 10.x binaries bundle cuDNN 7.6);
4. the DeepLearningExamples PyTorch ConvNets tables at HEAD 729963dd, which MEASUREMENTS.md
   traces to the numbers of 7bdfc81d (April 2021, pytorch-21.03 container: cuDNN 8), and the
   2019 ResNet-50 table at f0ef8493 (pytorch-19.10: cuDNN 7); torchgpipe's benchmarks at
   a1b4ee25 (PyTorch 1.3: cuDNN 7).

A row none of these match is priced with the default (:data:`~perfmodel.cost.grouped.DEFAULT_CUDNN_MAJOR`).
The release (major and minor) is read only where a row states it (``cuDNN 7.0.0.5``:
:func:`cudnn_release_of`); it selects the cuDNN 7.0 Volta rule of :mod:`perfmodel.cost.cudnn_release`.

The activations' memory format (:mod:`perfmodel.cost.layout`: NCHW adds cuDNN's transposes around
tensor-core convolutions) is read from the same fields (:func:`memory_format_of`):

1. an explicit ``NHWC``/``channels-last`` or ``NCHW`` in the framework, source or notes;
2. NVIDIA DeepLearningExamples: AMP rows NHWC, FP32/TF32 rows NCHW. PyTorch ConvNets: ``configs.yml``
   sets ``memory_format: nhwc`` for every AMP entry and nothing for FP32/TF32, and ``main.py``'s
   ``--memory-format`` defaults to ``nchw`` (both at 0fadac23d764429ed0da54dc8c5a31677dc923d5);
   MXNet RN50v1.5: ``runner`` adds ``--conv-layout NHWC --batchnorm-layout NHWC --pooling-layout
   NHWC`` for ``--dtype float16`` only, the layouts default to NCHW (70c51ad7f811b020ddd741ea2c6ce5a573bad963);
   TensorFlow ConvNets: ``--data_format`` defaults to NCHW (``utils/cmdline_helper.py`` at
   37672df8f725d74160e379ad41750e57fd902e36), and TensorFlow's layout optimizer turns a graph
   whose convolutions are mostly fp16 on Volta or newer GPUs to NHWC
   (``tensorflow/core/grappler/optimizers/generic_layout_optimizer.cc``,
   ``GetSrcAndDstDataFormats``; that NGC 20.06's TensorFlow 1.15 behaves so is an assumption);
3. the 2019 PyTorch ConvNets table (f0ef8493, pytorch-19.10: PyTorch 1.3) is NCHW at every
   precision: ``torch.channels_last`` arrived in PyTorch 1.5 (the PyTorch tutorial "Channels Last
   Memory Format in PyTorch" lists PyTorch 1.5.0 as its prerequisite); the June 2020 ConvNets
   README (46ff3707, the first A100 table) too: it says NHWC support for mixed precision is still
   being added, its training scripts pass no ``--memory-format`` and ``main.py`` defaults it to
   ``nchw`` (``memory_format: nhwc`` first appears in ``configs.yml`` at 097c7ff9, March 2021);
4. anything else: PyTorch's default, NCHW (tf_cnn_benchmarks' 2017 P100 rows and torchgpipe's P40
   rows are fp32 without tensor cores, unaffected either way).

Which batch-norm/add/ReLU chains the run's framework fused (:mod:`perfmodel.cost.fusion`) is read
from the same fields (:func:`fusion_of`):

1. ``XLA`` or ``--xla`` in the framework field, not negated ("no XLA", "without --xla", "XLA off"):
   ``xla`` (the TensorFlow ConvNets rows run with ``--xla``: "TensorFlow 1 (NGC 20.06-tf1-py3,
   XLA)"). The source and notes are not read for it: a note may name XLA to say it was off ("run
   without XLA (--xla not passed)"), while the framework field names what ran;
2. NVIDIA DeepLearningExamples MXNet RN50v1.5 at ``amp``: ``mxnet-bn-add-relu`` (``runner`` passes
   ``--fuse-bn-relu 1 --fuse-bn-add-relu 1`` for ``--dtype float16`` only, ``models.py`` defaults
   both to 0, at 70c51ad7f811b020ddd741ea2c6ce5a573bad963); its FP32/TF32 rows stay eager (MXNet's
   own pointwise fusion of add + ReLU is not priced: which of those graphs it fused is not stated);
3. anything else: eager PyTorch, nothing fused (TensorFlow without XLA, tf_cnn_benchmarks included,
   is priced eager too: its fused batch norm and Grappler's remapper fusions are not priced).
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..cost.fusion import DEFAULT_FUSION
from ..cost.grouped import CUDNN_MAJORS, DEFAULT_CUDNN_MAJOR, FIRST_GROUPED_KERNEL_MAJOR
from ..cost.layout import DEFAULT_MEMORY_FORMAT
from .measurements import Measurement

__all__ = ["cudnn_major_of", "cudnn_major_from_text", "cudnn_release_of", "memory_format_of", "fusion_of"]

#: A version number of at most 4 digits: a longer run of digits is no version, and is not read
#: (Python refuses to convert a string of more than 4,300 digits to an int).
_DIGITS = r"(\d{1,4})(?!\d)"
_EXPLICIT = re.compile(rf"cuDNN\s*v?{_DIGITS}(?:\.\d+)*", re.IGNORECASE)
_NGC = re.compile(r"(?:NGC\s+|pytorch-|mxnet-|tensorflow-|\b)(\d\d)\.(\d\d)(?:-tf[12])?(?:-py3)?\b")
_PYTORCH = re.compile(rf"PyTorch\s+1\.{_DIGITS}\b")
#: The first NGC container release with cuDNN 8 (NGC PyTorch/TensorFlow/MXNet 20.06 release notes).
FIRST_CUDNN8_CONTAINER = (20, 6)
#: Sources whose software is known from their commit (perfmodel/data/MEASUREMENTS.md): the
#: DeepLearningExamples PyTorch tables, and kakaobrain/torchgpipe's benchmarks (PyTorch 1.3).
_COMMITS = {"729963dd": 8, "7bdfc81d": 8, "f0ef8493": 7, "a1b4ee25": 7}


def cudnn_major_from_text(*texts: str) -> int | None:
    """The cuDNN major version ``texts`` state (module docstring, rules 1-4), or None."""
    return _major_in(" ".join(texts))


@lru_cache(maxsize=1024)
def _major_in(text: str) -> int | None:
    """:func:`cudnn_major_from_text` of one string, parsed once per distinct text (a measurement
    file repeats a source and its notes over many rows)."""
    m = _EXPLICIT.search(text)
    if m and int(m.group(1)) in CUDNN_MAJORS:
        return int(m.group(1))
    for m in _NGC.finditer(text):
        yy, mm = int(m.group(1)), int(m.group(2))
        if 17 <= yy <= 30 and 1 <= mm <= 12:
            return FIRST_GROUPED_KERNEL_MAJOR if (yy, mm) >= FIRST_CUDNN8_CONTAINER else 7
    m = _PYTORCH.search(text)
    if m and int(m.group(1)) <= 5:
        return 7
    for commit, major in _COMMITS.items():
        if commit in text:
            return major
    return None


def cudnn_major_of(m: Measurement) -> int:
    """The cuDNN major version measured row ``m`` ran with (the default where it does not say)."""
    found = cudnn_major_from_text(m.framework, m.source, m.columns.get("notes", ""))
    return DEFAULT_CUDNN_MAJOR if found is None else found


_RELEASE = re.compile(rf"cuDNN\s*v?{_DIGITS}\.{_DIGITS}", re.IGNORECASE)


def cudnn_release_of(m: Measurement) -> tuple[int, int] | None:
    """The cuDNN (major, minor) row ``m`` states explicitly (``cuDNN 7.0.0.5`` -> (7, 0)), or None:
    the release selects :func:`perfmodel.cost.cudnn_release.release_hardware`'s rule (cuDNN 7.0 on
    Volta); a row stating only a major, a container or a framework version gets None."""
    found = _RELEASE.search(" ".join((m.framework, m.source, m.columns.get("notes", ""))))
    return None if found is None else (int(found.group(1)), int(found.group(2)))


_LAYOUT = re.compile(r"\b(NHWC|NCHW|channels[-_ ]last)\b", re.IGNORECASE)
#: Sources whose runs were NCHW at every precision (module docstring, rule 3).
_NCHW_COMMITS = ("f0ef8493", "46ff3707")


def memory_format_of(m: Measurement) -> str:
    """The activations' memory format row ``m`` ran in (module docstring, rules 1-4)."""
    return _format_in(m.framework, m.source, m.columns.get("notes", ""), m.precision)


@lru_cache(maxsize=1024)
def _format_in(framework: str, source: str, notes: str, precision: str) -> str:
    """:func:`memory_format_of` of one row's texts, parsed once per distinct combination."""
    found = _LAYOUT.search(" ".join((framework, source, notes)))
    if found:
        return "nchw" if found.group(1).upper() == "NCHW" else "nhwc"
    if "DeepLearningExamples" in source and not any(c in source for c in _NCHW_COMMITS):
        return "nhwc" if precision == "amp" else "nchw"
    return DEFAULT_MEMORY_FORMAT


_XLA = re.compile(r"\bXLA\b", re.IGNORECASE)  # also an explicit ``--xla``
#: XLA negated in the framework field: "no XLA", "without --xla", "XLA off", "--xla not passed".
_NO_XLA = re.compile(r"\b(?:no|non|not|without|w/o)[\s-]+(?:--)?XLA\b|\bXLA[\s:=]+(?:off|disabled|false|not)\b",
                     re.IGNORECASE)
#: The DeepLearningExamples MXNet ResNet-50 v1.5 example (module docstring, fusion rule 2).
_MXNET_RN50 = "MxNet/Classification/RN50v1.5"


def fusion_of(m: Measurement) -> str:
    """The batch-norm/add/ReLU fusion row ``m`` ran with (module docstring, fusion rules 1-3)."""
    return _fusion_in(m.framework, m.source, m.columns.get("notes", ""), m.precision)


@lru_cache(maxsize=1024)
def _fusion_in(framework: str, source: str, notes: str, precision: str) -> str:
    """:func:`fusion_of` of one row's texts, parsed once per distinct combination."""
    if _XLA.search(framework) and not _NO_XLA.search(framework):
        return "xla"
    if _MXNET_RN50.lower() in source.lower() and "mxnet" in framework.lower() and precision == "amp":
        return "mxnet-bn-add-relu"
    return DEFAULT_FUSION

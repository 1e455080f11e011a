"""The mixed-precision runtime a measured 16-bit run used, read from its framework, source and notes.

Each ``amp``/``bf16`` row is priced with the runtime its source states
(:mod:`perfmodel.strategies.amp_runtime`), by the first of these rules that matches:

1. ``model.half()`` in the framework, source or notes: ``pytorch-half``, a 16-bit model with no
   casts and no loss scaler (u39kun/deep-learning-benchmark's fp16 rows: ``frameworks/pytorch/models.py``
   @ 9dc3e36e6f97 calls ``model.half()`` and feeds a half input, and creates no optimizer or scaler);
2. MXNet in the framework: ``mxnet-multi-precision`` (NVIDIA DeepLearningExamples MxNet RN50v1.5:
   ``runner`` passes ``--dtype float16`` and no ``--amp``, and ``fit.py`` builds the optimizer with
   ``'multi_precision': True``, at 70c51ad7f811b020ddd741ea2c6ce5a573bad963: an fp16 network with fp32
   master weights in the optimizer);
3. TensorFlow in the framework: ``tensorflow-amp`` (DeepLearningExamples TensorFlow ConvNets ``--amp``
   enables TensorFlow's automatic mixed precision graph rewrite);
4. anything else: ``pytorch-autocast``, the default (DeepLearningExamples PyTorch ConvNets and lambdal's
   benchmarks of it run ``torch.cuda.amp.autocast`` with ``GradScaler``).

fp32 and tf32 rows launch none of these kernels: they are priced with the default.
"""

from __future__ import annotations

from functools import lru_cache

from ..cost.compute import HALF_PRECISIONS
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME
from .measurements import Measurement

__all__ = ["amp_runtime_of"]


def amp_runtime_of(m: Measurement) -> str:
    """The mixed-precision runtime row ``m`` ran with (module docstring, rules 1-4)."""
    return _runtime_in(m.framework, m.source, m.columns.get("notes", ""), m.precision)


@lru_cache(maxsize=1024)
def _runtime_in(framework: str, source: str, notes: str, precision: str) -> str:
    """:func:`amp_runtime_of` of one row's texts, parsed once per distinct combination."""
    if precision not in HALF_PRECISIONS:
        return DEFAULT_AMP_RUNTIME
    if "model.half()" in " ".join((framework, source, notes)):
        return "pytorch-half"
    fw = framework.lower()
    if "mxnet" in fw:
        return "mxnet-multi-precision"
    if "tensorflow" in fw:
        return "tensorflow-amp"
    return DEFAULT_AMP_RUNTIME

"""Which mixed-precision runtime a 16-bit run used: what it launches besides the layers' kernels.

A run at ``amp`` (fp16) or ``bf16`` keeps its layers' GEMMs in 16 bits under every runtime; what
differs is what the runtime adds per step (:mod:`.amp_step` prices it):

* ``pytorch-autocast`` (the default): ``torch.autocast`` casts each conv/linear weight to 16 bits
  once per micro-batch forward and its gradient back, and at ``amp`` ``torch.amp.GradScaler`` scales,
  unscales and checks every gradient (NVIDIA DeepLearningExamples' PyTorch ConvNets trainer: "Gradient
  Scaler is needed for AMP"); at ``bf16`` no scaler;
* ``pytorch-half``: a 16-bit model (``model.half()`` with a half input): weights and gradients are
  16-bit tensors, nothing is cast and no loss is scaled;
* ``mxnet-multi-precision``: MXNet with ``--dtype float16`` and ``multi_precision`` (NVIDIA
  DeepLearningExamples MxNet RN50v1.5): the model is fp16, no per-forward casts; the optimizer keeps
  fp32 master weights and in its one update kernel per tensor (``mp_sgd_mom_update``,
  ``MP_SGDMomKernel`` in ``src/operator/optimizer_op-inl.h``: reads ``weight32``, ``mom`` and the fp16
  ``grad``, writes ``mom``, ``weight32`` and the fp16 ``weight``) writes the fp16 copy once per step;
  a static loss scale is folded into the kernel's ``rescale_grad``: no scaler kernels;
* ``tensorflow-amp``: TensorFlow's automatic mixed precision graph rewrite inserts a cast of each
  conv/matmul weight in the step's graph (per step, as autocast per micro-batch), and its loss
  scaling optimizer unscales and checks every gradient per step; priced as ``pytorch-autocast``'s
  kernels (an assumption: the graph's cast and check kernels are taken to cost what PyTorch's do).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError, closest_names

__all__ = ["AMP_RUNTIMES", "DEFAULT_AMP_RUNTIME", "AmpRuntime", "check_amp_runtime", "runtime_of"]


@dataclass(frozen=True)
class AmpRuntime:
    """What a mixed-precision runtime launches: per-micro-batch weight casts (``casts``), a
    GradScaler-like unscale and check at fp16 (``scaler_at_fp16``; never at bf16), and a 16-bit
    weight copy written by the optimizer's update (``master_copy``); ``words``: the assumption;
    ``sixteen_bit_model``: the parameters and their gradients are 16-bit tensors with no fp32
    master (``model.half()``, :func:`~.memory.half_model`)."""

    casts: bool
    scaler_at_fp16: bool
    master_copy: bool
    words: str
    sixteen_bit_model: bool = False


#: The runtimes by name (module docstring).
AMP_RUNTIMES = {
    "pytorch-autocast": AmpRuntime(True, True, False, "PyTorch torch.autocast"),
    "pytorch-half": AmpRuntime(False, False, False, "a 16-bit PyTorch model (model.half()): no casts, no loss scaler",
                               sixteen_bit_model=True),
    "mxnet-multi-precision": AmpRuntime(
        False, False, True, "MXNet multi_precision: an fp16 model, no per-forward casts, fp32 master weights "
        "whose fp16 copy the optimizer's update writes once per step, no loss-scaler kernels"),
    "tensorflow-amp": AmpRuntime(
        True, True, False, "TensorFlow's automatic mixed precision graph rewrite, priced as PyTorch autocast's casts "
        "and GradScaler's kernels"),
}
DEFAULT_AMP_RUNTIME = "pytorch-autocast"


def check_amp_runtime(name: str) -> None:
    """A usage error naming the closest runtimes when ``name`` is none of :data:`AMP_RUNTIMES`."""
    if name not in AMP_RUNTIMES:
        close = closest_names(name, AMP_RUNTIMES, n=2)
        hint = f" (closest: {', '.join(close)})" if close else ""
        raise UsageError(f"unknown mixed-precision runtime '{name}'{hint}; valid: {', '.join(AMP_RUNTIMES)}")


def runtime_of(name: str) -> AmpRuntime:
    """The :class:`AmpRuntime` called ``name`` (checked)."""
    check_amp_runtime(name)
    return AMP_RUNTIMES[name]

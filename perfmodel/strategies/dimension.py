"""How a plan's dimensions contribute to a step: named time terms, memory parts, details.

The interface every dimension module follows (:mod:`.data`, :mod:`.parameter_server`,
:mod:`.spatial`, :mod:`.pipeline`, :mod:`.channels`, :mod:`.model_parallel`):

* **compute split**: how the dimension divides each layer's work (a tile, a channel share, a
  stage, a part), as per-layer seconds from :func:`perfmodel.cost.compute.layer_seconds`;
* **communication**: its exchanges as functions of bytes and link parameters, written over
  numbers *or* sympy symbols (``halo_exchange_s``, ``cut_sends``, ``overlapped_exchange``,
  ``parameter_server_comm_s``, the collectives), so ``explain`` evaluates the same function;
* **schedule**: how its pieces overlap (``pipeline_step``, the bucketed overlap, the ``mp``
  simulation), again one function for both;
* **memory**: what one GPU holds, through :func:`memory_parts`.

:mod:`.compose` composes them into *named terms*: seconds that add up to the step, so the
breakdown is the list of terms and the step time is their sum (:class:`.priced.Priced`), never a
total patched to match. Shared by every dimension: :func:`optimizer_step_s` (numbers or
symbols) and :func:`memory_parts`.

The terms are built once, on a :class:`Valuation`: the profile's numbers (``predict``, the
search) or named symbols (``explain``, whose formula is then the same terms, term by term):
:func:`.chain_terms.chain_terms`, :func:`.split_terms.split_terms`,
:func:`.model_parallel.mp_terms`. A dimension adds a term by adding a key there, written
over ``Num`` (numbers or symbols; its counts named by :meth:`Valuation.count`), and
``explain`` prints it with no code of its own; a term only numbers can give shows in
``explain`` as predict's value, flagged (:func:`.formula.finish`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..cost.collectives import LinkParams
from ..cost.compute import GRAD_BYTES_PER_PARAM, ComputeValues
from ..cost.formulas import Num
from .amp_runtime import DEFAULT_AMP_RUNTIME
from .amp_step import AmpStep, amp_casts_s, amp_update_s
from .memory import (
    grad_bytes_per_param,
    optimizer_bytes_per_param,
    optimizer_traffic_bytes_per_param,
    weight_bytes_per_param,
)

__all__ = ["OPTIMIZER_LAUNCHES", "Valuation", "memory_parts", "optimizer_step_s", "step_tail_terms"]

#: Kernel launches of one optimizer step: torch.optim's ``foreach`` implementation (the
#: default since PyTorch 2.0) updates lists of tensors in a handful of fused launches.
OPTIMIZER_LAUNCHES = 10


@dataclass(frozen=True)
class Valuation:
    """The values a step's terms are built on: the hardware's (``v``: compute, ``lp``: links),
    the mean micro-batch ``b`` on one GPU and the micro-batches ``M`` per step.

    Here numbers (``predict``, the search); ``explain`` passes a subclass whose values are
    sympy symbols, so the same code gives the formula. :meth:`count` is how a term names a
    count of the plan (halo elements, exchanged elements per sample, ...).
    """

    v: ComputeValues
    lp: LinkParams
    b: Num
    M: Num

    @property
    def symbolic(self) -> bool:
        return False

    @property
    def e(self) -> Num:
        """Bytes per activation element."""
        return self.v.elem_bytes

    def count(self, name: str, value: float, meaning: str) -> Num:
        """A count of the plan: ``value`` here; a symbol ``name`` that stands for it, with its
        ``meaning``, in ``explain``."""
        return value

    def define(self, name: str, expr: Num, meaning: str) -> Num:
        """A part of the step that several terms share: ``expr`` here; in ``explain`` a symbol
        ``name`` defined as ``expr`` (printed once, re-evaluated by a what-if), so a formula does
        not repeat it in every term that reads it."""
        return expr


def optimizer_step_s(params: Num, optimizer: str, v: ComputeValues, amp: AmpStep | None = None,
                     micro_batches: Num = 1.0, param_bytes: int = GRAD_BYTES_PER_PARAM) -> Num:
    """The optimizer's update of ``params`` weights: its traffic (``param_bytes`` per element of the
    weights, gradients and state: fp32, or 2 in a 16-bit model,
    :func:`~.memory.optimizer_traffic_bytes_per_param`) over the achievable
    memory bandwidth plus :data:`OPTIMIZER_LAUNCHES` launches, plus the step's fixed cost (zero_grad,
    loss, host synchronisation: ``v.step_overhead_s``), plus under amp/bf16 what mixed precision adds
    to the update on that GPU in ``micro_batches`` micro-batches (``amp``: GradScaler's kernels or
    MXNet's fp16 weight copy, :func:`.amp_step.amp_update_s`; autocast's casts are the
    ``amp_casts`` term, :func:`step_tail_terms`) (numbers or symbols by ``v``)."""
    traffic = optimizer_traffic_bytes_per_param(optimizer, param_bytes)
    base = (params * traffic / (v.memory_bandwidth_bytes_per_s * v.eta_memory) + OPTIMIZER_LAUNCHES * v.launch_s
            + v.step_overhead_s)
    return base if amp is None else base + amp_update_s(amp, micro_batches, v)


def step_tail_terms(params: Num, optimizer: str, v: ComputeValues, amp: AmpStep | None,
                    micro_batches: Num, param_bytes: int = GRAD_BYTES_PER_PARAM) -> dict[str, Num]:
    """The terms after a step's body on the GPU holding ``params`` weights: ``amp_casts`` (autocast's
    weight casts in ``micro_batches`` forwards and backwards, only where ``amp`` casts any,
    :func:`.amp_step.amp_casts_s`) and ``optimizer_step`` (:func:`optimizer_step_s`, ``param_bytes``
    per element)."""
    out: dict[str, Num] = {}
    if amp is not None and amp.cast_tensors > 0:
        out["amp_casts"] = amp_casts_s(amp, micro_batches, v)
    out["optimizer_step"] = optimizer_step_s(params, optimizer, v, amp, micro_batches, param_bytes)
    return out


def memory_parts(
    params: float,
    precision: str,
    optimizer: str,
    buckets: bool,
    input_batch: float,
    activations: float,
    workspace: float,
    amp_runtime: str = DEFAULT_AMP_RUNTIME,
) -> dict[str, float]:
    """Memory of one GPU holding ``params`` weights, by part (bytes).

    fp32 weights (+16-bit copies under amp/bf16), fp32 gradients, optimizer state, the DDP
    gradient buckets when the weights are exchanged (``buckets``), the input batch, the
    activations kept for backward and the workspace (transient tensors and the framework's
    reserve). A 16-bit model (``amp_runtime`` pytorch-half at amp/bf16) holds 16-bit weights,
    gradients, buckets and optimizer state only (:func:`~.memory.half_model`); its input batch
    (``input_batch``, bytes) is the caller's, :func:`~.memory.input_batch_bytes`.
    """
    grad = grad_bytes_per_param(precision, amp_runtime)
    return {
        "weights": params * weight_bytes_per_param(precision, amp_runtime),
        "gradients": params * grad,
        "optimizer_state": params * optimizer_bytes_per_param(optimizer, grad),
        "gradient_buckets": params * grad if buckets else 0.0,
        "input_batch": input_batch,
        "activations": activations,
        "workspace": workspace,
    }

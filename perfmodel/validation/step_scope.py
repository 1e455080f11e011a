"""What a measured row's time covers: the full training step, or forward and backward only.

A measurement file's optional ``step`` column (``perfmodel/data/MEASUREMENTS.md``) says it:

* ``full`` (the default, also for an empty cell): forward, backward and the optimizer's update,
  as every run that trains does (``optimizer.step()`` inside the timed loop);
* ``forward-backward``: the timed region ends when the backward pass is done; no optimizer
  updates the weights in it. Benchmarks of layers and networks often time only that, e.g.
  u39kun/deep-learning-benchmark (``frameworks/pytorch/models.py`` @ 9dc3e36e6f97: ``zero_grad()``,
  forward, ``out.sum()``, ``backward()`` between two ``torch.cuda.synchronize()``; it creates no
  optimizer). Such a row is priced by :func:`without_optimizer_update`.
"""

from __future__ import annotations

from dataclasses import replace

from ..cost.compute import ComputeValues
from ..strategies.priced import Priced

__all__ = ["FULL_STEP", "FORWARD_BACKWARD", "STEP_SCOPES", "step_scope", "without_optimizer_update"]

FULL_STEP = "full"
FORWARD_BACKWARD = "forward-backward"
#: The values of the ``step`` column (the first is the default).
STEP_SCOPES = (FULL_STEP, FORWARD_BACKWARD)


def step_scope(text: str) -> str | None:
    """The ``step`` cell as one of :data:`STEP_SCOPES` (empty: :data:`FULL_STEP`), None if it is none."""
    value = text.strip().lower() or FULL_STEP
    return value if value in STEP_SCOPES else None


def without_optimizer_update(priced: Priced, v: ComputeValues) -> Priced:
    """``priced`` without the optimizer's update: its ``optimizer_step`` term keeps only the step's
    fixed cost (``v.step_overhead_s``: zero_grad, the loss, the host synchronisation, all inside a
    forward-backward timing), and no optimizer state is held. The update's weight traffic and
    launches and the loss scaler's kernels (:func:`~perfmodel.strategies.dimension.optimizer_step_s`)
    leave the step; every other term is kept as priced, autocast's casts in forward and backward
    (``amp_casts``) included, so the step is still the sum of its terms."""
    if "optimizer_step" not in priced.breakdown:
        return priced
    breakdown = {**priced.breakdown, "optimizer_step": float(v.step_overhead_s)}
    memory = {**priced.memory, "optimizer_state": 0.0} if "optimizer_state" in priced.memory else priced.memory
    return replace(priced, breakdown=breakdown, memory=memory)

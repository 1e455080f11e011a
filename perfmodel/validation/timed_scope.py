"""What a measured row timed: a whole training step (the default) or the forward and backward passes only.

A row's optional ``timed`` column says it (read like :mod:`.software_era` reads the framework:
from the row, so each source states its own):

* ``step`` (or empty, the default): forward, backward and the optimizer's update, with the step's
  fixed costs (zero_grad, the loss, the host synchronisation): every term of the plan's price.
  Every row of the sets shipped before jcjohnson_runs.csv is such a step.
* ``fwd+bwd``: the forward pass and the backward pass (both gradients of every layer), and
  nothing else: no optimizer update, no zero_grad, no loss. jcjohnson/cnn-benchmarks
  (``cnn_benchmark.lua`` @ 83d441f852) times ``model:forward(x)`` and ``model:backward(x, dout)``
  on a random ``dout`` (no criterion), each between two ``cutorch.synchronize()`` calls, and never
  calls an optimizer or ``zeroGradParameters``; its throughput is batch / (forward + backward).
  Such a row is priced as the plan's step less the terms in :data:`UNTIMED_BY_FWD_BWD`; the
  host synchronisations around each timed pass are not priced (microseconds against steps of
  tens of milliseconds).

The one function the pricing calls is :func:`timed_terms`.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import MeasurementError
from .measurements import Measurement

__all__ = ["TIMED_COLUMN", "WHOLE_STEP", "FORWARD_BACKWARD", "TIMED_CHOICES", "UNTIMED_BY_FWD_BWD",
           "timed_scope_of", "timed_terms"]

#: The optional measurement column that says what a row timed.
TIMED_COLUMN = "timed"
WHOLE_STEP = "step"
FORWARD_BACKWARD = "fwd+bwd"
TIMED_CHOICES = (WHOLE_STEP, FORWARD_BACKWARD)
#: The priced terms a forward+backward timing leaves out: the optimizer's update and the step's
#: fixed costs (:func:`perfmodel.strategies.dimension.optimizer_step_s` prices both in this term).
UNTIMED_BY_FWD_BWD = ("optimizer_step",)


def timed_scope_of(m: Measurement) -> str:
    """What row ``m`` timed, one of :data:`TIMED_CHOICES` (``step`` when the column is absent or empty)."""
    text = m.columns.get(TIMED_COLUMN, "").strip().lower() or WHOLE_STEP
    if text not in TIMED_CHOICES:
        raise MeasurementError(f"{m.where(TIMED_COLUMN)}: {text[:40]!r} is not one of {', '.join(TIMED_CHOICES)}")
    return text


def timed_terms(m: Measurement, breakdown: Mapping[str, float]) -> dict[str, float]:
    """The terms of a priced step (``breakdown``, seconds) that row ``m``'s measurement covers:
    all of them for a whole step, without :data:`UNTIMED_BY_FWD_BWD` for ``fwd+bwd``."""
    if timed_scope_of(m) == WHOLE_STEP:
        return dict(breakdown)
    return {k: v for k, v in breakdown.items() if k not in UNTIMED_BY_FWD_BWD}

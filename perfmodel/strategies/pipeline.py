"""Pipeline parallelism: GPipe / 1F1B step timing (the stage partition: :mod:`perfmodel.partition.stages`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = ["PipelineTiming", "pipeline_timing"]


@dataclass(frozen=True)
class PipelineTiming:
    """Seconds of one pipelined step and its parts, for the critical (slowest) stage."""

    total_s: float
    compute_s: float
    p2p_s: float
    recompute_s: float
    bubble_s: float
    last_bwd_end_s: tuple[float, ...]


def pipeline_timing(
    fwd: FloatSeq,
    bwd: FloatSeq,
    send_fwd: FloatSeq,
    send_bwd: FloatSeq,
    micro_batches: int,
    recompute: bool,
) -> PipelineTiming:
    """Step time of a synchronous pipeline (GPipe; 1F1B has the same bubble).

    Per micro-batch, stage ``s`` computes forward ``f_s`` and backward ``b_s`` and sends
    ``send_fwd[s]`` (activations to stage s+1) and ``send_bwd[s]`` (gradients to s-1).
    With ``M`` micro-batches the forward phase takes ``sum_s F_s + (M - 1) * max_s F_s``
    (fill, then the bottleneck stage sets the pace; Huang et al., GPipe, NeurIPS 2019,
    section 2.3), likewise the backward phase. With recomputation (torchgpipe's
    ``checkpoint='except_last'``) every micro-batch but the last re-runs its forward pass
    in backward.
    """
    m = micro_batches
    f = np.asarray(fwd, float) + np.asarray(send_fwd, float)
    b = np.asarray(bwd, float) + np.asarray(send_bwd, float)
    rb = b + (np.asarray(fwd, float) if recompute else 0.0)
    t_f = f.sum() + (m - 1) * f.max()
    t_b = b.sum() + (m - 1) * rb.max() if m > 1 else b.sum()
    total = float(t_f + t_b)
    crit = int(np.argmax(np.asarray(fwd) + np.asarray(bwd) + (np.asarray(fwd) if recompute else 0)))
    compute = m * (fwd[crit] + bwd[crit])
    p2p = m * (send_fwd[crit] + send_bwd[crit])
    rec = (m - 1) * fwd[crit] if recompute else 0.0
    bubble = max(0.0, total - compute - p2p - rec)
    # when each stage finishes its last backward micro-batch (stage 0 finishes last, at ``total``)
    ends = tuple(float(total - b[:s].sum()) for s in range(len(b)))
    return PipelineTiming(total, float(compute), float(p2p), float(rec), float(bubble), ends)

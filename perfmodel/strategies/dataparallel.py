"""Single-process ``torch.nn.DataParallel``: what one step costs beyond the replicas' compute.

``DataParallel.forward`` (torch/nn/parallel/data_parallel.py) does, every step: ``scatter``
the input batch from GPU 0 to the others, ``replicate`` the module (a ``Broadcast`` of every
weight from GPU 0), ``parallel_apply`` (one Python thread per GPU, all sharing the GIL, so
the kernel launches of the forward pass are issued by one interpreter in turn), ``gather``
the outputs onto GPU 0; in backward, ``Broadcast``'s gradient is ``ReduceAddCoalesced``
(torch/nn/parallel/_functions.py): the replicas' gradients are reduced onto GPU 0 when the
whole backward pass has reached the broadcast, i.e. after it ends, and GPU 0 alone steps the
optimizer. PyTorch's DDP tutorial: "DataParallel is single-process, multi-thread ... usually
slower than DDP even on a single machine due to GIL contention across threads, per-iteration
replicated model, and additional overhead introduced by scattering inputs and gathering
outputs" (pytorch.org/tutorials/intermediate/ddp_tutorial.html).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..cost.formulas import Num, smax, ssum
from ..errors import StrategyError
from .spec import Strategy

__all__ = ["dataparallel_parts", "check_dataparallel"]


def dataparallel_parts(
    fwd_s: Sequence[Num] | np.ndarray, weight_bytes: float, grad_bytes: float, input_bytes: Num,
    output_bytes: Num, gpus: int, bw: Num, alpha: Num, launch_s: Num,
) -> dict[str, Num]:
    """What one micro-batch of ``torch.nn.DataParallel`` over ``gpus`` GPUs of one node adds
    to a replica's own forward and backward, by part (seconds; numbers or symbols).

    ``fwd_s`` is one replica's per-layer forward seconds; ``input_bytes`` and ``output_bytes``
    one replica's share of the batch and of the network's output. GPU 0's link (``bw``,
    ``alpha``) carries the scatter and the gather of the ``gpus - 1`` other shares; the fp32 (a
    16-bit model's fp16) weights are broadcast and gradients reduced as pipelined NCCL broadcast / reduce
    (``bytes/bw + (gpus - 1) * alpha``), the reduce after backward; forward layers whose
    kernels one interpreter launches for every GPU take ``max(layer seconds, gpus x launch)``
    (backward runs in autograd's per-device threads, at the replica's own speed).
    """
    n = gpus
    if n <= 1:
        return {}
    hops = (n - 1) * alpha
    return {
        "scatter_s": (n - 1) * input_bytes / bw + hops,
        "replicate_s": weight_bytes / bw + hops,
        "forward_launches_s": ssum([smax(f, n * launch_s) - f for f in fwd_s]),
        "gather_s": (n - 1) * output_bytes / bw + hops,
        "reduce_s": grad_bytes / bw + hops,
    }


def check_dataparallel(s: Strategy, gpus_per_node: int) -> None:
    """``comm=dataparallel`` is one process driving the GPUs of one node, data parallel only."""
    if s.dp * s.sp_degree * s.pp * s.mp * s.filter * s.channel != s.dp:
        raise StrategyError(
            f"comm=dataparallel is torch.nn.DataParallel: data parallelism only (use dp=N), got {s.spec()}"
        )
    if s.dp > gpus_per_node:
        raise StrategyError(
            f"comm=dataparallel is one process on one node: at most {gpus_per_node} GPUs, got dp={s.dp}"
        )

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

from dataclasses import dataclass

import numpy as np

from ..errors import StrategyError
from ..hardware import Hardware
from .spec import Strategy

__all__ = ["DataParallelStep", "dataparallel_step", "check_dataparallel"]


@dataclass(frozen=True)
class DataParallelStep:
    """Seconds of each part of a ``torch.nn.DataParallel`` step (one GPU's compute included)."""

    scatter_s: float
    replicate_s: float
    forward_s: float
    gather_s: float
    backward_s: float
    reduce_s: float

    @property
    def body_s(self) -> float:
        return self.scatter_s + self.replicate_s + self.forward_s + self.gather_s + self.backward_s

    @property
    def exchange_s(self) -> float:
        """What the exchange adds to the replicas' own compute (all of it exposed)."""
        return self.scatter_s + self.replicate_s + self.gather_s + self.reduce_s


def dataparallel_step(
    fwd_s: np.ndarray, bwd_s: np.ndarray, weight_bytes: float, grad_bytes: float,
    input_bytes: float, output_bytes: float, gpus: int, hw: Hardware,
) -> DataParallelStep:
    """One ``DataParallel`` step over ``gpus`` GPUs of one node.

    ``fwd_s``/``bwd_s`` are one replica's per-layer seconds; ``input_bytes`` and
    ``output_bytes`` one replica's share of the batch and of the network's output. GPU 0's
    link carries the scatter and gather of the ``gpus - 1`` other shares; the weights are
    broadcast and the gradients reduced as pipelined NCCL broadcast / reduce
    (``bytes/beta + (gpus - 1) * alpha``). Forward layers whose kernels are launched by the
    one interpreter for every GPU take ``max(layer seconds, gpus x launch overhead)``;
    backward runs in autograd's per-device threads (no GIL) at the replica's own speed.
    """
    n = gpus
    if n <= 1:
        return DataParallelStep(0.0, 0.0, float(fwd_s.sum()), 0.0, float(bwd_s.sum()), 0.0)
    beta = hw.intra.effective_bandwidth_bytes_per_s
    alpha = hw.intra.latency_s
    pipelined = (n - 1) * alpha
    return DataParallelStep(
        scatter_s=(n - 1) * input_bytes / beta + (n - 1) * alpha,
        replicate_s=weight_bytes / beta + pipelined,
        forward_s=float(np.maximum(fwd_s, n * hw.kernel_launch_s).sum()),
        gather_s=(n - 1) * output_bytes / beta + (n - 1) * alpha,
        backward_s=float(bwd_s.sum()),
        reduce_s=grad_bytes / beta + pipelined,
    )


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

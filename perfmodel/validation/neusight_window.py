"""The host dispatch inside NeuSight's timing window: a measured floor per GPU and op, added to its rows.

NeuSight times each op with two CUDA events around its Python call (``sitar-lab/NeuSight`` @
``6945927``, ``neusight/Dataset/collect.py``, ``measure_once``: ``starter.record()``, the op,
``ender.record()``, ``torch.cuda.synchronize()``; the mean of the 5 fastest of 25 such runs).
The GPU is idle when the start event is recorded, so it fires at once and the op's kernel starts
only once the host has dispatched it (the module call, PyTorch's dispatcher, cuDNN's or cuBLAS's
setup, the launch): every row's time holds that host work as well as the kernel's.

Its size is measured, not fitted: the smallest problems of a GPU and op take the same time
whatever their size (V100 linear layers 63.3-63.6 us from 2.3 to 78 MFLOP, P100 89.3 us for 71
MFLOP, A100-PCIE-40GB 52.2-52.7 us from 28 to 92 MFLOP), so that floor is the window's host work.
:data:`WINDOW_FLOOR_S` holds, per GPU and op, the smallest time of NeuSight's whole collection
(``scripts/asplos/data/dataset/train/collect/<op>/p2.1.0/<gpu>.csv``, 1,750 to 6,460 rows each).
The price of a row is that floor plus the kernel model's GPU time. That is an upper bound: the
floor also holds the host work after the launch (until the end event is recorded), behind which
a small kernel runs unseen (the floor rows above hide kernels of ~10 us), so a row whose kernel
outlasts it is over-priced by that part. GPUs whose collection has no small problems (A100 80GB
PCIe linear and element-wise, H100: test split only, every row tens of microseconds of kernel or
more) have no floor and are priced on GPU time alone.
"""

from __future__ import annotations

__all__ = ["WINDOW_FLOOR_S", "window_floor_s"]

#: (CUDA device name, op) -> seconds: the smallest time of that GPU's op in NeuSight's collection
#: (file above; the problem it was measured on in the comment: batch x C -> K at H x W for conv,
#: B x M rows of N -> K for linear, B x H elements for element-wise ops).
WINDOW_FLOOR_S: dict[tuple[str, str], float] = {
    ("Tesla P100-PCIE-16GB", "conv"): 108.21e-6,  # 6 x 111 -> 188 at 8x8
    ("Tesla V100-PCIE-32GB", "conv"): 68.37e-6,  # 3 x 16 -> 1092 at 8x8
    ("NVIDIA A100 80GB PCIe", "conv"): 59.34e-6,  # 6 x 27 -> 285 at 5x5
    ("Tesla P100-PCIE-16GB", "linear"): 89.27e-6,  # 1 x 60 of 55 -> 10739
    ("Tesla V100-PCIE-32GB", "linear"): 63.25e-6,  # 1 x 261 of 5 -> 864
    ("NVIDIA A100-PCIE-40GB", "linear"): 52.21e-6,  # 1 x 79 of 379 -> 642
    ("NVIDIA A100-PCIE-40GB", "relu"): 30.02e-6,  # 127 x 168
    ("NVIDIA A100-PCIE-40GB", "add"): 25.83e-6,  # 394 x 3781
    ("NVIDIA A100-PCIE-40GB", "mul"): 25.27e-6,  # 127 x 168
}


def window_floor_s(gpu: str, op: str) -> float:
    """Host seconds inside NeuSight's timing window of ``op`` on ``gpu`` (the first word of the
    row's op: conv, linear, relu, add, mul); 0 where the collection measured no small problem."""
    return WINDOW_FLOOR_S.get((gpu, op), 0.0)

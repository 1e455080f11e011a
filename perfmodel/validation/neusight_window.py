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
Each row is priced as ``max(floor, GPU + floor - GPU(floor problem))``: the floor less the kernel
model's time of the floor's own problem (its launch and small kernel, ~10 us) is the window's host
work, added to the row's modelled time; no row is priced below the floor, which no measured row
is. The host work after the launch (until the end event is recorded) can hide a small kernel,
so that form is an upper bound for rows whose kernel outlasts it. GPUs whose collection has no
small problems (A100 80GB PCIe linear and element-wise, H100: test split only, every row tens of
microseconds of kernel or more) have no floor and are priced on GPU time alone, which lowers
their error only where the host work would have shown.
"""

from __future__ import annotations

__all__ = ["WINDOW_FLOOR", "window_floor"]

#: (CUDA device name, op) -> (seconds, problem): the smallest time of that GPU's op in NeuSight's
#: collection (file above) and the problem it was measured on: (batch, C, K, H = W) for a 3x3
#: conv, (rows, N, K) for linear (B x M rows of N -> K), (elements,) for element-wise (B x H).
WINDOW_FLOOR: dict[tuple[str, str], tuple[float, tuple[int, ...]]] = {
    ("Tesla P100-PCIE-16GB", "conv"): (108.21e-6, (6, 111, 188, 8)),
    ("Tesla V100-PCIE-32GB", "conv"): (68.37e-6, (3, 16, 1092, 8)),
    ("NVIDIA A100 80GB PCIe", "conv"): (59.34e-6, (6, 27, 285, 5)),
    ("Tesla P100-PCIE-16GB", "linear"): (89.27e-6, (60, 55, 10739)),
    ("Tesla V100-PCIE-32GB", "linear"): (63.25e-6, (261, 5, 864)),
    ("NVIDIA A100-PCIE-40GB", "linear"): (52.21e-6, (79, 379, 642)),
    ("NVIDIA A100-PCIE-40GB", "relu"): (30.02e-6, (127 * 168,)),
    ("NVIDIA A100-PCIE-40GB", "add"): (25.83e-6, (394 * 3781,)),
    ("NVIDIA A100-PCIE-40GB", "mul"): (25.27e-6, (127 * 168,)),
}


def window_floor(gpu: str, op: str) -> tuple[float, tuple[int, ...]] | None:
    """The floor of ``op`` on ``gpu`` (the first word of the row's op: conv, linear, relu, add,
    mul) and its problem; None where the collection measured no small problem."""
    return WINDOW_FLOOR.get((gpu, op))

"""Autograd's gradient sums: one elementwise add per extra reader of a tensor, in the backward.

A tensor that ``k > 1`` layers read receives ``k`` gradients in the backward, and eager PyTorch's
autograd engine adds them up before the layer that produced the tensor runs its own backward:
``InputBuffer::add`` (``torch/csrc/autograd/input_buffer.cpp``, pytorch/pytorch) keeps the first
gradient that arrives and ``accumulate`` sums each later one into it, in place
(``old_var.add_(var)``) where the buffer is a dense tensor it holds the last reference to, else out
of place (``old_var + var``: e.g. the buffer is a concatenation's gradient slice, which
``cat_tensors_backward`` in ``torch/csrc/autograd/FunctionsManual.cpp`` returns as
``grad.narrow(...)``, a view). Either way one elementwise kernel per extra gradient, reading two
tensors of the size ``n`` of the forked one and writing one: ``k - 1`` launches and ``3 n (k - 1)``
elements moved. The engine dispatches each add as an ATen op (one host op each).

Who pays: the layer that produced the tensor, whose backward waits for the sum (its input buffer
is complete only once the last reader's gradient is in). Which tensors: those that carry a gradient,
i.e. that a layer with parameters, or a layer reading such a tensor, produced: the network input
carries none (``requires_grad`` is false on a batch), so its readers add nothing. Readers are
counted per operand (a layer reading a tensor twice, ``x * x``, sends it two gradients); the
pieces of one ``chunk``/``split``/``unbind`` (views with ``attr('split_piece')``) are one reader:
one autograd node (``derivatives.yaml``: ``split_backward``, ``unbind_backward``) sends ``x`` one
gradient built from all of theirs.

Where this fires: every residual block (the block's input feeds its body and the shortcut), every
squeeze-and-excitation block (the scaled tensor feeds the pooling and the multiply), every
Inception module (its input feeds 3-4 branches), every DenseNet feature map (read by each later
layer's concatenation in its block and by the block's output), a U-Net's skip connections, a
transformer's attention input (read by its q, k and v projections). Checked against the adds
eager PyTorch dispatches in the backward of small networks with these forks
(``tests/test_gradient_sums.py``, ``TorchDispatchMode`` on CPU; the engine's accumulation is the
same code on CUDA, on the accumulation stream it picks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..network.layers import Layer

__all__ = ["extra_gradients", "SUM_PASSES", "GRADIENT_SUMS_WORDS"]

#: Full-size passes of one gradient sum: read the buffer and the new gradient, write the sum.
SUM_PASSES = 3.0

#: The rule in words, for every output's assumptions.
GRADIENT_SUMS_WORDS = (
    f"autograd adds the gradients of every tensor that k > 1 layers read (a residual block's input, an "
    f"Inception module's, a DenseNet feature map): k - 1 elementwise adds of {SUM_PASSES:g}n elements moved, "
    "one launch and one host op each, paid by the layer that produced the tensor (torch/csrc/autograd/"
    "input_buffer.cpp; perfmodel.cost.gradient_sums); the pieces of one chunk/split are one reader"
)


def extra_gradients(layers: Sequence[Layer], one_network: bool = True) -> np.ndarray:
    """Per layer, how many gradients beyond the first autograd adds into its output: its readers
    among ``layers`` less one, where its output carries a gradient (module docstring); zero where it
    has at most one reader. ``one_network`` False: the layers are unrelated problems (measured rows,
    whose tensor names mean nothing across rows): no layer reads another's output, so no sums."""
    if not one_network:
        return np.zeros(len(layers))
    carries = {"input": False}
    readers: Counter[str] = Counter()
    for layer in layers:
        carries[layer.name] = layer.params > 0 or any(carries.get(t, False) for t in layer.inputs)
        if not layer.attr("split_piece"):  # a later piece of a split: its first piece reads x
            readers.update(layer.inputs)
    return np.array([max(readers[la.name] - 1, 0) if carries[la.name] else 0 for la in layers], dtype=float)

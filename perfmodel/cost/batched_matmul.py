"""Products of two activations (``matmul``, ``attention``) as the batched GEMMs eager PyTorch runs.

A ``matmul`` layer ``C = A @ B`` of per-sample shapes ``(*a, M, K)`` and ``(*b, K, N)`` is one
cuBLAS batched GEMM per direction and operand, over ``G = prod(broadcast(a, b))`` products per
sample. PyTorch's ``torch.matmul`` (``aten/src/ATen/native/LinearAlgebra.cpp``, ``_matmul_impl``)
expands both operands to the broadcast batch shape, reshapes them to ``(N*G, M, K)`` and ``(N*G,
K, N)`` and calls ``bmm``; autograd differentiates that decomposition (``derivatives.yaml``,
``bmm``: ``self: grad.bmm(mat2.transpose(1, 2))``, ``mat2: self.transpose(1, 2).bmm(grad)``).
So, per sample and direction (checked with a dispatch oracle in
``tests/test_batched_matmul.py``):

==============  ==================================================  ==========================================
slot            GEMM (per product, ``G`` products per sample)        runs
==============  ==================================================  ==========================================
``fwd``         ``C = A B``: ``M x N x K``                           always
``dgrad``       ``dA = dC B^T``: ``M x K x N``                       where ``A`` needs a gradient
``wgrad``       ``dB^T = dC^T A``: ``N x K x M``                     where ``B`` needs a gradient
==============  ==================================================  ==========================================

(``dB`` is computed as ``A^T dC``, ``K x N x M``; the transposed view has the same FLOPs and lets the
tensor-core padding of :mod:`.tensor_core` treat ``K`` and ``N`` as a linear layer's input and output
features.) The micro-batch multiplies the number of products, not ``M``: each product is tiled on
its own (:func:`~perfmodel.cost.work.kernel_work`, ``gemm_batch``). An operand broadcast over
batch dimensions is materialised by ``expand(...).reshape(...)`` (a ``clone``: read it, write the
expanded copy) and its gradient is summed back over those dimensions (``ExpandBackward0``:
``sum_to``, read the expanded gradient, write the operand's); both are memory-bound kernels.

An ``attention`` layer (``scaled_dot_product_attention`` of ``q (*, L, E)``, ``k (*, S, E)``, ``v (*,
S, Ev)``) is one fused kernel forward (FlashAttention-2 or the memory-efficient kernel: Dao,
"FlashAttention-2", arXiv:2307.08691, 2023, Algorithm 1; its grid runs one block per ``L`` tile and
head) and one backward (Algorithm 2: one block per ``S`` tile and head, recomputing the scores):
the forward as a GEMM of ``L x Ev`` tiles over a reduction of ``S (E + Ev) / Ev`` (its FLOPs, ``2 L
S (E + Ev)``, those of ``q k^T`` and ``p v``), the backward as ``S x Ev`` tiles over ``L (3 E + 2
Ev) / Ev`` (the five products of Algorithm 2: ``q k^T`` again, ``dQ`` and ``dK`` contract or yield
``E``, ``dV`` and ``dP`` ``Ev``; ``torch.utils.flop_counter.sdpa_backward_flop_count`` counts the same), in
the ``dgrad`` slot (it yields every operand's gradient), with the backward's pre-processing pass
(``rowsum(dO * O)``: read both) as a memory kernel. The softmax's elementwise FLOPs stay those of
:mod:`perfmodel.network.counts`.

A *causal* attention (``is_causal=True``: query ``i`` sees keys ``j <= i``, aligned top-left as
torch's ``scaled_dot_product_attention`` does) skips every block of the score matrix that lies
wholly above the diagonal, forward and backward ("FlashAttention-2", section 3.1.1, "Causal
masking": about half of the blocks, a 1.7-1.8x speedup against the unmasked kernel at long
sequences). Both views' reductions are scaled by the fraction of :data:`FLASH_BLOCK`-square blocks
kept (:func:`causal_fraction`: 1 up to one block, towards 1/2 for long sequences). FLOP counts
keep the full products, as ``torch.utils.flop_counter`` does.
"""

from __future__ import annotations

import math

from ..network.layers import Layer, Shape, numel

__all__ = ["PRODUCT_KINDS", "View", "product_views", "product_memory", "gemm_batch", "operand_features",
           "FLASH_BLOCK", "causal_fraction"]

#: Rows and columns of one block of the score matrix in FlashAttention-2's kernels (the paper's
#: block sizes are 64 or 128 by head dimension; section 3.3): what causal masking skips whole.
FLASH_BLOCK = 128

#: Layer kinds whose GEMMs are products of two activations, batched over samples.
PRODUCT_KINDS = ("matmul", "attention")

#: (m, n, k, m grows with the batch) of one GEMM kernel
View = tuple[float, float, float, bool]


def _lead(layer: Layer) -> Shape:
    return layer.out_shape[:-2]


def gemm_batch(layer: Layer) -> float:
    """GEMMs per sample of a product layer (the broadcast batch dimensions' extent)."""
    return float(numel(_lead(layer)))


def operand_features(layer: Layer) -> tuple[float, float]:
    """(reduction, output columns) of the forward GEMM: a linear layer's input and output features."""
    if layer.kind == "attention":
        return float(layer.attr("e")), float(layer.out_shape[-1])
    return float(layer.in_shapes[0][-1]), float(layer.out_shape[-1])


def product_views(layer: Layer, grads: tuple[bool, ...]) -> dict[str, View]:
    """The GEMM views of a product layer (module docstring); ``grads[i]``: operand ``i`` needs a
    gradient (it is not the network input)."""
    m, n = float(layer.out_shape[-2]), float(layer.out_shape[-1])
    if layer.kind == "attention":
        s, e = layer.attr("s"), layer.attr("e")
        kept = causal_fraction(m, s) if layer.attr("causal") else 1.0
        views: dict[str, View] = {"fwd": (m, n, kept * s * (e + n) / n, False)}
        if any(grads):
            views["dgrad"] = (s, n, kept * m * (3 * e + 2 * n) / n, False)
        return views
    k = float(layer.in_shapes[0][-1])
    views = {"fwd": (m, n, k, False)}
    if grads[0]:
        views["dgrad"] = (m, k, n, False)
    if grads[1]:
        views["wgrad"] = (n, k, m, False)
    return views


def _broadcast_operands(layer: Layer) -> list[tuple[int, float, float]]:
    """(operand, own, expanded) elements per sample of each matmul operand broadcast over batch dimensions."""
    lead = math.prod(_lead(layer))
    out = []
    for i, shape in enumerate(layer.in_shapes):
        own, batch = float(numel(shape)), numel(shape[:-2])
        if batch < lead:
            out.append((i, own, own / batch * lead))
    return out


def product_memory(layer: Layer, grads: tuple[bool, ...]) -> tuple[float, float, float, float, int, int]:
    """(fwd elems, bwd elems, fwd extra bytes, bwd extra bytes, fwd launches, bwd launches) per
    sample of a product layer's memory-bound kernels (module docstring), besides its GEMMs."""
    if layer.kind == "attention":
        return (0.0, 2.0 * layer.out_elems, 0.0, 0.0, 0, 1) if any(grads) else (0.0, 0.0, 0.0, 0.0, 0, 0)
    broadcast = _broadcast_operands(layer)
    summed = [(own, expanded) for i, own, expanded in broadcast if grads[i]]
    fwd = sum(own + expanded for _, own, expanded in broadcast)
    bwd = sum(own + expanded for own, expanded in summed)
    return fwd, bwd, 0.0, 0.0, len(broadcast), len(summed)


def causal_fraction(queries: float, keys: float, block: int = FLASH_BLOCK) -> float:
    """The fraction of ``block``-square blocks of a ``queries x keys`` score matrix that a causal
    mask aligned top-left leaves anything in: row block ``i`` keeps key blocks ``0..i``."""
    rows, cols = math.ceil(queries / block), math.ceil(keys / block)
    if rows < 1 or cols < 1:
        return 1.0
    return sum(min(cols, i + 1) for i in range(rows)) / (rows * cols)

"""The kernels eager PyTorch (cuDNN/cuBLAS) launches for each layer in a training step.

Per layer and per sample (whole tensors, before any spatial split), this module lists:

* up to three GEMM-shaped kernels: forward, data gradient (``dgrad``) and weight gradient
  (``wgrad``) of convolutions, transposed convolutions and linear layers, each as its GEMM
  view ``m x n x k`` in ``groups`` (implicit GEMM: NVIDIA cuDNN Developer Guide,
  "Convolution Formulas"; Chetlur et al., "cuDNN: Efficient Primitives for Deep Learning",
  2014, section 3), with which of ``m`` / ``k`` grows with the batch (a linear layer's ``m`` is
  its rows: the tokens of each sample), and the batched GEMMs of products of two activations
  (``matmul``, ``attention``: :mod:`.batched_matmul`), whose count grows with the batch;
* the memory-bound kernels around them, unfused (every elementwise kernel reads and writes
  its tensors): their bytes, launches and host-side ops, forward and backward.

Byte counts per kind (``n`` output, ``n_in`` input elements, ``e`` bytes per element):

==================  ==========================================  ============================================
kind                forward                                      backward
==================  ==========================================  ============================================
conv/linear bias    bias add: read+write ``n``                  bias gradient: read ``n``
batchnorm (train)   statistics pass + normalise: ``3n``, and     two reductions + dx: ``5n`` (issue 14)
                    ``num_batches_tracked += 1`` (one launch)
act, dropout        read+write ``n`` (+1-byte mask)              read dy and saved, write dx: ``3n``
lrn (across chans)  read x, write y: ``2n``                     read x, y and dy, write dx: ``4n`` (cuDNN's
                                                                ``cudnnLRNCrossChannelBackward`` arguments)
add                 ``3n``                                       none (``AddBackward0`` passes ``dy`` on);
                                                                 a broadcast operand's ``sum_to``: ``n + n_b``
mul (broadcast)     :mod:`.broadcast_mul` (SE scaling)           :mod:`.broadcast_mul`
layernorm,          :mod:`.norm_kernels`: one kernel read x,      :mod:`.norm_kernels`: dx kernel and (affine) a
groupnorm,          write y (``2n``; group norm's moments pass:  gamma/beta kernel, each re-reading dy and x
softmax             ``3n``), + fp32 row statistics               (``5n``); softmax reads y and dy: ``3n``
maxpool             read ``n_in``, write ``n`` + int64 indices   zero-fill ``n_in``; per input, read grad and
                                                                 index of each covering window: ``a n``
                                                                 reads from L2 (window area ``a``), write
                                                                 ``n_in`` (PyTorch ``max_pool_backward_nchw``)
avgpool             read ``n_in``, write ``n``                   gather per input: 6 passes over in + out
adaptive avgpool    read ``n_in``, write ``n``                   read ``n``, write ``n_in``
concat              read+write ``n``                             none (gradient slices are views)
upsample            read ``n_in``, write ``n``                   zero-fill and scatter-add into ``n_in``
forked output       --                                           autograd's gradient sums into the output:
(``k`` readers)                                                  ``3n`` and one launch and host op per extra
                                                                 reader (:mod:`.gradient_sums`)
==================  ==========================================  ============================================

Latency bound of window kernels: PyTorch's pooling forward kernels (``avg_pool2d``, ``max_pool2d``,
adaptive pooling to more than one output per plane) run one thread per output element, each walking
its window with one load at a time. Per layer this module records the threads (output elements
per sample), the serial loads per thread (window area) and the distance in elements between
neighbouring threads' loads (the pooling stride along the row; a whole plane for a global
window); :mod:`perfmodel.cost.work` turns them into the serial loads of the kernel's critical
path and :mod:`perfmodel.cost.kernel_model` prices those at the memory latency.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ..network.graph import Network
from ..network.layers import Layer, numel
from .autocast_fp32 import AutocastKernels, autocast_kernels
from .batched_matmul import PRODUCT_KINDS, gemm_batch, operand_features, product_memory, product_views
from .broadcast_mul import mul_kernels
from .efficiency import im2col_loads, zero_insert_factor
from .gradient_sums import SUM_PASSES, extra_gradients
from .norm_kernels import NORM_KINDS, norm_kernels

__all__ = ["LayerKernels", "layer_kernels", "network_kernels", "slot_roles", "MM_SLOTS", "INDEX_BYTES",
           "DEPTHWISE_MAX_CPG", "WINDOW_KINDS"]

#: The GEMM-shaped kernels of a matmul layer, in order.
MM_SLOTS = ("fwd", "dgrad", "wgrad")
#: Bytes of one max-pooling index (PyTorch keeps int64 indices).
INDEX_BYTES = 8
#: Average-pool backward gathers each input's gradient from the windows covering it, with
#: index and divisor arithmetic per window: PipeDream's V100 profiles (shipped in
#: perfmodel/data/kernels_pipedream_layers.csv) show it moving its input and output at ~120 GB/s
#: against ~720 GB/s for streaming kernels. Priced as this many streaming passes over input + output.
AVGPOOL_BWD_PASSES = 6.0
#: How much faster the L2 cache serves loads than DRAM: pooling kernels re-read each value once
#: per window that covers it, and all but the first read hit L2. Jia et al., "Dissecting the
#: NVIDIA Volta GPU Architecture via Microbenchmarking" (arXiv:1804.06826, 2018): V100 L2 load
#: throughput about 2.2 TB/s against about 0.75 TB/s measured from HBM2, i.e. about 3x.
L2_OVER_DRAM = 3.0
#: A 2-D (non-transposed) grouped convolution with at most this many input channels per group
#: runs PyTorch's depthwise kernels (no GEMM tiles: one thread per output or input element),
#: priced per element and filter tap by :mod:`.depthwise` or by their memory traffic; PyTorch
#: sends only 4-D non-transposed depthwise layers there (``Convolution.cpp``), so transposed and
#: 3-D grouped layers stay grouped GEMMs.
DEPTHWISE_MAX_CPG = 1


@dataclass(frozen=True, eq=False)
class LayerKernels:
    """Per-layer kernel descriptors of a list of layers (numpy arrays, per sample).

    GEMM slots ``s`` in :data:`MM_SLOTS`: ``m[s]``, ``n[s]``, ``k[s]`` (per group; ``m`` is per
    sample where ``m_batch[s]``, else ``k`` is), ``groups``; zero ``n`` means no such kernel.
    ``x_elems`` / ``y_elems`` the input and output activation elements per sample every GEMM
    kernel of the layer reads and writes, ``c_in`` / ``c_out`` the channels (for tensor-core
    alignment), ``winograd_shape`` where the
    Winograd rule may apply, ``depthwise`` where the depthwise rule does; ``dgrad_sum_n`` /
    ``dgrad_sum_k`` the data-gradient kernel's other GEMM view (:func:`_dgrad_sum_view`; zero:
    none); ``transposed``: the layer's forward slot holds its
    underlying convolution's data-gradient kernel and its ``dgrad`` slot the convolution's forward.
    Memory kernels: ``mem_elems_fwd/bwd`` (activation elements per sample moved),
    ``mem_bytes_extra_fwd/bwd`` (indices and masks, bytes per sample), ``launches_fwd/bwd``,
    ``host_ops_fwd/bwd``. ``spatial_dims`` says how the per-sample counts shrink on a tile.
    """

    m: dict[str, np.ndarray]
    n: dict[str, np.ndarray]
    k: dict[str, np.ndarray]
    m_batch: dict[str, np.ndarray]
    groups: np.ndarray
    c_in: np.ndarray
    c_out: np.ndarray
    winograd_shape: np.ndarray
    out_h: np.ndarray
    out_w: np.ndarray
    depthwise: np.ndarray
    conv: np.ndarray
    dgrad_sum_n: np.ndarray
    dgrad_sum_k: np.ndarray
    transposed: np.ndarray
    mem_elems_fwd: np.ndarray
    mem_elems_bwd: np.ndarray
    mem_bytes_extra_fwd: np.ndarray
    mem_bytes_extra_bwd: np.ndarray
    launches_fwd: np.ndarray
    launches_bwd: np.ndarray
    host_ops_fwd: np.ndarray
    host_ops_bwd: np.ndarray
    spatial_dims: np.ndarray
    names: tuple[str, ...] = field(default=())
    #: window kernels (forward pooling): threads per sample, serial loads per thread, elements
    #: between neighbouring threads' loads (0 where the layer has no such kernel)
    window_threads_fwd: np.ndarray = field(default_factory=lambda: np.zeros(0))
    window_loads_fwd: np.ndarray = field(default_factory=lambda: np.zeros(0))
    window_stride_fwd: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: elements a convolution's GEMM tiles load per element of their lowered operand
    #: (:func:`~perfmodel.cost.efficiency.im2col_loads`): the input (forward, weight gradient),
    #: the output gradient (data gradient), of the underlying convolution; 1 for linear layers
    x_loads: np.ndarray = field(default_factory=lambda: np.zeros(0))
    dy_loads: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: per sample, the input and output activation elements of a convolution, linear or product layer (the
    #: tensors each of its GEMM kernels reads and writes; zero for other layers)
    x_elems: np.ndarray = field(default_factory=lambda: np.zeros(0))
    y_elems: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: autograd's gradient sums into each layer's output (:mod:`.gradient_sums`), run before the
    #: layer's own backward: how many (one launch and one host op each) and the elements they move
    #: per sample; kept apart from the layer's own kernels, which a fusion may re-price
    grad_sums_bwd: np.ndarray = field(default_factory=lambda: np.zeros(0))
    grad_sum_elems_bwd: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: GEMMs per sample of a product of two activations (:mod:`.batched_matmul`: the micro-batch
    #: multiplies their count, not ``m``); zero for every other layer
    gemm_batch: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: the layers autocast runs in fp32 and the casts around them (:mod:`.autocast_fp32`)
    autocast: AutocastKernels | None = None


View = tuple[float, float, float, bool]


def _underlying(layer: Layer) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(input, output) shapes of the convolution underlying ``layer``: its own, or for a
    transposed layer those of the convolution whose input is the layer's output."""
    if layer.kind == "conv_transpose":
        return layer.out_shape, layer.in_shape
    return layer.in_shape, layer.out_shape


def _conv_views(layer: Layer) -> dict[str, View]:
    """(m, n, k, m grows with batch) of the three kernels of the convolution
    underlying ``layer`` (:func:`_underlying`)."""
    g, area = layer.groups, math.prod(layer.kernel)
    x, y = _underlying(layer)
    c, kk = x[0], y[0]
    out_sp = numel(y[1:])
    return {
        "fwd": (out_sp, kk / g, c / g * area, True),
        "wgrad": (kk / g, c / g * area, out_sp, False),
        # implicit GEMM over the zero-inserted output gradient (cuDNN BWD_DATA_ALGO_1)
        "dgrad": (out_sp, c / g, kk / g * area * zero_insert_factor(layer.stride), True),
    }


def _gemm_views(layer: Layer, first: bool) -> dict[str, View]:
    """(m, n, k, m grows with batch) of each GEMM kernel of ``layer``.

    A transposed convolution runs its underlying convolution's kernels with the roles of forward
    and data gradient swapped (PyTorch, ``aten/src/ATen/native/cudnn/ConvShared.cpp``:
    ``cudnn_convolution_transpose_forward`` calls ``cudnn_convolution_backward_input``, the
    transposed layer's input gradient is ``cudnn_convolution_forward``, and its weight gradient
    ``cudnn_convolution_backward_weight`` with input and output gradient swapped)."""
    if layer.kind == "linear":  # over the last dimension: the others are rows (tokens) of the GEMM
        fi, fo, rows = layer.in_shape[-1], layer.out_shape[-1], numel(layer.in_shape[:-1])
        views: dict[str, View] = {"fwd": (rows, fo, fi, True), "wgrad": (fo, fi, rows, False)}
        if not first:
            views["dgrad"] = (rows, fi, fo, True)
        return views
    conv = _conv_views(layer)
    if layer.kind == "conv_transpose":
        conv = {"fwd": conv["dgrad"], "dgrad": conv["fwd"], "wgrad": conv["wgrad"]}
    if first:
        del conv["dgrad"]
    return conv


def _dgrad_sum_view(layer: Layer) -> tuple[float, float]:
    """(n, k) of the data-gradient kernel of the convolution underlying ``layer`` (:func:`_underlying`)
    computed as a sum of matrix products.

    cuDNN's ``CUDNN_CONVOLUTION_BWD_DATA_ALGO_0`` (cuDNN API reference,
    ``cudnnConvolutionBwdDataAlgo_t``: "a sum of matrix products without actually explicitly
    forming the matrix that holds the input tensor data", summed with atomic adds) multiplies
    the output gradient (``N*P*Q x K``) by the filters (``K x C*R*S``) and adds each result tile
    into the input gradient at its filter tap: the same ``m`` as the implicit view, ``n =
    C*R*S``, ``k = K`` per group, the forward's FLOPs. Where ``C`` is small (a 1- or 3-channel
    first layer) its ``n`` fills the tiles that the implicit view's ``n = C`` cannot."""
    x, y = _underlying(layer)
    return x[0] / layer.groups * math.prod(layer.kernel), y[0] / layer.groups


def _memory_kernels(layer: Layer) -> tuple[float, float, float, float, int, int]:
    """(fwd elems, bwd elems, fwd extra bytes, bwd extra bytes, fwd launches, bwd launches) of the
    memory-bound kernels of ``layer`` (table in the module docstring), per sample."""
    n, kind = layer.out_elems, layer.kind
    n_in = sum(numel(s) for s in layer.in_shapes)
    if kind in ("conv", "conv_transpose", "linear"):
        return (2 * n, n, 0, 0, 1, 1) if layer.bias else (0, 0, 0, 0, 0, 0)
    if kind in NORM_KINDS:
        return norm_kernels(layer)
    # window reads of max-pool backward (each output's gradient and index, once per input of its
    # window), served by L2; a global (adaptive) window covers the whole input
    # an add passes dy on to each operand (PyTorch ``derivatives.yaml``, ``add.Tensor``: ``self: grad``);
    # autograd reduces a broadcast operand's gradient to its shape (``validate_outputs``: ``at::sum_to``)
    broadcast = [numel(s) for s in layer.in_shapes if numel(s) < n]
    reads = n * (math.prod(layer.kernel) if kind == "maxpool" and layer.kernel else n_in / max(n, 1)) / L2_OVER_DRAM
    table: dict[str, tuple[float, float, float, float, int, int]] = {
        # training forward also increments num_batches_tracked (torch.nn.BatchNorm2d docs): one more launch
        "batchnorm": (3 * n, 5 * n, 0, 0, 3, 2),
        "act": (2 * n, 3 * n, 0, 0, 1, 1),
        "lrn": (2 * n, 4 * n, 0, 0, 1, 1),
        "dropout": (2 * n, 2 * n, n, n, 1, 1),
        "add": (3 * n, n * len(broadcast) + sum(broadcast), 0, 0, 1, len(broadcast)),
        "maxpool": (n_in + n, 2 * n_in + reads, INDEX_BYTES * n, INDEX_BYTES * reads, 1, 2),
        "adaptive_maxpool": (n_in + n, 2 * n_in + reads, INDEX_BYTES * n, INDEX_BYTES * reads, 1, 2),
        "avgpool": (n_in + n, AVGPOOL_BWD_PASSES * (n_in + n), 0, 0, 1, 1),
        "adaptive_avgpool": (n_in + n, n_in + n, 0, 0, 1, 1),
        "concat": (2 * n, 0, 0, 0, 1, 0),
        "upsample": (n_in + n, 2 * n_in + n, 0, 0, 1, 2),
    }
    return table.get(kind, (0, 0, 0, 0, 0, 0))


#: Pooling kinds whose forward kernel runs one thread per output walking its window.
WINDOW_KINDS = ("maxpool", "avgpool", "adaptive_maxpool", "adaptive_avgpool")


def _window_kernel(layer: Layer) -> tuple[float, float, float]:
    """(threads per sample, serial loads per thread, elements between neighbouring threads' loads)
    of ``layer``'s forward window kernel; zeros where it has none. Adaptive average pooling to one
    output per plane is a mean reduction in PyTorch (``adaptive_avg_pool2d`` calls ``mean`` for a
    1x1 output), which splits each plane over a warp: no window kernel."""
    if layer.kind not in WINDOW_KINDS:
        return 0.0, 0.0, 0.0
    n = float(layer.out_elems)
    n_in = float(sum(numel(s) for s in layer.in_shapes))
    ratio = n_in / max(n, 1.0)
    spatial = len(layer.out_shape) >= 3 and len(layer.in_shape) >= 3
    out_plane = numel(layer.out_shape[1:]) if spatial else 0
    if layer.kind == "adaptive_avgpool" and (out_plane == 1 or not spatial):
        return 0.0, 0.0, 0.0
    window = float(math.prod(layer.kernel)) if layer.kind in ("maxpool", "avgpool") and layer.kernel else ratio
    if spatial:  # neighbouring outputs along a row, or (one output per plane) along the channels
        stride = float(layer.stride[-1]) if out_plane > 1 and layer.stride else numel(layer.in_shape[1:])
        if out_plane > 1 and not layer.stride:
            stride = math.sqrt(ratio)
    else:  # flat shapes (measured rows): the input-to-output ratio is the stride squared
        stride = math.sqrt(ratio)
    return n, window, max(stride, 1.0)


#: (c_in, c_out), (in, out elements), GEMM views, conv, transposed, im2col loads, sum view (n, k),
#: output (h, w), depthwise, Winograd shape: a weight layer's columns of :class:`LayerKernels`
_WeightGemm = tuple[tuple[float, float], tuple[float, float], dict[str, View], bool, bool, tuple[float, float],
                    tuple[float, float], tuple[float, float], bool, bool]


def _weight_gemm_columns(layer: Layer, first: bool) -> _WeightGemm:
    """The GEMM columns of a layer with a weight (``first``: it reads only the network input)."""
    ax = -1 if layer.kind == "linear" else 0  # features on the last dimension, channels on the first
    conv = layer.kind != "linear"
    transposed = layer.kind == "conv_transpose"
    # the underlying convolution's operands (a transposed layer's forward is its dgrad)
    loads = im2col_loads(layer.kernel, layer.stride) if conv else (1.0, 1.0)
    sum_view = _dgrad_sum_view(layer) if transposed or (layer.kind == "conv" and not first) else (0.0, 0.0)
    planar = conv and len(layer.out_shape) == 3
    out_hw = (float(layer.out_shape[1]), float(layer.out_shape[2])) if planar else (1.0, 1.0)
    depthwise = (layer.kind == "conv" and len(layer.kernel) == 2 and layer.groups > 1
                 and layer.in_shape[0] // layer.groups <= DEPTHWISE_MAX_CPG)
    winograd = (
        conv and len(layer.kernel) == 2
        and all(s == 1 for s in layer.stride) and all(d == 1 for d in (layer.dilation or (1, 1)))
        and tuple(layer.kernel) in ((3, 3), (5, 5))
    )
    return ((float(layer.in_shape[ax]), float(layer.out_shape[ax])), (float(numel(layer.in_shape)),
            float(layer.out_elems)), _gemm_views(layer, first), conv, transposed, loads, sum_view, out_hw,
            depthwise, winograd)


def layer_kernels(layers: Sequence[Layer], first: Sequence[bool], one_network: bool = True) -> LayerKernels:
    """The kernel descriptors of ``layers`` (``first[i]``: layer i reads only the network input,
    so it computes no data gradient). ``one_network``: the layers are one network's, so a tensor
    several of them read forks and its gradients are summed (:mod:`.gradient_sums`); False: they
    are unrelated problems (measured rows priced together, whose tensor names mean nothing across
    rows), each layer's operands read by that layer alone."""
    L = len(layers)
    z = {s: np.zeros(L) for s in MM_SLOTS}
    m, n, k = ({s: a.copy() for s, a in z.items()} for _ in range(3))
    mb = {s: np.zeros(L, dtype=bool) for s in MM_SLOTS}
    cols = {c: np.zeros(L) for c in ("groups", "c_in", "c_out", "mf", "mb", "xf", "xb", "lf", "lb", "hf", "hb", "sd")}
    wino = np.zeros(L, dtype=bool)
    out_hw = np.ones((2, L))
    dw = np.zeros(L, dtype=bool)
    conv = np.zeros(L, dtype=bool)
    sum_nk = np.zeros((2, L))
    transposed = np.zeros(L, dtype=bool)
    win = np.zeros((3, L))
    loads = np.ones((2, L))
    xy = np.zeros((2, L))
    bmm = np.zeros(L)
    sums = extra_gradients(layers, one_network)
    for i, layer in enumerate(layers):
        win[:, i] = _window_kernel(layer)
        cols["groups"][i] = layer.groups
        cols["sd"][i] = layer.spatial_dims
        if layer.kind in ("conv", "conv_transpose", "linear"):
            (cols["c_in"][i], cols["c_out"][i]), xy[:, i], views, conv[i], transposed[i], loads[:, i], \
                sum_nk[:, i], out_hw[:, i], dw[i], wino[i] = _weight_gemm_columns(layer, first[i])
            for s, (mm_, nn_, kk_, grows) in views.items():
                m[s][i], n[s][i], k[s][i], mb[s][i] = mm_, nn_, kk_, grows
        mf, mbw, xf, xb, lf, lb = _memory_kernels(layer)
        if layer.kind in PRODUCT_KINDS:  # batched GEMMs of two activations (batched_matmul.py)
            grads = tuple(t != "input" for t in layer.inputs)
            for s, (mm_, nn_, kk_, grows) in product_views(layer, grads).items():
                m[s][i], n[s][i], k[s][i], mb[s][i] = mm_, nn_, kk_, grows
            cols["c_in"][i], cols["c_out"][i] = operand_features(layer)
            xy[:, i], bmm[i] = (sum(numel(s) for s in layer.in_shapes), layer.out_elems), gemm_batch(layer)
            mf, mbw, xf, xb, lf, lb = product_memory(layer, grads)
        host_f = 2 if layer.kind == "batchnorm" else 1  # + the num_batches_tracked increment
        if layer.kind == "mul":  # SE scaling
            mf, mbw, lf, lb, host_f = mul_kernels(layer)
        cols["mf"][i], cols["mb"][i], cols["xf"][i], cols["xb"][i] = mf, mbw, xf, xb
        cols["lf"][i] = lf + (1 if n["fwd"][i] else 0)
        cols["lb"][i] = lb + sum(1 for s in ("dgrad", "wgrad") if n[s][i])
        # host: one op per layer forward, one autograd node backward (a view too: it launches no
        # kernel but is dispatched and recorded like any op)
        cols["hf"][i] = host_f
        cols["hb"][i] = 1
    return LayerKernels(
        m=m, n=n, k=k, m_batch=mb, groups=cols["groups"], c_in=cols["c_in"],
        c_out=cols["c_out"], winograd_shape=wino, out_h=out_hw[0], out_w=out_hw[1], depthwise=dw, conv=conv,
        dgrad_sum_n=sum_nk[0], dgrad_sum_k=sum_nk[1],
        transposed=transposed,
        mem_elems_fwd=cols["mf"], mem_elems_bwd=cols["mb"], mem_bytes_extra_fwd=cols["xf"],
        mem_bytes_extra_bwd=cols["xb"], launches_fwd=cols["lf"], launches_bwd=cols["lb"],
        host_ops_fwd=cols["hf"], host_ops_bwd=cols["hb"], spatial_dims=cols["sd"],
        names=tuple(layer.name for layer in layers),
        window_threads_fwd=win[0], window_loads_fwd=win[1], window_stride_fwd=win[2],
        x_loads=loads[0], dy_loads=loads[1], x_elems=xy[0], y_elems=xy[1],
        grad_sums_bwd=sums, grad_sum_elems_bwd=SUM_PASSES * sums * np.array([la.out_elems for la in layers], float),
        gemm_batch=bmm, autocast=autocast_kernels(layers, one_network),
    )


def slot_roles(lk: LayerKernels, s: str) -> np.ndarray:
    """Per layer, which kernel of its underlying convolution GEMM slot ``s`` runs: a transposed
    layer's forward is the convolution's data gradient and its data gradient the convolution's
    forward (:func:`_gemm_views`)."""
    swap = {"fwd": "dgrad", "dgrad": "fwd"}.get(s, s)
    return np.where(lk.transposed, swap, s)


@lru_cache(maxsize=64)
def network_kernels(net: Network) -> LayerKernels:
    """:func:`layer_kernels` of every layer of ``net`` (cached per network)."""
    first = [all(t == "input" for t in layer.inputs) for layer in net.layers]
    return layer_kernels(net.layers, first)

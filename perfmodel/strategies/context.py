"""What pricing needs of a (network, hardware, precision, optimizer), and the batch split of a plan."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from ..cost.collectives import Group
from ..cost.compute import ComputeValues, LayerTimes, layer_times
from ..cost.cudnn_gpus import check_cudnn_for_gpu
from ..cost.fusion import DEFAULT_FUSION, check_fusion_setting
from ..cost.grouped import DEFAULT_CUDNN_MAJOR, check_cudnn_major
from ..cost.layout import DEFAULT_MEMORY_FORMAT, check_memory_format
from ..errors import BatchSplitError
from ..hardware import Hardware, check_precision
from ..network import Network, compile_counts
from ..network.counts import CompiledCounts
from ..units import BYTES_PER_ELEMENT
from .amp_runtime import DEFAULT_AMP_RUNTIME, check_amp_runtime, runtime_of
from .memory import grad_bytes_per_param, input_batch_bytes, input_bytes_per_element, optimizer_bytes_per_param
from .priced import Priced
from .spec import Strategy

__all__ = ["Context", "context", "clear_contexts", "split_batch", "transient_bytes", "weight_group"]


@dataclass(frozen=True, eq=False)
class Context:
    """What pricing needs of a (network, hardware, precision, optimizer): compiled counts and masks."""

    net: Network
    cc: CompiledCounts
    hw: Hardware
    precision: str
    optimizer: str
    link_starts: np.ndarray
    cut_elems: np.ndarray
    #: every layer's forward and backward seconds are multiplied by this (1 unless fitted to a
    #: network's own 1-GPU run: perfmodel.validation.calibrate_group). It scales what a 1-GPU
    #: run measures, the layers' kernels or host dispatch, and what is built from them
    #: (recomputation; a pipeline bubble by its compute share; filter/channel splits' sharded
    #: layers, through :meth:`scaled`), never the exchanges, NCCL contention, bucket copies,
    #: transfers, optimizer step or step overhead, of which a 1-GPU run says little or nothing.
    compute_scale: float = 1.0
    #: the cuDNN major version the run's framework uses: before 8, grouped convolutions run one
    #: kernel per group (perfmodel.cost.grouped); a stated assumption of every output
    cudnn_major: int = DEFAULT_CUDNN_MAJOR
    #: the activations' layout, nchw (PyTorch's default) or nhwc: under nchw cuDNN transposes the
    #: tensors of every tensor-core convolution (perfmodel.cost.layout); a stated assumption
    memory_format: str = DEFAULT_MEMORY_FORMAT
    #: the batch-norm/add/ReLU chains the run's framework fuses (perfmodel.cost.fusion; eager: none)
    fusion: str = DEFAULT_FUSION
    #: the mixed-precision runtime of a 16-bit run (perfmodel.strategies.amp_runtime: which casts,
    #: loss scaler and weight copies it launches; default PyTorch autocast)
    amp_runtime: str = DEFAULT_AMP_RUNTIME
    memo: dict[tuple[float, tuple[int, int, int]], tuple[LayerTimes, dict[str, np.ndarray]]] = field(
        default_factory=dict, repr=False
    )
    #: priced plans by (plan, global batch), :func:`~.compose.price`'s memo: the searches of one
    #: sweep (scale's kinds at a GPU count, its baselines) price many of the same plans
    priced: dict[tuple[Strategy, int], Priced] = field(default_factory=dict, repr=False)
    #: (tiles any link, fits) of spatial plans by (plan, global batch): :func:`~.compose.tiles_and_fits`'s memo
    tiled: dict[tuple[Strategy, int], tuple[bool, bool]] = field(default_factory=dict, repr=False)

    @property
    def elem_bytes(self) -> int:
        return BYTES_PER_ELEMENT[self.precision]

    @property
    def param_bytes(self) -> int:
        """Bytes of one element of a parameter's gradient, DDP bucket and optimizer state (their
        dtype is the parameter's): 4, or 2 in a 16-bit model (:func:`~.memory.half_model`)."""
        return grad_bytes_per_param(self.precision, self.amp_runtime)

    def input_bytes(self, samples: float) -> float:
        """Bytes of ``samples`` network inputs on one GPU, fp32, or 16-bit for a 16-bit model
        (:func:`~.memory.input_batch_bytes`, :func:`~.memory.input_bytes_per_element`)."""
        return input_batch_bytes(self.net.input_shape, samples,
                                 bytes_per_element=input_bytes_per_element(self.precision, self.amp_runtime))

    @property
    def autocast(self) -> bool:
        """Whether ``torch.autocast`` (or TensorFlow's AMP rewrite) runs the 16-bit precision, so
        autocast's fp32 ops run at fp32; False for a 16-bit model (:mod:`.amp_runtime`)."""
        return runtime_of(self.amp_runtime).casts

    @property
    def values(self) -> ComputeValues:
        """The profile's compute numbers at the precision (the formulas' hardware inputs)."""
        return ComputeValues.of(self.hw, self.precision)

    def times(self, batch: float, grid: tuple[int, int, int] = (1, 1, 1)) -> tuple[LayerTimes, dict[str, np.ndarray]]:
        """Per-layer times and counts at ``batch`` on a tile of ``grid`` (memoised per context)."""
        key = (float(batch), (grid[0], grid[1], grid[2]))
        hit = self.memo.get(key)
        if hit is None:
            ev = self.cc.evaluate(batch, *grid)
            lt = layer_times(self.cc, self.hw, self.precision, batch, *grid, counts=ev, cudnn_major=self.cudnn_major,
                             memory_format=self.memory_format, fusion=self.fusion, autocast=self.autocast)
            hit = (self.scaled(lt), ev)
            if len(self.memo) > 256:
                self.memo.clear()
            self.memo[key] = hit
        return hit

    def scaled(self, lt: LayerTimes) -> LayerTimes:
        """``lt`` times :attr:`compute_scale` (``lt`` itself at 1)."""
        if self.compute_scale == 1.0:
            return lt
        return LayerTimes(lt.fwd * self.compute_scale, lt.bwd * self.compute_scale)

    def link_sum(self, per_layer: np.ndarray) -> np.ndarray:
        """Per chain link, the sum of a per-layer array over the link's layers."""
        return np.add.reduceat(per_layer, self.link_starts)


def context(net: Network, hw: Hardware, precision: str, optimizer: str, compute_scale: float = 1.0,
            cudnn_major: int = DEFAULT_CUDNN_MAJOR, memory_format: str = DEFAULT_MEMORY_FORMAT,
            reference: bool = False, fusion: str = DEFAULT_FUSION,
            amp_runtime: str = DEFAULT_AMP_RUNTIME) -> Context:
    """The pricing context (layer seconds times ``compute_scale``, :attr:`Context.compute_scale`;
    grouped convolutions as cuDNN ``cudnn_major`` runs them; activations in ``memory_format``);
    unknown precisions, optimizers, cuDNN versions and memory formats are usage errors, and so is
    a cuDNN that never ran on ``hw``'s GPU (:mod:`perfmodel.cost.cudnn_gpus`) unless ``reference``
    (a shipped profile that only ranks candidates for another profile's plan, no run of its own);
    ``fusion``: the batch-norm/add/ReLU chains the run's framework fuses (:mod:`perfmodel.cost.fusion`),
    a usage error where its kernels cannot run at ``precision`` in ``memory_format``;
    ``amp_runtime``: the mixed-precision runtime (:mod:`.amp_runtime`)."""
    check_cudnn_major(cudnn_major)
    if not reference:
        check_cudnn_for_gpu(int(cudnn_major), hw)
    check_memory_format(memory_format)
    check_amp_runtime(amp_runtime)
    check_precision(precision)
    check_fusion_setting(fusion, precision, memory_format)
    optimizer_bytes_per_param(optimizer)  # validates
    key = (id(net), id(hw), precision, optimizer, float(compute_scale), int(cudnn_major), memory_format, fusion,
           amp_runtime)
    hit = _CONTEXTS.get(key)
    if hit is not None and hit[0] is net and hit[1] is hw:
        _CONTEXTS.move_to_end(key)
        return hit[2]
    cc = compile_counts(net)
    starts = np.array([lk.start for lk in net.links])
    cut = np.array([lk.cut_elems_per_sample for lk in net.links], dtype=float)
    ctx = Context(net, cc, hw, precision, optimizer, starts, cut, compute_scale, int(cudnn_major),
                  memory_format, fusion, amp_runtime)
    _CONTEXTS[key] = (net, hw, ctx)
    while len(_CONTEXTS) > CONTEXTS_KEPT:
        _CONTEXTS.popitem(last=False)
    return ctx


#: Contexts :func:`context` keeps, the latest used: calls with the same network and profile
#: objects and settings share one, and with it its memoised layer times and priced plans (a
#: loop of ``predict`` calls in a notebook prices each micro-batch's layers once).
CONTEXTS_KEPT = 8
def clear_contexts() -> None:
    """Forget the contexts :func:`context` keeps (after changing what pricing reads in place)."""
    _CONTEXTS.clear()


#: :func:`context`'s contexts by argument (network and profile by identity; the entry holds both,
#: so neither id can be reused by another object while it is kept)
_CONTEXTS: OrderedDict[tuple[object, ...], tuple[Network, Hardware, Context]] = OrderedDict()


def split_batch(global_batch: int, s: Strategy) -> tuple[int, int]:
    """(samples per data-parallel replica, largest micro-batch)."""
    if global_batch < 1:
        raise BatchSplitError(f"global batch must be >= 1, got {global_batch}")
    if global_batch % s.dp:
        lo = global_batch // s.dp * s.dp
        hint = f"{lo} or {lo + s.dp}" if lo else f"{s.dp}"
        raise BatchSplitError(
            f"global batch {global_batch} does not split over dp={s.dp} replicas "
            f"(use a multiple of {s.dp}, e.g. {hint})"
        )
    per_replica = global_batch // s.dp
    if s.mb > per_replica:
        raise BatchSplitError(
            f"{per_replica} samples per replica cannot make mb={s.mb} micro-batches (valid: mb <= {per_replica})"
        )
    return per_replica, math.ceil(per_replica / s.mb)


def transient_bytes(ctx: Context, m: int, grid: tuple[int, int, int] = (1, 1, 1)) -> float:
    """The gradients of the largest layer's output and input, which live during its backward
    (the tensors themselves are saved activations, counted there)."""
    _, ev = ctx.times(m, grid)
    out = ev["out_elems"]
    return float(2 * out.max() * ctx.elem_bytes)


def weight_group(s: Strategy, gpus_per_node: int) -> Group:
    """The GPUs that share each weight (dp replicas x spatial tiles) and how many sit in one node.

    Spatial tiles are the innermost ranks, then pipeline stages, then replicas, so replicas
    of one stage are ``sp * pp`` ranks apart.
    """
    g = gpus_per_node
    share = s.dp * s.sp_degree
    stride = s.sp_degree * s.pp
    per_node = min(share, min(s.sp_degree, g) * (max(1, min(s.dp, g // stride)) if stride < g else 1))
    return Group(share, max(1, per_node), sharing=g)

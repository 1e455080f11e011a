"""Kernel fusion of batch norm, residual add and ReLU by the run's framework (default: none, eager PyTorch).

:mod:`perfmodel.cost.kernels` lists the kernels eager PyTorch launches: batch norm, the residual
add and the ReLU each read and write their tensors (forward ``3n`` / ``3n`` / ``2n`` elements,
backward ``5n`` / none / ``3n``, ``n`` the output's elements). Some frameworks run these chains
as fewer kernels. A fusion, named by :data:`FUSIONS`, re-prices each chain it fuses: a batch norm
whose output only a ReLU reads (``bn-relu``), or a batch norm whose output only an add reads,
whose output only a ReLU reads (``bn-add-relu``: the add's other input is the residual; which of
the add's inputs may be the batch norm depends on the fusion, "Which add" below). Other layers,
and other activations, keep their eager kernels.

``eager`` (the default: PyTorch without ``torch.compile``): nothing fused, today's prices exactly.

``mxnet-bn-add-relu``: NVIDIA's MXNet (NGC containers) with DeepLearningExamples'
``--fuse-bn-relu 1 --fuse-bn-add-relu 1``. ``MxNet/Classification/RN50v1.5/models.py`` builds
``nn.BatchNorm(act_type='relu')`` and ``BatchNormAddRelu`` (``F.BatchNormAddRelu(data, addend)``)
when those flags are set (both default 0), and ``runner`` passes them only with ``--dtype float16``,
together with ``--batchnorm-layout NHWC`` (both at 70c51ad7f811b020ddd741ea2c6ce5a573bad963). NGC
MXNet runs them as NVIDIA's NHWC batch-norm kernels (``src/operator/nn/cudnn/nhwc_batch_norm_add_relu.h``
and ``nhwc_batch_norm_kernel.h`` in NVIDIA's MXNet, e.g. the lanchongyizu/ngc-mxnet mirror at
5d7f1cd6): one cooperative kernel forward (``nhwc_batch_norm_fwd`` with ``USE_RELU`` /
``USE_ADD_RELU``: statistics, grid-wide sync, normalise, add the ``addend``, ReLU, and a 1-bit
ReLU mask out) and one backward (``nhwc_batch_norm_bwd_add_relu``: gradient gated by the mask,
both reductions, ``dX`` and ``dAddend`` out), fp16 NHWC only (``Supports``: ``kFloat16``,
``axis == 3``, channels a multiple of 4). The kernel keeps up to 15 pixels per thread of its
input in registers and shared memory (``PIXELS_PER_THREAD_IN_REGISTERS_FWD`` 5 +
``_IN_SMEM_FWD`` 10, 512 threads, 16 threads per pixel, 64 channels per CTA; a cooperative
launch keeps every CTA resident: on a V100 80 SMs x 2 - 12 = 148 CTAs, about 4.5M elements in
all), far fewer than one of ResNet-50's 56x56 or 28x28 batch norms holds at 192-256 samples
(28 x 28 x 512 x 256 = 103M), so the input is priced as read twice (statistics, then normalise),
as in the eager batch norm; what fusion saves
is the intermediate tensors' writes and re-reads and the launches. Per chain (``e`` bytes per element):

===========  ==========================================  ==============================================
chain        forward                                      backward
===========  ==========================================  ==============================================
bn-relu      x twice, y once (``3n``) + mask ``n/8`` B;   dy and x twice, dx once (``5n``), mask read
             1 launch (eager ``5n``, 4 launches)          twice; 1 launch (eager ``8n``, 3 launches)
bn-add-relu  as bn-relu + the residual once (``4n``);     as bn-relu + ``dAddend`` written (``n``): ``6n``;
             1 launch (eager ``8n``, 5 launches)          1 launch (eager ``8n``, 3 launches)
===========  ==========================================  ==============================================

Autograd's sum of the block input's gradients (shortcut + body, ``3n``, one launch) stays where
that input is produced, whatever the fusion (:mod:`.gradient_sums`; the frameworks add the
gradients of a tensor read twice too).

``xla``: TensorFlow with XLA (``--xla``). XLA's GPU compiler decomposes batch norm into
reductions and element-wise ops (``BatchNormExpander`` in ``xla/service/gpu/gpu_compiler.cc``;
``xla_gpu_use_cudnn_batchnorm`` defaults to false in ``debug_options_flags.cc``: "it does not
provide a performance win on average") and fuses element-wise ops into the kernels that produce
or consume their operands (XLA's overview, "XLA: Optimizing Compiler for Machine Learning",
tensorflow.org/xla: fusion is "XLA's single most important optimization" because memory
bandwidth is the scarcest resource; its example fuses a multiply, an add and a reduction into one
kernel that does not write the intermediate values to memory but streams them to their users in
registers): the statistics are one reduction fusion (x once) and the
normalisation, residual add and ReLU one loop fusion (x and the residual once, y written once).
Backward, the ReLU's gradient is fused into the batch norm's reduction and ``dx`` fusions, each of
which then reads the ReLU's saved output to rebuild the mask (``+2n``), and the residual's
gradient is written by one of them (``+n``):

===========  ==========================================  ==============================================
chain        forward                                      backward
===========  ==========================================  ==============================================
bn-relu      ``3n``, 2 launches (eager ``5n``, 4)        ``7n``, 2 launches (eager ``8n``, 3)
bn-add-relu  ``4n``, 2 launches (eager ``8n``, 5)        ``8n``, 2 launches (eager ``8n``, 3)
===========  ==========================================  ==============================================

Where each runs (:data:`RUNS_IN`, checked by :func:`check_fusion_setting` for every priced run):
``mxnet-bn-add-relu`` at ``amp`` in ``nhwc`` only, as its kernels' ``Supports`` (``kFloat16``,
``axis == 3``) and the runner's flags (float16 with NHWC layouts) say; ``eager`` and ``xla`` at any
precision and memory format (XLA's fusion pass works on HLO whatever the element type and layout:
the TensorFlow XLA rows it prices are fp32, tf32 and amp, NCHW and NHWC).

Which add: ``mxnet-bn-add-relu`` fuses what DeepLearningExamples' residual block calls, the
body's last batch norm with the shortcut as the ``addend``; MXNet has no graph pass that finds
other batch norms (its pointwise fusion leaves batch norm alone), so the batch norm must be the
add's first input, the block's body (the zoo, like torchvision's ``out + identity``, writes the
body first). In a squeeze-and-excitation block the body ends in the SE multiply, so the add,
the ReLU and, in the down-sampling blocks, the shortcut's batch norm stay eager
(``se_resnext101_32x4d``: the 33 blocks' bn-relu chains fuse, no bn-add-relu). XLA expands every
batch norm into element-wise ops and fuses them with whatever element-wise op reads them, so under
``xla`` the batch norm may be either input: in SE-ResNeXt's 4 down-sampling blocks the shortcut's
batch norm, the add and the ReLU are one loop fusion (the SE multiply, which XLA fuses into it
too, is priced eager as its own kernel, below).

Host ops: a fused-away layer dispatches nothing of its own; the batch norm keeps its eager count.
Squeeze-and-excitation chains (sigmoid, broadcast multiply) and activations other than ReLU are
left eager under every fusion (XLA fuses them too; not priced here). Memory (saved activations) is
unchanged: only compute time is re-priced. The hypergraph layer partition (``mp=``) weighs its
layers as eager PyTorch runs them whatever the fusion (:mod:`perfmodel.partition`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import UsageError
from ..network.graph import Network
from .kernels import LayerKernels

__all__ = ["FUSIONS", "DEFAULT_FUSION", "RUNS_IN", "check_fusion", "check_fusion_setting", "fusion_assumption",
           "fused_chains", "with_fusion", "own_arithmetic", "Chain", "ChainPrice"]

#: The fusions perfmodel prices (module docstring).
FUSIONS: tuple[str, ...] = ("eager", "mxnet-bn-add-relu", "xla")
#: The precisions and memory formats a fusion's kernels run in, where it is limited (module
#: docstring, "Where each runs"): NVIDIA's NHWC batch-norm kernels are fp16 NHWC only.
RUNS_IN: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {"mxnet-bn-add-relu": (("amp",), ("nhwc",))}
#: Eager PyTorch: every kernel of :mod:`perfmodel.cost.kernels` runs on its own.
DEFAULT_FUSION = "eager"
#: Bytes of the ReLU mask per element (one bit: NVIDIA's NHWC batch-norm kernels' ``relu_bitmask``).
MASK_BYTES_PER_ELEM = 1.0 / 8.0


@dataclass(frozen=True)
class Chain:
    """One fused chain: layer indices of its batch norm, add (-1: none) and ReLU."""

    bn: int
    add: int
    act: int


@dataclass(frozen=True)
class ChainPrice:
    """A fused chain's kernels per element of its output (module docstring tables): elements moved
    and launches forward / backward, booked on the batch norm (``bn_*``) and the add (``add_*``:
    the residual's read and, backward, the residual's gradient);
    ``mask_reads``: 1-bit mask bytes, written once forward, read this many times backward."""

    bn_fwd: float
    bn_bwd: float
    bn_launches_fwd: float
    bn_launches_bwd: float
    add_fwd: float
    add_bwd: float
    add_launches_bwd: float
    mask_reads: float


#: Fusions whose bn-add-relu kernel takes the batch norm of the block's body only (the add's first
#: input), the shortcut as its addend (module docstring, "Which add").
_BODY_ONLY = frozenset({"mxnet-bn-add-relu"})

_PRICES: dict[str, ChainPrice] = {
    "mxnet-bn-add-relu": ChainPrice(3.0, 5.0, 1.0, 1.0, 1.0, 1.0, 0.0, 2.0),
    "xla": ChainPrice(3.0, 7.0, 2.0, 2.0, 1.0, 1.0, 0.0, 0.0),
}


def check_fusion(fusion: object) -> str:
    """``fusion`` if perfmodel knows it, else a :class:`~perfmodel.errors.UsageError` naming the choices."""
    if not isinstance(fusion, str) or fusion not in FUSIONS:
        raise UsageError(f"unknown fusion {fusion!r} (valid: {', '.join(FUSIONS)})")
    return fusion


def check_fusion_setting(fusion: str, precision: str, memory_format: str) -> str:
    """``fusion`` if its kernels run at ``precision`` in ``memory_format`` (:data:`RUNS_IN`), else a
    :class:`~perfmodel.errors.UsageError` naming the precision and memory format it needs."""
    need = RUNS_IN.get(check_fusion(fusion))
    if need is not None and (precision not in need[0] or memory_format not in need[1]):
        anywhere = " or ".join(f for f in FUSIONS if f not in RUNS_IN)
        raise UsageError(
            f"fusion {fusion} runs at precision {'/'.join(need[0])} in memory format {'/'.join(need[1])} only "
            f"(NVIDIA's fp16 NHWC batch-norm kernels), not {precision} {memory_format}: use --precision "
            f"{need[0][0]} --memory-format {need[1][0]}, or --fusion {anywhere}")
    return fusion


def fusion_assumption(fusion: str) -> str:
    """The fusion in words, for outputs' assumptions."""
    how = {
        "eager": "batch norm, residual add and ReLU run as separate kernels (eager PyTorch)",
        "mxnet-bn-add-relu": "batch norm + ReLU and batch norm + add + ReLU run as one kernel each way "
                             "(NGC MXNet --fuse-bn-relu/--fuse-bn-add-relu, fp16 NHWC)",
        "xla": "ReLU and residual add fused into the batch norm's kernels (TensorFlow with XLA)",
    }[fusion]
    return f"fusion {fusion}: {how}; set --fusion to the run's (valid: {', '.join(FUSIONS)})"


def fused_chains(net: Network, fusion: str) -> tuple[Chain, ...]:
    """The bn-relu and bn-add-relu chains ``fusion`` fuses in ``net`` (module docstring): each
    intermediate tensor read by the next layer of the chain only; under ``mxnet-bn-add-relu`` the
    add's batch norm must be its first input (the block's body), under ``xla`` either input;
    none under ``eager``."""
    if check_fusion(fusion) == DEFAULT_FUSION:
        return ()
    body_only = fusion in _BODY_ONLY
    index = {layer.name: i for i, layer in enumerate(net.layers)}
    readers = Counter(t for layer in net.layers for t in layer.inputs)
    layers = net.layers

    def only_reader(name: str) -> bool:
        return name in index and readers[name] == 1

    chains = []
    for i, act in enumerate(layers):
        if act.kind != "act" or act.fn != "relu" or len(act.inputs) != 1 or not only_reader(act.inputs[0]):
            continue
        src = index[act.inputs[0]]
        if layers[src].kind == "batchnorm":
            chains.append(Chain(src, -1, i))
        elif layers[src].kind == "add" and len(layers[src].inputs) == 2:
            ins = layers[src].inputs[:1] if body_only else layers[src].inputs
            bns = [index[t] for t in ins if only_reader(t) and layers[index[t]].kind == "batchnorm"]
            if bns:
                chains.append(Chain(bns[0], src, i))
    return tuple(chains)


def with_fusion(lk: LayerKernels, net: Network, fusion: str) -> LayerKernels:
    """``lk`` (the kernels of ``net``) with the chains ``fusion`` fuses re-priced; ``lk`` itself
    under ``eager`` or where ``net`` has no such chain."""
    if check_fusion(fusion) == DEFAULT_FUSION:
        return lk
    return _fused(lk, net, fusion)


@lru_cache(maxsize=64)
def own_arithmetic(net: Network, fusion: str) -> tuple[np.ndarray, np.ndarray]:
    """Per layer, 1.0 where its element-wise arithmetic (forward, backward) runs as a kernel of its
    own, 0.0 where ``fusion`` folds it into a chain's fused kernel, whose time its bytes set (a ReLU
    or add does one operation per element against at least two elements moved)."""
    fwd, bwd = np.ones(len(net.layers)), np.ones(len(net.layers))
    if check_fusion(fusion) != DEFAULT_FUSION:
        for c in fused_chains(net, fusion):
            fwd[c.act] = bwd[c.act] = 0.0
            if c.add >= 0:
                fwd[c.add] = 0.0
    return fwd, bwd


@lru_cache(maxsize=64)
def _fused(lk: LayerKernels, net: Network, fusion: str) -> LayerKernels:
    """:func:`with_fusion` past the eager case (cached per kernels, network and fusion)."""
    chains = fused_chains(net, fusion)
    if not chains:
        return lk
    p = _PRICES[fusion]
    f = {name: np.array(getattr(lk, name), dtype=float, copy=True) for name in (
        "mem_elems_fwd", "mem_elems_bwd", "mem_bytes_extra_fwd", "mem_bytes_extra_bwd",
        "launches_fwd", "launches_bwd", "host_ops_fwd", "host_ops_bwd")}
    for c in chains:
        n = float(net.layers[c.act].out_elems)
        for i in (c.act, c.add):  # the fused-away layers: no kernels or ops of their own
            if i >= 0:
                for name in f:
                    f[name][i] = 0.0
        f["mem_elems_fwd"][c.bn], f["mem_elems_bwd"][c.bn] = p.bn_fwd * n, p.bn_bwd * n
        f["launches_fwd"][c.bn], f["launches_bwd"][c.bn] = p.bn_launches_fwd, p.bn_launches_bwd
        f["mem_bytes_extra_fwd"][c.bn] = MASK_BYTES_PER_ELEM * n if p.mask_reads else 0.0
        f["mem_bytes_extra_bwd"][c.bn] = p.mask_reads * MASK_BYTES_PER_ELEM * n
        if c.add >= 0:  # the residual's read; backward the residual's gradient
            f["mem_elems_fwd"][c.add], f["mem_elems_bwd"][c.add] = p.add_fwd * n, p.add_bwd * n
            f["launches_bwd"][c.add] = p.add_launches_bwd
            f["host_ops_bwd"][c.add] = lk.host_ops_bwd[c.add]
    return dataclasses.replace(
        lk, mem_elems_fwd=f["mem_elems_fwd"], mem_elems_bwd=f["mem_elems_bwd"],
        mem_bytes_extra_fwd=f["mem_bytes_extra_fwd"], mem_bytes_extra_bwd=f["mem_bytes_extra_bwd"],
        launches_fwd=f["launches_fwd"], launches_bwd=f["launches_bwd"],
        host_ops_fwd=f["host_ops_fwd"], host_ops_bwd=f["host_ops_bwd"])

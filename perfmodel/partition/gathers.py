"""The copies a channel partition adds: packing channel blocks into contiguous buffers.

A part runs one kernel per layer over the channels it holds (:mod:`perfmodel.partition.loads`),
so its output channels of a layer sit in one buffer of their own, in channel order: a *source
buffer*. A layer reads a tensor as one contiguous buffer (PyTorch's convolutions and batch norm
call ``.contiguous()`` on their input; an elementwise kernel could read a strided slice in place,
so for it this is an upper bound), and a message between parts is one
contiguous buffer too: NCCL's ``ncclSend``/``ncclRecv`` take a pointer and an element count,
and ``torch.distributed``'s NCCL backend refuses non-contiguous tensors. Two copies follow:

* **gather** (on the reading part): a block whose channels of a tensor are not exactly one
  source buffer (its own part's holds more or other channels, or they come from several parts)
  is assembled by ``torch.cat`` of the runs, each run a slice of one buffer (its own part's, or
  one received from another part, which holds just what that part sends);
* **pack** (on the sending part): what a reading part needs of its buffer, when that is not the
  whole buffer, is copied into a contiguous send buffer first (``torch.cat`` of its runs).

Each copy reads and writes its elements once. Its launches follow PyTorch's CUDA ``cat``
(``aten/src/ATen/native/cuda/Shape.cu``): the slices of a batch-major tensor are not
contiguous, and ``CatArrayBatchedCopy`` copies up to ``CAT_ARRAY_BATCH_SIZE / 2 = 64`` such
inputs per launch for tensors of at most 4 dimensions; larger ones (5-D, 3-D convolutions)
take one ``copy_`` per run. The backward pass mirrors the forward: each gradient goes back
through the same copies (a gathered input's gradient split into the runs its parts send back,
a packed message's gradient unpacked into the sender's gradient buffer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost.kernel_model import ComputeValues
from ..hardware import Hardware
from ..network import Network
from ..network.channel_split import LayerSplit, channel_split, halo_reads
from ..network.layers import numel
from .hypergraph import Hypergraph, reference_hardware

__all__ = ["CAT_INPUTS_PER_LAUNCH", "MAX_BATCHED_DIMS", "Copies", "channel_copies", "copy_launches", "copy_seconds"]

#: Non-contiguous inputs ``torch.cat`` copies per launch on CUDA (``CAT_ARRAY_BATCH_SIZE / 2``,
#: ``aten/src/ATen/native/cuda/Shape.cu``) ...
CAT_INPUTS_PER_LAUNCH = 64
#: ... for tensors of at most this many dimensions (``CAT_ARRAY_MAX_INPUT_DIMS``); beyond it one
#: ``copy_`` per input.
MAX_BATCHED_DIMS = 4


@dataclass(frozen=True, eq=False)
class Copies:
    """The copies of one pass (forward; the backward repeats them): copy ``i`` runs on part
    ``part[i]``, moves ``runs[i]`` slices of tensor ``tensor[i]`` (``"gather"`` or ``"pack"``,
    ``kind[i]``) holding ``elems[i]`` elements per sample, in ``launches[i]`` kernels."""

    part: np.ndarray
    runs: np.ndarray
    elems: np.ndarray
    launches: np.ndarray
    tensor: tuple[str, ...]
    kind: tuple[str, ...]

    @property
    def count(self) -> int:
        return len(self.tensor)


def copy_launches(runs: int, ndim: int) -> int:
    """Kernels ``torch.cat`` launches for ``runs`` non-contiguous slices of ``ndim``-dimension tensors."""
    return runs if ndim > MAX_BATCHED_DIMS else -(-runs // CAT_INPUTS_PER_LAUNCH)


def _mask(channels: int, share: tuple[tuple[int, int], ...]) -> np.ndarray:
    m = np.zeros(channels, dtype=bool)
    for lo, hi in share:
        m[lo:hi] = True
    return m


def _live(ls: LayerSplit) -> list[int]:
    """The parts of ``ls`` that hold channels, in order (a layer's units, as the hypergraph lists them)."""
    return [j for j in range(len(ls.parts)) if ls.parts[j]]


def _needs(net: Network, splits: tuple[LayerSplit, ...], first_unit: np.ndarray, a: np.ndarray, producer: int,
           channels: int) -> dict[tuple[int, bytes], np.ndarray]:
    """Per (reading part, mask bytes): the channels of ``producer``'s tensor a block of one of its
    readers on that part reads (its units' shares where aligned, with a halo's edge channels;
    every channel otherwise). ``first_unit[k]``: layer ``k``'s first unit."""
    t = net.layers[producer].name
    out: dict[tuple[int, bytes], np.ndarray] = {}
    for k in sorted(set(net.consumers[t])):
        ls = splits[k]
        for i, name in enumerate(net.layers[k].inputs):
            if name != t:
                continue
            per_part: dict[int, np.ndarray] = {}
            for idx, j in enumerate(_live(ls)):
                p = int(a[first_unit[k] + idx])
                if ls.split and ls.aligned[i]:
                    need = _mask(channels, splits[producer].parts[j])
                    if ls.halo != (0, 0):
                        need |= _mask(channels, halo_reads(ls, j))
                else:
                    need = np.ones(channels, dtype=bool)
                per_part[p] = need if p not in per_part else per_part[p] | need
            for p, need in per_part.items():
                out[(p, need.tobytes())] = need
    return out


def _runs(keys: np.ndarray, pos: np.ndarray, local: np.ndarray) -> int:
    """Slices of the channels in order: a new one where the source changes, or where a local
    buffer's positions are not consecutive (a received buffer holds just what was sent)."""
    if keys.size == 0:
        return 0
    breaks = (keys[1:] != keys[:-1]) | (local[1:] & (pos[1:] != pos[:-1] + 1))
    return 1 + int(breaks.sum())


def channel_copies(net: Network, hg: Hypergraph, assignment: np.ndarray) -> Copies:
    """Every gather and pack one forward pass of ``assignment`` runs (see the module docstring):
    per tensor and reading part, at most one gather (shared by the part's readers that need the
    same channels) and one pack per sending part. None at layer granularity (each tensor is one
    unit's buffer, read whole)."""
    a = np.asarray(assignment, dtype=np.int64)
    splits = channel_split(net, hg.groups)
    first_unit = np.searchsorted(hg.unit_layer, np.arange(len(net.layers)))
    rows: list[tuple[int, int, float, int, str, str]] = []
    for producer, layer in enumerate(net.layers):
        channels = layer.out_shape[0]
        owner = np.empty(channels, dtype=np.int64)
        for idx, j in enumerate(_live(splits[producer])):
            owner[_mask(channels, splits[producer].parts[j])] = a[first_unit[producer] + idx]
        pos = np.empty(channels, dtype=np.int64)
        size: dict[int, int] = {}
        for q in np.unique(owner).tolist():
            mine = np.flatnonzero(owner == q)
            pos[mine], size[q] = np.arange(mine.size), mine.size
        per_channel = numel(layer.out_shape) // channels
        ndim = 1 + len(layer.out_shape)
        packs: set[tuple[int, int, bytes]] = set()
        for (p, _), need in _needs(net, splits, first_unit, a, producer, channels).items():
            src = owner[need]
            parts = np.unique(src)
            if parts.size > 1 or (int(parts[0]) == p and int(need.sum()) != size[p]):
                r = _runs(src, pos[need], src == p)
                rows.append((p, r, float(need.sum() * per_channel), copy_launches(r, ndim), layer.name, "gather"))
            for q in parts.tolist():
                sent = need & (owner == q)
                if q == p or int(sent.sum()) == size[q] or (q, p, sent.tobytes()) in packs:
                    continue
                packs.add((q, p, sent.tobytes()))
                r = _runs(np.zeros(int(sent.sum()), dtype=np.int64), pos[sent], np.ones(int(sent.sum()), dtype=bool))
                rows.append((q, r, float(sent.sum() * per_channel), copy_launches(r, ndim), layer.name, "pack"))
    cols = list(zip(*rows, strict=True)) if rows else [(), (), (), (), (), ()]
    return Copies(part=np.array(cols[0], dtype=np.int64), runs=np.array(cols[1], dtype=np.int64),
                  elems=np.array(cols[2], dtype=float), launches=np.array(cols[3], dtype=np.int64),
                  tensor=tuple(cols[4]), kind=tuple(cols[5]))


def copy_seconds(c: Copies, parts: int, hw: Hardware | None, precision: str, batch: int) -> np.ndarray:
    """Forward plus backward seconds of the copies on each of ``parts`` parts for ``batch``
    samples on ``hw`` (None: the reference profile) at ``precision``: per copy and pass, one
    host op (``torch.cat``) or its kernels, the slower: ``max(h, launches x tau + 2 x bytes /
    (beta_mem x eta_mem))``, as a layer's time is bounded (:mod:`perfmodel.cost.kernel_model`)."""
    v = ComputeValues.of(hw or reference_hardware(), precision)
    bw = float(v.memory_bandwidth_bytes_per_s) * float(v.eta_memory)
    traffic = 2.0 * c.elems * batch * float(v.elem_bytes) / bw
    each = np.maximum(float(v.host_op_s), c.launches * float(v.launch_s) + traffic)
    return 2.0 * np.bincount(c.part, weights=each, minlength=parts)

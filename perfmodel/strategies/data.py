"""Data parallelism: gradients in DDP's buckets, each allreduced once ready, overlapped with backward.

The backward compute that runs beside an allreduce is slowed by it (NCCL holds SMs and
memory bandwidth: :func:`perfmodel.cost.collectives.contention`); that slow-down is the
plan's ``nccl_contention`` term, and only the exchange that sticks out past the slowed
backward is exposed. DDP also copies every gradient tensor into its bucket and back
(``gradient_bucket_copies``, :func:`bucket_copies_s`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..cost.collectives import (
    Group,
    LinkParams,
    allreduce,
    allreduce_expr,
    contention,
    link_params,
    memory_contention_s,
)
from ..cost.compute import GRAD_BYTES_PER_PARAM, ComputeValues
from ..cost.formulas import Num, is_symbolic, smax, smin, ssum
from ..hardware import Hardware
from ..network import Network
from .context import Context, weight_group
from .spec import Strategy

#: A sequence of floats or a numpy array of them.
FloatSeq = Sequence[float] | np.ndarray

__all__ = [
    "BUCKET_BYTES",
    "buckets",
    "overlapped_exchange",
    "slowed_backward_s",
    "bucket_reducer",
    "stage_exchange",
    "Drain",
    "ExchangeTerms",
    "stage_backward_s",
    "drain_stage",
    "drain_delays",
    "gradient_exchange",
    "param_tensors",
    "bucket_copies_s",
    "copies_s",
    "shard_copies_s",
]

#: PyTorch DDP's default bucket size, ``bucket_cap_mb=25`` (torch.nn.parallel.DistributedDataParallel docs).
BUCKET_BYTES = 25 * 2**20


def buckets(grad_bytes: FloatSeq, bucket_bytes: float = BUCKET_BYTES) -> list[tuple[int, float]]:
    """DDP's buckets over gradients in backward order: (index of the gradient that fills a
    bucket, the bucket's bytes); the last bucket holds what is left."""
    out, acc = [], 0.0
    for i, g in enumerate(grad_bytes.tolist() if isinstance(grad_bytes, np.ndarray) else grad_bytes):
        acc += g
        if acc >= bucket_bytes:
            out.append((i, acc))
            acc = 0.0
    if acc > 0:
        out.append((len(grad_bytes) - 1, acc))
    return out


def overlapped_exchange(
    bwd_s: Sequence[Num] | np.ndarray,
    grad_bytes: FloatSeq,
    comm: Callable[[float], Num],
    start_s: Num = 0.0,
    bucket_bytes: float = BUCKET_BYTES,
) -> tuple[Num, Num]:
    """When the last bucket's allreduce ends, and the sum of allreduce times.

    ``bwd_s`` and ``grad_bytes`` are per layer in *backward* order (last layer first).
    Gradients fill buckets in that order (:func:`buckets`); a bucket is reduced as soon as it
    is full and the previous bucket's reduction is done (one communication stream, as DDP).
    The end is ``max_k (ready_k + sum_{j >= k} c_j)``; what sticks out past the backward pass
    is exposed. Times may be numbers or sympy expressions (``explain``); sizes are numbers.
    """
    t = start_s
    end = start_s
    total_comm: Num = 0.0
    done = 0
    times = bwd_s.tolist() if isinstance(bwd_s, np.ndarray) else bwd_s
    for i, nbytes in buckets(grad_bytes, bucket_bytes):
        for dt in times[done : i + 1]:
            t = t + dt
        done = i + 1
        c = comm(nbytes)
        end = smax(end, t) + c
        total_comm = total_comm + c
    return end, total_comm


def slowed_backward_s(
    comm_s: Num, backward_s: Num, grad_bytes: float, group: Group, links: LinkParams, algorithm: str, eta_mem: Num
) -> Num:
    """How much later a backward pass of ``backward_s`` ends when ``comm_s`` seconds of
    ``algorithm`` allreduces of ``grad_bytes`` over ``group`` run beside it (numbers or
    symbols): they overlap at most ``w = min(comm_s, backward_s)``; during it compute runs
    ``1 + gamma`` times slower on the SMs NCCL leaves, and loses the memory bandwidth NCCL's
    traffic takes (the algorithm's link bytes at ``beta_mem * eta_mem``, at most ``w``):
    ``max(gamma/(1 + gamma) w, min(memory seconds, w))`` (0 when nothing overlaps).

    A backward of exactly 0 seconds (``overlap=none``: the allreduces start after it) gives
    0.0, also with symbolic ``comm_s``: the window is 0 by construction, so ``explain`` shows the
    term as 0 instead of ``Max(..., Min(0.0, ...))``."""
    if isinstance(backward_s, (int, float)) and backward_s == 0:
        return 0.0
    gamma = contention(group, links)
    window = smin(comm_s, backward_s)
    memory = memory_contention_s(grad_bytes, group, links, algorithm, eta_mem)
    return smax(gamma / (1 + gamma) * window, smin(memory, window))


def bucket_reducer(
    hw: Hardware, group: Group, comm: str, lp: LinkParams | None = None
) -> tuple[Callable[[float], Num], LinkParams]:
    """(one bucket's allreduce seconds over ``group`` with ``comm``, the link numbers used): on
    the profile's links (``lp=None``, taken once for every bucket) or on ``lp``'s symbols."""
    if lp is None:
        links = link_params(hw, group)
        return (lambda nbytes: allreduce(nbytes, group, hw, comm, links)), links
    return (lambda nbytes: allreduce_expr(nbytes, group, lp, comm)), lp


def stage_exchange(
    bwd_s: Sequence[Num] | np.ndarray,
    grad_bytes: np.ndarray,
    reduce: Callable[[float], Num],
    end_s: Num,
    overlap: str,
    group: Group,
    links: LinkParams,
    algorithm: str,
    eta_mem: Num,
) -> tuple[Num, Num, Num]:
    """(when the last bucket's allreduce ends, the allreduce seconds, the contention seconds) of
    one stage's gradients (``grad_bytes`` per layer, forward order) reduced in DDP's buckets
    with ``algorithm`` as its last backward pass (``bwd_s`` per layer, forward order) produces
    them, up to ``end_s``; with ``overlap="none"``, all after ``end_s``; ``eta_mem``: the
    memory efficiency of the compute beside them."""
    last_bwd = bwd_s[::-1]
    start = end_s - ssum(last_bwd)
    if overlap == "none":  # the exchange starts when the backward pass has ended
        start, last_bwd = end_s, [0.0] * len(last_bwd)
    end, total = overlapped_exchange(last_bwd, grad_bytes[::-1], reduce, start)
    return end, total, slowed_backward_s(total, ssum(last_bwd), float(grad_bytes.sum()), group, links, algorithm,
                                         eta_mem)


#: Layer kinds whose parameters are two tensors (scale and shift) whatever ``bias`` says.
_AFFINE_KINDS = frozenset({"batchnorm", "layernorm", "groupnorm"})


@lru_cache(maxsize=64)
def param_tensors(net: Network) -> np.ndarray:
    """Parameter tensors per layer: a weight, plus a bias; a norm's scale and shift (as
    ``nn.Module.parameters()`` lists them: resnet50 161). Cached per network, read-only."""
    out = np.array([0.0 if not layer.params else 2.0 if layer.bias or layer.kind in _AFFINE_KINDS else 1.0
                    for layer in net.layers])
    out.setflags(write=False)
    return out


def copies_s(tensors: float, params: float, v: ComputeValues,
             param_bytes: int = GRAD_BYTES_PER_PARAM) -> Num:
    """Seconds of DDP's two gradient copies per step for ``tensors`` tensors of ``params``
    values of ``param_bytes`` each (fp32; 2 in a 16-bit model) (numbers or symbols, by ``v``):
    with ``gradient_as_bucket_view=False`` (the default), the reducer copies each gradient into
    its bucket when autograd produces it (dividing by the world size in the same kernel) and
    each reduced bucket slice back into the gradient when backward ends (torch/csrc/distributed/c10d/reducer.cpp,
    ``mark_variable_ready_dense`` and ``copy_bucket_to_grad``): one kernel per tensor each
    way (``tau``), reading and writing ``param_bytes`` per value (``beta_mem * eta_mem``)."""
    traffic = 2 * param_bytes * params / (v.memory_bandwidth_bytes_per_s * v.eta_memory)
    return 2 * (tensors * v.launch_s + traffic)


def shard_copies_s(net: Network, params: np.ndarray, v: ComputeValues,
                   param_bytes: int = GRAD_BYTES_PER_PARAM) -> Num:
    """:func:`copies_s` of a GPU holding ``params`` parameters per layer of ``net`` (a shard:
    a layer's tensors count where it holds any), ``param_bytes`` each."""
    return copies_s(float(np.where(params > 0, param_tensors(net), 0.0).sum()), float(params.sum()), v, param_bytes)


def bucket_copies_s(ctx: Context, s: Strategy, v: ComputeValues) -> Num:
    """The ``gradient_bucket_copies`` term of a parameter server or ``torch.nn.DataParallel``
    (one stage; 0 for one replica): :func:`copies_s` of every layer, both copies on the step.
    Assumed, not measured: a parameter-server worker pays DDP's two copies (each gradient into
    the buffer it pushes, each pulled weight back), and so does ``torch.nn.DataParallel``, whose
    ``reduce_add_coalesced`` flattens the gradients into buffers (``torch.cat`` per chunk:
    fewer launches than priced here) and whose reduced views are accumulated into each
    ``.grad`` (torch/nn/parallel/comm.py): an upper bound for these two. DDP's copies are
    :func:`gradient_exchange`'s."""
    if s.dp * s.sp_degree == 1:
        return 0.0
    return copies_s(float(param_tensors(ctx.net).sum()), float(ctx.cc.params.sum()), v, ctx.param_bytes)


@dataclass(frozen=True)
class Drain:
    """A pipeline's backward phase, as :func:`drain_delays` composes the stages' delays: per
    stage, one micro-batch's backward seconds with its send (and, under recomputation, its
    forward pass and send) ``rb``, numbers or symbols; the micro-batches ``m``; ``stage``, the
    last stage with the largest ``rb``, the backward phase's bottleneck (:func:`drain_stage`,
    taken on numbers as the critical stage is). ``Drain()``: one stage."""

    rb: Sequence[Num] = (0.0,)
    m: Num = 1
    stage: int = 0


def stage_backward_s(
    fwd: Sequence[Num], bwd: Sequence[Num], send_f: Sequence[Num], send_b: Sequence[Num], recompute: bool
) -> list[Num]:
    """Each stage's backward seconds per micro-batch as the pipeline's closed form takes them
    (:func:`.pipeline.pipeline_step`): backward and send, plus forward and send when recomputed."""
    return [b + sb + (f + sf if recompute else 0.0) for f, b, sf, sb in zip(fwd, bwd, send_f, send_b, strict=True)]


def drain_stage(rb: Sequence[float] | np.ndarray, m: int) -> int:
    """The last stage with no slack in :func:`drain_delays` (numbers): the last with the largest
    backward seconds per micro-batch ``rb``; the last stage for one micro-batch (no stage
    repeats its pass, so no path has slack)."""
    x = np.asarray(rb, dtype=float)
    return len(x) - 1 if m <= 1 else int(len(x) - 1 - np.argmax(x[::-1]))


def _max(xs: Sequence[Num]) -> Num:
    return xs[0] if len(xs) == 1 else smax(*xs)


def drain_delays(drain: Drain, delays: Sequence[Num]) -> tuple[Num, list[Num], list[Num]]:
    """(how much later the step ends when each stage's last backward pass takes ``delays[s]``
    longer; per stage, how much later its last pass starts; per stage, how much earlier than
    the closed form's ``ends`` its last pass ends without delays), numbers or symbols.

    GPipe's backward phase is a grid: stage ``s`` runs the micro-batches' backward passes in
    turn (``rb_s`` each), a pass waits for the stage's previous pass and for the next stage's
    pass of the same micro-batch, and the step ends with stage 0's last pass. Its longest path
    runs the ``m - 1`` extra passes on the largest-``rb`` stage and the last micro-batch down
    to stage 0 (the closed form's ``sum b + (m - 1) max rb``). The delays sit on the last
    passes, so a path entering the last micro-batch at stage ``j`` collects ``d_0 + ... + d_j``
    and is ``slack_j = (m - 1)(max rb - max_{i >= j} rb_i)`` shorter: the step grows by
    ``max_j (d_0 + ... + d_j - slack_j)``; up to the bottleneck ``c = drain.stage`` the slack
    is 0, so the delays of stages ``0..c`` (the stage that sets the step time and those after
    it in the drain) all count; a stage above ``c`` counts only past its slack. Computed from
    the last stage down: ``G_s = d_s + max((m - 1) max_{i >= s} rb_i, G_{s+1})`` is the
    longest path from stage s's last pass; the step grows by ``G_0 - (m - 1) max rb``, stage
    s's last pass starts ``max(0, G_{s+1} - (m - 1) max_{i >= s} rb_i)`` later, and without
    delays ends ``slack_s`` before the closed form's ``ends[s]`` (which puts every stage on the
    critical path). Numbers: 4 stages of rb = (4, 6, 5, 3) ms, m = 8, delays 0.3 ms each: the
    step grows by d_0 + d_1 = 0.6 ms (the path through stage 2 has 7 ms of slack); with m = 1,
    no slack, by all four, 1.2 ms. The largest single delay (0.3 ms) is a lower bound, not an
    upper one. tests/test_drain.py checks all three against a simulated schedule."""
    n, rb = len(delays), drain.rb
    symbolic = is_symbolic(*rb, *delays)
    top = smax if symbolic else max  # plain floats on numbers: the search prices this for every split
    if symbolic:
        tops = [_max(rb[j:]) for j in range(n)]
    else:  # running maxima from the last stage
        tops = [float(x) for x in rb]
        for j in range(n - 2, -1, -1):
            tops[j] = max(tops[j], tops[j + 1])
    extra = [(drain.m - 1) * t for t in tops]
    start: list[Num] = [0.0] * n
    g: Num = delays[n - 1] + extra[n - 1]
    for i in range(n - 2, -1, -1):
        start[i] = top(0.0, g - extra[i])
        g = delays[i] + top(extra[i], g)
    return g - extra[0], start, [extra[0] - x for x in extra]


@dataclass(frozen=True)
class ExchangeTerms:
    """The data dimension's terms of a DDP plan (seconds, numbers or symbols): the gradient
    copies and NCCL's contention on the step's critical path, the exchange exposed past them,
    and the allreduce seconds in all (a detail)."""

    copies: Num
    contention: Num
    exposed: Num
    total_comm: Num


def gradient_exchange(
    ctx: Context,
    s: Strategy,
    bwd: Sequence[Num] | np.ndarray,
    ranges: Sequence[tuple[int, int]],
    ends: Sequence[Num],
    body_s: Num,
    drain: Drain | None = None,
    lp: LinkParams | None = None,
    v: ComputeValues | None = None,
    memo: dict[tuple[int, int], tuple[Num, Num, Num, Num]] | None = None,
) -> ExchangeTerms:
    """The terms of the gradient exchange among the GPUs sharing each weight (dp replicas x
    spatial tiles) in DDP's buckets: every stage's layers ``ranges`` reduced while its last
    backward micro-batch (``bwd`` per layer) runs up to ``ends`` (the pipeline's closed form;
    ``body_s``: the step so far), its backward slowed by NCCL and by the copy into the buckets.

    Per stage: the allreduces overlap at most ``w = min(their seconds, the backward seconds
    they run beside)``; during that window compute runs on the SMs NCCL leaves, ``1 + gamma``
    times slower (:func:`~perfmodel.cost.collectives.contention`), and loses the memory
    bandwidth NCCL's traffic takes (:func:`~perfmodel.cost.collectives.memory_contention_s`,
    at most ``w``): the stage's last backward ends ``kappa_s = max(gamma/(1 + gamma) w,
    min(memory seconds, w))`` later, and also ``copy_s`` later, DDP's copy of each gradient
    into its bucket (half of :func:`copies_s`); the copy back follows the stage's last
    allreduce. Across stages (:func:`drain_delays`, ``drain``; one stage without it) the
    delays of the stage that sets the step time and of the stages after it in the drain add
    up: ``nccl_contention = sum_{s <= c} kappa_s``, ``gradient_bucket_copies = sum_{s <= c}
    copy_s + copy_0`` (stage 0's copy back ends the step). Exposed is what ends later than
    ``body + those``: a path above ``c`` whose delays outgrow its slack, or a stage's last
    allreduce, moved by the delays on the chain before it and its own copy in, then its copy
    back. First order: the window is an upper bound of the overlap, and a slowed backward
    also readies later buckets later, which is not followed; both are monotone, so more
    bandwidth never slows a step and more contention never speeds one. On the profile's
    links and values (``lp=None``, ``v=None``), or on ``lp``'s and ``v``'s symbols with
    symbolic times (``explain``): the same recurrence either way. ``memo`` (numbers only; the
    split search's, one per plan) keeps each stage's exchange by its layers, its end relative
    to the end of its backward pass (the walk is a sum from there), for the other splits
    sharing the stage.
    """
    if s.dp * s.sp_degree == 1 or s.is_ps or s.comm == "dataparallel":
        return ExchangeTerms(0.0, 0.0, 0.0, 0.0)
    drain = drain or Drain()
    vals = ctx.values if v is None else v
    group = weight_group(s, ctx.hw.gpus_per_node)
    grad = ctx.cc.params * ctx.param_bytes  # DDP's buckets have the gradients' dtype
    tensors = param_tensors(ctx.net)
    reduce, links = bucket_reducer(ctx.hw, group, s.comm, lp)
    ex_end: list[Num] = []
    slowed: list[Num] = []
    copy: list[Num] = []
    total: Num = 0.0
    for (a, b), end_s in zip(ranges, ends, strict=True):
        hit = None if memo is None else memo.get((a, b))
        if hit is None:
            end, tot, ext = stage_exchange(bwd[a:b], grad[a:b], reduce, 0.0 if memo is not None else end_s,
                                           s.overlap, group, links, s.comm, vals.eta_memory)
            cp = copies_s(float(tensors[a:b].sum()), float(ctx.cc.params[a:b].sum()), vals, ctx.param_bytes) / 2
            hit = (end, tot, ext, cp)
            if memo is not None:
                memo[(a, b)] = hit
        ex_end.append(hit[0] + end_s if memo is not None else hit[0])
        slowed.append(hit[2])
        copy.append(hit[3])
        total = total + hit[1]
    c = drain.stage
    delays = [k + x for k, x in zip(slowed, copy, strict=True)]
    growth, start, slack = drain_delays(drain, delays)
    contention = ssum(slowed[: c + 1])
    copies = ssum(copy[: c + 1]) + copy[0]
    base = body_s + contention + copies
    # the paths above c that outgrow their slack, then each stage's last allreduce: its last
    # pass ends slack earlier and starts later by the delays reaching it, its buckets wait for
    # its copy in, its copy back follows
    late = [body_s + growth + copy[0] - base]
    late += [ex_end[i] - slack[i] + start[i] + 2 * copy[i] - base for i in range(len(ex_end))]
    return ExchangeTerms(copies, contention, smax(0, *late), total)

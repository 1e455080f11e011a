"""Enumerate candidate plans: factorisations of the GPU count into parallel degrees, and options."""

from __future__ import annotations

import math
from collections.abc import Iterator

from ..errors import UsageError, did_you_mean
from ..limits import shown
from ..network import Network
from ..strategies.spec import Strategy

__all__ = [
    "divisors", "factorisations", "spatial_grids", "candidates", "variants", "no_candidate_reasons", "KINDS",
    "check_kinds",
]

#: Strategy kinds the search can be restricted to.
KINDS = ("dp", "ps", "sp", "pp", "hybrid", "mp", "filter", "channel")


def check_kinds(kinds: object) -> tuple[str, ...]:
    """Strategy kinds of :data:`KINDS` to search, from a list (tuple, set) of them or one comma list
    (``"dp"``, ``"dp,pp"``); else :class:`~perfmodel.errors.UsageError` naming the unknown ones."""
    if isinstance(kinds, str):
        kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    elif not isinstance(kinds, (list, tuple, set, frozenset)):
        raise UsageError(f"kinds must be strategy kinds as a list or a comma list (valid: {', '.join(KINDS)}), "
                         f"got {type(kinds).__name__} {shown(kinds, 40)}")
    if not kinds:
        raise UsageError(f"no strategy kinds to search (valid: {', '.join(KINDS)})")
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise UsageError(f"unknown strategy kind{'s' if len(bad) > 1 else ''} {', '.join(shown(b, 40) for b in bad)} "
                         f"(valid: {', '.join(KINDS)}){did_you_mean(str(bad[0]), KINDS)}")
    ordered = sorted(kinds, key=KINDS.index) if isinstance(kinds, (set, frozenset)) else kinds
    return tuple(dict.fromkeys(ordered))


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def factorisations(n: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Ordered tuples of ``parts`` positive integers whose product is ``n`` (any ``n``)."""
    if parts == 1:
        yield (n,)
        return
    for d in divisors(n):
        for rest in factorisations(n // d, parts - 1):
            yield (d, *rest)


def spatial_grids(p: int, net: Network) -> list[tuple[int, int, int]]:
    """Grids of ``p`` tiles that fit the input: HxW for images, DxHxW for volumes."""
    ext = net.input_shape[1:]
    if len(ext) == 2:
        return [(1, h, p // h) for h in divisors(p) if h <= ext[0] and p // h <= ext[1]]
    if len(ext) == 3:
        out = []
        for d, h, w in factorisations(p, 3):
            if d <= ext[0] and h <= ext[1] and w <= ext[2]:
                out.append((d, h, w))
        return out
    return []


def _mb_choices(pp: int, per_replica: int) -> list[int]:
    """Micro-batch counts worth trying: multiples of the stage count (GPipe's advice M >= 4S)."""
    out = sorted({m for m in (pp, 2 * pp, 4 * pp, 8 * pp) if m <= per_replica})
    return out or [per_replica]


def candidates(
    net: Network, gpus: int, global_batch: int, gpus_per_node: int, kinds: tuple[str, ...] = KINDS,
    max_pp: int = 32, max_sp: int = 64,
) -> Iterator[Strategy]:
    """Every plan worth pricing for ``gpus`` GPUs and ``global_batch`` samples.

    dp x sp x pp factorisations (any GPU count); spatial grids that fit the input; pipeline
    stage counts up to the chain's links with micro-batch counts that split the batch;
    central and sharded parameter servers for pure data parallelism; hypergraph model
    parallelism (mp) and filter / channel splits inside a node. Structures come with ring
    allreduce (and the 1F1B schedule); :func:`variants` gives their other options.
    """
    n_links = len(net.links)
    multi_node = gpus > gpus_per_node
    comms = ("ring", "tree", "hierarchical") if multi_node else ("ring", "tree")
    for dp, p_sp, pp in factorisations(gpus, 3):
        if global_batch % dp or global_batch < dp:
            continue
        per_replica = global_batch // dp
        if pp > min(n_links, max_pp) or p_sp > max_sp:
            continue
        grids = [(1, 1, 1)] if p_sp == 1 else spatial_grids(p_sp, net)
        if p_sp > 1 and not grids:
            continue
        kind = ("sp" if p_sp > 1 else "") + ("pp" if pp > 1 else "")
        if kind == "":
            if "dp" in kinds:
                for c in comms if dp > 1 else ("ring",):
                    yield Strategy(dp=dp, comm=c)
                if dp > 1 and not multi_node:  # torch.nn.DataParallel: one process, one node
                    yield Strategy(dp=dp, comm="dataparallel")
            if "ps" in kinds and dp > 1:
                yield Strategy(dp=dp, comm="ps-central")
                yield Strategy(dp=dp, comm="ps-sharded")
            continue
        is_hybrid = dp > 1 or (p_sp > 1 and pp > 1)
        if is_hybrid and "hybrid" not in kinds:
            continue
        if not is_hybrid and kind not in kinds:
            continue
        for grid in grids:
            mbs = _mb_choices(pp, per_replica) if pp > 1 else [1]
            for mb in mbs:
                # the search lets the per-link DP choose spatial or sample decomposition
                decomp = "auto" if math.prod(grid) > 1 else "spatial"
                yield Strategy(dp=dp, sp=grid, pp=pp, mb=mb, schedule="1f1b" if pp > 1 else "gpipe", decomp=decomp)
    # layer-parallel splits inside a node, combined with data parallelism across
    for k in divisors(gpus):
        if k == 1 or k > gpus_per_node:
            continue
        dp = gpus // k
        if global_batch % dp:
            continue
        if "filter" in kinds:
            yield Strategy(dp=dp, filter=k)
        if "channel" in kinds:
            yield Strategy(dp=dp, channel=k)
        if "mp" in kinds and k <= min(8, n_links):
            per_replica = global_batch // dp
            for mb in sorted({m for m in (k, 4 * k) if m <= per_replica}) or [1]:
                yield Strategy(dp=dp, mp=k, mb=mb)


def variants(s: Strategy, gpus: int, gpus_per_node: int) -> Iterator[Strategy]:
    """The options of a structure that change its price: allreduce algorithm, schedule."""
    comms = ("ring", "tree", "hierarchical") if gpus > gpus_per_node else ("ring", "tree")
    shares = s.dp * s.sp_degree > 1 and not s.is_ps
    for c in comms if shares else (s.comm,):
        for sched in ("gpipe", "1f1b") if s.pp > 1 else (s.schedule,):
            v = s.with_(comm=c, schedule=sched)
            if v != s:
                yield v


def no_candidate_reasons(
    net: Network, gpus: int, global_batch: int, gpus_per_node: int, kinds: tuple[str, ...], max_pp: int = 32,
    max_sp: int = 64,
) -> list[str]:
    """Why :func:`candidates` yields no plan of each of ``kinds``, in words (one clause per kind without
    candidates; the rules are those of :func:`candidates`)."""
    links = len(net.links)
    reasons: dict[str, str] = {}
    for kind in kinds:
        if any(True for _ in candidates(net, gpus, global_batch, gpus_per_node, (kind,), max_pp, max_sp)):
            continue
        if kind in ("dp", "ps"):
            reasons[kind] = (f"{kind} needs 2 or more GPUs" if kind == "ps" and gpus == 1 else
                             f"{kind}={gpus} needs a global batch that is a multiple of {gpus}")
        elif gpus == 1:  # every split but data parallelism needs a second GPU
            reasons[kind] = f"{kind} splits a step over 2 or more GPUs (on 1 GPU only dp=1 runs)"
        elif kind == "pp":
            reasons[kind] = (f"pp={gpus} needs {gpus} pipeline stages, and {net.name} has {links} chain links"
                             f"{f'; the search tries at most {max_pp} stages' if gpus > max_pp else ''}")
        elif kind == "sp":
            ext = "x".join(str(e) for e in net.input_shape[1:]) or "non-spatial"
            reasons[kind] = (f"sp splits at most {max_sp} GPUs" if gpus > max_sp else
                             f"no grid of {gpus} tiles fits {net.name}'s {ext} input")
        elif kind == "hybrid":
            reasons[kind] = (f"hybrid needs two of dp, sp, pp above 1 whose product is {gpus}, with dp dividing "
                             f"global batch {global_batch}, pp <= {min(links, max_pp)} stages and a grid that fits "
                             f"the input")
        else:  # filter, channel, mp: k GPUs of one node, data parallelism over the rest
            most = min(8, links) if kind == "mp" else gpus_per_node
            reasons[kind] = (f"{kind}=k needs 2 to {most} GPUs of a node (k dividing {gpus}) with dp={gpus}/k "
                             f"dividing global batch {global_batch}")
    return list(reasons.values())

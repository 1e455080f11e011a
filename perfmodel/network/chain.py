"""Group an imported network's layers into chain links from its module hierarchy and data flow."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from .layers import Layer

__all__ = ["ModulePath", "assign_blocks"]

#: The modules enclosing a layer, outermost first (``()`` for the model's own forward).
ModulePath = tuple[str, ...]


def _common(a: ModulePath, b: ModulePath) -> ModulePath:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _inside(path: ModulePath, scope: ModulePath) -> bool:
    return path[: len(scope)] == scope


def _cuts(
    layers: Sequence[Layer], paths: Sequence[ModulePath], atomic: Callable[[str], bool] | None
) -> list[bool]:
    """``cut[i]``: whether a link may end after layer ``i``.

    With ``atomic`` (which modules run a forward of their own, unlike a ``Sequential``): no
    module with its own forward that holds both neighbours may read, after the cut, a tensor
    that crosses it other than layer ``i``'s output, and the innermost such module may be cut
    only between two of its children (not next to an op of its own forward, like a residual
    add). So a residual, inception, dense or attention block is one link, an encoder's layers
    are links of their own, and tensors crossing a cut between blocks (a U-Net's skips) are
    carried by it. Without ``atomic`` (a graph with scope names only), a cut is allowed where
    only layer ``i``'s output crosses it, or where the innermost scope holding both neighbours
    reads none of the other crossing tensors after it.
    """
    readers: dict[str, list[int]] = {}
    for j, layer in enumerate(layers):
        for t in layer.inputs:
            readers.setdefault(t, []).append(j)
    live: set[str] = set()
    out: list[bool] = []
    for i, layer in enumerate(layers[:-1]):
        live.add(layer.name)
        live = {t for t in live | set(layer.inputs) if readers.get(t) and readers[t][-1] > i}
        others = live - {layer.name}
        scope = _common(paths[i], paths[i + 1])
        later = [j for t in others for j in readers[t] if j > i]
        if atomic is None:
            out.append(not others or bool(scope) and not any(_inside(paths[j], scope) for j in later))
            continue
        blocks = [k for k in range(len(scope)) if atomic(scope[k])]
        ok = all(not any(_inside(paths[j], scope[: k + 1]) for j in later) for k in blocks)
        if ok and blocks and blocks[-1] == len(scope) - 1:  # the innermost module has its own forward
            ok = len(paths[i]) > len(scope) and len(paths[i + 1]) > len(scope)
        out.append(ok)
    out.append(True)
    return out


def assign_blocks(
    layers: Sequence[Layer], paths: Sequence[ModulePath], atomic: Callable[[str], bool] | None = None
) -> tuple[Layer, ...]:
    """``layers`` with ``block`` set so that each run between allowed cuts (see :func:`_cuts`) is
    one link, named by the innermost module holding the whole run (single layers keep their name)."""
    cuts = _cuts(layers, paths, atomic)
    taken = {la.name for la in layers}
    out: list[Layer] = []
    start = 0
    used: set[str] = set()
    for i, cut in enumerate(cuts):
        if not cut:
            continue
        run = layers[start : i + 1]
        block = ""
        if len(run) > 1:
            scope = paths[start]
            for p in paths[start + 1 : i + 1]:
                scope = _common(scope, p)
            base = scope[-1] if scope else run[0].name
            block, k = base, 1
            while block in used or block in taken:
                block, k = f"{base}#{k}", k + 1
            used.add(block)
        out.extend(dataclasses.replace(la, block=block) for la in run)
        start = i + 1
    return tuple(out)

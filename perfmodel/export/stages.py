"""Pipeline stages on the IR: which layers each stage holds and which tensors cross each cut."""

from __future__ import annotations

from collections.abc import Sequence

from ..network import Network

__all__ = ["cut_tensors", "stage_layer_ranges"]


def cut_tensors(net: Network, stop: int) -> tuple[str, ...]:
    """Names of the tensors produced before layer ``stop`` and read at or after it, in order
    (what a pipeline cut before layer ``stop`` sends; ``input`` first when read later)."""
    if stop >= len(net.layers):
        return (net.layers[-1].name,)
    last_use: dict[str, int] = {}
    for i, layer in enumerate(net.layers):
        for t in layer.inputs:
            last_use[t] = i
    names = ("input", *(layer.name for layer in net.layers[:stop]))
    return tuple(t for t in names if last_use.get(t, -1) >= stop)


def stage_layer_ranges(net: Network, balance: Sequence[int]) -> list[tuple[int, int]]:
    """Layer index ranges ``[start, stop)`` of consecutive stages of ``balance[i]`` chain links."""
    links = net.links
    if sum(balance) != len(links):
        raise ValueError(f"balance {list(balance)} covers {sum(balance)} links, {net.name} has {len(links)}")
    out: list[tuple[int, int]] = []
    first = 0
    for n in balance:
        out.append((links[first].start, links[first + n - 1].stop))
        first += n
    return out

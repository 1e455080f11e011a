"""The chain of an imported DAG: links are contiguous, uniquely named, never cut inside a block."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.network import NetBuilder
from perfmodel.network.chain import assign_blocks
from perfmodel.network.graph import Network


@st.composite
def dags(draw: st.DrawFn) -> tuple[Network, list[tuple[str, ...]], set[str]]:
    """Random chains of activations with skip adds, each layer inside a random module path."""
    b = NetBuilder("dag", (4, 8, 8))
    tensors = ["input"]
    paths: list[tuple[str, ...]] = []
    n = draw(st.integers(2, 25))
    for i in range(n):
        if i and draw(st.booleans()):
            other = draw(st.sampled_from(tensors))
            tensors.append(b.add(tensors[-1], other))
        else:
            tensors.append(b.act(tensors[-1], "relu"))
        depth = draw(st.integers(0, 2))
        paths.append(tuple(f"m{draw(st.integers(0, 2))}" + ".x" * d for d in range(depth)))
    atomic = {p for path in paths for p in path if draw(st.booleans())}
    return b.build(), paths, atomic


@settings(max_examples=60, deadline=None)
@given(dags(), st.booleans())
def test_links_are_contiguous_unique_and_respect_blocks(case, with_hierarchy: bool) -> None:
    net, paths, atomic = case
    layers = assign_blocks(net.layers, paths, atomic.__contains__ if with_hierarchy else None)
    chained = Network(net.name, net.input_shape, layers)
    links = chained.links
    assert links[0].start == 0 and links[-1].stop == len(layers)
    assert all(a.stop == b.start for a, b in zip(links, links[1:], strict=False))
    assert len({link.name for link in links}) == len(links)
    for link in links[:-1]:
        i = link.stop - 1  # the cut after layer i
        common: list[str] = []
        for p, q in zip(paths[i], paths[i + 1], strict=False):
            if p != q:
                break
            common.append(p)
        readers_after = {t for la in layers[i + 1:] for t in la.inputs}
        crossing = {t for t in ("input", *(la.name for la in layers[: i + 1])) if t in readers_after}
        if with_hierarchy and common and common[-1] in atomic:  # cut between two children of a block
            assert len(paths[i]) > len(common) and len(paths[i + 1]) > len(common)
        for k, m in enumerate(common):  # a block holding the cut reads nothing else that crosses it
            if (m in atomic) if with_hierarchy else k == len(common) - 1:
                scope = tuple(common[: k + 1])
                inside = [la for la, p in zip(layers[i + 1:], paths[i + 1:], strict=True) if p[: k + 1] == scope]
                assert not {t for la in inside for t in la.inputs} & (crossing - {layers[i].name})
        if not with_hierarchy:
            assert crossing == {layers[i].name} or common

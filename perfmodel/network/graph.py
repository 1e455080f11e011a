"""The network DAG and its linearisation into a chain of cut points."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..errors import NetworkError
from .layers import Layer, Shape, numel

__all__ = ["Network", "Link"]


@dataclass(frozen=True)
class Link:
    """One link of the chain: the layers ``layers[start:stop]`` of the network.

    ``cut_elems_per_sample`` counts the elements of every tensor produced at or before
    this link and read after it (the activations a pipeline cut after this link sends
    forward, and whose gradients it receives back). For a plain chain that is the link's
    output; a U-Net's skip connections add the tensors they carry across.
    """

    index: int
    name: str
    start: int
    stop: int
    cut_elems_per_sample: int


@dataclass(frozen=True, eq=False)
class Network:
    """A network: layers in a topological order, the input shape per sample, and a source."""

    name: str
    input_shape: Shape
    layers: tuple[Layer, ...]
    source: str = ""

    def __post_init__(self) -> None:
        seen: set[str] = {"input"}
        for layer in self.layers:
            for t in layer.inputs:
                if t not in seen:
                    raise NetworkError(f"{self.name}: layer {layer.name} reads '{t}' before it is produced")
            if layer.name in seen:
                raise NetworkError(f"{self.name}: duplicate layer name '{layer.name}'")
            seen.add(layer.name)
        if not self.layers:
            raise NetworkError(f"{self.name}: a network needs at least one layer")

    def __hash__(self) -> int:
        return hash((self.name, self.input_shape, len(self.layers)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Network) and (self.name, self.input_shape, self.layers) == (
            other.name,
            other.input_shape,
            other.layers,
        )

    @property
    def image_size(self) -> int:
        """The input's last spatial extent (the width), or 0 for vector inputs."""
        return self.input_shape[-1] if len(self.input_shape) > 1 else 0

    @cached_property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    @cached_property
    def index(self) -> dict[str, int]:
        return {layer.name: i for i, layer in enumerate(self.layers)}

    def shape_of(self, tensor: str) -> Shape:
        return self.input_shape if tensor == "input" else self.layers[self.index[tensor]].out_shape

    @cached_property
    def consumers(self) -> dict[str, tuple[int, ...]]:
        """Tensor name -> indices of the layers that read it."""
        out: dict[str, list[int]] = {"input": []}
        for layer in self.layers:
            out.setdefault(layer.name, [])
        for i, layer in enumerate(self.layers):
            for t in layer.inputs:
                out[t].append(i)
        return {k: tuple(v) for k, v in out.items()}

    @cached_property
    def links(self) -> tuple[Link, ...]:
        """The chain of cut points: consecutive layers of one ``block`` form one link."""
        spans: list[tuple[str, int, int]] = []
        start = 0
        for i in range(1, len(self.layers) + 1):
            if i == len(self.layers) or self._block_of(i) != self._block_of(start):
                spans.append((self._block_of(start), start, i))
                start = i
        # last reader of each tensor, to find what crosses each cut
        last_use: dict[str, int] = {}
        for i, layer in enumerate(self.layers):
            for t in layer.inputs:
                last_use[t] = i
        links: list[Link] = []
        for k, (name, s, e) in enumerate(spans):
            crossing = 0
            if e < len(self.layers):
                for t in ("input", *(la.name for la in self.layers[:e])):
                    if last_use.get(t, -1) >= e:
                        crossing += numel(self.shape_of(t))
            else:
                crossing = numel(self.layers[-1].out_shape)
            links.append(Link(index=k, name=name, start=s, stop=e, cut_elems_per_sample=crossing))
        return tuple(links)

    def _block_of(self, i: int) -> str:
        layer = self.layers[i]
        return layer.block or layer.name

    def describe(self) -> str:
        return f"{self.name} (input {'x'.join(map(str, self.input_shape))}, {self.params:,} parameters)"

"""What both importers share: constants beside activations, per-sample shapes, the layer emitter."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import DataError
from ..builder import NetBuilder
from ..chain import ModulePath, assign_blocks
from ..graph import Network
from ..layers import Shape

__all__ = ["Const", "Emitter", "UnsupportedOp", "batch_axis", "per_sample", "TRACE_BATCH"]

#: The batch the importers trace with (2: training-mode batch norm needs more than one value).
TRACE_BATCH = 2


class UnsupportedOp(DataError):
    """An operator the IR cannot price, named with where it is in the user's model."""


@dataclass(frozen=True)
class Const:
    """A value that does not depend on the input: a parameter, buffer, shape or constant tensor.

    ``params`` maps each trainable parameter it derives from (by id) to its elements;
    ``shape`` is its full shape when it is a tensor (``None`` otherwise).
    """

    value: Any = None
    shape: tuple[int, ...] | None = None
    params: tuple[tuple[int, int], ...] = ()


def batch_axis(shape: Sequence[int], batch: int) -> int | None:
    """The dimension of a traced tensor that holds the batch: the first of extent ``batch``; None
    when there is none (a leading dimension may fold the batch in: :func:`per_sample`)."""
    s = tuple(int(d) for d in shape)
    return s.index(batch) if batch in s else None


def per_sample(shape: Sequence[int], batch: int, where: str) -> Shape:
    """The per-sample shape of a traced tensor: without its batch dimension (:func:`batch_axis`),
    or with a leading dimension that folds the batch in divided by it."""
    s = tuple(int(d) for d in shape)
    i = batch_axis(s, batch)
    if i is not None:
        return s[:i] + s[i + 1 :] or (1,)
    if s and s[0] % batch == 0:
        return (s[0] // batch, *s[1:])
    raise UnsupportedOp(f"{where}: cannot tell the batch dimension of a tensor of shape {s} (traced batch {batch})")


def operand_shape(const: Const, act_rank: int) -> Shape:
    """The per-sample shape of a constant broadcast against an activation of full rank ``act_rank``."""
    s = const.shape or ()
    return tuple(s[1:]) if len(s) == act_rank else tuple(s)


@dataclass
class Emitter:
    """A :class:`NetBuilder` that also records each layer's module path and counts every
    trainable parameter once, however often it is used."""

    builder: NetBuilder
    paths: list[ModulePath] = field(default_factory=list)
    counted: set[int] = field(default_factory=set)
    atomic: Callable[[str], bool] | None = None

    def emit(self, path: ModulePath, method: str, *args: Any, **kwargs: Any) -> str:
        name = getattr(self.builder, method)(*args, **kwargs)
        self.paths.append(path)
        return str(name)

    def tagged(self, path: ModulePath, base: str) -> Callable[..., str]:
        """:meth:`emit` at ``path`` naming each layer ``base.tag`` (the ``tag=`` keyword): the
        layers one call of a framework op is written out as."""

        def emit(method: str, *args: Any, tag: str, **kwargs: Any) -> str:
            return self.emit(path, method, *args, name=f"{base}.{tag}", **kwargs)

        return emit

    def new_params(self, *consts: Const) -> int:
        """Elements of the parameters behind ``consts`` not counted yet (and now counted)."""
        n = 0
        for c in consts:
            for pid, elems in c.params:
                if pid not in self.counted:
                    self.counted.add(pid)
                    n += elems
        return n

    def check(self, name: str, expected: Shape, where: str) -> None:
        """Fail if the IR inferred another shape than the framework did for ``name``."""
        got = self.builder.shape(name)
        if math.prod(got) != math.prod(expected) or (len(got) == len(expected) and got != expected):
            raise UnsupportedOp(f"{where}: perfmodel infers shape {got} but the model computes {expected}")

    def network(self) -> Network:
        net = self.builder.build()
        if net.params == 0 and not net.layers:
            raise DataError(f"{net.name}: no layer reads the input")
        layers = assign_blocks(net.layers, self.paths, self.atomic)
        return Network(net.name, net.input_shape, layers, net.source)

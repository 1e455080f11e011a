"""One torch.fx node being read into the IR: its arguments as refs, its traced value, where it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .emit import TRACE_BATCH, Const, Emitter, batch_axis

__all__ = ["Ctx", "const_value"]


class Ctx:
    """One node being imported: its arguments as refs, its traced result and where it is."""

    def __init__(self, em: Emitter, name: str, path: tuple[str, ...], where: str, args: list[Any],
                 kwargs: dict[str, Any], result: Any, ps: Callable[[Any], tuple[int, ...]], rank: int) -> None:
        self.em, self.name, self.path, self.where = em, name, path, where
        self.args, self.kwargs, self.result, self.ps = args, kwargs, result, ps
        #: the full rank (with the batch) of the first activation argument
        self.rank = rank
        #: whether a reshape-like op copied its input (set by the tracer from the traced tensors)
        self.copies: bool | None = None
        #: the traced value of the first activation argument (set by the tracer)
        self.first: Any = None
        #: the traced values of the activation arguments, by ref (set by the tracer)
        self.traced: dict[str, Any] = {}

    def emit(self, method: str, *args: Any, **kwargs: Any) -> str:
        return self.em.emit(self.path, method, *args, name=self.name, **kwargs)

    def arg(self, i: int, key: str, default: Any = None) -> Any:
        if i < len(self.args):
            return self.args[i]
        return self.kwargs.get(key, default)

    def out_shape(self) -> tuple[int, ...]:
        return self.ps(self.result)

    def sample_dim(self, dim: int) -> int | None:
        """The per-sample index of full-rank dimension ``dim`` of the first activation argument, or
        None for its batch dimension: :func:`.emit.batch_axis`, as :func:`.emit.per_sample` drops it
        (dimension 1 of a sequence-first tensor), else dimension 0 folding the batch in."""
        d = dim % self.rank
        b = batch_axis(self.first.shape, TRACE_BATCH) if self.first is not None else 0
        if b is None:  # the batch folded into dimension 0, which keeps its place
            return None if d == 0 else d
        return None if d == b else d - (d > b)

    def view(self, x: str) -> str:
        return self.emit("view", x, self.out_shape())


def const_value(v: Any) -> Any:
    """A ref's plain value: a :class:`~.emit.Const`'s own, anything else as it is."""
    return v.value if isinstance(v, Const) else v

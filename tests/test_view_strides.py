"""The importers' stride rules against torch itself: which reshapes are views, and the layout of
``scaled_dot_product_attention``'s output."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel.network.importers.strides import attention_out_strides, rows_copy, view_strides

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


@st.composite
def _permuted_views(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """A permuted (possibly sliced) tensor's shape and strides, and a shape of as many elements."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    perm = draw(st.permutations(range(len(shape))))
    t = torch.empty(shape).permute(*perm)
    if draw(st.booleans()) and t.shape[-1] > 1:
        t = t[..., :-1]  # a slice: not dense
    sizes = [int(d) for d in t.shape]
    split = []  # regroup the elements: factor the total into a random sequence of extents
    n = math.prod(sizes)
    while n > 1:
        f = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
        split.append(f)
        n //= f
    new = tuple(split) or (1,)
    return tuple(sizes), tuple(int(s) for s in t.stride()), new


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # torch in the generator
@given(_permuted_views())
def test_view_strides_are_torchs(case: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]) -> None:
    """``view`` succeeds with these strides exactly when torch's does (else ``reshape`` copies)."""
    shape, strides, new = case
    t = torch.empty_strided(shape, strides)
    try:
        want: tuple[int, ...] | None = tuple(t.view(new).stride())
    except RuntimeError:
        want = None
    got = view_strides(shape, strides, new)
    if want is None or got is None:
        assert got == want
    else:  # a size-1 dimension's stride is arbitrary
        assert [s for s, n in zip(got, new, strict=True) if n != 1] == [s for s, n in zip(want, new, strict=True)
                                                                           if n != 1]


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (2, 0, 1, 3), (0, 2, 1, 3), (1, 2, 0, 3)])
@pytest.mark.parametrize("sliced", [False, True])
def test_attention_output_layout_is_torchs(order: tuple[int, ...], sliced: bool) -> None:
    """A ``(B, H, L, E)`` query laid out in ``order`` (or sliced out of a packed projection): the
    output's strides are those CPU's fused ``scaled_dot_product_attention`` returns (before this
    rule the traced reading assumed ``(B, H, L, E)`` and priced a copy after it)."""
    b, h, length, e = 2, 3, 5, 8
    physical = [(b, h, length, e)[i] for i in order]
    if sliced:
        physical[-1] *= 3
    base = torch.randn(physical)
    if sliced:
        base = base[..., :e]
    q = base.permute(*[order.index(i) for i in range(4)])
    assert tuple(q.shape) == (b, h, length, e)
    out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
    assert attention_out_strides(tuple(q.shape), tuple(q.stride()), tuple(out.shape)) == tuple(out.stride())


class _Clones(TorchDispatchMode):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.clones = 0

    def __torch_dispatch__(self, func: object, types: object, args: tuple = (), kwargs: dict | None = None) -> object:
        self.clones += getattr(func, "__name__", "").startswith("clone")
        return func(*args, **(kwargs or {}))  # type: ignore[operator]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(2, 4), min_size=3, max_size=4), st.data())
def test_matmul_copies_its_input_as_predicted(shape: list[int], data: st.DataObject) -> None:
    """``x @ W`` of a permuted activation by a trainable matrix (a linear layer): ``aten::matmul``
    launches a copy exactly when :func:`rows_copy` says so."""
    perm = data.draw(st.permutations(range(len(shape))))
    x = torch.empty(shape).permute(*perm)
    w = torch.zeros(x.shape[-1], 5, requires_grad=True)
    with _Clones() as d:
        torch.matmul(x, w)
    assert rows_copy(tuple(x.shape), tuple(x.stride())) == (d.clones > 0)

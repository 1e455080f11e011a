"""The split search's lower bound never exceeds a split's price, so pruning on it stays exact.

Oracles: DDP's bucket walk (:func:`perfmodel.strategies.data.buckets`) for the vectorised
bucket sizes, and ``predict``'s own price of every split through ``balance=`` (the chain
pricing, :func:`perfmodel.strategies.compose.price`) for the bound.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies.compose import price
from perfmodel.strategies.context import context, split_batch
from perfmodel.strategies.data import buckets
from perfmodel.strategies.spatial import sample_layers
from perfmodel.strategies.spec import parse_strategy
from perfmodel.strategies.split_search import exchange_floor_s, fill_drain_s, last_bucket_bytes, split_pool, tail_s


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=40), st.integers(1, 90))
def test_last_bucket_is_the_walks_last_bucket(grads: list[int], bucket: int) -> None:
    g = np.array(grads, dtype=float)
    stops = np.arange(1, len(g) + 1)
    got = last_bucket_bytes(g, stops, float(bucket))
    for stop in stops:
        filled = buckets(g[:stop][::-1], float(bucket))
        assert got[stop - 1] == (filled[-1][1] if filled else 0.0)


def test_last_bucket_of_resnet50_prefixes() -> None:
    """Real gradient sizes (fp32 resnet50, 25 MiB buckets): the vector equals the walk."""
    ctx = context(get_model("resnet50"), load_hardware("a100-80gb-dgx"), "fp32", "sgd")
    grad = ctx.cc.params * 4.0
    stops = np.arange(1, len(grad) + 1)
    got = last_bucket_bytes(grad, stops)
    want = [buckets(grad[:b][::-1])[-1][1] if grad[:b].sum() > 0 else 0.0 for b in stops]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("model", "spec", "gpus", "hw", "precision"), [
    ("resnet18", "pp=2,dp=4,mb=4", 8, "a100-80gb-dgx", "amp"),
    ("resnet18", "pp=3,dp=2,mb=6,comm=tree", 6, "v100-16gb-dgx1", "fp32"),
    ("squeezenet1_1", "pp=2,dp=16,mb=2,comm=hierarchical", 32, "a100-80gb-dgx", "amp"),
    ("resnet18", "pp=2,dp=2,mb=4,overlap=none", 4, "h100-80gb-dgx", "amp"),
    ("mobilenet_v2", "pp=2,dp=4,mb=4,recompute=true", 8, "p100-16gb-nvlink", "fp32"),
])
def test_bound_is_below_every_splits_price(model: str, spec: str, gpus: int, hw: str, precision: str) -> None:
    """Fill-drain + tail + the exchange floor is at most the price of every split of the pool."""
    net = get_model(model, 64)
    ctx = context(net, load_hardware(hw), precision, "sgd")
    s = parse_strategy(spec, gpus)
    batch = 8 * gpus
    per_replica, _ = split_batch(batch, s)
    layers = sample_layers(ctx, per_replica / s.mb)
    pool = split_pool(len(net.links), s.pp, [])
    body = fill_drain_s(ctx, s, layers, pool)
    _, tail = tail_s(ctx, s, pool)
    floor = exchange_floor_s(ctx, s, pool)
    assert len(pool) >= 9
    gains = []
    for j, row in enumerate(pool):
        bal = ":".join(str(int(x)) for x in np.diff(row))
        step = price(ctx, parse_strategy(f"{spec},balance={bal}", gpus), batch).time_s
        assert float(body[j]) + tail(j) + floor(j) <= step * (1 + 1e-12), (bal, floor(j), step)
        gains.append(floor(j))
    assert min(gains) > 0  # the bound adds something wherever DDP exchanges gradients

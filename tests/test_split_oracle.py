"""The automatic pipeline split against brute force: no contiguous split that ``predict``
prices (``balance=a:b:...``) is faster than the one the search picks.

Cases that missed before the exhaustive split search (tools/split_oracle.py on e300d74):
mobilenet_v2 pp=2 on H100 with a 16-bit model picked 9:11 (13.25 ms) where 10:10 prices at
12.98 ms; vgg16 pp=3 on V100 4:7:8 (52.6 ms) where 6:6:7 prices at 50.3 ms.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.hardware import load_hardware
from perfmodel.network.zoo import get_model
from perfmodel.strategies.compose import chain_memory, price, split_memory_bytes
from perfmodel.strategies.context import context
from perfmodel.strategies.spatial import sample_layers, spatial_layers
from perfmodel.strategies.spec import parse_strategy
from perfmodel.strategies.split_search import cheapest_split, split_pool

CASES = [
    ("mobilenet_v2", 2, "h100-80gb-dgx", "amp", "pytorch-half"),
    ("mobilenet_v2", 2, "h100-80gb-dgx", "amp", "pytorch-autocast"),
    ("vgg16", 3, "v100-16gb-dgx1", "amp", "pytorch-autocast"),
    ("vgg16", 3, "a100-80gb-dgx", "amp", "pytorch-half"),
    ("cosmoflow", 3, "a100-80gb-dgx", "fp32", "pytorch-autocast"),
    ("alexnet", 4, "h100-80gb-dgx", "fp32", "pytorch-autocast"),
    ("squeezenet1_1", 4, "v100-16gb-dgx1", "amp", "pytorch-autocast"),
]


def _compositions(n: int, k: int) -> list[tuple[int, ...]]:
    out = []
    for cuts in itertools.combinations(range(1, n), k - 1):
        b = (0, *cuts, n)
        out.append(tuple(b[i + 1] - b[i] for i in range(k)))
    return out


@pytest.mark.parametrize(("model", "k", "hw", "precision", "runtime"), CASES)
def test_no_contiguous_split_is_faster_than_the_search(model: str, k: int, hw: str, precision: str,
                                                        runtime: str) -> None:
    net = get_model(model)
    hardware = load_hardware(hw)
    ctx = context(net, hardware, precision, "sgd", amp_runtime=runtime)
    spec, gpus = f"pp={k},dp=2,mb={2 * k}", 2 * k
    batch = 8 * gpus
    auto = price(ctx, parse_strategy(spec, gpus), batch)
    cap = hardware.device.memory_bytes
    every = []
    for bal in _compositions(len(net.links), k):
        p = price(ctx, parse_strategy(f"{spec},balance={':'.join(map(str, bal))}", gpus), batch)
        every.append((sum(p.memory.values()) > cap, p.time_s, bal))
    too_big, best_s, best_bal = min(every)
    assert auto.details["balance_search"]["exhaustive"] and auto.details["balance_search"]["gap_bound_s"] == 0.0
    assert (sum(auto.memory.values()) > cap) == too_big
    assert auto.time_s <= best_s * (1 + 1e-12), (auto.details["balance"], auto.time_s, best_bal, best_s)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 10.0), min_size=2, max_size=40), st.lists(st.booleans(), min_size=40, max_size=40),
       st.floats(0.0, 5.0), st.integers(1, 50))
def test_cheapest_split_is_the_brute_force_minimum(extra: list[float], fit: list[bool], spread: float,
                                                  budget: int) -> None:
    """Bound ``lower``, step ``lower + extra``: the branch and bound returns the fastest fitting
    row (the fastest of all if none fits), the minimum over every row, or past its budget a row
    at most its stated gap above that minimum."""
    lower = np.linspace(1.0, 1.0 + spread, len(extra))[::-1].copy()
    steps = lower + np.array(extra)
    fits = np.array(fit[: len(extra)])
    row, priced, gap = cheapest_split(lower, fits, lambda j: float(steps[j]), budget)
    pool = [j for j in range(len(extra)) if fits[j]] or list(range(len(extra)))
    best = min(steps[j] for j in pool)
    assert row in pool and 1 <= priced <= min(budget, len(pool))
    assert gap >= 0.0 and steps[row] <= best + gap + 1e-12
    if priced < budget:
        assert steps[row] == best and gap == 0.0


def test_pool_is_every_split_while_small_and_local_moves_above() -> None:
    assert len(split_pool(20, 3, [])) == 171  # C(19, 2)
    local = split_pool(52, 8, [(7, 7, 7, 7, 6, 6, 6, 6)])
    assert len(local) == 1 + 7 * 4
    assert all((np.diff(row) > 0).all() and row[-1] == 52 for row in local)


@pytest.mark.parametrize(("spec", "gpus"), [("pp=4,dp=2,mb=8", 8), ("pp=4,dp=2,mb=8,schedule=1f1b", 8),
                                           ("pp=3,mb=2,recompute=true", 3), ("pp=2,sp=2x2,mb=4", 8)])
def test_split_memory_is_chain_memory_of_each_split(spec: str, gpus: int) -> None:
    """The vectorized memory the search filters on equals the reported memory of every split."""
    net = get_model("resnet18")
    ctx = context(net, load_hardware("v100-16gb-dgx1"), "amp", "adam")
    s = parse_strategy(spec, gpus)
    pool = split_pool(len(net.links), s.pp, [])
    m = 8
    layers = spatial_layers(ctx, s, m) if s.sp_degree > 1 else sample_layers(ctx, m)
    per_replica, workspace = m * s.mb, 3.0e8
    vector = split_memory_bytes(ctx, s, layers, pool, per_replica, workspace)
    for row, total in zip(pool, vector, strict=True):
        parts = chain_memory(ctx, s, layers, row, per_replica, workspace)
        assert total == pytest.approx(sum(parts.values()), rel=1e-12)

"""Multi-start fits: reproducible starts inside the bounds, and the best local optimum kept."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from perfmodel.validation.multistart import best_of, start_points

BOUNDS = [(0.3, 1.0), (1e-7, 2e-6), (0.0, 500.0)]


def test_first_start_is_the_callers_and_draws_repeat() -> None:
    x0 = [0.5, 5e-7, 100.0]
    a = start_points(x0, BOUNDS, 6, seed=3)
    b = start_points(x0, BOUNDS, 6, seed=3)
    assert len(a) == 6 and np.array_equal(a[0], np.array(x0))
    assert all(np.array_equal(p, q) for p, q in zip(a, b, strict=True))
    assert not np.array_equal(a[1], start_points(x0, BOUNDS, 2, seed=4)[1])


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 20), seed=st.integers(0, 2**31 - 1))
def test_every_start_inside_its_bounds(n: int, seed: int) -> None:
    for p in start_points([0.5, 5e-7, 100.0], BOUNDS, n, seed)[1:]:
        assert all(lo <= x <= hi for x, (lo, hi) in zip(p, BOUNDS, strict=True))


def test_wide_positive_bounds_are_drawn_log_uniformly() -> None:
    # over 1e-7..2e-6 (a factor 20) half the draws fall below the geometric middle (4.5e-7); a
    # uniform draw would put only (4.5e-7 - 1e-7) / 1.9e-6 = 18% there
    pts = np.array([p[1] for p in start_points([5e-7, 5e-7, 1.0], BOUNDS, 2001, seed=0)[1:]])
    below = float(np.mean(pts < np.sqrt(1e-7 * 2e-6)))
    assert 0.45 < below < 0.55


def test_best_of_escapes_the_well_a_single_start_stops_in() -> None:
    # two wells: a shallow one at x = -1 (loss 0.5) and the global one at x = 2 (loss 0)
    def loss(x: np.ndarray) -> float:
        return float(min((x[0] + 1) ** 2 + 0.5, (x[0] - 2) ** 2))

    def local(s: np.ndarray) -> tuple[np.ndarray, float]:
        sol = minimize(loss, s, method="Nelder-Mead")
        return sol.x, float(sol.fun)

    one = best_of(local, start_points([-1.2], [(-3.0, 3.0)], 1))
    many = best_of(local, start_points([-1.2], [(-3.0, 3.0)], 8, seed=1))
    assert one.loss == pytest.approx(0.5, abs=1e-6) and one.best_start == 0
    assert many.loss < 1e-6 and abs(many.x[0] - 2.0) < 1e-3 and many.best_start > 0
    assert many.start_losses[0] == pytest.approx(one.loss)


@pytest.mark.parametrize("args", [([0.5], BOUNDS, 2), ([0.5, 1e-7, 1.0], BOUNDS, 0), ([0.5], [(1.0, 0.0)], 2)])
def test_bad_requests_raise(args: tuple[list[float], list[tuple[float, float]], int]) -> None:
    with pytest.raises(ValueError):
        start_points(*args)

"""NeuSight's timing window: the measured host floor per GPU and op, and how its rows are priced with it."""

from __future__ import annotations

import dataclasses

import numpy as np

from perfmodel.validation.kernel_rows import KernelRow, load_rows
from perfmodel.validation.kernels import price_rows
from perfmodel.validation.neusight_window import WINDOW_FLOOR, window_floor


def _rows() -> list[KernelRow]:
    return list(load_rows(("neusight",)))


def test_no_shipped_row_is_faster_than_its_floor() -> None:
    # the floors are the smallest times of NeuSight's whole collection; the shipped rows are a
    # subset of it, so none may be below its GPU's and op's floor (a wrong constant fails here)
    seen = set()
    for r in _rows():
        floor = window_floor(r.gpu, r.op.split(" ")[0])
        if floor is None:
            assert r.window_floor is None
            continue
        assert r.window_floor is not None and r.window_floor.measured_s == floor[0]
        assert r.measured_s >= floor[0]
        seen.add((r.gpu, r.op.split(" ")[0]))
    assert seen == set(WINDOW_FLOOR)  # every floor prices shipped rows


def test_gpus_without_small_problems_have_no_floor() -> None:
    for r in _rows():
        if r.gpu == "NVIDIA H100 80GB HBM3" or (r.gpu == "NVIDIA A100 80GB PCIe" and r.op != "conv 3x3 fwd"):
            assert r.window_floor is None
    assert all(1e-5 < s < 2e-4 for s, _ in WINDOW_FLOOR.values())  # tens of microseconds, as printed


def test_the_floors_own_problem_prices_at_its_measured_time() -> None:
    # the floor holds the host work and its own small kernel: counting that kernel (or its launch)
    # twice would price the floor's problem above what it measured
    floors = [r.window_floor for r in _rows()[::40] if r.window_floor is not None]
    problems = [dataclasses.replace(f, window_floor=f) for f in {id(f): f for f in floors}.values()]
    priced, _ = price_rows(problems, before=False)
    np.testing.assert_allclose(priced, [f.measured_s for f in problems], rtol=1e-12)


def test_rows_price_their_gpu_time_plus_the_windows_host_work() -> None:
    rows = [r for r in _rows() if r.window_floor is not None][::25]
    floors = [r.window_floor for r in rows if r.window_floor is not None]
    with_floor, _ = price_rows(rows, before=False)
    gpu_only, _ = price_rows([dataclasses.replace(r, window_floor=None) for r in rows], before=False)
    floor_gpu, _ = price_rows(floors, before=False)
    floor_s = np.array([f.measured_s for f in floors])
    host = floor_s - floor_gpu
    assert np.all(host > 0)  # the model prices every floor problem below its measured time
    np.testing.assert_allclose(with_floor, np.maximum(floor_s, gpu_only + host), rtol=1e-9, atol=1e-15)
    assert np.all(with_floor >= floor_s)

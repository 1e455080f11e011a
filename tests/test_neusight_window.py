"""NeuSight's timing window: the measured host floor per GPU and op, added to its rows' prices."""

from __future__ import annotations

import dataclasses

import numpy as np

from perfmodel.validation.kernel_rows import KernelRow, load_rows
from perfmodel.validation.kernels import price_rows
from perfmodel.validation.neusight_window import WINDOW_FLOOR_S, window_floor_s


def _rows() -> list[KernelRow]:
    return list(load_rows(("neusight",)))


def test_no_shipped_row_is_faster_than_its_floor() -> None:
    # the floors are the smallest times of NeuSight's whole collection; the shipped rows are a
    # subset of it, so none may be below its GPU's and op's floor (a wrong constant fails here)
    rows = _rows()
    seen = set()
    for r in rows:
        op = r.op.split(" ")[0]
        floor = window_floor_s(r.gpu, op)
        assert r.host_s == floor
        assert r.measured_s >= floor
        if floor:
            seen.add((r.gpu, op))
    assert seen == set(WINDOW_FLOOR_S)  # every floor prices shipped rows


def test_gpus_without_small_problems_have_no_floor() -> None:
    rows = _rows()
    for r in rows:
        if r.gpu == "NVIDIA H100 80GB HBM3" or (r.gpu == "NVIDIA A100 80GB PCIe" and r.op != "conv 3x3 fwd"):
            assert r.host_s == 0.0
    assert all(1e-5 < s < 2e-4 for s in WINDOW_FLOOR_S.values())  # tens of microseconds, as printed


def test_the_floor_adds_to_the_kernel_models_gpu_time() -> None:
    rows = [r for r in _rows() if r.host_s > 0][::25]
    bare = [dataclasses.replace(r, host_s=0.0) for r in rows]
    with_floor, _ = price_rows(rows, before=False)
    gpu_only, _ = price_rows(bare, before=False)
    np.testing.assert_allclose(with_floor - gpu_only, [r.host_s for r in rows], rtol=1e-9, atol=1e-15)

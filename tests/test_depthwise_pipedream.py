"""Depthwise convolutions against PipeDream's measured V100 NASNet layers (perfmodel.cost.depthwise)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from perfmodel.validation.kernel_rows import KernelRow, load_rows
from perfmodel.validation.kernels import price_rows
from perfmodel.validation.pipedream_lomo import held_out_prices


@pytest.fixture(scope="module")
def nasnet_rows() -> list[KernelRow]:
    return [r for r in load_rows(("pipedream",)) if r.op.startswith("conv depthwise")]


def test_pipedream_depthwise_rows_held_out() -> None:
    # The shipped depthwise numbers were fitted on these NASNet rows, so the score that counts
    # is out of sample: each NASNet's rows priced with every PipeDream-only number (the three
    # depthwise ones included) derived from the other NASNet's rows. One depthwise efficiency
    # per generation was 71.8% / 20.7% off in sample (forward / backward); the forward's rows
    # sit near the 0.1 ms scoring floor, where the profiler's noise is largest.
    rows = [r for r in load_rows(("pipedream",)) if r.model.startswith("nasnet")]
    out, _ = held_out_prices(rows)
    meas = np.array([r.measured_s for r in rows])
    fwd = [i for i, r in enumerate(rows) if r.op.startswith("conv depthwise") and r.what == "layer_fwd"]
    bwd = [i for i, r in enumerate(rows) if r.op.startswith("conv depthwise") and r.what == "layer_bwd"]
    assert len(fwd) >= 80 and len(bwd) >= 300
    assert 100 * float(np.mean(np.abs(out[fwd] / meas[fwd] - 1))) < 30
    assert 100 * float(np.mean(np.abs(out[bwd] / meas[bwd] - 1))) < 15


def test_cost_per_flop_by_window_follows_pipedream(nasnet_rows: list[KernelRow]) -> None:
    # (in sample: a guard on the law's shape at the shipped numbers, fitted on these rows)
    # measured: the larger the window, the less time per FLOP; the model follows it within a third
    # per window size (one efficiency per generation priced 5x5 and 7x7 1.7-2.1x slow, 3x3 0.5-0.9x)
    fwd = [r for r in nasnet_rows if r.what == "layer_fwd"]
    pred, _ = price_rows(fwd, before=False)
    meas_per_flop: dict[int, list[float]] = defaultdict(list)
    ratio: dict[int, list[float]] = defaultdict(list)
    for r, p in zip(fwd, pred, strict=True):
        k = r.layer.kernel[0]
        meas_per_flop[k].append(r.measured_s / (2 * r.batch * r.layer.out_elems * k * k))
        ratio[k].append(p / r.measured_s)
    med = [float(np.median(meas_per_flop[k])) for k in (3, 5, 7)]
    assert med[0] > med[1] > med[2]
    for k in (3, 5, 7):
        assert 0.75 < float(np.median(ratio[k])) < 1.33, (k, np.median(ratio[k]))

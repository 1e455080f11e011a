"""The autograd saved-storage oracle counts by hand on a small network."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from perfmodel.validation.autograd_saved import saved_storages  # noqa: E402


def test_counts_distinct_storages_and_indices() -> None:
    # conv saves the input (left out) and its weight (a parameter: left out); ReLU saves its
    # output, 4 x 8 x 8 = 256 elements; max-pool saves the same storage again (counted once)
    # and its int64 indices, 4 x 4 x 4 x 8 = 512 bytes per sample
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
    saved = saved_storages(net, (3, 8, 8), batch=3)
    assert saved.float_elements == 256
    assert saved.other_bytes == 512


def test_refuses_a_batch_of_one() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        saved_storages(torch.nn.ReLU(), (4,), batch=1)

"""The P100/V100 PCIe profiles: their generation's kernel numbers, their own card's peaks."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest
from cli_helpers import load_file

from perfmodel.hardware import load_hardware

#: PCIe profile -> the SXM2 profile of the same GPU generation whose fitted numbers it shares
TWINS = {"p100-16gb-pcie": "p100-16gb-nvlink", "v100-32gb-pcie": "v100-32gb-dgx1"}


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_file("scripts/fit_kernel_params.py", "fit_kernel_params_pcie")


@pytest.mark.parametrize("pcie", sorted(TWINS))
def test_pcie_profile_shares_its_generations_numbers(pcie: str) -> None:
    p, twin = load_hardware(pcie), load_hardware(TWINS[pcie])
    assert p.kernels == twin.kernels
    assert set(p.compute) == set(twin.compute)
    for prec, eff in p.compute.items():
        other = twin.compute[prec]
        assert dataclasses.replace(eff, half_work_flops=0.0) == dataclasses.replace(other, half_work_flops=0.0)
        # the derived Hockney n_1/2 follows the card's own peak (10 us of work, two digits)
        assert eff.half_work_flops < other.half_work_flops
    # a 250 W PCIe card is slower than its 300 W SXM2 twin at the same memory bandwidth
    assert p.device.peak_flops_per_s["fp32"] < twin.device.peak_flops_per_s["fp32"]
    assert p.device.memory_bandwidth_bytes_per_s == twin.device.memory_bandwidth_bytes_per_s
    assert p.intra.bandwidth_bytes_per_s < 20e9  # PCIe 3.0 x16, not NVLink


@pytest.mark.parametrize("pcie", sorted(TWINS))
def test_fit_writes_the_pcie_profiles_with_their_twins(fit: ModuleType, pcie: str) -> None:
    for compute, kernels in fit.WRITES.values():
        assert (pcie in kernels) == (TWINS[pcie] in kernels)
        assert compute.get(pcie) == compute.get(TWINS[pcie])

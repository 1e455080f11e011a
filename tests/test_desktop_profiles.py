"""The one-card desktop profiles (TITAN V, GTX 1080 Ti): their generation's numbers, their own peaks."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest
from cli_helpers import load_file

from perfmodel.cost.cudnn_gpus import architecture_of
from perfmodel.errors import PerfmodelError
from perfmodel.hardware import load_hardware
from perfmodel.hardware.generation import generation
from perfmodel.strategies import predict

#: desktop profile -> the shipped profile of the same chip whose fitted numbers it shares
TWINS = {"titan-v": "v100-16gb-dgx1", "gtx-1080-ti": "p40-24gb-pcie"}
#: SMs enabled (Titan V: 80 of GV100 as the V100; GTX 1080 Ti: 28 of GP102's 30, the P40 has 30)
SMS = {"titan-v": 80, "gtx-1080-ti": 28}


@pytest.fixture(scope="module")
def fit() -> ModuleType:
    return load_file("scripts/fit_kernel_params.py", "fit_kernel_params_desktop")


@pytest.mark.parametrize("name", sorted(TWINS))
def test_desktop_profile_shares_its_generations_numbers(name: str) -> None:
    p, twin = load_hardware(name), load_hardware(TWINS[name])
    assert p.kernels == dataclasses.replace(twin.kernels, sm_count=SMS[name])
    assert set(p.compute) == set(twin.compute)
    for prec, eff in p.compute.items():
        other = twin.compute[prec]
        assert dataclasses.replace(eff, half_work_flops=0.0) == dataclasses.replace(other, half_work_flops=0.0)
        # the derived Hockney n_1/2 follows the card's own peak (10 us of work, two digits)
        assert eff.half_work_flops == pytest.approx(10e-6 * p.device.peak(prec) * eff.linear, rel=0.05)
    # fewer SMs or a lower boost clock than the twin: a lower fp32 peak
    assert p.device.peak_flops_per_s["fp32"] < twin.device.peak_flops_per_s["fp32"]


@pytest.mark.parametrize("name", sorted(TWINS))
def test_fit_writes_the_desktop_profiles_with_their_twins(fit: ModuleType, name: str) -> None:
    for compute, kernels in fit.WRITES.values():
        assert (name in kernels) == (TWINS[name] in kernels)
        assert compute.get(name) == compute.get(TWINS[name])


def test_generations_and_cudnn_floors() -> None:
    assert generation(load_hardware("titan-v").device.name) == "volta"
    assert generation(load_hardware("gtx-1080-ti").device.name) == "pascal"
    assert [architecture_of(load_hardware(n).device.name).min_cudnn_major  # type: ignore[union-attr]
            for n in ("titan-v", "gtx-1080-ti")] == [7, 5]
    # other GeForce names stay unrecognised (no fitted numbers for Maxwell or Turing)
    assert generation("GeForce GTX 980") is None and generation("GeForce RTX 2080 Ti") is None


def test_peaks_follow_the_chip() -> None:
    """Titan V: tensor cores at 8x the FP32 rate (GV100 SM: 8 x 64 FMA against 64 lanes); the GTX
    1080 Ti has no unit faster than fp32, so amp runs at the fp32 peak with 2-byte activations."""
    tv, ti = load_hardware("titan-v").device, load_hardware("gtx-1080-ti").device
    assert tv.peak("amp") == pytest.approx(8 * tv.peak("fp32"))
    assert ti.peak("amp") == ti.peak("fp32") == ti.peak("tf32")


@pytest.mark.parametrize("name", sorted(TWINS))
def test_one_card_only(name: str) -> None:
    assert load_hardware(name).max_gpus == 1
    assert predict("resnet50", 1, "dp=1", name, "fp32", batch_per_gpu=16).throughput_samples_per_s > 0
    with pytest.raises(PerfmodelError):
        predict("resnet50", 2, "dp=2", name, "fp32", batch_per_gpu=16)

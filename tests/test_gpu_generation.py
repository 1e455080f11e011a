"""One GPU-generation recogniser (perfmodel.hardware.generation) serves the cuDNN check and the
validation groups: names the two used to disagree on (V100S, A800, A10G, GV100) now agree."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfmodel.cost.cudnn_gpus import architecture_of, check_cudnn_for_gpu
from perfmodel.errors import UsageError
from perfmodel.hardware import Hardware, load_hardware, profile_names
from perfmodel.hardware.generation import generation
from perfmodel.validation.intervals import generation_of

NAMES = {  # device names as nvidia-smi / NVIDIA's product pages spell them
    "Tesla V100S-PCIE-32GB": "volta",
    "Quadro GV100": "volta",
    "TITAN V": "volta",
    "NVIDIA A800-SXM4-80GB": "ampere",
    "NVIDIA A10G": "ampere",
    "NVIDIA RTX A6000": "ampere",
    "NVIDIA A100-SXM4-80GB": "ampere",
    "Tesla P100-PCIE-16GB": "pascal",
    "Tesla P4": "pascal",
    "Tesla T4": "turing",
    "NVIDIA L40S": "ada",
    "NVIDIA H100 80GB HBM3": "hopper",
    "NVIDIA GH200 480GB": "hopper",
    "NVIDIA H800": "hopper",
    "NVIDIA B200": "blackwell",
}
UNKNOWN = ["NVIDIA GeForce RTX 3090", "AMD Instinct MI250X", "my own accelerator", ""]


def _hw(device_name: str) -> Hardware:
    hw = load_hardware("v100-16gb-dgx1")
    return replace(hw, device=replace(hw.device, name=device_name))


@pytest.mark.parametrize(("name", "gen"), sorted(NAMES.items()))
def test_both_users_see_the_same_generation(name: str, gen: str) -> None:
    assert generation(name) == gen
    assert generation_of(_hw(name)) == gen
    arch = architecture_of(name)
    assert (arch.key if arch else None) == (gen if gen in ("pascal", "volta", "ampere", "hopper") else None)


@pytest.mark.parametrize("name", ["NVIDIA A800-SXM4-80GB", "NVIDIA A10G", "NVIDIA H800"])
def test_cudnn7_is_refused_on_every_ampere_and_hopper_name(name: str) -> None:
    with pytest.raises(UsageError, match="needs cuDNN >= 8"):
        check_cudnn_for_gpu(7, _hw(name))


@pytest.mark.parametrize("name", ["Tesla V100S-PCIE-32GB", "Quadro GV100"])
def test_cudnn6_is_refused_on_volta_names(name: str) -> None:
    with pytest.raises(UsageError, match="Volta needs cuDNN >= 7"):
        check_cudnn_for_gpu(6, _hw(name))


@pytest.mark.parametrize("name", UNKNOWN)
def test_unknown_names_stay_unchecked(name: str) -> None:
    assert generation(name) is None and architecture_of(name) is None
    assert generation_of(_hw(name)) == "unknown"
    assert check_cudnn_for_gpu(5, _hw(name)) == 5


def test_every_shipped_profile_is_recognised() -> None:
    for p in profile_names():
        assert generation(load_hardware(p).device.name) in ("pascal", "volta", "ampere", "hopper"), p


@pytest.mark.parametrize("name, gen", [
    ("nvidia a100-sxm4-80gb", "ampere"), ("tesla v100s-pcie-32gb", "volta"), ("titan v", "volta"),
    ("Intel Arc A770", None), ("AMD Radeon Pro V620", None), ("Google TPU v4", None),
])
def test_names_in_any_case_and_other_vendors(name: str, gen: str | None) -> None:
    # a user's TOML may write the device name in lower case; other vendors' model numbers share
    # NVIDIA's letters and have no NVIDIA generation (left unchecked)
    assert generation(name) == gen

"""A cuDNN major that never ran on the profile's GPU is a usage error, through every API entry.

Oracle: NVIDIA's release notes and support matrices (perfmodel/cost/cudnn_gpus.py): Volta from
cuDNN 7.0.1, Ampere and Hopper from cuDNN 8, Pascal with every major perfmodel prices. The shipped
profiles' GPUs are listed by hand below from their datasheet names.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import perfmodel.data
from perfmodel import plan, predict
from perfmodel.api import scale
from perfmodel.commands.compare import compare
from perfmodel.cost.cudnn_gpus import architecture_of, check_cudnn_for_gpu
from perfmodel.cost.grouped import CUDNN_MAJORS, DEFAULT_CUDNN_MAJOR
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.hardware.loader import profile_names
from perfmodel.partition import partition_report
from perfmodel.validation.measurements import load_measurements
from perfmodel.validation.software_era import cudnn_major_of

#: Each shipped profile's GPU generation, by hand (the profile's [device] name).
GENERATION = {
    "p100-16gb-nvlink": "Pascal", "p100-16gb-pcie": "Pascal", "p40-24gb-pcie": "Pascal",
    "gtx-1080": "Pascal", "titan-x-pascal": "Pascal", "gtx-1080-ti": "Pascal",
    "v100-16gb-dgx1": "Volta", "v100-32gb-dgx1": "Volta", "v100-32gb-dgx2": "Volta", "v100-32gb-pcie": "Volta",
    "abci-v100-16gb": "Volta", "titan-v": "Volta",
    "a100-40gb-dgx": "Ampere", "a100-80gb-dgx": "Ampere", "a100-40gb-pcie": "Ampere", "a100-80gb-pcie": "Ampere",
    "h100-80gb-dgx": "Hopper", "h100-80gb-pcie": "Hopper", "h200-141gb-dgx": "Hopper",
}
#: The oldest cuDNN major each generation ran (release notes, module docstring).
OLDEST = {"Pascal": 5, "Volta": 7, "Ampere": 8, "Hopper": 8}


def test_every_shipped_profile_has_its_generation() -> None:
    assert set(profile_names()) == set(GENERATION)
    for name, gen in GENERATION.items():
        arch = architecture_of(load_hardware(name).device.name)
        assert arch is not None and arch.name == gen, name
        assert arch.min_cudnn_major == OLDEST[gen]


@pytest.mark.parametrize("name", sorted(GENERATION))
def test_exactly_the_majors_before_the_generation_are_refused(name: str) -> None:
    hw = load_hardware(name)
    oldest = OLDEST[GENERATION[name]]
    for major in CUDNN_MAJORS:
        if major >= oldest:
            assert check_cudnn_for_gpu(major, hw) == major
        else:
            with pytest.raises(UsageError) as e:
                check_cudnn_for_gpu(major, hw)
            msg = str(e.value)
            assert f"cuDNN {major} cannot run on {name}'s {hw.device.name}" in msg
            assert f"needs cuDNN >= {oldest}" in msg and "\n" not in msg
            assert msg.endswith(" or 9") or msg.endswith("--cudnn 9")


def test_the_default_is_never_refused() -> None:
    for name in GENERATION:
        check_cudnn_for_gpu(DEFAULT_CUDNN_MAJOR, load_hardware(name))
    p = predict("tiny_cnn", 1, "dp=1", "h200-141gb-dgx", "amp", 8)  # no cudnn_major given
    assert p.cudnn_major == DEFAULT_CUDNN_MAJOR


def test_an_unknown_gpu_is_not_checked() -> None:
    hw = load_hardware("v100-16gb-dgx1")
    own = replace(hw, device=replace(hw.device, name="Tesla T4"))
    assert architecture_of("Tesla T4") is None
    assert check_cudnn_for_gpu(5, own) == 5


AMPERE_7 = "cuDNN 7 cannot run on a100-80gb-dgx's NVIDIA A100-SXM4-80GB (Ampere needs cuDNN >= 8"


def test_every_api_entry_refuses_an_impossible_pair() -> None:
    with pytest.raises(UsageError, match=r"choose --cudnn 8 or 9"):
        predict("resnet50", 8, "dp=8", "a100-80gb-dgx", "amp", 32, cudnn_major=7)
    with pytest.raises(UsageError, match="Hopper needs cuDNN >= 8"):
        plan("resnet50", 8, "h100-80gb-dgx", "amp", 256, cudnn_major=6)
    with pytest.raises(UsageError, match="Volta needs cuDNN >= 7"):
        scale("resnet50", [1, 2], "v100-16gb-dgx1", "amp", batch_per_gpu=32, cudnn_major=5)
    with pytest.raises(UsageError, match=r"cuDNN 7 cannot run on a100-80gb-dgx"):
        compare("resnet50", 8, ["v100-16gb-dgx1", "a100-80gb-dgx"], ["amp"], cudnn_major=7)
    with pytest.raises(UsageError) as e:
        partition_report("resnet50", 2, cudnn_major=7)
    assert str(e.value).startswith(AMPERE_7)


@pytest.mark.parametrize("spec", ["pp=2,mb=4", "mp=2", "filter=2"])
def test_old_cudnn_on_volta_still_prices_every_kind(spec: str) -> None:
    """Pipelines rank their stage splits on the P40 and A100 reference profiles and mp=K weights
    its hypergraph on the A100, with the plan's cuDNN: references, not runs, so a V100 plan under
    cuDNN 7 (which the A100 never ran) is priced, and differs from cuDNN 9 on grouped layers."""
    old = predict("resnext50_32x4d", 2, spec, "v100-16gb-dgx1", "fp32", 16, cudnn_major=7)
    new = predict("resnext50_32x4d", 2, spec, "v100-16gb-dgx1", "fp32", 16, cudnn_major=9)
    assert old.iteration_time_s > new.iteration_time_s


def test_every_measured_row_names_a_cudnn_its_gpu_ran() -> None:
    """The validation data: each end-to-end row's cuDNN (software_era) ran on its GPU, the check
    the pricing context makes, so no row is refused."""
    files = sorted((Path(perfmodel.data.__file__).parent).glob("*runs.csv"))
    assert len(files) == 9  # published, hold-out, two family sets, jcjohnson, u39kun, hopper, unet3d, unet3d_tf
    rows = load_measurements(files).rows
    assert len(rows) > 150
    for m in rows:
        check_cudnn_for_gpu(cudnn_major_of(m), load_hardware(m.hardware))

"""Every number of a hardware profile is checked against one range table, wherever it enters:
the TOML loader, the dataclasses (what-ifs, the Python API) and ``explain --set``."""

from __future__ import annotations

import copy
import math
import tomllib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.errors import ProfileError
from perfmodel.hardware import load_hardware, parse_profile, profile_names, profiles_dir
from perfmodel.hardware.ranges import RANGES
from perfmodel.strategies import predict

GOOD = tomllib.loads((profiles_dir() / "a100-80gb-dgx.toml").read_text())

#: A dotted TOML field for each range name.
FIELDS = {
    "memory_bytes": "device.memory_bytes",
    "memory_bandwidth_bytes_per_s": "device.memory_bandwidth_bytes_per_s",
    "peak": "device.peak_flops_per_s.fp32",
    "bandwidth_bytes_per_s": "network.bandwidth_bytes_per_s",
    "latency_s": "node.link.latency_s",
    "efficiency": "node.link.efficiency",
    "conv": "efficiency.compute.amp.conv",
    "linear": "efficiency.compute.fp32.linear",
    "memory": "efficiency.compute.tf32.memory",
    "half_work_flops": "efficiency.compute.bf16.half_work_flops",
    "kernel_launch_s": "efficiency.kernel_launch_s",
    "framework_reserve_bytes": "efficiency.framework_reserve_bytes",
    "tile_half_intensity": "efficiency.kernels.tile_half_intensity",
    "winograd_gain": "efficiency.kernels.winograd_gain",
    "winograd_min_channels": "efficiency.kernels.winograd_min_channels",
    "winograd_transform_flops": "efficiency.kernels.winograd_transform_flops",
    "wgrad_efficiency": "efficiency.kernels.wgrad_efficiency",
    "wgrad_efficiency_tensor_cores": "efficiency.kernels.wgrad_efficiency_tensor_cores",
    "wgrad_split_efficiency": "efficiency.kernels.wgrad_split_efficiency",
    "wgrad_split_efficiency_tensor_cores": "efficiency.kernels.wgrad_split_efficiency_tensor_cores",
    "depthwise_efficiency": "efficiency.kernels.depthwise_efficiency",
    "host_op_s": "efficiency.kernels.host_op_s",
    "step_overhead_s": "efficiency.kernels.step_overhead_s",
    "per_gpu_hour": "price.per_gpu_hour",
    "base_latency_s": "collectives.base_latency_s",
    "memory_passes": "collectives.memory_passes",
    "memory_latency_s": "efficiency.kernels.memory_latency_s",
    "wgrad_max_split": "efficiency.kernels.wgrad_max_split",
    "wgrad_tile_passes": "efficiency.kernels.wgrad_tile_passes",
    "dgrad_atomic_flops": "efficiency.kernels.dgrad_atomic_flops",
    "sector_slots_per_sm": "efficiency.kernels.sector_slots_per_sm",
    "depthwise_output_flops": "efficiency.kernels.depthwise_output_flops",
    "depthwise_wgrad_flops": "efficiency.kernels.depthwise_wgrad_flops",
    "tile_half_intensity_tensor_cores": "efficiency.kernels.tile_half_intensity_tensor_cores",
    "tile_half_intensity_gemm": "efficiency.kernels.tile_half_intensity_gemm",
}


def with_value(field: str, value: object) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    *path, last = field.split(".")
    table = data
    for k in path:
        table = table[k]
    table[last] = value
    return data


def test_every_range_has_a_field_and_the_template_says_so() -> None:
    assert set(FIELDS) == set(RANGES)
    template = (profiles_dir() / "template.toml").read_text()
    for r in RANGES.values():
        assert r.span in template, r.span


@pytest.mark.parametrize("name", profile_names())
def test_shipped_profiles_are_inside_the_ranges(name: str) -> None:
    load_hardware(name)  # the loader checks every field


def bounded_out(name: str, x: float) -> bool:
    """Whether ``x``, in its range, is past the bound another field of GOOD sets (the profile's
    checks across fields: the framework's reserve below the memory, other peaks above fp32's)."""
    peaks = GOOD["device"]["peak_flops_per_s"]
    faster = min(v for k, v in peaks.items() if k not in ("fp32", "source"))
    reserve, memory = GOOD["efficiency"]["framework_reserve_bytes"], GOOD["device"]["memory_bytes"]
    return {"peak": x >= faster, "memory_bytes": x <= reserve, "framework_reserve_bytes": x >= memory}.get(name, False)


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                    st.integers(min_value=-(10**400), max_value=10**400))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(sorted(FIELDS)), numbers)
def test_a_number_loads_if_and_only_if_it_is_in_range(name: str, value: float | int) -> None:
    r = RANGES[name]
    try:
        x = float(value)
    except OverflowError:
        x = math.inf
    try:
        hw = parse_profile(with_value(FIELDS[name], value), "p.toml")
    except ProfileError as e:
        assert not r.holds(x) or bounded_out(name, x), (name, value, str(e))
        assert FIELDS[name] in str(e) or bounded_out(name, x)
        assert len(str(e)) < 300
        return
    assert r.holds(x) and not bounded_out(name, x), (name, value)
    # a profile that loads prices to finite numbers
    p = predict("tiny_cnn", 16, "dp=16", hw, batch_per_gpu=2)
    assert math.isfinite(p.iteration_time_s) and p.iteration_time_s > 0
    assert math.isfinite(p.memory_per_gpu_bytes)


@pytest.mark.parametrize(("name", "value", "phrase"), [
    ("peak", 1e-300, "1e6 to 1e18"),
    ("kernel_launch_s", 1e308, "0 to 0.1 s"),
    ("bandwidth_bytes_per_s", 1e-300, "1e3 to 1e15"),
    ("memory_bytes", 10**400, "about 401 digits"),
    ("conv", 1e-300, "a fraction from 0.0001 to 1"),  # new-user walk: a step of 4.6e302 ms
])
def test_the_reported_cases(name: str, value: object, phrase: str) -> None:
    with pytest.raises(ProfileError, match=phrase):
        parse_profile(with_value(FIELDS[name], value), "p.toml")

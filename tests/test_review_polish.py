"""Review findings: dict what-ifs of the hardware's parts, the hardware command's model numbers,
explain's zero contention without overlap, and zero-valued contention what-ifs."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest

from perfmodel import api
from perfmodel.errors import ProfileError
from perfmodel.hardware import load_hardware as shipped

A100 = "a100-80gb-dgx"


# -- 1. what-ifs of a part of the hardware take a dict of its fields ----------------------------
def test_dict_what_ifs_change_those_fields_of_a_copy() -> None:
    base = shipped(A100)
    hw = api.load_hardware(A100, collectives={"channels_intra": 4, "memory_passes": 0.0},
                           kernels={"threads_per_sm": 1024})
    assert hw.collectives == dataclasses.replace(base.collectives, channels_intra=4, memory_passes=0.0)
    assert hw.kernels == dataclasses.replace(base.kernels, threads_per_sm=1024)
    assert shipped(A100).collectives == base.collectives  # the profile is not changed
    assert "what-if" in hw.name


def test_predict_frame_takes_dict_what_ifs_like_a_changed_profile() -> None:
    """The frame with ``collectives={...}`` equals the frame on a profile changed by hand."""
    base = shipped(A100)
    by_hand = dataclasses.replace(base, collectives=dataclasses.replace(base.collectives, channels_net=1,
                                                                        memory_passes=10.0))
    df = api.predict_frame("resnet50", 16, "dp=16", A100, batch_per_gpu=32,
                           collectives={"channels_net": 1, "memory_passes": 10.0})
    ref = api.predict_frame("resnet50", 16, "dp=16", by_hand, batch_per_gpu=32)
    plain = api.predict_frame("resnet50", 16, "dp=16", A100, batch_per_gpu=32)
    assert float(df["step_s"].iloc[0]) == pytest.approx(float(ref["step_s"].iloc[0]), rel=1e-12)
    assert float(df["step_s"].iloc[0]) != float(plain["step_s"].iloc[0])  # the change is priced


BAD_PARTS: list[tuple[str, Callable[[], Any], str]] = [
    ("channels above the SMs", lambda: api.load_hardware(A100, collectives={"channels_intra": 200}),
     "channels_intra = 200 must be below efficiency.kernels.sm_count = 108"),
    ("SMs below the channels", lambda: api.load_hardware(A100, kernels={"sm_count": 2}),
     "must be below efficiency.kernels.sm_count = 2"),
    ("channels a float", lambda: api.load_hardware(A100, collectives={"channels_net": 2.5}),
     "'channels_net' must be an integer"),
    ("latency nan", lambda: api.load_hardware(A100, kernels={"memory_latency_s": math.nan}),
     "memory_latency_s"),
    ("misspelt field", lambda: api.load_hardware(A100, collectives={"channel_intra": 4}),
     "did you mean channels_intra"),
    ("unknown field", lambda: api.load_hardware(A100, kernels={"bogus": 1}), "valid: sm_count, "),
    ("not a dict", lambda: api.load_hardware(A100, collectives=[4]), "a dict of its fields"),
    ("link not a dict", lambda: api.load_hardware(A100, intra=3), "intra must be a LinkTier"),
    ("non-str key", lambda: api.load_hardware(A100, inter={1: 2}), "inter has no field 1"),
    ("device peaks", lambda: api.load_hardware(A100, device={"peak_flops_per_s": 5}), "peak_flops_per_s"),
    ("compute", lambda: api.load_hardware(A100, compute={"fp32": 1}), "ComputeEfficiency"),
    ("frame", lambda: api.predict_frame("tiny_cnn", 8, "dp=8", A100, kernels={"sm_count": 0}),
     "'sm_count' must be a positive integer"),
]


@pytest.mark.parametrize(("name", "call", "phrase"), BAD_PARTS, ids=[c[0] for c in BAD_PARTS])
def test_bad_part_what_ifs_raise_one_profile_error(name: str, call: Callable[[], Any], phrase: str) -> None:
    with pytest.raises(ProfileError) as e:
        call()
    assert phrase in str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) < 400

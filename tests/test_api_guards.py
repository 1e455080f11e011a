"""The notebook API checks its arguments: wrong kinds raise the project's errors, never
AttributeError/TypeError/ZeroDivisionError, and never a silently wrong frame."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.errors import PerfmodelError, ProfileError, UsageError

PF = api.predict_frame
CASES: list[tuple[str, Callable[[], Any], type[PerfmodelError], str]] = [
    ("model None", lambda: PF(None, 8, "dp=8"), UsageError, "model must be"),
    ("model number", lambda: api.load_model(3), UsageError, "model must be"),
    ("strategy number", lambda: PF("tiny_cnn", 8, 8), UsageError, "strategy must be"),
    ("strategy dict", lambda: PF("tiny_cnn", 8, {"dp": 8}), UsageError, "strategy must be"),
    ("strategy bytes", lambda: PF("tiny_cnn", 8, b"dp=8"), UsageError, "strategy must be"),
    ("strategy None", lambda: PF("tiny_cnn", 8, None), UsageError, "strategy must be"),
    ("gpus bool", lambda: PF("tiny_cnn", True, "dp=1"), UsageError, "gpus must be an integer"),
    ("gpus float", lambda: PF("tiny_cnn", 8.0, "dp=8"), UsageError, "gpus must be an integer"),
    ("gpus huge", lambda: PF("tiny_cnn", 10**30, "dp=8"), UsageError, "1,000,000"),
    ("hardware number", lambda: PF("tiny_cnn", 8, "dp=8", hardware=3), UsageError, "hardware must be"),
    ("precision", lambda: PF("tiny_cnn", 8, "dp=8", precision="fp8"), UsageError, "unknown precision"),
    ("optimizer", lambda: PF("tiny_cnn", 8, "dp=8", optimizer="lamb"), UsageError, "unknown optimizer"),
    ("batch str", lambda: PF("tiny_cnn", 8, "dp=8", batch_per_gpu="8"), UsageError, "batch_per_gpu"),
    ("batch bool", lambda: PF("tiny_cnn", 8, "dp=8", global_batch=True), UsageError, "global_batch"),
    ("image size", lambda: PF("tiny_cnn", 8, "dp=8", image_size=10**9), UsageError, "image_size"),
    ("scale as str", lambda: PF("tiny_cnn", 8, "dp=8", intra_bandwidth_scale="2"), ProfileError, "a number"),
    ("scale nan", lambda: PF("tiny_cnn", 8, "dp=8", peak_scale=math.nan), ProfileError, "finite"),
    ("scale inf", lambda: api.load_hardware(inter_bandwidth_scale=math.inf), ProfileError, "finite"),
    ("scale 0", lambda: api.load_hardware(memory_bandwidth_scale=0), ProfileError, "> 0"),
    ("latency nan", lambda: api.load_hardware(intra_latency_scale=math.nan), ProfileError, ">= 0"),
    ("launch nan", lambda: api.load_hardware(kernel_launch_s=math.nan), ProfileError, "kernel_launch_s"),
    ("launch huge", lambda: api.load_hardware(kernel_launch_s=1e308), ProfileError, "0 to 0.1 s"),
    ("memory tiny", lambda: api.load_hardware(memory_bytes=1e-300), ProfileError, "1 MiB to 1 PiB"),
    ("gpus_per_node bool", lambda: api.load_hardware(gpus_per_node=True), ProfileError, "gpus_per_node"),
    ("max_nodes huge", lambda: api.load_hardware(max_nodes=10**400), ProfileError, "max_nodes"),
    ("top str", lambda: api.plan_frame("tiny_cnn", 2, top="5"), UsageError, "top must be an integer"),
    ("top 0", lambda: api.plan_frame("tiny_cnn", 2, top=0), UsageError, "top must be an integer"),
    ("plan gpus bool", lambda: api.plan_frame("tiny_cnn", True), UsageError, "gpus must be"),
    ("kinds unknown", lambda: api.plan_frame("tiny_cnn", 2, kinds=["dq"]), UsageError, "did you mean dp"),
    ("kinds number", lambda: api.plan_frame("tiny_cnn", 2, kinds=3), UsageError, "kinds must be"),
    ("sweep what_if list", lambda: api.sweep("tiny_cnn", 2, what_if=[1]), UsageError, "what_if must be a dict"),
    ("sweep gpus axis", lambda: api.sweep("tiny_cnn", [2, "4"], "dp"), UsageError, "gpus must be an integer"),
    ("sweep precision axis", lambda: api.sweep("tiny_cnn", 2, "dp", precision=["amp", "x"]), UsageError,
     "unknown precision"),
    ("scale strategies", lambda: api.scale("tiny_cnn", [1, 2], strategies=3), UsageError, "strategies must be"),
    ("gpu list float", lambda: api.parse_gpu_list(4.0), UsageError, "GPU list must be"),
    ("gpu list None", lambda: api.parse_gpu_list(None), UsageError, "GPU list must be"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("name", "call", "error", "phrase"), CASES, ids=[c[0] for c in CASES])
def test_wrong_arguments_raise_the_projects_errors(name: str, call: Callable[[], Any],
                                                   error: type[PerfmodelError], phrase: str) -> None:
    with pytest.raises(error, match=phrase) as e:
        call()
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_kinds_as_one_name_is_that_kind_not_its_letters() -> None:
    df = api.plan_frame("tiny_cnn", 2, kinds="dp", top=3)
    assert set(df["plan_kind"]) == {"data"}
    assert api.plan_frame("tiny_cnn", 2, kinds="dp,pp", top=10)["plan"].notna().all()


def test_scale_takes_a_comma_list_of_strategies() -> None:
    df = api.scale("tiny_cnn", [1, 2], batch_per_gpu=4, strategies="dp,best")
    assert list(dict.fromkeys(df["strategy"])) == ["dp", "best"]


def test_a_huge_model_name_is_not_echoed_whole() -> None:
    with pytest.raises(PerfmodelError) as e:
        api.load_model("x" * 100_000)
    assert "x" * 100 not in str(e.value) and "100,000 characters" in str(e.value)


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.none(),
                 st.booleans(), st.integers(-10, 0)))
def test_what_if_scales_are_finite_positive_numbers(value: Any) -> None:
    """Any scale that is not a finite number > 0 is refused; one that is gives finite predictions."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and value > 0)
    try:
        hw = api.load_hardware("a100-80gb-dgx", inter_bandwidth_scale=value)
    except ProfileError:
        assert not ok or not 1e3 <= 200e9 * value <= 1e15  # refused: bad, or out of the range
        return
    assert ok
    df = api.predict_frame("tiny_cnn", 16, "dp=16", hw, batch_per_gpu=2)
    assert math.isfinite(float(df["step_s"].iloc[0]))

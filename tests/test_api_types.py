"""Arguments of the wrong type get the project's errors at every public entry point (``predict``,
``plan``, ``get_model``, ``compile_counts``, ``Hardware.what_if``, the notebook API), counts take
Python and NumPy integers alike, profiles are checked across fields, and sweeps check every spec
and what-if before they price a point."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_helpers import run_main

import perfmodel
from perfmodel import Strategy, api, compile_counts, get_model, load_hardware, parse_strategy, plan, predict
from perfmodel.errors import PerfmodelError, ProfileError, StrategyError, UsageError
from perfmodel.hardware import load_profile, profiles_dir
from perfmodel.network import compile_counts as network_compile_counts
from perfmodel.search.plan import DEFAULT_BATCH_PER_GPU

NET = "tiny_cnn"
A100 = "a100-80gb-dgx"
V100 = "v100-16gb-dgx1"
GIB = 2**30


def _raises(call: Callable[[], Any], error: type[PerfmodelError], phrase: str) -> str:
    """``call``'s error, checked: of class ``error``, holding ``phrase``, one short line."""
    with pytest.raises(error) as e:
        call()
    text = str(e.value)
    assert phrase in text, text
    assert "\n" not in text and len(text) < 400, text
    return text


# -- 1, 2. wrong kinds of argument and of count --------------------------------------------
WRONG: list[tuple[str, Callable[[], Any], type[PerfmodelError], str]] = [
    ("predict model None", lambda: predict(None, 8, "dp=8", batch_per_gpu=32), UsageError, "model must be"),  # type: ignore[arg-type]
    ("predict model number", lambda: predict(123, 8, "dp=8", batch_per_gpu=32), UsageError, "got 123"),  # type: ignore[arg-type]
    ("get_model None", lambda: get_model(None), UsageError, "model must be"),  # type: ignore[arg-type]
    ("get_model image str", lambda: get_model(NET, "32"), UsageError, "image_size must be an integer"),  # type: ignore[arg-type]
    ("predict strategy number", lambda: predict(NET, 8, 8, batch_per_gpu=32), UsageError, "strategy must be"),  # type: ignore[arg-type]
    ("predict hardware number", lambda: predict(NET, 8, "dp=8", 3), UsageError, "hardware must be"),  # type: ignore[arg-type]
    ("predict batch str", lambda: predict(NET, 8, "dp=8", batch_per_gpu="32"), UsageError,  # type: ignore[arg-type]
     "batch_per_gpu must be an integer, got '32'"),
    ("predict batch bool", lambda: predict(NET, 8, "dp=8", batch_per_gpu=True), UsageError,
     "batch_per_gpu must be an integer, got True"),
    ("predict batch float", lambda: predict(NET, 8, "dp=8", batch_per_gpu=2.5), UsageError,  # type: ignore[arg-type]
     "batch_per_gpu must be an integer, got 2.5"),
    ("predict global float", lambda: predict(NET, 8, "dp=8", global_batch=64.0), UsageError,  # type: ignore[arg-type]
     "global_batch must be an integer, got 64.0"),
    ("predict batch numpy bool", lambda: predict(NET, 8, "dp=8", batch_per_gpu=np.bool_(True)), UsageError,  # type: ignore[arg-type]
     "batch_per_gpu must be an integer"),
    ("predict gpus bool", lambda: predict(NET, True, "dp=1", batch_per_gpu=32), UsageError,
     "gpus must be an integer from 1 to 1,000,000, got True"),
    ("predict gpus float", lambda: predict(NET, 8.0, "dp=8", batch_per_gpu=32), UsageError,  # type: ignore[arg-type]
     "gpus must be an integer from 1 to 1,000,000, got 8.0"),
    ("plan top str", lambda: plan(NET, 2, top="3"), UsageError, "top must be an integer from 1 to 1,000, got '3'"),  # type: ignore[arg-type]
    ("plan top None", lambda: plan(NET, 2, top=None), UsageError, "top must be an integer"),  # type: ignore[arg-type]
    ("plan global str", lambda: plan(NET, 2, global_batch="64"), UsageError,  # type: ignore[arg-type]
     "global_batch must be an integer, got '64'"),
    ("plan gpus bool", lambda: plan(NET, True), UsageError, "gpus must be an integer"),
    ("plan model None", lambda: plan(None, 2), UsageError, "model must be"),  # type: ignore[arg-type]
    ("plan kinds number", lambda: plan(NET, 2, kinds=5), UsageError, "kinds must be strategy kinds"),  # type: ignore[arg-type]
    ("plan kinds typo", lambda: plan(NET, 2, kinds="dp,hybrd"), UsageError, "did you mean hybrid"),
    ("compile_counts None", lambda: compile_counts(None), UsageError, "model must be"),  # type: ignore[arg-type]
    ("what_if sources", lambda: load_hardware().what_if(sources=5), ProfileError, "'sources'"),
    ("sweep progress", lambda: api.sweep(NET, [1, 2], "dp", progress=5), UsageError,  # type: ignore[arg-type]
     "progress must be None or a callable"),
    ("scale progress", lambda: api.scale(NET, [1, 2], strategies="dp", progress="x"), UsageError,  # type: ignore[arg-type]
     "progress must be None or a callable"),
    ("sweep gpus numpy floats", lambda: api.sweep(NET, np.array([1.0, 2.0]), "dp"), UsageError,  # type: ignore[arg-type]
     "gpus must be an integer from 1 to 1,000,000, got 1.0"),
    ("sweep what_if key number", lambda: api.sweep(NET, 2, "dp", what_if={5: [1, 2]}), UsageError,  # type: ignore[arg-type, dict-item]
     "what_if keys must be"),
    ("Strategy degree bool", lambda: Strategy(dp=True), StrategyError, "dp must be a positive integer, got True"),
    ("Strategy extent bool", lambda: Strategy(sp=(1, True, 2)), StrategyError, "sp extents must be positive integers"),
    ("parse_strategy gpus bool", lambda: parse_strategy("dp=1", True), UsageError,  # type: ignore[arg-type]
     "gpus must be an integer from 1 to 1,000,000, got True"),
    ("gpu list numpy floats", lambda: api.parse_gpu_list(np.array([1.0, 2.5])), UsageError,
     "GPU counts must be integers"),
]


@pytest.mark.parametrize(("name", "call", "error", "phrase"), WRONG, ids=[c[0] for c in WRONG])
def test_wrong_kinds_of_argument_raise_the_projects_errors(name: str, call: Callable[[], Any],
                                                           error: type[PerfmodelError], phrase: str) -> None:
    _raises(call, error, phrase)


def test_compile_counts_takes_a_model_name_as_predict_does() -> None:
    by_name = compile_counts(NET)
    assert by_name is network_compile_counts(get_model(NET))
    assert compile_counts(get_model(NET)) is by_name
    assert compile_counts(NET, np.int64(16)).network.image_size == 16  # type: ignore[arg-type, dict-item]


def test_one_gpu_step_is_not_exported_by_the_notebook_api() -> None:
    """It took an internal pricing context, so ``api.one_gpu_step("resnet50", 32)`` could only fail."""
    assert "one_gpu_step" not in api.__all__ and not hasattr(api, "one_gpu_step")


def _said(p: perfmodel.Prediction) -> tuple[float, type, type]:
    """A prediction's step time and the types of its counts (Python ints, whatever was given)."""
    return p.iteration_time_s, type(p.global_batch), type(p.gpus)


NUMPY_COUNTS: list[tuple[str, Callable[[Any], Any]]] = [
    ("predict gpus", lambda i: _said(predict(NET, i(8), "dp=8", batch_per_gpu=16))),
    ("predict batch", lambda i: _said(predict(NET, 8, "dp=8", batch_per_gpu=i(16)))),
    ("predict global batch", lambda i: _said(predict(NET, 8, "pp=2", global_batch=i(64), image_size=i(32)))),
    ("plan gpus, batch, top", lambda i: [p.strategy for p in plan(NET, i(4), global_batch=i(64), top=i(2)).plans]),
    ("sweep gpus", lambda i: api.sweep(NET, i(8), "dp", batch_per_gpu=i(16))["step_s"].tolist()),
    ("predict_frame", lambda i: api.predict_frame(NET, i(8), "dp=8", global_batch=i(64))["step_s"].tolist()),
    ("plan_frame", lambda i: api.plan_frame(NET, i(2), global_batch=i(8), top=i(1))["plan"].tolist()),
    ("scale", lambda i: api.scale(NET, [1, i(2)], batch_per_gpu=i(4), strategies="dp")["step_s"].tolist()),
    ("parse_gpu_list", lambda i: api.parse_gpu_list(i(4))),
    ("parse_strategy", lambda i: parse_strategy("pp=2", i(8))),
    ("Strategy", lambda i: Strategy(dp=i(2), sp=(1, i(2), 1), mb=i(4)).spec()),
    ("what_if count", lambda i: load_hardware(A100).what_if(gpus_per_node=i(4)).max_gpus),
]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16])
@pytest.mark.parametrize(("name", "call"), NUMPY_COUNTS, ids=[c[0] for c in NUMPY_COUNTS])
def test_numpy_integers_count_as_integers(name: str, call: Callable[[Any], Any], dtype: type[np.integer]) -> None:
    assert call(dtype) == call(int)


def test_numpy_arrays_are_lists_where_lists_are_taken() -> None:
    assert api.parse_gpu_list(np.arange(1, 5)) == [1, 2, 3, 4]
    assert all(type(g) is int for g in api.parse_gpu_list(np.array([8, 2], dtype=np.int32)))
    df = api.sweep(NET, np.array([1, 2, 4]), "dp", batch_per_gpu=np.array([4, 8]))  # type: ignore[arg-type, dict-item]
    ref = api.sweep(NET, [1, 2, 4], "dp", batch_per_gpu=[4, 8])
    assert df["step_s"].tolist() == ref["step_s"].tolist() and df["reason"].isna().all()
    fast = api.sweep(NET, 8, "dp", what_if={"peak_scale": np.linspace(1.0, 2.0, 3)})
    assert len(fast) == 3 and fast["step_s"].is_monotonic_decreasing


# -- 3. kinds as a comma list ----------------------------------------------------------------
@pytest.mark.parametrize(("kinds", "expected"), [("dp", {"data"}), ("dp, pp", {"data", "pipeline"}),
                                                 (" pp,dp,pp ", {"data", "pipeline"})])
def test_plan_takes_kinds_as_plan_frame_does(kinds: str, expected: set[str]) -> None:
    got = {p.strategy.kind for p in plan(NET, 2, kinds=kinds, top=10).plans}
    assert got <= expected and "data" in got
    assert set(api.plan_frame(NET, 2, kinds=kinds, top=10)["plan_kind"]) == got


# -- 4. predict's default batch, and the other arguments checked first -------------------------
def test_predict_defaults_to_the_clis_batch_and_says_so() -> None:
    p = predict(NET, 8, "dp=8")
    q = predict(NET, 8, "dp=8", batch_per_gpu=DEFAULT_BATCH_PER_GPU)
    assert p.global_batch == 8 * DEFAULT_BATCH_PER_GPU and p.iteration_time_s == q.iteration_time_s
    said = p.assumptions["global_batch"]
    assert said.startswith(f"{8 * DEFAULT_BATCH_PER_GPU} samples per step (default: {DEFAULT_BATCH_PER_GPU} per GPU")
    assert "global_batch" not in q.assumptions  # a batch given is not an assumption
    assert perfmodel.predict is predict


@pytest.mark.parametrize(("kwargs", "phrase"), [
    ({"precision": "fp16"}, "unknown precision 'fp16'"),
    ({"cudnn_major": 3}, "unknown cuDNN major version 3"),
    ({"optimizer": "lamb"}, "optimizer"),
    ({"memory_format": "nhcw"}, "nhcw"),
    ({"image_size": "big"}, "image_size must be an integer"),
])
@pytest.mark.parametrize("batches", [{}, {"batch_per_gpu": 32, "global_batch": 256}], ids=["no batch", "both batches"])
def test_predict_checks_the_other_arguments_before_the_batch(kwargs: dict[str, Any], phrase: str,
                                                             batches: dict[str, int]) -> None:
    _raises(lambda: predict(NET, 8, "dp=8", **kwargs, **batches), UsageError, phrase)  # type: ignore[arg-type, dict-item]


# -- 5. what-ifs of the fields that describe a profile ------------------------------------------
BAD_WHAT_IFS: list[tuple[dict[str, Any], str]] = [
    ({"price_per_gpu_hour": -1}, "price.per_gpu_hour"),
    ({"price_per_gpu_hour": "x"}, "price.per_gpu_hour"),
    ({"name": 5}, "field 'name'"),
    ({"name": ""}, "field 'name'"),
    ({"description": None}, "field 'description'"),
    ({"path": 5}, "field 'path'"),
    ({"schema_version": "x"}, "schema_version"),
    ({"schema_version": 2}, "expected the integer 1"),
    ({"price_currency": 5}, "price.currency"),
    ({"sources": {"profile": 3}}, "'sources'"),
    ({"device": {"peak_flops_per_s": {"fp32": 1e13, "fp8": 1e15}}}, "peak_flops_per_s has no class 'fp8'"),
]


@pytest.mark.parametrize(("changes", "phrase"), BAD_WHAT_IFS, ids=[repr(c)[:40] for c, _ in BAD_WHAT_IFS])
def test_what_if_checks_the_fields_the_loader_checks(changes: dict[str, Any], phrase: str) -> None:
    text = _raises(lambda: load_hardware(A100).what_if(**changes), ProfileError, phrase)
    key = next(iter(changes))
    assert text.startswith(f"what-if {key}=") and A100 in text  # names the key, its value and the profile


def test_what_if_names_the_copy_when_asked_and_guesses_a_misspelt_key() -> None:
    hw = load_hardware(A100)
    assert hw.what_if(name="mine", price_per_gpu_hour=2.5).name == "mine"
    assert hw.what_if(price_per_gpu_hour=2.5).price_per_gpu_hour == 2.5
    _raises(lambda: hw.what_if(inter_bandwith_scale=2), ProfileError, "did you mean inter_bandwidth_scale")


# -- 6. profiles checked across fields -----------------------------------------------------------
ACROSS: list[tuple[str, dict[str, Any], str]] = [
    ("reserve above memory", {"framework_reserve_bytes": 32 * GIB},
     "framework_reserve_bytes = 34,359,738,368 (32.00 GiB) must be below device.memory_bytes = 17,179,869,184"),
    ("tiny device", {"memory_bytes": 2**20}, "must be below device.memory_bytes = 1,048,576 (0.00 GiB)"),
    ("reserve equal to memory", {"framework_reserve_bytes": 16 * GIB}, "must be below device.memory_bytes"),
    ("fp16 below fp32", {"device": {"peak_flops_per_s": {"fp32": 15.7e12, "fp16": 1e6}}},
     "peak_flops_per_s.fp16 = 1e+06 FLOP/s is not above peak_flops_per_s.fp32 = 1.57e+13"),
    ("fp16 equal to fp32", {"device": {"peak_flops_per_s": {"fp32": 15.7e12, "fp16": 15.7e12}}}, "is not above"),
    ("bf16 below fp32", {"device": {"peak_flops_per_s": {"fp32": 15.7e12, "bf16": 1e12}}}, "peak_flops_per_s.bf16"),
    ("tf32 below fp32", {"device": {"peak_flops_per_s": {"fp32": 15.7e12, "tf32": 1e12}}}, "peak_flops_per_s.tf32"),
]


@pytest.mark.parametrize(("name", "changes", "phrase"), ACROSS, ids=[c[0] for c in ACROSS])
def test_what_if_refuses_fields_that_contradict_each_other(name: str, changes: dict[str, Any], phrase: str) -> None:
    _raises(lambda: load_hardware(V100).what_if(**changes), ProfileError, phrase)


def test_what_if_changes_apply_together() -> None:
    """A smaller device with a smaller reserve is valid in either order: checked once, at the end."""
    hw = load_hardware(V100)
    for changes in ({"memory_bytes": GIB, "framework_reserve_bytes": GIB // 2},
                    {"framework_reserve_bytes": GIB // 2, "memory_bytes": GIB}):
        assert hw.what_if(**changes).device.memory_bytes == GIB
    _raises(lambda: hw.what_if(memory_bytes=GIB), ProfileError, "what-if memory_bytes=1073741824 on v100-16gb-dgx1")


FILES: list[tuple[str, str, str, str]] = [
    ("reserve", "framework_reserve_bytes = 1_610_612_736", "framework_reserve_bytes = 34_359_738_368",
     "framework_reserve_bytes = 34,359,738,368 (32.00 GiB) must be below device.memory_bytes"),
    ("tiny device", "memory_bytes = 17_179_869_184", "memory_bytes = 1_048_576", "must be below device.memory_bytes"),
    ("fp16 below fp32", "fp16 = 125e12", "fp16 = 1e12", "peak_flops_per_s.fp16 = 1e+12 FLOP/s is not above"),
]


@pytest.mark.parametrize(("name", "old", "new", "phrase"), FILES, ids=[c[0] for c in FILES])
def test_profile_files_are_checked_across_fields(name: str, old: str, new: str, phrase: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    text = (profiles_dir() / f"{V100}.toml").read_text(encoding="utf-8")
    assert old in text
    f = tmp_path / f"{V100}.toml"
    f.write_text(text.replace(old, new), encoding="utf-8")
    said = _raises(lambda: load_profile(f), ProfileError, phrase)
    assert said.startswith(str(f))  # names the file
    code, out, err = run_main(["predict", NET, "--gpus", "8", "-s", "dp=8", "-H", str(f)], capsys)
    assert code == 1 and not out and len(err.splitlines()) == 1 and phrase in err


# -- 7. what-ifs of a sweep built before any point is priced --------------------------------------
def test_sweep_checks_every_what_if_before_pricing() -> None:
    done: list[tuple[int, int]] = []
    text = _raises(lambda: api.sweep(NET, [1, 8, 64], "dp", what_if={"inter_latency_scale": [1, 100000]},
                                     progress=lambda i, n: done.append((i, n))),
                   ProfileError, "what-if inter_latency_scale=100000 on a100-80gb-dgx: inter.latency_s")
    assert "got 1.4" in text
    _raises(lambda: api.sweep(NET, [1, 8], "dp", [A100, V100], what_if={"memory_bytes": [80 * GIB, 2**20]},
                              progress=lambda i, n: done.append((i, n))), ProfileError, "memory_bytes=1048576")
    _raises(lambda: api.predict_frame(NET, 8, "dp=8", intra_latency_scale=1e9), ProfileError,
            "what-if intra_latency_scale=1000000000.0 on a100-80gb-dgx: intra.latency_s")
    assert done == []  # no point was priced


# -- 8. misspelt specs raise; specs that do not fit a point's GPUs are that point's reason -------------
@pytest.mark.parametrize(("call", "phrase"), [
    (lambda: api.sweep(NET, 8, "foo=3"), "unknown key 'foo'"),
    (lambda: api.sweep(NET, [2, 4], ["dp", "dp=2,comm=rng"]), "did you mean ring"),
    (lambda: api.predict_frame(NET, 8, "dp=8,comm=rng"), "did you mean ring"),
    (lambda: api.predict_frame(NET, 8, ["dp=8", "pp=x"]), "pp='x' is not an integer"),
    (lambda: api.sweep(NET, 8, "schedule=1f1b"), "needs a pipeline"),
], ids=["unknown key", "comm typo in a list", "predict_frame comm typo", "not a number", "schedule without pp"])
def test_a_misspelt_spec_raises_before_pricing(call: Callable[[], Any], phrase: str) -> None:
    _raises(call, StrategyError, phrase)
    df = api.sweep(NET, [4, 8], "dp=4")  # well-formed, fits 4 GPUs only: a reason row at 8
    assert df["reason"].isna().tolist() == [True, False]
    assert "multiply to 4, not 8 GPUs" in df["reason"].iloc[1]

"""``--amp-runtime`` on every pricing command and API function, and in what they output."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest
from cli_helpers import run_main

from perfmodel import predict
from perfmodel.api import plan_frame, predict_frame, scale, sweep
from perfmodel.commands.compare import compare
from perfmodel.errors import UsageError
from perfmodel.network import get_model
from perfmodel.search import plan
from perfmodel.strategies.amp_runtime import AMP_RUNTIMES, DEFAULT_AMP_RUNTIME

_HW = "v100-16gb-dgx1"
_SETTING = ["-H", _HW, "--precision", "amp"]


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    code, out, err = run_main([*argv, *_SETTING, "--format", "json"], capsys)
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _step(runtime: str, spec: str = "dp=8", gpus: int = 8, precision: str = "amp") -> float:
    return predict("resnet50", gpus, spec, _HW, precision, batch_per_gpu=64, amp_runtime=runtime).iteration_time_s


def test_pytorch_half_is_cheaper_than_autocast_at_amp() -> None:
    # a half model launches no weight casts and no GradScaler kernels: strictly less work per step
    p_half = predict("resnet50", 8, "dp=8", _HW, "amp", batch_per_gpu=64, amp_runtime="pytorch-half")
    p_auto = predict("resnet50", 8, "dp=8", _HW, "amp", batch_per_gpu=64)
    assert p_auto.amp_runtime == DEFAULT_AMP_RUNTIME and p_half.amp_runtime == "pytorch-half"
    assert p_half.iteration_time_s < p_auto.iteration_time_s
    assert p_auto.breakdown.get("amp_casts", 0.0) > 0.0 and p_half.breakdown.get("amp_casts", 0.0) == 0.0


@pytest.mark.parametrize("runtime", AMP_RUNTIMES)
def test_fp32_ignores_the_runtime(runtime: str) -> None:
    assert _step(runtime, precision="fp32") == _step(DEFAULT_AMP_RUNTIME, precision="fp32")


@pytest.mark.parametrize("runtime", AMP_RUNTIMES)
def test_explain_equals_predict_and_json_carries_the_runtime(runtime: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = ["resnet50", "-n", "8", "-s", "dp=8", "-b", "64", "--amp-runtime", runtime]
    p = _json(["predict", *args], capsys)
    e = _json(["explain", *args], capsys)
    assert p["amp_runtime"] == runtime and e["amp_runtime"] == runtime
    assert e["mixed_precision"] == p["assumptions"]["mixed_precision"]
    assert math.isclose(e["iteration_time_s"], p["iteration_time_s"], rel_tol=1e-9)
    assert math.isclose(p["iteration_time_s"], _step(runtime), rel_tol=1e-12)


def test_plan_ranks_with_the_runtimes_prices(capsys: pytest.CaptureFixture[str]) -> None:
    d = _json(["plan", "resnet50", "-n", "8", "-B", "512", "--top", "3", "--amp-runtime", "pytorch-half"], capsys)
    assert "pytorch-half" in d["assumptions"]["mixed_precision"]
    thr = [row["throughput_samples_per_s"] for row in d["plans"]]
    assert thr == sorted(thr, reverse=True)
    for row in d["plans"]:
        assert row["amp_runtime"] == "pytorch-half"
        assert math.isclose(row["iteration_time_s"], _step("pytorch-half", row["strategy"]), rel_tol=1e-9)
    auto = plan("resnet50", 8, _HW, "amp", global_batch=512, top=1).plans[0]
    assert auto.amp_runtime == DEFAULT_AMP_RUNTIME and d["plans"][0]["iteration_time_s"] < auto.iteration_time_s


def test_plan_csv_states_the_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["plan", "resnet50", "-n", "8", "-B", "512", "--top", "2", *_SETTING,
                               "--amp-runtime", "mxnet-multi-precision", "--format", "csv"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2 and {r["amp_runtime"] for r in rows} == {"mxnet-multi-precision"}


def test_compare_and_scale_take_the_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    c = _json(["compare", "resnet50", "-n", "8", "-s", "dp=8", "-b", "64", "--amp-runtime", "pytorch-half"], capsys)
    (row,) = c["rows"]
    assert row["amp_runtime"] == "pytorch-half"
    assert math.isclose(row["iteration_time_s"], _step("pytorch-half"), rel_tol=1e-12)
    s = _json(["scale", "resnet50", "--gpus", "8", "--strategies", "dp", "-b", "64", "--amp-runtime", "pytorch-half"],
              capsys)
    assert s["setting"]["amp_runtime"] == "pytorch-half"
    (srow,) = s["rows"]
    assert math.isclose(srow["step_s"], _step("pytorch-half"), rel_tol=1e-12)
    assert compare("resnet50", 8, [_HW], ["amp"], "dp=8", 64, None,
                   amp_runtime="tensorflow-amp").predictions[0].amp_runtime == "tensorflow-amp"


def test_scale_text_states_the_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["scale", "resnet50", "--gpus", "1,8", "--strategies", "dp", "-b", "64", *_SETTING,
                               "--amp-runtime", "pytorch-half"], capsys)
    assert code == 0, err
    assert "mixed precision: pytorch-half:" in out


def test_api_functions_take_the_runtime() -> None:
    half = _step("pytorch-half")
    pf = predict_frame("resnet50", 8, "dp=8", _HW, "amp", batch_per_gpu=64, amp_runtime="pytorch-half")
    assert pf.attrs["amp_runtime"] == "pytorch-half" and math.isclose(pf["step_s"].iloc[0], half, rel_tol=1e-12)
    best = plan_frame("resnet50", 8, _HW, "amp", global_batch=512, top=1, amp_runtime="pytorch-half")
    assert best.attrs["amp_runtime"] == "pytorch-half"
    assert math.isclose(best["step_s"].iloc[0], _step("pytorch-half", best["plan"].iloc[0]), rel_tol=1e-9)
    sc = scale("resnet50", [8], _HW, "amp", batch_per_gpu=64, strategies="dp", amp_runtime="pytorch-half")
    assert sc.attrs["amp_runtime"] == "pytorch-half" and math.isclose(sc["step_s"].iloc[0], half, rel_tol=1e-12)
    sw = sweep("resnet50", 8, "dp=8", _HW, ["amp", "fp32"], batch_per_gpu=64, amp_runtime="pytorch-half")
    assert sw.attrs["amp_runtime"] == "pytorch-half"
    assert math.isclose(sw["step_s"].iloc[0], half, rel_tol=1e-12)
    assert math.isclose(sw["step_s"].iloc[1], _step(DEFAULT_AMP_RUNTIME, precision="fp32"), rel_tol=1e-12)


def test_api_refuses_an_unknown_runtime_before_pricing() -> None:
    with pytest.raises(UsageError, match="closest: pytorch-half"):
        sweep("resnet50", 8, "dp=8", _HW, ["amp", "fp32"], amp_runtime="pytorch-halfs")
    with pytest.raises(UsageError, match="unknown mixed-precision runtime"):
        plan_frame("resnet50", 8, _HW, amp_runtime="apex")


# -- memory of a 16-bit model (pytorch-half): 16-bit weights and gradients, no fp32 master --------
def test_a_half_model_holds_16_bit_weights_and_gradients_only() -> None:
    torch = pytest.importorskip("torch")
    # the mechanism, checked on torch: after model.half() parameters and their .grad are 2-byte tensors
    layer = torch.nn.Linear(8, 4).half()
    layer(torch.ones(2, 8, dtype=torch.float16)).sum().backward()
    assert {p.element_size() for p in layer.parameters()} == {2}
    assert {p.grad.element_size() for p in layer.parameters()} == {2}
    params = get_model("resnet50").params
    kw = dict(batch_per_gpu=64)
    half = predict("resnet50", 8, "dp=8", _HW, "amp", amp_runtime="pytorch-half", **kw).memory
    auto = predict("resnet50", 8, "dp=8", _HW, "amp", **kw).memory
    assert math.isclose(half["weights"], 2 * params) and math.isclose(auto["weights"], 6 * params)
    assert math.isclose(half["gradients"], 2 * params) and math.isclose(auto["gradients"], 4 * params)
    assert math.isclose(half["gradient_buckets"], 2 * params)
    # SGD's momentum buffer and the input batch have the model's dtype too (tests/test_half_model.py)
    for part in ("optimizer_state", "input_batch"):
        assert math.isclose(2 * half[part], auto[part]), part
    for part in ("activations", "workspace"):
        assert half[part] == auto[part], part


@pytest.mark.parametrize("spec", ["pp=2,dp=4,mb=4", "mp=2,dp=4", "channel=2,dp=4"])
def test_every_plan_kind_counts_the_half_models_memory(spec: str) -> None:
    h = predict("resnet50", 8, spec, _HW, "amp", batch_per_gpu=64, amp_runtime="pytorch-half")
    a = predict("resnet50", 8, spec, _HW, "amp", batch_per_gpu=64)
    half, auto = h.memory, a.memory
    if h.strategy.mp > 1:  # each runtime runs its fastest candidate partition: per weight of the busiest part
        held = [p.details["parts"][p.details["busiest_part"]]["params"] for p in (h, a)]
        assert math.isclose(half["weights"], 2 * held[0]) and math.isclose(auto["weights"], 6 * held[1])
        assert math.isclose(half["gradients"], 2 * held[0]) and math.isclose(auto["gradients"], 4 * held[1])
        return
    assert half["weights"] > 0 and math.isclose(3 * half["weights"], auto["weights"])
    assert math.isclose(2 * half["gradients"], auto["gradients"])


@pytest.mark.parametrize("runtime", AMP_RUNTIMES)
def test_fp32_memory_ignores_the_runtime(runtime: str) -> None:
    m = predict("resnet50", 8, "dp=8", _HW, "fp32", batch_per_gpu=64, amp_runtime=runtime).memory
    assert m == predict("resnet50", 8, "dp=8", _HW, "fp32", batch_per_gpu=64).memory

"""A 16-bit model (``--amp-runtime pytorch-half``, ``model.half()``) sized at 16 bits everywhere.

Oracles on torch (CPU): the optimizer's state, DDP's flat gradient bucket and the input a ``.half()``
model takes have the parameters' dtype; then what predict, explain and plan make of it, and that no
other runtime moves.
"""

from __future__ import annotations

import json
import math

import pytest
from cli_helpers import run_main

from perfmodel import predict
from perfmodel.network import get_model
from perfmodel.strategies.amp_runtime import AMP_RUNTIMES, DEFAULT_AMP_RUNTIME
from perfmodel.strategies.memory import (
    OPTIMIZERS,
    grad_bytes_per_param,
    input_bytes_per_element,
    optimizer_bytes_per_param,
)

_HW = "v100-16gb-dgx1"
_HALF = "pytorch-half"


def _tiny(torch, half: bool):  # type: ignore[no-untyped-def]
    """Two linear layers (4*8+4 + 3*4+3 = 51 parameters in 4 tensors), fp32 or ``.half()``."""
    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    return m.half() if half else m


def _torch_optimizer(torch, name: str, params):  # type: ignore[no-untyped-def]
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3)
    return torch.optim.SGD(params, lr=0.1, momentum=0.9 if name == "sgd" else 0.0)


def _runtime(half: bool) -> str:
    return _HALF if half else DEFAULT_AMP_RUNTIME


# -- oracles on torch ---------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("half", [False, True])
def test_optimizer_state_has_the_parameters_dtype(optimizer: str, half: bool) -> None:
    """torch.optim keeps SGD's momentum (a clone of the gradient) and Adam's exp_avg/exp_avg_sq
    (zeros_like the parameter) in the parameter's dtype: 2 B each for a ``.half()`` model."""
    torch = pytest.importorskip("torch")
    model = _tiny(torch, half)
    opt = _torch_optimizer(torch, optimizer, model.parameters())
    dtype = torch.float16 if half else torch.float32
    model(torch.ones(2, 8, dtype=dtype)).float().sum().backward()
    opt.step()
    params = sum(p.numel() for p in model.parameters())
    # per-parameter buffers only: Adam's ``step`` is one scalar per tensor, not per parameter
    state = [t for p in model.parameters() for t in opt.state[p].values() if t.shape == p.shape]
    assert {t.dtype for t in state} <= {dtype}
    measured = sum(t.numel() * t.element_size() for t in state) / params
    expected = optimizer_bytes_per_param(optimizer, grad_bytes_per_param("amp", _runtime(half)))
    assert measured == expected == {"sgd": 1, "sgd-plain": 0, "adam": 2}[optimizer] * (2 if half else 4)


@pytest.mark.parametrize("half", [False, True])
def test_ddp_bucket_has_the_gradients_dtype(half: bool) -> None:
    """DDP's reducer allocates each flat bucket in its parameters' dtype (reducer.cpp
    ``initialize_buckets``): a comm hook on a one-process gloo group sees 2 B per parameter for a
    ``.half()`` model, the bytes perfmodel allreduces per parameter."""
    torch = pytest.importorskip("torch")
    dist = pytest.importorskip("torch.distributed")
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with gloo is not available")
    seen: list[tuple[object, int]] = []

    def hook(state, bucket):  # type: ignore[no-untyped-def]
        buf = bucket.buffer()
        seen.append((buf.dtype, buf.numel() * buf.element_size()))
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        model = _tiny(torch, half)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        ddp.register_comm_hook(None, hook)
        x = torch.ones(2, 8, dtype=torch.float16 if half else torch.float32)
        ddp(x).float().sum().backward()
    finally:
        dist.destroy_process_group()
    params = sum(p.numel() for p in model.parameters())
    assert {d for d, _ in seen} == {torch.float16 if half else torch.float32}
    assert sum(b for _, b in seen) == params * grad_bytes_per_param("amp", _runtime(half))


def test_a_half_model_takes_a_half_input() -> None:
    """A ``.half()`` convolution refuses an fp32 input: the run casts its input (``input.half()``)."""
    torch = pytest.importorskip("torch")
    conv = torch.nn.Conv2d(3, 4, 3).half()
    with pytest.raises(RuntimeError):
        conv(torch.ones(1, 3, 8, 8))
    x = torch.ones(1, 3, 8, 8).half()
    assert conv(x).dtype == torch.float16
    assert x.element_size() == input_bytes_per_element("amp", _HALF) == 2
    assert torch.ones(1).element_size() == input_bytes_per_element("amp", DEFAULT_AMP_RUNTIME) == 4


# -- what the pricing makes of it ---------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_predict_sizes_state_input_and_allreduce_at_16_bits(optimizer: str) -> None:
    params = get_model("resnet50").params
    kw = dict(batch_per_gpu=64, optimizer=optimizer)
    half = predict("resnet50", 8, "dp=8", _HW, "amp", amp_runtime=_HALF, **kw)
    auto = predict("resnet50", 8, "dp=8", _HW, "amp", **kw)
    state = {"sgd": 1, "adam": 2}[optimizer]
    assert math.isclose(half.memory["optimizer_state"], 2 * state * params)
    assert math.isclose(auto.memory["optimizer_state"], 4 * state * params)
    assert math.isclose(half.memory["input_batch"], 64 * 3 * 224 * 224 * 2)
    assert math.isclose(auto.memory["input_batch"], 64 * 3 * 224 * 224 * 4)
    assert half.memory_per_gpu_bytes < auto.memory_per_gpu_bytes
    # 97.5 MiB of fp32 gradients fill 4 of DDP's 25 MiB buckets, the fp16 ones 2: half the bytes
    # and half the latencies
    ratio = half.details["gradient_allreduce_s"] / auto.details["gradient_allreduce_s"]
    assert math.isclose(ratio, 0.5, rel_tol=0.02)
    assert half.breakdown["optimizer_step"] < auto.breakdown["optimizer_step"]
    assert half.breakdown["gradient_bucket_copies"] < auto.breakdown["gradient_bucket_copies"]


@pytest.mark.parametrize("spec", ["dp=8,comm=ps-central", "dp=4,comm=dataparallel"])
def test_parameter_servers_and_dataparallel_move_16_bit_tensors(spec: str) -> None:
    gpus = 4 if "dataparallel" in spec else 8
    half = predict("resnet50", gpus, spec, _HW, "amp", batch_per_gpu=32, amp_runtime=_HALF)
    auto = predict("resnet50", gpus, spec, _HW, "amp", batch_per_gpu=32)
    assert half.breakdown["gradient_exchange_exposed"] < auto.breakdown["gradient_exchange_exposed"]


@pytest.mark.parametrize("runtime", [r for r in AMP_RUNTIMES if r != _HALF])
def test_other_runtimes_keep_fp32_state_input_and_allreduce(runtime: str) -> None:
    params = get_model("resnet50").params
    p = predict("resnet50", 8, "dp=8", _HW, "amp", batch_per_gpu=64, amp_runtime=runtime)
    auto = predict("resnet50", 8, "dp=8", _HW, "amp", batch_per_gpu=64)
    assert math.isclose(p.memory["optimizer_state"], 4 * params)
    assert p.memory["input_batch"] == auto.memory["input_batch"] == 64 * 3 * 224 * 224 * 4
    assert p.details["gradient_allreduce_s"] == auto.details["gradient_allreduce_s"]


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    code, out, err = run_main([*argv, "-H", _HW, "--precision", "amp", "--format", "json"], capsys)
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_cli_half_plan_needs_less_memory_and_a_smaller_allreduce(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["resnet50", "-n", "8", "-s", "dp=8", "-b", "64"]
    half = _json(["predict", *args, "--amp-runtime", _HALF], capsys)
    auto = _json(["predict", *args, "--amp-runtime", DEFAULT_AMP_RUNTIME], capsys)
    assert half["memory_per_gpu_bytes"] < auto["memory_per_gpu_bytes"]
    assert half["details"]["gradient_allreduce_s"] < auto["details"]["gradient_allreduce_s"]
    explained = _json(["explain", *args, "--amp-runtime", _HALF], capsys)
    assert math.isclose(explained["iteration_time_s"], half["iteration_time_s"], rel_tol=1e-9)


@pytest.mark.parametrize("spec", ["pp=2,dp=4,mb=4", "mp=2,dp=4", "channel=2,dp=4", "dp=8,comm=ps-sharded"])
def test_explain_equals_predict_for_a_half_model(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["resnet50", "-n", "8", "-s", spec, "-b", "16", "--amp-runtime", _HALF]
    p, e = _json(["predict", *args], capsys), _json(["explain", *args], capsys)
    assert math.isclose(e["iteration_time_s"], p["iteration_time_s"], rel_tol=1e-9)


def test_plan_assumptions_say_what_a_half_model_keeps_at_16_bits(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["plan", "resnet50", "-n", "8", "--top", "1"]
    half = _json([*args, "--amp-runtime", _HALF], capsys)["assumptions"]
    auto = _json(args, capsys)["assumptions"]
    assert "kept at 16 bits" in half["mixed_precision"] and "input batch" in half["mixed_precision"]
    assert "kept at 16 bits" not in auto["mixed_precision"]
    assert half["optimizer"] == "SGD with momentum (one 16-bit state buffer)"
    assert auto["optimizer"] == "SGD with momentum (one fp32 state buffer)"
    assert "no fp32 master" in half["precision"] and "fp32 master weights" in auto["precision"]

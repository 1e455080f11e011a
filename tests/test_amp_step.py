"""Mixed precision's own kernels (perfmodel.strategies.amp_step) against torch's dispatched ops."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.api import load_hardware, load_model
from perfmodel.cost.compute import ComputeValues
from perfmodel.network.counts import compile_counts
from perfmodel.network.importers.fx import import_module
from perfmodel.strategies.amp_step import (
    CHUNK_ELEMS,
    LAUNCH_BLOCKS,
    LAUNCH_TENSORS,
    SCALER_SCALAR_KERNELS,
    amp_casts_s,
    amp_step,
    amp_step_s,
    gradient_numels,
    unscale_launches,
)
from perfmodel.strategies.context import context
from perfmodel.strategies.data import param_tensors
from perfmodel.strategies.dimension import optimizer_step_s
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.predict import predict_in
from perfmodel.strategies.spec import parse_strategy

torch = pytest.importorskip("torch")
nn = torch.nn
TorchDispatchMode = pytest.importorskip("torch.utils._python_dispatch").TorchDispatchMode


class _Ops(TorchDispatchMode):  # type: ignore[misc]
    """Records (op, input dtype, output dtype, output numel, input is a leaf needing grad) of every
    dispatched op, keeping no tensor alive (a kept reference would change autograd's copies)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, Any, Any, int, bool]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        a = args[0] if args and isinstance(args[0], torch.Tensor) else None
        o = out if isinstance(out, torch.Tensor) else None
        self.ops.append((func.overloadpacket.__name__, None if a is None else a.dtype,
                         None if o is None else o.dtype, 0 if o is None else o.numel(),
                         a is not None and a.is_leaf and a.requires_grad))
        return out


class _Small(nn.Module):  # type: ignore[misc]
    """Convolutions with and without bias, batch norm, a residual add, pooling, a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, bias=True)
        self.c3 = nn.Conv2d(8, 16, 1, stride=2, bias=False)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 7)

    def forward(self, x: Any) -> Any:
        x = torch.relu(self.bn(self.c1(x)))
        x = self.c3(torch.relu(self.c2(x)) + x)
        return self.fc(self.pool(x).flatten(1))


def _casts(model: Any, steps: int = 1, shared: Callable[[Any], Any] | None = None) -> tuple[_Ops, _Ops]:
    """The ops of ``steps`` forward passes (each its own autocast region) and of one backward."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 12, 12), torch.randint(0, 7, (4,))
    fwd, bwd = _Ops(), _Ops()
    loss = 0
    with fwd:
        for _ in range(steps):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = shared(x) if shared else model(x)
                loss = loss + nn.functional.cross_entropy(out, y)
    with bwd:
        loss.backward()
    return fwd, bwd


def _param_casts(ops: _Ops) -> list[int]:
    return [n for op, src, dst, n, leaf in ops.ops
            if op == "_to_copy" and leaf and src == torch.float32 and dst == torch.bfloat16]


def test_cast_kernels_and_bytes_match_torch() -> None:
    """autocast casts each conv/linear weight and bias once per forward and each gradient back:
    as many kernels as amp_step counts, moving params x (4 + 2) bytes each way."""
    model = _Small()
    net = import_module(_Small, "small", (3, 12, 12))
    a = amp_step(net, "bf16", compile_counts(net).params)
    assert a is not None and not a.scaler
    fwd, bwd = _casts(model)
    cast = _param_casts(fwd)
    cast_params = [p for name, p in model.named_parameters() if not name.startswith("bn.")]
    assert len(cast) == a.cast_tensors == len(cast_params) == 6
    assert sum(cast) == a.cast_params == sum(p.numel() for p in cast_params)
    # the bytes amp_step_s prices per cast element (fp32 read + 16-bit written) against the
    # element sizes of the dtypes torch's cast ops really read and wrote
    moved = sum(n * (src.itemsize + dst.itemsize) for op, src, dst, n, leaf in fwd.ops
                if op == "_to_copy" and leaf and src.is_floating_point and dst.is_floating_point)
    v = replace(ComputeValues.of(load_hardware("a100-80gb-dgx"), "bf16"), launch_s=0.0,
                memory_bandwidth_bytes_per_s=1.0, eta_memory=1.0)
    assert amp_step_s(a, 1.0, v) / 2 == pytest.approx(moved, rel=1e-12)
    sizes = sorted(p.numel() for p in cast_params)
    back = [n for op, src, dst, n, _ in bwd.ops if op == "_to_copy" and src == torch.bfloat16
            and dst == torch.float32 and n in sizes]
    assert sorted(back) == sizes  # one fp32 conversion of each 16-bit weight gradient


def test_cache_lasts_one_autocast_region() -> None:
    """A weight used twice in one region is cast once; a second region (micro-batch) casts again."""
    model = _Small()
    twice = _param_casts(_casts(model, shared=lambda x: model(x) + model(x))[0])
    assert len(twice) == 6
    assert len(_param_casts(_casts(model, steps=2)[0])) == 12


def test_grad_scaler_kernels_match_torch() -> None:
    """GradScaler's scalar ops per step and its one foreach unscale over every gradient."""
    model = _Small()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu")
    x, y = torch.randn(4, 3, 12, 12), torch.randint(0, 7, (4,))
    for _ in range(2):  # the first step also creates the scale and growth tracker
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        back, upd = _Ops(), _Ops()
        with back:
            scaler.scale(loss).backward()
        with upd:
            scaler.step(opt)
            scaler.update()
    names = [op for op, *_ in upd.ops]
    scalar = [n for n in names if n in ("_to_copy", "reciprocal", "full", "_local_scalar_dense",
                                         "_amp_update_scale_")]
    assert len(scalar) == SCALER_SCALAR_KERNELS
    assert names.count("_amp_foreach_non_finite_check_and_unscale_") == 1
    assert [op for op, *_ in back.ops].count("mul") == 2  # the scale and its gradient
    net = import_module(_Small, "small", (3, 12, 12))
    a = amp_step(net, "amp", compile_counts(net).params)
    assert a is not None and a.scaler
    assert a.grad_params == sum(p.numel() for p in model.parameters())
    assert param_tensors(net).sum() == len(list(model.parameters()))


@pytest.mark.parametrize(("numels", "launches"), [
    ([1.0] * LAUNCH_TENSORS, 1),
    ([1.0] * (LAUNCH_TENSORS + 1), 2),
    ([CHUNK_ELEMS * LAUNCH_BLOCKS], 1),
    ([CHUNK_ELEMS * LAUNCH_BLOCKS + 1], 2),
    ([0.0, 5.0], 1),
    ([], 0),
])
def test_unscale_launches_follow_multi_tensor_apply(numels: list[float], launches: int) -> None:
    assert unscale_launches(numels) == launches


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3 * CHUNK_ELEMS * LAUNCH_BLOCKS), max_size=400))
def test_unscale_launches_bounds(numels: list[int]) -> None:
    """At least enough launches for the tensors and the blocks, at most one per full launch of each plus one."""
    n = unscale_launches([float(x) for x in numels])
    tensors = sum(1 for x in numels if x)
    blocks = sum(math.ceil(x / CHUNK_ELEMS) for x in numels)
    assert n >= max(math.ceil(tensors / LAUNCH_TENSORS), math.ceil(blocks / LAUNCH_BLOCKS))
    assert n <= tensors // LAUNCH_TENSORS + blocks // LAUNCH_BLOCKS + 1


def test_fp32_tf32_have_no_amp_kernels() -> None:
    net = load_model("resnet50")
    for prec in ("fp32", "tf32"):
        assert amp_step(net, prec, compile_counts(net).params) is None


def test_resnet50_counts_and_seconds() -> None:
    """ResNet-50: 53 convolutions and the fc (weight and bias) cast, 161 gradient tensors unscaled;
    the step's amp_casts and optimizer terms together grow by exactly amp_step_s under amp, the
    casts being the amp_casts term; nothing under tf32."""
    net = load_model("resnet50")
    cc = compile_counts(net)
    a = amp_step(net, "amp", cc.params)
    assert a is not None
    assert a.cast_tensors == 55
    assert a.cast_params == float(cc.params.sum()) - 53120  # all but batch norm's scales and shifts
    assert a.grad_params == float(cc.params.sum())
    hw = load_hardware("a100-80gb-dgx")
    s = parse_strategy("dp=8")
    ctx = context(net, hw, "amp", "sgd")
    bd = predict_in(ctx, s, 2048).breakdown
    base = optimizer_step_s(float(cc.params.sum()), "sgd", ctx.values)
    assert bd["optimizer_step"] + bd["amp_casts"] == pytest.approx(base + amp_step_s(a, 1.0, ctx.values), rel=1e-12)
    assert bd["amp_casts"] == pytest.approx(amp_casts_s(a, 1.0, ctx.values), rel=1e-12)
    v = ctx.values
    bw = v.memory_bandwidth_bytes_per_s * v.eta_memory
    casts = 2 * (55 * v.launch_s + a.cast_params * 6 / bw)
    scaler = (2 + SCALER_SCALAR_KERNELS + a.unscale_launches) * v.launch_s + a.grad_params * 8 / bw + v.host_op_s
    assert amp_step_s(a, 1.0, v) == pytest.approx(casts + scaler, rel=1e-12)
    tf = context(net, hw, "tf32", "sgd")
    assert "amp_casts" not in predict_in(tf, s, 2048).breakdown
    assert predict_in(tf, s, 2048).breakdown["optimizer_step"] == pytest.approx(
        optimizer_step_s(float(cc.params.sum()), "sgd", tf.values), rel=1e-12)


@pytest.mark.parametrize("spec", ["dp=2", "pp=2,mb=4", "filter=2", "mp=2"])
def test_explain_reproduces_the_term(spec: str) -> None:
    """explain's optimizer_step (with GradScaler's kernels) and amp_casts evaluate to predict's."""
    ctx = context(load_model("resnet18"), load_hardware("a100-80gb-dgx"), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy(spec), 64)
    for term in ("optimizer_step", "amp_casts"):
        assert f.term_values[term] == pytest.approx(f.prediction.breakdown[term], rel=1e-9)
        assert term not in f.numeric_terms
        assert f.legend[term]
    fp32 = explain_plan(context(ctx.net, ctx.hw, "fp32", "sgd"), parse_strategy(spec), 64)
    assert f.term_values["optimizer_step"] > fp32.term_values["optimizer_step"]


def test_linear_bias_is_its_output_features() -> None:
    """A linear on (T, D) tokens has a bias of out_features elements, not T: each gradient tensor
    GradScaler unscales has the size of torch's parameter (weight out x in, bias out)."""
    class _Tok(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(48, 40)
            self.fc2 = nn.Linear(40, 24, bias=False)

        def forward(self, x: Any) -> Any:
            return self.fc2(self.fc(x))

    for cls, shape in ((_Tok, (6, 48)), (_Small, (3, 12, 12))):
        net = import_module(cls, "m", shape)
        numels = gradient_numels(net, compile_counts(net).params)
        assert numels == [float(p.numel()) for p in cls().parameters()]

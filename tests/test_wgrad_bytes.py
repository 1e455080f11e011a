"""The weight bytes a GEMM kernel moves (perfmodel.cost.kernel_model.mm_time) against torch's ops."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from perfmodel.api import load_hardware
from perfmodel.cost.compute import ComputeValues
from perfmodel.cost.kernel_model import mm_time
from perfmodel.cost.work import KernelWork

torch = pytest.importorskip("torch")
TorchDispatchMode = pytest.importorskip("torch.utils._python_dispatch").TorchDispatchMode

_SLOTS = ("fwd", "dgrad", "wgrad")


class _Outputs(TorchDispatchMode):  # type: ignore[misc]
    """(op, output dtype, output numel) of every dispatched op returning one tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, Any, int]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self.ops.append((func.overloadpacket.__name__, out.dtype, out.numel()))
        return out


def _wgrad_itemsize(autocast: bool) -> int:
    """Bytes per element of the weight gradient the backward GEMM of a linear layer writes (the op
    whose output has the weight's size: the mm, not the views or the cast back to fp32)."""
    lin = torch.nn.Linear(24, 40, bias=False)
    x = torch.randn(8, 24, requires_grad=False)
    if autocast:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = lin(x)
    else:
        y = lin(x)
    rec = _Outputs()
    with rec:
        y.float().sum().backward()
    sizes = {dtype.itemsize for op, dtype, n in rec.ops if n == lin.weight.numel() and op == "mm"}
    assert len(sizes) == 1
    return sizes.pop()


def _weight_bytes(precision: str, slot: str, weights: float) -> float:
    """mm_time's bytes for ``weights`` parameters and no activations, at unit bandwidth and no FLOPs."""
    zero = dict.fromkeys(_SLOTS, 0.0)
    w = KernelWork(flops=zero, cc_flops=zero, mm_elems=zero, mem_elems_fwd=0.0, mem_elems_bwd=0.0,
                   mem_extra_bytes_fwd=0.0, mem_extra_bytes_bwd=0.0, launches_fwd=0.0, launches_bwd=0.0,
                   host_ops_fwd=0.0, host_ops_bwd=0.0)
    v = replace(ComputeValues.of(load_hardware("a100-80gb-dgx"), precision), memory_bandwidth_bytes_per_s=1.0,
                eta_memory=1.0)
    return float(mm_time(w, slot, weights, v, 1.0))


@pytest.mark.parametrize(("precision", "autocast"), [("bf16", True), ("fp32", False)])
def test_wgrad_writes_the_gradient_at_the_gemm_dtype_and_reads_no_weights(precision: str, autocast: bool) -> None:
    """Under autocast the weight-gradient GEMM writes a 16-bit gradient of the cast weight (its fp32
    conversion is the cast's backward, priced in amp_step); in fp32 a 4-byte one. It reads no
    weights: its bytes are the gradient's only."""
    assert _weight_bytes(precision, "wgrad", 1000.0) == pytest.approx(1000.0 * _wgrad_itemsize(autocast))


@pytest.mark.parametrize("precision", ["amp", "bf16", "fp32", "tf32"])
def test_fwd_and_dgrad_read_the_weights_at_the_precision(precision: str) -> None:
    e = ComputeValues.of(load_hardware("a100-80gb-dgx"), precision).elem_bytes
    for slot in ("fwd", "dgrad"):
        assert _weight_bytes(precision, slot, 1000.0) == pytest.approx(1000.0 * e)

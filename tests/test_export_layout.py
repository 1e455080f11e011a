"""An export priced ``--memory-format nhwc`` runs channels-last and its row says so.

The program's modules are checked in process (hooks on every convolution of a built stage:
inputs and filters channels-last, pipeline stages included, whose inputs arrive as contiguous
NCHW buffers); the programs then run under torchrun on the CPU (gloo) and must train exactly
like one unsplit NCHW process (oracle: ``build_module`` with the same seed on the same pieces
of the same samples); the row they write must make ``validate`` price it channels-last again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from perfmodel.export import ExportPlan, export_plan
from perfmodel.export.rows import RunResult, append_rows, measurement_row
from perfmodel.network import get_model
from perfmodel.strategies import predict
from perfmodel.validation import load_measurements, validate
from perfmodel.validation.software_era import memory_format_of

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")

from export_helpers import export_program, reference_run, torchrun  # noqa: E402

from perfmodel.export.runtime import Segment, build_pieces, synthetic_batch  # noqa: E402

HW = "a100-80gb-dgx"


def _export(tmp: Path, spec: str, gpus: int, fmt: str | None) -> tuple[Path, ExportPlan]:
    return export_program(tmp, spec, gpus, ["--format", "json", *([] if fmt is None else ["--memory-format", fmt])])


def test_the_plan_carries_the_priced_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, plan = _export(tmp_path, "dp=2", 2, "nhwc")
    d = json.loads(capsys.readouterr().out)
    assert plan.memory_format == "nhwc" == d["plan"]["memory_format"]
    assert d["assumptions"]["memory_format"].startswith("memory format nhwc")
    _, plan = _export(tmp_path, "dp=2", 2, None)
    assert plan.memory_format == "nchw"
    assert ExportPlan.from_dict({k: v for k, v in plan.to_dict().items() if k != "memory_format"}) == plan  # old


def _layout(t: Any) -> str:
    cl = {4: torch.channels_last, 5: torch.channels_last_3d}[t.dim()]
    if t.is_contiguous(memory_format=cl) and not t.is_contiguous():
        return "nhwc"
    return "nchw" if t.is_contiguous() else "other"


@pytest.mark.parametrize("fmt", ["nchw", "nhwc"])
@pytest.mark.parametrize(("spec", "gpus"), [("dp=2,mb=2", 2), ("pp=2,mb=4", 2)])
def test_every_stage_runs_its_convolutions_in_the_format(fmt: str, spec: str, gpus: int) -> None:
    p = predict("tiny_cnn", gpus, spec, HW, "fp32", None, 16, "sgd", 16, memory_format=fmt)
    plan = export_plan(p, HW)
    net = get_model(plan.model, plan.image_size)
    seen: list[tuple[str, str]] = []
    for stage in range(plan.pp):
        pieces = build_pieces(plan, net, stage, "cpu")
        for m in pieces.modules():
            if isinstance(m, torch.nn.Conv2d):
                m.register_forward_pre_hook(lambda mod, args: seen.append((_layout(args[0]), _layout(mod.weight))))
        seg = next(m for m in pieces.modules() if isinstance(m, Segment))
        x, _ = synthetic_batch(net, 4, 0, "cpu", fmt)
        # what crosses a pipeline cut arrives as a contiguous (NCHW) buffer
        xs = [x] if stage == 0 else [torch.randn(4, *net.shape_of(t)) for t in seg.in_names]
        assert _layout(x) == fmt
        pieces(*xs)
    assert len(seen) == sum(layer.kind == "conv" for layer in net.layers)
    assert set(seen) == {(fmt, fmt)}


@pytest.mark.parametrize(("spec", "gpus"), [("dp=2,mb=2", 2), ("pp=2,mb=4", 2)])
def test_an_nhwc_program_trains_like_one_process_and_its_row_says_nhwc(spec: str, gpus: int, tmp_path: Path) -> None:
    prog, plan = _export(tmp_path, spec, gpus, "nhwc")
    out, summary = torchrun(tmp_path, prog, gpus, 2, 1)
    assert "NHWC" in out
    assert summary["losses"] == pytest.approx(reference_run(plan, 3)[0], rel=1e-5, abs=1e-6)
    (row,) = load_measurements([tmp_path / "measured.csv"]).rows
    assert memory_format_of(row) == "nhwc" and row.columns["memory_format"] == "nhwc"


def _gpu_run() -> RunResult:
    return RunResult("cuda", "NVIDIA A100-SXM4-80GB", "nccl", "2.x", "2026-01-01", 1, (0.1, 0.1, 0.1), (2.3, 2.2),
                     None, "9.1.0")


def test_validate_prices_the_row_in_its_format(tmp_path: Path) -> None:
    """bf16 on the A100 runs tensor-core convolutions, so the two layouts price apart."""
    out = tmp_path / "measured.csv"
    plans = {fmt: export_plan(predict("resnet50", 2, "dp=2", HW, "bf16", 32, memory_format=fmt), HW)
             for fmt in ("nchw", "nhwc")}
    assert plans["nhwc"].predicted_throughput > 1.05 * plans["nchw"].predicted_throughput
    append_rows(out, [measurement_row(plans[fmt], _gpu_run()) for fmt in ("nchw", "nhwc")])
    v = validate(load_measurements([out]))
    assert [memory_format_of(row.measurement) for row in v.rows] == ["nchw", "nhwc"]
    for row, fmt in zip(v.rows, ("nchw", "nhwc"), strict=True):
        assert row.predicted_throughput == pytest.approx(plans[fmt].predicted_throughput, rel=1e-9)

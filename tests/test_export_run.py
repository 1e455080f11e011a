"""Exported programs run under torchrun on the CPU (gloo) and train exactly like one process.

Oracle: one process, no torch.distributed, the unsplit ``build_module`` network with the same
seed, trained on the same samples cut into the same pieces (each replica's batch into its
micro-batches: batch norm normalises per piece in both), gradients averaged over all pieces,
SGD with momentum. Data-parallel runs must end with its weights, pipelined runs must give its
loss sequence (and, stage by stage, its weights).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from perfmodel.validation import load_measurements, validate
from perfmodel.validation.devices import CPU_ROLE

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed.pipelining")

from export_helpers import export_program, reference_run, torchrun  # noqa: E402

from perfmodel.export import ExportPlan  # noqa: E402
from perfmodel.export.runtime import build_network  # noqa: E402
from perfmodel.export.stages import cut_tensors  # noqa: E402
from perfmodel.network import NetBuilder, Network, get_model  # noqa: E402
from perfmodel.validation.measure import build_module  # noqa: E402

WARMUP, STEPS = 1, 2
#: (spec, processes): data parallel with accumulation, a GPipe pipeline, a 1F1B pipeline x data
#: parallel on a 2-D mesh with activation checkpointing
CASES = [("dp=2,mb=2", 2), ("pp=2,mb=4", 2), ("pp=2,dp=2,mb=2,schedule=1f1b,recompute=true", 4)]


def _torchrun(tmp: Path, prog: Path, gpus: int) -> dict[str, object]:
    out, summary = torchrun(tmp, prog, gpus, STEPS, WARMUP, ["--save-weights", str(tmp / "weights.pt")])
    assert "measured" in out and "predicted" in out
    return summary


@pytest.mark.parametrize(("spec", "gpus"), CASES)
def test_exported_plan_trains_like_one_process_and_is_scored(spec, gpus, tmp_path):
    prog, plan = export_program(tmp_path, spec, gpus)
    summary = _torchrun(tmp_path, prog, gpus)
    losses, weights = reference_run(plan, WARMUP + STEPS)
    assert summary["losses"] == pytest.approx(losses, rel=1e-5, abs=1e-6)
    assert losses[-1] < losses[0]  # it trains
    files = sorted(tmp_path.glob("weights*.pt"))
    assert len(files) == plan.pp
    got: dict[str, object] = {}
    for f in files:
        got.update(torch.load(f))
    assert set(weights) <= set(got)
    for k, w in weights.items():
        torch.testing.assert_close(got[k], w, rtol=1e-4, atol=1e-6, msg=f"{spec}: {k}")
    # the row: read by validate, priced as exported, shown as a CPU run
    v = validate(load_measurements([tmp_path / "measured.csv"]))
    (row,) = v.rows
    assert row.measurement.strategy_text == plan.strategy and row.measurement.gpus == gpus
    assert row.predicted_throughput == pytest.approx(plan.predicted_throughput, rel=1e-9)
    assert row.role == CPU_ROLE and row.measurement.columns["device"] == "cpu"
    times = summary["step_times_s"]
    assert isinstance(times, list) and len(times) == STEPS
    assert row.measurement.measured_throughput == pytest.approx(16 / statistics.median(times), rel=1e-9)


def test_stage_cuts_carry_what_the_ir_says_crosses_them():
    """The tensors a stage boundary sends are those whose elements the IR counts at that cut
    (on a small U-Net-like chain whose skips cross several cuts), and chaining stages gives
    the network."""
    from perfmodel.export.runtime import Segment

    net = _skip_net()
    for lk in net.links[:-1]:
        sent = cut_tensors(net, lk.stop)
        numel = sum(int(torch.Size(net.shape_of(t)).numel()) for t in sent)
        assert numel == lk.cut_elems_per_sample, lk.name
    torch.manual_seed(0)
    full = build_module(net, torch).eval()
    x = torch.randn(2, *net.input_shape)
    out: object = (x,)
    for lk in net.links:
        seg = Segment(full, net, lk.start, lk.stop)
        out = seg(*(out if isinstance(out, tuple) else (out,)))
    torch.testing.assert_close(out, full(x))
    # a stage's input gradients go back as flat buffers: contiguous even for a tensor read by cat
    dec = next(lk for lk in net.links if lk.name == "dec")
    stage = Segment(full, net, dec.start, len(net.layers))
    inputs = [torch.randn(2, *net.shape_of(t), requires_grad=True) for t in stage.in_names]
    assert len(inputs) == 2
    grads = torch.autograd.grad(stage(*inputs).sum(), inputs)  # as pipelining takes them
    assert all(g.is_contiguous() for g in grads)
    assert build_network(ExportPlan.from_dict(_plan_dict())).name == "tiny_cnn"


def _skip_net() -> Network:
    """conv, down, conv, up + concat with the first conv, conv: the first block's output crosses
    two cuts and is read by a concat only, the input crosses none."""
    b = NetBuilder("skips", (2, 8, 8))
    with b.block("enc1"):
        e1 = b.act(b.conv("input", 4, 3, padding=1), "relu")
    with b.block("enc2"):
        e2 = b.act(b.conv(b.maxpool(e1, 2, 2), 8, 3, padding=1), "relu")
    with b.block("mid"):
        m = b.conv(e2, 8, 3, padding=1)
    with b.block("dec"):
        u = b.upsample(m, 2)
        x = b.conv(b.concat([u, e1]), 4, 3, padding=1)
    with b.block("head"):
        b.conv(x, 3, 1)
    return b.build()


def _plan_dict() -> dict[str, object]:
    return {"model": "tiny_cnn", "image_size": 16, "gpus": 1, "dp": 1, "pp": 1, "mb": 1, "schedule": "gpipe",
            "recompute": False, "balance": [], "comm": "ring", "precision": "fp32", "optimizer": "sgd",
            "global_batch": 4, "hardware": "a100-80gb-dgx", "strategy": "dp=1", "kind": "data"}


USER_MODULE = """
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))
"""


def test_a_file_model_trains_the_users_own_module(tmp_path):
    """Hook for ``file.py:Name`` models: the program builds the user's class, not the IR
    (data-parallel plans; pipelines need the module cut at the priced links)."""
    from perfmodel.export import NotExportableError, export_plan
    from perfmodel.export.plan import user_module
    from perfmodel.export.runtime import build_pieces, flat_state
    from perfmodel.strategies import predict

    (tmp_path / "mynet.py").write_text(USER_MODULE)
    spec = user_module(str(tmp_path / "mynet.py") + ":Net")
    assert spec == f"{(tmp_path / 'mynet.py').resolve()}:Net" and user_module("resnet50") == ""
    p = predict("tiny_cnn", 2, "dp=2", "a100-80gb-dgx", "fp32", None, 8, "sgd", 16)
    plan = export_plan(p, "a100-80gb-dgx", spec)
    assert plan.model == spec and plan.module == spec
    module = build_pieces(plan, get_model("tiny_cnn", 16), 0, "cpu")
    assert tuple(module(torch.randn(2, 3, 16, 16)).shape) == (2, 10)
    assert set(flat_state(module)) == {"conv.weight", "conv.bias", "fc.weight", "fc.bias"}
    pp = predict("tiny_cnn", 2, "pp=2,mb=2", "a100-80gb-dgx", "fp32", None, 8, "sgd", 16)
    with pytest.raises(NotExportableError, match="cut at the priced links"):
        export_plan(pp, "a100-80gb-dgx", spec)


def test_report_shows_memory_of_a_gpu_run():
    """A GPU row's peak memory is printed beside the predicted memory (no GPU needed to check)."""
    from perfmodel.export.rows import RunResult, measurement_row
    from perfmodel.export.template import report

    plan = ExportPlan.from_dict({**_plan_dict(), "predicted_throughput": 400.0,
                                 "predicted_memory_per_gpu_bytes": 3 * 2**30})
    r = RunResult("cuda", "Test GPU", "nccl", "2.x", "2026-01-01", 1, (0.01,), (2.0, 1.9), 2.5 * 2**30)
    text = report(plan, measurement_row(plan, r))
    assert "measured  400.0 samples/s" in text and "+0.0%" in text and "CPU run" not in text
    assert "2.50 GiB peak allocated per GPU, predicted 3.00 GiB" in text


@pytest.mark.parametrize(("pp", "balance", "expected"), [(2, [2, 1], 3), (1, [], 4 * 3)])
def test_recompute_checkpoints_as_priced(pp, balance, expected, monkeypatch):
    """``recompute=true``: in a pipeline, each stage checkpoints all micro-batches of a step but the
    last (torchgpipe's except_last, as the cost model prices it); without one, every chain link of
    every micro-batch (tiny_cnn has 3 links)."""
    from perfmodel.export.runtime import build_pieces

    calls = []
    real = torch.utils.checkpoint.checkpoint

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", counting)
    plan = ExportPlan.from_dict({**_plan_dict(), "gpus": pp, "pp": pp, "mb": 4, "recompute": True,
                                 "balance": balance, "global_batch": 16})
    module = build_pieces(plan, get_model("tiny_cnn", 16), 0, "cpu")
    for _ in range(2):  # two steps of four micro-batches
        module.forwards = 0
        for _ in range(4):
            module(torch.randn(4, 3, 16, 16))
    assert len(calls) == 2 * expected

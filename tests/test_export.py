"""``perfmodel export`` without running anything: which plans export, the program text, the
measured row as validate reads it. (The programs run under torchrun in test_export_run.py.)"""

from __future__ import annotations

import ast
import csv
import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.export import ExportPlan, export_plan, program_text
from perfmodel.export.plan import refusal
from perfmodel.export.rows import RunResult, append_rows, measurement_row
from perfmodel.export.stages import cut_tensors, stage_layer_ranges
from perfmodel.network import get_model
from perfmodel.search import plan
from perfmodel.strategies import predict
from perfmodel.strategies.spec import parse_strategy
from perfmodel.validation import load_measurements, validate
from perfmodel.validation.devices import CPU_ROLE
from perfmodel.validation.measure import TORCH_MISSING
from perfmodel.validation.measure_env import cudnn_version_text, loaded_cudnn
from perfmodel.validation.software_era import cudnn_major_of


def _plan(spec: str, gpus: int, batch: int = 16, precision: str = "fp32") -> ExportPlan:
    p = predict("tiny_cnn", gpus, spec, "a100-80gb-dgx", precision, None, batch, "sgd", 16)
    return export_plan(p, "a100-80gb-dgx")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out, out.err


def test_pipeline_plan_pins_the_priced_stage_split():
    p = predict("resnet50", 4, "pp=4,mb=8", "a100-80gb-dgx", "amp", None, 256)
    e = export_plan(p, "a100-80gb-dgx")
    assert list(e.balance) == p.details["balance"] == [len(st["links"]) for st in p.details["stages"]]
    # the written spec prices to the same step: validate scores exactly the exported split
    s = parse_strategy(e.strategy, 4)
    again = predict("resnet50", 4, e.strategy, "a100-80gb-dgx", "amp", None, 256)
    assert s.balance == e.balance and again.iteration_time_s == pytest.approx(p.iteration_time_s, rel=1e-12)
    assert ExportPlan.from_dict(e.to_dict()) == e


@pytest.mark.parametrize(
    ("spec", "missing"),
    [
        ("sp=2x2", "spatial parallelism"),
        ("filter=4", "filter/channel"),
        ("channel=4", "filter/channel"),
        ("mp=4", "hypergraph model parallelism"),
        ("dp=4,comm=ps-sharded", "parameter servers"),
        ("dp=4,comm=hierarchical", "hierarchical allreduce"),
    ],
)
def test_plans_without_a_torch_program_exit_1_with_one_line(spec, missing, tmp_path, capsys):
    out = tmp_path / "p.py"
    code, _, err = _run(["export", "resnet50", "--gpus", "4", "-s", spec, "-o", str(out)], capsys)
    assert code == 1, err
    assert err.count("\n") == 1 and "cannot be exported yet" in err and missing in err
    assert not out.exists()


def test_uneven_micro_batches_and_bad_paths_are_usage_errors(tmp_path, capsys):
    code, _, err = _run(["export", "tiny_cnn", "-n", "2", "-s", "pp=2,mb=3", "-B", "16", "-o",
                         str(tmp_path / "p.py")], capsys)
    assert code == 2 and "mb=3 equal micro-batches" in err
    code, _, err = _run(["export", "tiny_cnn", "-n", "2", "-s", "dp=2", "-o", str(tmp_path / "p.txt")], capsys)
    assert code == 2 and "unknown extension '.txt'" in err
    code, _, err = _run(["export", "tiny_cnn", "-n", "2", "-s", "dp=2", "-o", str(tmp_path / "no" / "p.py")], capsys)
    assert code == 2 and "does not exist" in err


def test_program_is_python_importing_only_torch_perfmodel_and_the_standard_library():
    e = _plan("pp=2,dp=2,mb=2,schedule=1f1b,recompute=true", 4)
    text = program_text(e)
    tree = ast.parse(text)
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    assert roots <= {"__future__", "argparse", "gc", "json", "os", "sys", "pathlib", "typing", "torch", "perfmodel"}
    plan = _plan_literal(text)
    assert ExportPlan.from_dict(plan) == e
    assert plan["balance"] == list(e.balance) and plan["schedule"] == "1f1b" and plan["recompute"] is True


def _plan_literal(text: str) -> dict[str, object]:
    tree = ast.parse(text)
    node = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "PLAN")
    assert node.value is not None
    return dict(ast.literal_eval(node.value))


def _run_result(device: str, step_s: float = 0.01) -> RunResult:
    return RunResult(device, "test device", "gloo", "2.x", "2026-01-01", 1, (step_s, step_s * 1.2, step_s * 0.9),
                     (2.3, 2.2), None)


def test_rows_are_read_by_validate_and_a_cpu_run_is_shown_not_scored(tmp_path):
    out = tmp_path / "measured.csv"
    dp = _plan("dp=2", 2)
    pp = _plan("pp=2,mb=4", 2)
    append_rows(out, [measurement_row(dp, _run_result("cpu"))])
    append_rows(out, [measurement_row(pp, _run_result("cuda", 0.002))])  # a second run appends
    ms = load_measurements([out])
    assert [m.strategy_text for m in ms.rows] == [dp.strategy, pp.strategy]
    assert ms.rows[0].batch_per_gpu == 8 and ms.rows[1].global_batch == 16
    assert ms.rows[0].measured_throughput == pytest.approx(16 / 0.01)  # median step
    v = validate(ms)
    cpu, gpu = v.rows
    assert cpu.role == CPU_ROLE and not cpu.scored and "CPU" in cpu.reason
    assert cpu.predicted_throughput == pytest.approx(dp.predicted_throughput, rel=1e-9)
    assert gpu.scored and gpu.predicted_throughput == pytest.approx(pp.predicted_throughput, rel=1e-9)
    assert v.summary.scored == 1
    header = next(csv.reader(out.open()))
    assert {"device", "peak_memory_per_gpu_bytes", "predicted_throughput", "framework", "source"} <= set(header)


def test_calibrate_refuses_cpu_runs(tmp_path, capsys):
    out = tmp_path / "measured.csv"
    append_rows(out, [measurement_row(_plan("dp=2", 2), _run_result("cpu"))])
    code, _, err = _run(["calibrate", str(out), "-H", "a100-80gb-dgx", "-o", str(tmp_path / "c.toml")], capsys)
    assert code == 2 and "ran on the CPU" in err


def test_export_and_plan_export_write_runnable_programs(tmp_path, capsys):
    out = tmp_path / "train_plan.py"
    code, text, err = _run(["export", "tiny_cnn", "-n", "2", "-s", "pp=2,mb=2", "-B", "16", "--image-size", "16",
                            "--precision", "fp32", "-o", str(out)], capsys)
    assert code == 0, err
    assert "torchrun --nproc-per-node 2" in text and "perfmodel validate measured.csv" in text
    compile(out.read_text(), str(out), "exec")
    best = tmp_path / "best.py"
    code, text, err = _run(["plan", "tiny_cnn", "-n", "2", "--precision", "fp32", "--export", str(best)], capsys)
    assert code == 0, err
    assert f"wrote {best}" in text
    ranked = plan("tiny_cnn", 2, "a100-80gb-dgx", "fp32")
    first = next(p for p in ranked.plans if not refusal(p.strategy))  # the fastest exportable plan
    written = _plan_literal(best.read_text())
    assert written["strategy"] == export_plan(first, "a100-80gb-dgx").strategy  # a pipeline pins its balance
    assert written["predicted_throughput"] == pytest.approx(first.throughput_samples_per_s, rel=1e-9)
    passed_over = [p for p in ranked.plans[: ranked.plans.index(first)]]
    assert all(f"({p.strategy.spec()}) not exported" in text for p in passed_over)


NETS = {name: get_model(name, size) for name, size in [("tiny_cnn", 16), ("resnet18", 64), ("googlenet", 64),
                                                        ("unet", 64), ("densenet121", 64)]}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(NETS)), st.data())
def test_stages_cover_the_network_and_cuts_send_what_the_ir_counts(name, data):
    """For any split of the chain into stages: the stages hold every layer once, in order; each
    stage reads only its own layers' outputs and what crosses the cut before it; and what
    crosses a cut has exactly the elements per sample the cost model prices at that cut."""
    net = NETS[name]
    links = len(net.links)
    stages = data.draw(st.integers(1, min(6, links)))
    cuts = sorted(data.draw(st.lists(st.integers(1, links - 1), min_size=stages - 1, max_size=stages - 1,
                                     unique=True))) if stages > 1 else []
    bounds = [0, *cuts, links]
    balance = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
    ranges = stage_layer_ranges(net, balance)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(net.layers)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    for start, stop in ranges:
        available = set(cut_tensors(net, start)) if start else {"input"}
        for layer in net.layers[start:stop]:
            assert set(layer.inputs) <= available, (layer.name, layer.inputs)
            available.add(layer.name)
        if stop < len(net.layers):
            link = next(lk for lk in net.links if lk.stop == stop)
            sent = cut_tensors(net, stop)
            assert set(sent) <= available
            assert sum(math.prod(net.shape_of(t)) for t in sent) == link.cut_elems_per_sample


def test_export_says_when_this_python_cannot_run_the_program(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    code, text, err = _run(["export", "tiny_cnn", "-n", "2", "-s", "dp=2", "-o", str(tmp_path / "p.py")], capsys)
    assert code == 0, err
    assert "running it needs torch" in text and TORCH_MISSING.split(": ")[-1] in text


def test_plan_export_takes_the_fastest_exportable_plan(tmp_path):
    from perfmodel.commands.export import export_best
    from perfmodel.export import NotExportableError

    sp = predict("resnet18", 4, "sp=2x2", "a100-80gb-dgx", "amp", 32)
    dp = predict("resnet18", 4, "dp=4", "a100-80gb-dgx", "amp", 32)
    out = tmp_path / "best.py"
    text = export_best([sp, dp], "a100-80gb-dgx", out)
    assert _plan_literal(out.read_text())["strategy"] == "dp=4"
    assert "rank 1 (sp=2x2,dp=1) not exported: spatial parallelism" in text
    with pytest.raises(NotExportableError, match="spatial"):
        export_best([sp], "a100-80gb-dgx", tmp_path / "none.py")
    assert not (tmp_path / "none.py").exists()


def test_a_gpu_run_records_the_cudnn_it_loaded_and_validate_prices_with_it(tmp_path):
    # the exported program reads torch.backends.cudnn.version() (8.9.2 here, an old-encoding
    # 8902) into the row's framework; validate reads the major back from the row
    out = tmp_path / "measured.csv"
    r = dataclasses.replace(_run_result("cuda", 0.002), cudnn_version="7.6.5")
    append_rows(out, [measurement_row(_plan("dp=2", 2), r), measurement_row(_plan("dp=2", 2), _run_result("cpu"))])
    with_cudnn, without = load_measurements([out]).rows
    assert with_cudnn.framework == "PyTorch 2.x, cuDNN 7.6.5, NCHW (torch.contiguous_format)"
    assert cudnn_major_of(with_cudnn) == 7
    assert "cuDNN" not in without.framework


def test_run_result_reads_the_loaded_cudnn_in_both_encodings():
    class _Backends:
        def __init__(self, v):
            self.cudnn = type("C", (), {"version": staticmethod(lambda: v)})()

    for raw, text in ((8902, "8.9.2"), (90100, "9.1.0")):
        fake = type("T", (), {"backends": _Backends(raw), "version": type("V", (), {"hip": None})()})()
        assert cudnn_version_text(loaded_cudnn(fake)) == text
    rocm = type("T", (), {"backends": _Backends(60032), "version": type("V", (), {"hip": "6.0"})()})()
    assert loaded_cudnn(rocm) is None

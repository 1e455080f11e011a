"""predict --trace: the Chrome trace event format (chrome://tracing, Perfetto) of a priced step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_main

from perfmodel.report.trace import trace_events
from perfmodel.strategies import predict


def _check_schema(doc: dict) -> list[dict]:
    """The Trace Event Format's rules for what we emit: complete ('X') and metadata ('M') events."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M")
        assert isinstance(e["name"], str) and e["name"]
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], int | float) and isinstance(e["dur"], int | float)
            assert e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["cat"], str)
        else:
            assert e["name"] in ("process_name", "thread_name") and isinstance(e["args"]["name"], str)
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def test_cli_writes_a_loadable_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "step.json"
    code, _, _ = run_main(["predict", "vgg16", "--gpus", "8", "-s", "pp=4,dp=2,mb=4", "-b", "4", "--trace", str(f)],
                          capsys)
    assert code == 0
    doc = json.loads(f.read_text(encoding="utf-8"))
    events = _check_schema(doc)
    p = predict("vgg16", 8, "pp=4,dp=2,mb=4", global_batch=32)
    # process 0: the breakdown, end to end, in microseconds
    step = [e for e in events if e["pid"] == 0]
    assert sum(e["dur"] for e in step) == pytest.approx(p.iteration_time_s * 1e6, rel=1e-9)
    assert step[-1]["ts"] + step[-1]["dur"] == pytest.approx(p.iteration_time_s * 1e6, rel=1e-9)
    # process 1: every micro-batch's forward and backward on every stage, in order on each stage
    passes = [e for e in events if e["pid"] == 1 and e["cat"] in ("forward", "backward")]
    assert len(passes) == 2 * 4 * 4
    for stage in range(4):
        mine = sorted((e for e in passes if e["tid"] == stage), key=lambda e: e["ts"])
        for a, b in zip(mine, mine[1:], strict=False):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6
        fwd = [e["dur"] for e in mine if e["cat"] == "forward"]
        st = p.details["stages"][stage]
        assert fwd[0] == pytest.approx((st["forward_s"] + st.get("send_forward_s", 0.0)) * 1e6)


def test_data_parallel_trace_has_the_breakdown_only() -> None:
    p = predict("resnet50", 8, "dp=8", batch_per_gpu=64)
    events = _check_schema(trace_events(p))
    assert {e["pid"] for e in events} == {0}
    assert [e["name"] for e in events][0] == "compute"


def test_trace_needs_a_json_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["predict", "resnet50", "--gpus", "1", "-s", "dp=1", "--trace", str(tmp_path / "t.txt")],
                            capsys)
    assert code == 2 and ".json" in err
    assert not (tmp_path / "t.txt").exists()

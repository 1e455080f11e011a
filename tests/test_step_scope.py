"""The ``step`` column: rows timed over forward and backward only are priced without the update."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import run_main

from perfmodel.errors import MeasurementError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.validation import parse_measurements, validate
from perfmodel.validation.pricing import price_row
from perfmodel.validation.step_scope import FORWARD_BACKWARD, FULL_STEP

HEADER = "model,hardware,gpus,precision,batch_per_gpu,global_batch,strategy,measured_throughput"


def _rows(*steps: str, model: str = "vgg16", hardware: str = "v100-16gb-dgx1", optimizer: str = "sgd") -> str:
    lines = [HEADER + ",optimizer,step"]
    lines += [f"{model},{hardware},1,fp32,16,,dp=1,150,{optimizer},{s}" for s in steps]
    return "\n".join(lines) + "\n"


def test_default_is_the_full_step_and_values_are_checked() -> None:
    ms = parse_measurements(_rows("", "full", "Forward-Backward"))
    assert [m.step for m in ms.rows] == [FULL_STEP, FULL_STEP, FORWARD_BACKWARD]
    plain = parse_measurements(HEADER + "\nvgg16,v100-16gb-dgx1,1,fp32,16,,dp=1,150\n")
    assert plain.rows[0].step == FULL_STEP
    with pytest.raises(MeasurementError, match="row 1, column 'step': 'fwd' is not one of full, forward-backward"):
        parse_measurements(_rows("fwd"))


@pytest.mark.parametrize("optimizer, bytes_per_param", [("sgd", 20), ("adam", 28)])
def test_forward_backward_drops_exactly_the_update(optimizer: str, bytes_per_param: int) -> None:
    """The update reads and writes ``bytes_per_param`` fp32 bytes per weight (SGD with momentum: w, g,
    m in, w, m out; Adam: w, g, m, v in, w, m, v out) at the memory rate, in a fixed count of
    launches: the difference between the two prices, and nothing else moves."""
    hw = load_hardware("v100-16gb-dgx1")
    rows = parse_measurements(_rows("full", FORWARD_BACKWARD, optimizer=optimizer)).rows
    full, fb = (price_row(m, hw) for m in rows)
    params = get_model("vgg16").params
    update_s = params * bytes_per_param / (hw.device.memory_bandwidth_bytes_per_s * hw.compute["fp32"].memory)
    dropped = full.step_time_s - fb.step_time_s
    assert update_s < dropped < update_s + 100e-6  # plus the update's few launches (microseconds each)
    assert {k: v for k, v in full.breakdown.items() if k != "optimizer_step"} == \
        {k: v for k, v in fb.breakdown.items() if k != "optimizer_step"}
    assert fb.breakdown["optimizer_step"] == pytest.approx(hw.kernels.step_overhead_s)
    state = (8 if optimizer == "adam" else 4) * params  # momentum / Adam's two moments, fp32
    assert fb.memory_per_gpu_bytes == pytest.approx(full.memory_per_gpu_bytes - state)


def test_validate_prices_each_scope_apart() -> None:
    """Two rows that differ only in ``step`` are not one cached price."""
    v = validate(parse_measurements(_rows("full", FORWARD_BACKWARD)), "none")
    full, fb = (r.predicted_throughput for r in v.rows)
    assert full is not None and fb is not None and fb > full


def test_cli_names_a_bad_step_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad_step.csv"
    bad.write_text(_rows("optimizer-only"))
    code, _, err = run_main(["validate", str(bad)], capsys)
    assert code == 1
    assert "row 1, column 'step': 'optimizer-only' is not one of full, forward-backward" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1

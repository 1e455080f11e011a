"""A forward-backward row is never the speedup baseline (or the calibration group) of a full step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfmodel.errors import MeasurementError
from perfmodel.network import get_model
from perfmodel.partition import build_hypergraph
from perfmodel.partition.loads import part_blocks
from perfmodel.validation import load_measurements, validate

HEADER = "model,hardware,gpus,precision,batch_per_gpu,global_batch,strategy,measured_throughput,framework,source,step\n"


def _file(tmp_path: Path, *rows: str) -> str:
    p = tmp_path / "runs.csv"
    p.write_text(HEADER + "".join(r + "\n" for r in rows))
    return str(p)


def test_a_forward_backward_one_gpu_row_is_no_full_step_baseline(tmp_path: Path) -> None:
    f = _file(tmp_path, "resnet50,v100-16gb-dgx1,1,fp32,64,,dp=1,300,PyTorch,x,forward-backward",
              "resnet50,v100-16gb-dgx1,8,fp32,64,,dp=8,2100,PyTorch,x,full")
    rows = validate(load_measurements([f]), "none").rows
    assert all(r.measured_speedup is None and r.speedup_baseline_row is None for r in rows)


def test_the_same_scope_still_forms_a_group(tmp_path: Path) -> None:
    f = _file(tmp_path, "resnet50,v100-16gb-dgx1,1,fp32,64,,dp=1,300,PyTorch,x,full",
              "resnet50,v100-16gb-dgx1,8,fp32,64,,dp=8,2100,PyTorch,x,")
    multi = validate(load_measurements([f]), "none").rows[1]
    assert multi.measured_speedup == pytest.approx(7.0) and multi.speedup_baseline_row == 1


def test_a_misspelt_scope_names_the_closest(tmp_path: Path) -> None:
    f = _file(tmp_path, "resnet50,v100-16gb-dgx1,1,fp32,64,,dp=1,300,PyTorch,x,forward_backward")
    with pytest.raises(MeasurementError, match=r"did you mean forward-backward\?"):
        load_measurements([f])


def test_part_blocks_refuses_labels_outside_the_parts() -> None:
    hg = build_hypergraph(get_model("tiny_cnn", None), None, "fp32", "channel", groups=2)
    with pytest.raises(ValueError, match=r"a part in 0\.\.2"):
        part_blocks(hg, np.full(hg.unit_layer.size, 3), 3)

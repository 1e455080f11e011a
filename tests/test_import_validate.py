"""A measured row of an imported model (``file.py:Name``, as ``perfmodel export`` writes it) is
read and priced by ``validate`` like a zoo model's row."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel.errors import MeasurementError
from perfmodel.strategies import predict
from perfmodel.validation import load_measurements, validate

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
HEADER = "model,hardware,gpus,precision,batch_per_gpu,global_batch,strategy,measured_throughput,image_size\n"


def test_a_row_of_a_model_file_is_priced_like_predict(tmp_path: Path) -> None:
    spec = f"{ROOT / 'examples' / 'mynet.py'}:MyNet"
    f = tmp_path / "measured.csv"
    f.write_text(HEADER + f"{spec},a100-80gb-dgx,2,amp,4,,dp=2,3000,64\n")
    v = validate(load_measurements([f]))
    (row,) = v.rows
    expected = predict(spec, 2, "dp=2", "a100-80gb-dgx", "amp", batch_per_gpu=4, image_size=64)
    assert row.predicted_throughput == pytest.approx(expected.throughput_samples_per_s, rel=1e-12)


def test_an_unknown_zoo_name_is_still_refused(tmp_path: Path) -> None:
    f = tmp_path / "measured.csv"
    f.write_text(HEADER + "resnt50,a100-80gb-dgx,2,amp,4,,dp=2,3000,224\n")
    with pytest.raises(MeasurementError, match="did you mean resnet50"):
        load_measurements([f])

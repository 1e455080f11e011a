"""The cuDNN each measured run used, read from its framework, source and notes."""

from __future__ import annotations

from importlib import resources

import pytest

from perfmodel.cost.grouped import DEFAULT_CUDNN_MAJOR
from perfmodel.validation import load_measurements
from perfmodel.validation.software_era import cudnn_major_from_text, cudnn_major_of


@pytest.mark.parametrize(("text", "major"), [
    ("TensorFlow 1 (NGC 20.06-tf1-py3, XLA)", 8),
    ("MXNet (NGC mxnet-20.12-py3)", 8),
    ("PyTorch (NGC 21.03)", 8),
    ("NGC pytorch:19.05-py3 container", 7),
    ("PyTorch 20.03 container", 7),
    ("TF b1e174e, CUDA 8 / cuDNN 5.1; variable_update parameter_server", 5),
    ("CUDA 10.1.243, cuDNN 7.6.2.24", 7),
    ("PyTorch 1.3", 7),
    ("PyTorch 1.12", None),
    ("PyTorch", None),
    ("CUDA 10.1 on 2020.06.01", None),
])
def test_versions_from_text(text: str, major: int | None) -> None:
    assert cudnn_major_from_text(text) == major


def test_shipped_runs() -> None:
    files = ("published_runs.csv", "holdout_runs.csv", "families_runs.csv", "families_holdout_runs.csv")
    seen: dict[tuple[str, str], set[int]] = {}
    for f in files:
        for m in load_measurements([resources.files("perfmodel.data") / f]).rows:
            seen.setdefault((m.framework, m.model), set()).add(cudnn_major_of(m))
    # NVIDIA's 2020-2021 ResNeXt tables ran NGC containers with cuDNN 8: the single-kernel rule
    resnext = {k: v for k, v in seen.items() if "resnext" in k[1]}
    assert resnext and all(v == {8} for v in resnext.values())
    assert seen[("TensorFlow 1.1 (tf_cnn_benchmarks)", "resnet50")] == {5}
    assert seen[("PyTorch (torchgpipe)", "resnet101")] == {7}
    # the 2019 ResNet-50 table (pytorch-19.10) and the one whose container no source states
    assert seen[("PyTorch", "resnet50")] == {7, 8, DEFAULT_CUDNN_MAJOR}

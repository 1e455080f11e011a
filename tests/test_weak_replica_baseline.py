"""Weak scaling measures a plan whose GPUs share samples against one GPU at one replica's batch.

``scale --batch-per-gpu 1`` took one GPU at 1 sample as every row's baseline; vgg16's filter=4 then
trained 4 samples on 4 GPUs against a one-GPU step bound by the 138 M weights it reads and updates,
which the split divides by 4: 5.46x on 4 GPUs (136% efficiency, A100 amp). The baseline of such a
plan is now one GPU training one replica's batch (global / dp), so the speedup is parallelism alone.
The oracle for dp=1 plans is ``predict``'s strong-scaling speedup at the same global batch.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.strategies import predict
from perfmodel.strategies.predict import replica_batch
from perfmodel.strategies.spec import parse_strategy

REL = 1e-9


def test_filter_split_at_one_sample_per_gpu_stays_within_its_gpus() -> None:
    df = api.scale("vgg16", [2, 4], batch_per_gpu=1, strategies=["filter"])
    assert (df["speedup_x"] <= df["gpus"] * (1 + REL)).all(), df[["plan", "speedup_x"]]
    for _, row in df.iterrows():
        assert row["baseline_batch"] == row["global_batch"]  # dp=1: one replica trains every sample
        p = predict("vgg16", int(row["gpus"]), str(row["plan"]), global_batch=int(row["global_batch"]))
        assert p.speedup_vs_1gpu == pytest.approx(float(row["speedup_x"]), rel=1e-9)


def test_data_parallel_rows_keep_the_per_gpu_baseline() -> None:
    df = api.scale("resnet50", [1, 8], batch_per_gpu=32, strategies=["dp", "hybrid"])
    dp = df[df["strategy"] == "dp"]
    assert (dp["baseline_batch"] == 32).all()
    assert df.attrs["baseline_batch"] == 32
    hybrid = df[(df["strategy"] == "hybrid") & df["reason"].isna()]
    for _, row in hybrid.iterrows():
        s = parse_strategy(str(row["plan"]), int(row["gpus"]))
        assert row["baseline_batch"] == int(row["global_batch"]) // s.dp


def test_the_table_names_each_rows_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    from perfmodel.cli import main

    with pytest.raises(SystemExit) as e:
        main(["scale", "vgg16", "--gpus", "1,4", "--strategies", "dp,filter", "--batch-per-gpu", "1"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "baseline_samples" in out and "one replica's batch, global / dp" in out


_SPECS = ("filter={k}", "channel={k}", "pp={k}", "sp={k}", "filter={h},dp=2", "pp={h},dp=2")


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(["vgg11", "resnet18", "alexnet"]), k=st.sampled_from([2, 4]),
       spec=st.sampled_from(_SPECS), b=st.sampled_from([1, 2, 8, 32]),
       precision=st.sampled_from(["amp", "fp32"]))
def test_weak_sweep_speedup_never_exceeds_gpus(model: str, k: int, spec: str, b: int, precision: str) -> None:
    text = spec.format(k=k, h=max(1, k // 2))
    df = api.sweep(model, [k], text, precision=precision, batch_per_gpu=b, image_size=64)
    row = df.iloc[0]
    if row["reason"] is not None or math.isnan(float(row["speedup_x"])):
        return
    s = parse_strategy(text, k)
    assert row["baseline_batch"] == replica_batch(s, b * k)
    assert 0 < float(row["speedup_x"]) <= k * (1 + REL), (text, b, precision, row["speedup_x"])

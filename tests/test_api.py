"""The notebook API: GPU lists, weak and strong scaling, what-if sweeps, frames of plans."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.cost.kernels import network_kernels
from perfmodel.errors import UsageError
from perfmodel.hardware import Hardware
from perfmodel.hardware import load_hardware as load_shipped
from perfmodel.network import compile_counts, get_model

# -- GPU lists -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1,2,4,8", [1, 2, 4, 8]),
        ("8, 4 ,8,1", [1, 4, 8]),
        ("1-1024:log2", [2**k for k in range(11)]),
        ("3-100:log2", [3, 6, 12, 24, 48, 96]),
        ("1-4", [1, 2, 3, 4]),
        ("8-32:8", [8, 16, 24, 32]),
        ("1,16-64:log2,100", [1, 16, 32, 64, 100]),
        ("7", [7]),
        ("5-5:log2", [5]),
    ],
)
def test_gpu_list_parses(text: str, expected: list[int]) -> None:
    assert api.parse_gpu_list(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("  ", "empty"),
        ("1,,2", "empty item"),
        ("eight", "not a count"),
        ("0", "from 1"),
        ("-4", "not a count"),
        ("8-4", "backwards"),
        ("1-8:0", "must be >= 1"),
        ("1-8:x", "not an integer or 'log2'"),
        ("4:log2", "needs a range"),
        ("1-2000000", "from 1 to"),
        ("1-100000", "more than"),
        ("1.5", "not a count"),
    ],
)
def test_gpu_list_rejects_with_a_clear_message(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        api.parse_gpu_list(text)


def test_gpu_list_from_python_values() -> None:
    assert api.parse_gpu_list([8, 1, 8]) == [1, 8]
    assert api.parse_gpu_list(4) == [4]
    with pytest.raises(UsageError):
        api.parse_gpu_list([0])
    with pytest.raises(UsageError):
        api.parse_gpu_list([])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 5000))
def test_log2_ranges_double_from_the_start(lo: int, extra: int) -> None:
    hi = lo + extra
    got = api.parse_gpu_list(f"{lo}-{hi}:log2")
    assert got[0] == lo and got[-1] <= hi and got[-1] * 2 > hi
    assert all(b == 2 * a for a, b in zip(got, got[1:], strict=False))


def test_cli_bad_gpu_list_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    from perfmodel.cli import main

    with pytest.raises(SystemExit) as e:
        main(["scale", "resnet50", "--gpus", "1-8:fast"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--gpus" in err and "1-8:fast" in err and "log2" in err


# -- scaling -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def weak() -> object:
    return api.scale("resnet50", "1-8:log2", batch_per_gpu=16, strategies=("dp", "pp"))


@pytest.fixture(scope="module")
def strong() -> object:
    return api.scale("resnet50", [1, 2, 4, 8], global_batch=64, strategies=("dp", "pp"))


def test_weak_scaling_keeps_the_batch_per_gpu(weak: object) -> None:
    df = weak
    assert df.attrs["scaling"] == "weak" and df.attrs["batch_per_gpu"] == 16  # type: ignore[attr-defined]
    assert (df["global_batch"] == 16 * df["gpus"]).all()  # type: ignore[index]
    assert (df["batch_per_gpu"] == 16).all()  # type: ignore[index]
    dp = df[df["strategy"] == "dp"].set_index("gpus")  # type: ignore[index]
    assert dp.loc[1, "speedup_x"] == pytest.approx(1.0)
    assert dp.loc[1, "plan"] == "dp=1"
    # weak scaling of data parallelism inside one node stays high; at 16 samples per GPU DDP's
    # per-tensor gradient copies (161 tensors, twice) cost ~15% of ResNet-50's short step
    assert (dp["efficiency_%"] > 80).all()
    assert (dp["speedup_x"] <= dp["ideal_x"] + 1e-9).all()


def test_strong_scaling_keeps_the_global_batch(strong: object, weak: object) -> None:
    df = strong
    assert df.attrs["scaling"] == "strong" and df.attrs["global_batch"] == 64  # type: ignore[attr-defined]
    assert (df["global_batch"] == 64).all()  # type: ignore[index]
    assert np.allclose(df["batch_per_gpu"], 64 / df["gpus"])  # type: ignore[index]
    dp = df[df["strategy"] == "dp"].set_index("gpus")  # type: ignore[index]
    assert dp.loc[1, "speedup_x"] == pytest.approx(1.0)
    # fixed work split finer: each step gets shorter, efficiency falls
    assert dp["step_s"].is_monotonic_decreasing
    assert dp["efficiency_%"].is_monotonic_decreasing
    # at 8 GPUs strong scaling (8 per GPU) is less efficient than weak scaling (16 per GPU)
    w = weak[(weak["strategy"] == "dp") & (weak["gpus"] == 8)]  # type: ignore[index]
    assert dp.loc[8, "efficiency_%"] < float(w["efficiency_%"].iloc[0])


def test_gaps_have_reasons(weak: object) -> None:
    df = weak
    pp = df[df["strategy"] == "pp"].set_index("gpus")  # type: ignore[index]
    assert math.isnan(pp.loc[1, "speedup_x"]) and pp.loc[1, "plan"] is None
    assert "one GPU" in pp.loc[1, "reason"]
    assert pp.loc[8, "plan"].startswith("pp=8")
    assert pp.loc[8, "reason"] is None


def test_strategies_beyond_the_chain_and_batch_leave_gaps() -> None:
    df = api.scale("resnet50", [32], global_batch=16, strategies=("dp", "pp"))
    reasons = dict(zip(df["strategy"], df["reason"], strict=True))
    assert "sample per GPU" in reasons["dp"]
    assert "chain links" in reasons["pp"]
    assert df["speedup_x"].isna().all()


def test_scale_gaps_say_what_the_enumerator_says() -> None:
    # scale's reason for a kind without candidates is the one `plan` gives (no_candidate_reasons),
    # with the numbers: tiny_cnn has 3 chain links, and hybrid on 2 GPUs needs two degrees above 1
    df = api.scale("tiny_cnn", [2, 4], batch_per_gpu=32, strategies=("pp", "hybrid"))
    reasons = {(s, g): r for s, g, r in zip(df["strategy"], df["gpus"], df["reason"], strict=True)}
    assert reasons[("pp", 4)] == "pp=4 needs 4 pipeline stages, and tiny_cnn has 3 chain links"
    assert "hybrid needs two of dp, sp, pp above 1 whose product is 2" in reasons[("hybrid", 2)]
    assert "global batch 64" in reasons[("hybrid", 2)]


def test_scale_rejects_unknown_strategies_and_two_batches() -> None:
    with pytest.raises(UsageError, match="did you mean"):
        api.scale("resnet50", [1, 2], strategies=("hybird",))
    with pytest.raises(UsageError, match="at most one"):
        api.scale("resnet50", [1, 2], batch_per_gpu=8, global_batch=64)
    with pytest.raises(UsageError, match="an integer from 1 to"):
        api.scale("resnet50", [1, 2], batch_per_gpu=0)


def test_best_is_at_least_every_kind() -> None:
    df = api.scale("vgg16", [8], batch_per_gpu=16, strategies=("dp", "pp", "hybrid", "best"))
    best = float(df[df["strategy"] == "best"]["samples_per_s"].iloc[0])
    assert best >= np.nanmax(df[df["strategy"] != "best"]["samples_per_s"]) * (1 - 1e-9)


def test_progress_is_reported() -> None:
    seen: list[tuple[int, int]] = []
    api.scale("resnet50", [1, 2], strategies=("dp",), progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 2), (2, 2)]


# -- hardware what-ifs ---------------------------------------------------------------------


def test_load_hardware_what_if_changes_a_copy_only() -> None:
    base = load_shipped("a100-80gb-dgx")
    bw = base.inter.bandwidth_bytes_per_s
    hw = api.load_hardware("a100-80gb-dgx", inter_bandwidth_scale=2, gpus_per_node=4)
    assert isinstance(hw, Hardware)
    assert hw.inter.bandwidth_bytes_per_s == pytest.approx(2 * bw)
    assert hw.gpus_per_node == 4 and "what-if" in hw.name
    assert load_shipped("a100-80gb-dgx").inter.bandwidth_bytes_per_s == bw
    assert api.load_hardware("a100-80gb-dgx") is base


PLANS = [
    (64, "dp"),
    (64, "pp=4,mb=8"),
    (64, "dp=64,comm=ps-central"),
    (64, "dp=64,comm=ps-sharded"),
    (16, "dp=16,comm=hierarchical"),
    (16, "sp=2x2,dp=4"),
    (8, "pp=8,mb=16,schedule=1f1b"),
]


@pytest.mark.parametrize(("gpus", "spec"), PLANS)
@pytest.mark.parametrize("key", ["inter_bandwidth_scale", "intra_bandwidth_scale"])
@pytest.mark.parametrize("model", ["resnet50", "vgg16"])
def test_twice_the_bandwidth_is_never_slower(gpus: int, spec: str, key: str, model: str) -> None:
    df = api.sweep(model, gpus, spec, "v100-16gb-dgx1", what_if={key: [1, 2, 4]})
    steps = df["step_s"].to_numpy()
    assert np.isfinite(steps).all(), df["reason"].tolist()
    assert (np.diff(steps) <= 1e-12 * steps[:-1]).all(), steps
    assert (np.diff(df["speedup_x"].to_numpy()) >= -1e-9).all()


def test_sweep_grid_columns_and_gaps() -> None:
    df = api.sweep(
        "resnet50",
        [8, 16],
        "pp=4,mb=8",
        precision=["amp", "fp32"],
        what_if={"inter_bandwidth_scale": [1, 2], "peak_scale": 1.5},
    )
    assert len(df) == 8
    assert {"gpus", "precision", "inter_bandwidth_scale", "step_s", "breakdown_compute_s"} <= set(
        df.columns
    )
    assert "peak_scale" not in df.columns  # a constant is not an axis
    assert df["hardware"].str.contains("peak_scale=1.5").all()
    bad = api.sweep("resnet50", [6], "pp=4,mb=8")
    assert math.isnan(bad["step_s"].iloc[0]) and "6" in bad["reason"].iloc[0]


def test_sweep_best_plan_per_point() -> None:
    df = api.sweep("resnet50", 8, None, kinds=("dp", "pp"), what_if={"inter_bandwidth_scale": [1]})
    assert df["plan"].iloc[0].startswith("dp=8")


def test_breakdown_adds_up_in_predict_frame() -> None:
    df = api.predict_frame("vgg16", 8, ["dp=8", "pp=4,dp=2,mb=8"], batch_per_gpu=16)
    parts = [c for c in df.columns if c.startswith("breakdown_")]
    assert np.allclose(df[parts].fillna(0).sum(axis=1), df["step_s"], rtol=1e-9)
    assert df["plan"].tolist() == ["dp=8", "pp=4,dp=2,mb=8"]
    fast = api.predict_frame("vgg16", 8, "dp=8", batch_per_gpu=16, inter_bandwidth_scale=2)
    assert "what-if" in fast["hardware"].iloc[0]


def test_plan_frame_is_ranked() -> None:
    df = api.plan_frame("resnet50", 8, top=3, kinds=("dp", "pp", "hybrid"))
    assert list(df["rank"]) == [1, 2, 3]
    assert df["samples_per_s"].is_monotonic_decreasing
    assert df.attrs["model"] == "resnet50" and df.attrs["global_batch"] == 256


def test_what_if_points_reuse_the_compiled_network() -> None:
    """A what-if point re-prices the plan on a changed profile; the network's counts and kernels are
    compiled once per sweep, not per point (what makes a point take milliseconds: timed in
    benchmarks/, never here)."""
    scales = list(np.linspace(0.5, 4.0, 50))
    net = get_model("resnet50")
    api.sweep(net, 64, "pp=4,mb=8", what_if={"inter_bandwidth_scale": scales[:1]})
    counts, kernels = compile_counts.cache_info().misses, network_kernels.cache_info().misses
    df = api.sweep(net, 64, "pp=4,mb=8", what_if={"inter_bandwidth_scale": scales})
    assert len(df) == 50 and df["step_s"].notna().all()
    assert compile_counts.cache_info().misses == counts and network_kernels.cache_info().misses == kernels
    assert df["step_s"].is_monotonic_decreasing  # more inter-node bandwidth never slows the plan


def test_available_kinds_are_known() -> None:
    kinds = api.available_kinds()
    assert {"dp", "ps", "sp", "pp", "hybrid"} <= set(kinds)
    assert set(kinds) <= set(api.SCALE_STRATEGIES)


def test_predict_and_scale_measure_speedup_against_the_same_one_gpu_run() -> None:
    """predict's baseline is scale's strong-scaling one for every plan: one GPU training the same
    global batch, accumulating gradients if needed (issue 15: one baseline per answer)."""
    from perfmodel.strategies import predict

    dp = api.scale("vgg16", [8], global_batch=512, strategies=["dp"])
    p = predict("vgg16", 8, str(dp["plan"].iloc[0]), global_batch=512)
    assert p.speedup_vs_1gpu == pytest.approx(float(dp["speedup_x"].iloc[0]), rel=1e-12)
    # 4,096 samples do not fit one 80 GB GPU: the baseline accumulates, in both
    strong = api.scale("vgg16", [8], global_batch=4096, strategies=["pp"])
    q = predict("vgg16", 8, str(strong["plan"].iloc[0]), global_batch=4096)
    assert "accumulating gradients" in q.speedup_baseline
    assert q.speedup_vs_1gpu == pytest.approx(float(strong["speedup_x"].iloc[0]), rel=1e-12)


def test_sweep_baseline_follows_a_kernel_what_if() -> None:
    # the one-GPU baseline cache keyed on the device and efficiencies only: a what-if of the
    # kernel parameters reused the first point's baseline (3.11x on one GPU, 23.08x on 8)
    wi = {"kernels": [{"step_overhead_s": 0.05}, {"step_overhead_s": 3e-4}]}
    df = api.sweep("resnet50", [1, 8], "dp", what_if=wi)
    one = df[df["gpus"] == 1]
    assert one["speedup_x"].to_numpy() == pytest.approx([1.0, 1.0])
    assert (df["speedup_x"] <= df["gpus"] + 1e-9).all()
    back = api.sweep("resnet50", [1, 8], "dp", what_if={"kernels": wi["kernels"][::-1]})
    assert np.sort(back["speedup_x"].to_numpy()) == pytest.approx(np.sort(df["speedup_x"].to_numpy()), rel=1e-12)


def test_sweep_plans_over_the_memory_keep_speedup_within_the_gpus() -> None:
    # dp over the memory skipped the accumulation its feasible baseline paid: 1.015x on one GPU,
    # 16.07x on 16; the baseline now also runs the plan's micro-batches unbounded, as predict's
    df = api.sweep("resnet50", [1, 2, 16], "dp", "v100-16gb-dgx1", "fp32", global_batch=8192)
    assert not df["fits"].any()
    assert df.loc[df["gpus"] == 1, "speedup_x"].iloc[0] == pytest.approx(1.0)
    assert (df["speedup_x"] <= df["gpus"] + 1e-9).all()
    weak = api.sweep("vgg16", [1, 8], "dp", "v100-16gb-dgx1", "fp32", batch_per_gpu=512)
    assert weak.loc[weak["gpus"] == 1, "speedup_x"].iloc[0] == pytest.approx(1.0)
    assert (weak["speedup_x"] <= weak["gpus"] + 1e-9).all()


@pytest.mark.parametrize("spec", ["dp=8", "pp=8", "sp=2x2,dp=2"])
def test_predict_frame_speedup_is_predicts(spec: str) -> None:
    # with batch_per_gpu the frame took one GPU at the per-GPU batch (7.43x for dp=8) where
    # predict takes the global batch (5.85x): one definition per single-plan answer
    from perfmodel.strategies import predict

    model = "unet" if spec.startswith("sp") else "resnet50"
    f = api.predict_frame(model, 8, spec, batch_per_gpu=32)
    p = predict(model, 8, spec, batch_per_gpu=32)
    assert p.speedup_vs_1gpu is not None
    assert float(f["speedup_x"].iloc[0]) == pytest.approx(p.speedup_vs_1gpu, rel=1e-12)
    assert f.attrs["speedup_against"] == "global-batch"


def test_sweep_speedup_against_is_checked() -> None:
    with pytest.raises(UsageError, match="did you mean global-batch"):
        api.sweep("tiny_cnn", 2, "dp", speedup_against="global-batc")
    strong = api.sweep("resnet50", 8, "dp", batch_per_gpu=32, speedup_against="global-batch")
    weak = api.sweep("resnet50", 8, "dp", batch_per_gpu=32)
    assert float(strong["speedup_x"].iloc[0]) < float(weak["speedup_x"].iloc[0])

"""Review findings: dict what-ifs of the hardware's parts, the hardware command's model numbers,
explain's zero contention without overlap, and zero-valued contention what-ifs."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sympy as sp
from cli_helpers import run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import api
from perfmodel.cost.collectives import Group, link_params
from perfmodel.errors import ProfileError, UsageError
from perfmodel.hardware import load_hardware as shipped
from perfmodel.network import get_model
from perfmodel.strategies import parse_strategy
from perfmodel.strategies.data import slowed_backward_s
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.predict import context, predict

A100 = "a100-80gb-dgx"
V100 = "v100-16gb-dgx1"
ROOT = Path(__file__).resolve().parents[1]


# -- 1. what-ifs of a part of the hardware take a dict of its fields ----------------------------
def test_dict_what_ifs_change_those_fields_of_a_copy() -> None:
    base = shipped(A100)
    hw = api.load_hardware(A100, collectives={"channels_intra": 4, "memory_passes": 0.0},
                           kernels={"threads_per_sm": 1024})
    assert hw.collectives == dataclasses.replace(base.collectives, channels_intra=4, memory_passes=0.0)
    assert hw.kernels == dataclasses.replace(base.kernels, threads_per_sm=1024)
    assert shipped(A100).collectives == base.collectives  # the profile is not changed
    assert "what-if" in hw.name


def test_predict_frame_takes_dict_what_ifs_like_a_changed_profile() -> None:
    """The frame with ``collectives={...}`` equals the frame on a profile changed by hand."""
    base = shipped(A100)
    by_hand = dataclasses.replace(base, collectives=dataclasses.replace(base.collectives, channels_net=1,
                                                                        memory_passes=10.0))
    df = api.predict_frame("resnet50", 16, "dp=16", A100, batch_per_gpu=32,
                           collectives={"channels_net": 1, "memory_passes": 10.0})
    ref = api.predict_frame("resnet50", 16, "dp=16", by_hand, batch_per_gpu=32)
    plain = api.predict_frame("resnet50", 16, "dp=16", A100, batch_per_gpu=32)
    assert float(df["step_s"].iloc[0]) == pytest.approx(float(ref["step_s"].iloc[0]), rel=1e-12)
    assert float(df["step_s"].iloc[0]) != float(plain["step_s"].iloc[0])  # the change is priced


BAD_PARTS: list[tuple[str, Callable[[], Any], str]] = [
    ("channels above the SMs", lambda: api.load_hardware(A100, collectives={"channels_intra": 200}),
     "channels_intra = 200 must be below efficiency.kernels.sm_count = 108"),
    ("SMs below the channels", lambda: api.load_hardware(A100, kernels={"sm_count": 2}),
     "must be below efficiency.kernels.sm_count = 2"),
    ("channels a float", lambda: api.load_hardware(A100, collectives={"channels_net": 2.5}),
     "'channels_net' must be an integer"),
    ("latency nan", lambda: api.load_hardware(A100, kernels={"memory_latency_s": math.nan}),
     "memory_latency_s"),
    ("misspelt field", lambda: api.load_hardware(A100, collectives={"channel_intra": 4}),
     "did you mean channels_intra"),
    ("unknown field", lambda: api.load_hardware(A100, kernels={"bogus": 1}), "valid: sm_count, "),
    ("not a dict", lambda: api.load_hardware(A100, collectives=[4]), "a dict of its fields"),
    ("link not a dict", lambda: api.load_hardware(A100, intra=3), "intra must be a LinkTier"),
    ("non-str key", lambda: api.load_hardware(A100, inter={1: 2}), "inter has no field 1"),
    ("device peaks", lambda: api.load_hardware(A100, device={"peak_flops_per_s": 5}), "peak_flops_per_s"),
    ("compute", lambda: api.load_hardware(A100, compute={"fp32": 1}), "ComputeEfficiency"),
    ("frame", lambda: api.predict_frame("tiny_cnn", 8, "dp=8", A100, kernels={"sm_count": 0}),
     "'sm_count' must be a positive integer"),
]


@pytest.mark.parametrize(("name", "call", "phrase"), BAD_PARTS, ids=[c[0] for c in BAD_PARTS])
def test_bad_part_what_ifs_raise_one_profile_error(name: str, call: Callable[[], Any], phrase: str) -> None:
    with pytest.raises(ProfileError) as e:
        call()
    assert phrase in str(e.value)
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


# -- 2. `perfmodel hardware NAME` shows the collective and kernel models' numbers -----------------
def _model_table(out: str) -> dict[str, str]:
    """The hardware command's second table (collective and kernel model numbers) as a dict."""
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("profile") and "channels_in_node" in line)
    return dict(zip(lines[head].split(), lines[head + 2].split(), strict=True))


def test_hardware_shows_the_model_numbers_of_the_file(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Changed numbers in a profile file show up, in the units of the column headers."""
    text = (ROOT / "hardware_profiles" / "v100-16gb-dgx1.toml").read_text()
    for old, new in (("channels_intra = 6 ", "channels_intra = 5 "), ("channels_net = 8 ", "channels_net = 3 "),
                     ("base_latency_s = 8.4e-6 ", "base_latency_s = 2.5e-6 "),
                     ("memory_passes = 3.0 ", "memory_passes = 2.0 "),
                     ("memory_latency_s = 5.28e-07 ", "memory_latency_s = 7.5e-07 ")):
        assert old in text
        text = text.replace(old, new)
    # a fitted number: whatever the last refit wrote
    text, n = re.subn(r"^sector_slots_per_sm = \S+ ", "sector_slots_per_sm = 200 ", text, flags=re.M)
    assert n == 1
    path = tmp_path / "v100-16gb-dgx1.toml"
    path.write_text(text)
    code, out, err = run_main(["hardware", str(path)], capsys)
    assert code == 0 and not err
    assert _model_table(out) == {
        "profile": "v100-16gb-dgx1", "channels_in_node": "5", "channels_across_nodes": "3",
        "collective_base_latency_us": "2.5", "memory_passes_B_per_link_B": "2.0", "SMs": "80",
        "memory_latency_ns": "750.0", "threads_per_SM": "2,048", "sector_slots_per_SM": "200.0"}
    assert "source (collectives):" in out  # the sources still follow


def test_hardware_json_and_csv_hold_the_shipped_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """Against the TOML file read directly (threads_per_sm is not in it: the CUDA guide's 2,048)."""
    raw = tomllib.loads((ROOT / "hardware_profiles" / "a100-80gb-dgx.toml").read_text())
    coll, kern = raw["collectives"], raw["efficiency"]["kernels"]
    code, out, _ = run_main(["hardware", A100, "--format", "json"], capsys)
    row = json.loads(out)["hardware"]
    assert code == 0
    assert (row["channels_in_node"], row["channels_across_nodes"]) == (coll["channels_intra"], coll["channels_net"])
    assert row["collective_base_latency_us"] == pytest.approx(coll["base_latency_s"] * 1e6, rel=1e-12)
    assert row["memory_passes_B_per_link_B"] == coll["memory_passes"]
    assert row["SMs"] == kern["sm_count"] and row["threads_per_SM"] == 2048
    assert row["memory_latency_ns"] == pytest.approx(kern["memory_latency_s"] * 1e9, rel=1e-12)
    assert row["sector_slots_per_SM"] == kern["sector_slots_per_sm"]
    code, out, _ = run_main(["hardware", "--format", "csv"], capsys)
    header, *rows = out.strip().splitlines()
    assert code == 0 and "channels_in_node" in header.split(",") and len(rows) >= 10


# -- 3. without overlap, NCCL's contention is a plain 0 with its reason ---------------------------
@pytest.mark.parametrize("spec", ["dp=16,overlap=none", "dp=8,filter=2,overlap=none", "dp=8,pp=2,mb=4,overlap=none"])
def test_no_overlap_contention_explains_as_zero(spec: str) -> None:
    """The term is the number 0 (no Min(0.0, ...) left), as predict's breakdown, with its reason;
    the whole step still equals predict's."""
    ctx = context(get_model("resnet50"), shipped(V100), "amp", "sgd")
    s = parse_strategy(spec, 16)
    f = explain_plan(ctx, s, 512)
    p = predict("resnet50", 16, spec, V100, "amp", global_batch=512)
    assert p.breakdown["nccl_contention"] == 0
    assert f.terms["nccl_contention"] == 0 and not isinstance(f.terms["nccl_contention"], sp.Basic)
    assert f.legend["nccl_contention"] == "no overlap (overlap=none): the allreduce runs after backward"
    assert f.iteration_time_s == pytest.approx(p.iteration_time_s, rel=1e-9)


def test_overlapped_contention_keeps_its_formula() -> None:
    ctx = context(get_model("resnet50"), shipped(V100), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy("dp=16", 16), 512)
    assert {"gamma_net", "kappa"} <= {str(x) for x in sp.sympify(f.terms["nccl_contention"]).free_symbols}
    assert f.term_values["nccl_contention"] > 0
    assert "overlap window" in f.legend["nccl_contention"]


@given(comm=st.floats(0.0, 1.0), backward=st.floats(1e-12, 1e-6))
@settings(max_examples=30, deadline=None, derandomize=True, database=None)
def test_contention_goes_to_zero_with_the_backward_it_overlaps(comm: float, backward: float) -> None:
    """The 0 of an empty window is the limit of short ones (at most the window itself)."""
    group = Group(16, 8)
    lp = link_params(shipped(V100), group)
    assert 0 <= float(slowed_backward_s(comm, backward, 1e8, group, lp, "ring", 0.8)) <= min(comm, backward)
    assert slowed_backward_s(comm, 0.0, 1e8, group, lp, "ring", 0.8) == 0.0
    assert slowed_backward_s(sp.Symbol("c", positive=True), 0.0, 1e8, group, lp, "ring", 0.8) == 0.0


def test_cli_prints_the_no_overlap_reason(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["explain", "resnet50", "--gpus", "16", "--strategy", "dp=16,overlap=none",
                               "-H", V100], capsys)
    lines = out.splitlines()
    i = lines.index("T_nccl_contention = 0")
    assert code == 0 and not err
    assert lines[i + 1] == ("    (zero in predict's breakdown too: no overlap (overlap=none): the allreduce runs "
                            "after backward)")
    assert "Min(0.0" not in out


# -- 4. --set takes 0 for NCCL's contention and memory passes ------------------------------------
def test_zero_memory_passes_what_if_equals_predict_on_such_a_profile() -> None:
    """kappa=0 is the profile's memory_passes = 0: explain's what-if equals predict there."""
    ctx = context(get_model("vgg16"), shipped(V100), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy("dp=16", 16), 512)
    changed = api.load_hardware(V100, collectives={"memory_passes": 0.0})
    p = predict("vgg16", 16, "dp=16", changed, "amp", global_batch=512)
    assert f.time_s({"kappa": 0.0}) == pytest.approx(p.iteration_time_s, rel=1e-9)
    assert f.evaluate({"kappa": 0.0})["nccl_contention"] == pytest.approx(p.breakdown["nccl_contention"], rel=1e-9)
    # no SMs held and no memory traffic: no contention at all, and a faster step than the profile's
    none = f.evaluate({"gamma_net": 0.0, "gamma_intra": 0.0, "kappa": 0.0})
    assert none["nccl_contention"] == 0 and sum(none.values()) < f.iteration_time_s


def test_cli_set_zero_contention(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(["explain", "vgg16", "--gpus", "16", "--strategy", "dp=16", "-H", V100,
                               "--set", "gamma_net=0", "--set", "kappa=0", "--set", "gamma_intra=0"], capsys)
    assert code == 0 and not err
    assert "what-if gamma_net = 0, kappa = 0, gamma_intra = 0:" in out
    assert "  T_nccl_contention = 0.0000 ms (was " in out


def test_api_what_if_takes_zero_contention_and_refuses_negative() -> None:
    ctx = context(get_model("tiny_cnn"), shipped(A100), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy("dp=16", 16), 64)
    assert math.isfinite(f.time_s({"gamma_net": 0.0, "kappa": 0.0}))
    with pytest.raises(UsageError, match="must be a finite number >= 0"):
        f.time_s({"kappa": -1.0})
    with pytest.raises(UsageError, match="must be a positive finite number"):
        f.time_s({"beta_net": 0.0})

"""Issue 15 item 9: --debug anywhere, precisions a device lacks, measure's hints, spec checks."""

from __future__ import annotations

import pytest
from cli_helpers import run_main

from perfmodel.commands.measure import cpu_timed_gpu_profile
from perfmodel.errors import PerfmodelError, StrategyError
from perfmodel.hardware import load_hardware
from perfmodel.strategies import predict
from perfmodel.strategies.spec import Strategy, parse_strategy
from perfmodel.strategies.wording import precision_assumption
from perfmodel.validation.measure import TORCH_MISSING


@pytest.mark.parametrize("where", ["before", "after", "middle"])
def test_debug_is_accepted_anywhere_on_the_line(where, capsys):
    args = ["predict", "tiny_cnn", "--gpus", "2", "--strategy", "dp=2", "-b", "4"]
    at = {"before": 0, "after": len(args), "middle": 2}[where]
    code, out, err = run_main(args[:at] + ["--debug"] + args[at:], capsys)
    assert code == 0, err
    assert "Traceback" not in err


def test_debug_after_the_command_reraises_errors_for_the_traceback():
    from perfmodel.cli import main

    with pytest.raises(PerfmodelError):
        main(["predict", "tiny_cnn", "--gpus", "2", "--strategy", "dp=3", "-b", "4", "--debug"])


def test_a_precision_the_device_lacks_is_an_explicit_assumption():
    v100 = load_hardware("v100-16gb-dgx1")
    text = precision_assumption(v100, "tf32")
    assert "has no TF32" in text and "fp32 peak" in text
    assert "has no BF16" in precision_assumption(v100, "bf16")
    assert "has no" not in precision_assumption(load_hardware("a100-80gb-dgx"), "tf32")
    p = predict("tiny_cnn", 1, "dp=1", "v100-16gb-dgx1", "tf32", batch_per_gpu=4)
    assert "has no TF32" in p.assumptions["precision"]
    # and it is priced at the fp32 peak: the same step as fp32
    p32 = predict("tiny_cnn", 1, "dp=1", "v100-16gb-dgx1", "fp32", batch_per_gpu=4)
    assert p.iteration_time_s == pytest.approx(p32.iteration_time_s, rel=0.05)


def test_measure_install_hint_works_from_a_checkout():
    assert "pip install torch" in TORCH_MISSING and 'pip install -e ".[torch]"' in TORCH_MISSING
    assert "perfmodel[torch]" not in TORCH_MISSING.replace('".[torch]"', "")


def test_measure_warns_when_a_cpu_is_labelled_with_a_gpu_profile():
    assert "timed on the CPU" in cpu_timed_gpu_profile("cpu", "a100-80gb-dgx")
    assert cpu_timed_gpu_profile("cuda", "a100-80gb-dgx") == ""
    assert cpu_timed_gpu_profile("cpu", None) == ""


@pytest.mark.parametrize("spec", ["dp=8,schedule=1f1b", "dp=8,schedule=gpipe"])
def test_a_schedule_without_a_pipeline_is_an_error(spec):
    with pytest.raises(StrategyError, match="needs a pipeline"):
        parse_strategy(spec, 8)
    with pytest.raises(StrategyError, match="needs a pipeline"):
        Strategy(dp=8, schedule="1f1b")


@pytest.mark.parametrize("spec", ["dp=\uff18", "pp=\uff12,dp=4", "dp=8,mb=\u0664"])
def test_non_ascii_digits_are_rejected(spec):
    with pytest.raises(StrategyError, match="not an integer"):
        parse_strategy(spec, 8)


def test_overlap_round_trips():
    s = parse_strategy("dp=8,overlap=none", 8)
    assert s.overlap == "none" and parse_strategy(s.spec(), 8) == s
    with pytest.raises(StrategyError, match="overlap"):
        parse_strategy("dp=8,overlap=sometimes", 8)


def test_fp32_on_a_tf32_gpu_says_what_pytorch_runs_by_default():
    # PyTorch runs cuDNN convolutions in TF32 by default on Ampere and later: fp32 here is
    # the allow_tf32 = False case, and the assumption says so; a GPU without TF32 does not
    for name, says in (("a100-80gb-dgx", True), ("h100-80gb-dgx", True), ("v100-16gb-dgx1", False)):
        text = precision_assumption(load_hardware(name), "fp32")
        assert text.startswith("fp32 everywhere")
        assert ("allow_tf32 = True" in text) is says

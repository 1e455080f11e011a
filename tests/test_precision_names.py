"""A precision given by another common name (fp16, half, bfloat16) is refused with what perfmodel
calls it, on the command line and in the Python API; a typo still gets the closest names."""

from __future__ import annotations

import pytest
from cli_helpers import run_main

from perfmodel import get_model, predict
from perfmodel.api.args import check_precision
from perfmodel.errors import UsageError
from perfmodel.hardware import PRECISIONS, precision_hint, unknown_precision
from perfmodel.partition.compare import partition_report
from perfmodel.partition.hypergraph import build_hypergraph
from perfmodel.validation.measure_timing import precision_context


@pytest.mark.parametrize(("name", "means"), [("fp16", "amp"), ("half", "amp"), ("bfloat16", "bf16"),
                                             ("float32", "fp32")])
def test_other_names_say_what_perfmodel_calls_them(name: str, means: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert means in PRECISIONS
    code, _, err = run_main(["predict", "tiny_cnn", "--gpus", "2", "-s", "dp=2", "--precision", name], capsys)
    assert code == 2 and f"{name} is {means} here" in err
    with pytest.raises(UsageError, match=f"{name} is {means} here"):
        predict("tiny_cnn", 2, "dp=2", precision=name)


def test_a_typo_gets_the_closest_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert precision_hint("fp31") == ""
    code, _, err = run_main(["predict", "tiny_cnn", "--gpus", "2", "-s", "dp=2", "--precision", "fp31"], capsys)
    assert code == 2 and "did you mean fp32" in err



#: every entry point that checks a precision, called with one
ENTRY_POINTS = {
    "context": lambda name: predict("tiny_cnn", 2, "dp=2", precision=name),
    "notebook API": check_precision,
    "partition": lambda name: partition_report("tiny_cnn", 2, precision=name),
    "hypergraph": lambda name: build_hypergraph(get_model("tiny_cnn"), None, name),
    "measure": lambda name: precision_context(None, "cpu", name),
}


@pytest.mark.parametrize("name", ["fp16", "fp31"])
def test_every_entry_point_words_an_unknown_precision_alike(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # one builder (perfmodel.hardware.unknown_precision): the same line everywhere, with the other
    # name's meaning or the closest names
    line = unknown_precision(name)
    assert line.startswith(f"unknown precision '{name}' (valid: fp32, tf32, amp, bf16); ")
    for where, call in ENTRY_POINTS.items():
        with pytest.raises(UsageError) as e:
            call(name)
        assert str(e.value).removeprefix("measure: ") == line, where
    code, _, err = run_main(["compare", "tiny_cnn", "-n", "1", "-H", "a100-80gb-dgx", "--precision", f"amp,{name}"],
                            capsys)
    assert code == 2 and line in err

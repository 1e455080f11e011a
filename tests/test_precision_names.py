"""A precision given by another common name (fp16, half, bfloat16) is refused with what perfmodel
calls it, on the command line and in the Python API; a typo still gets the closest names."""

from __future__ import annotations

import pytest
from cli_helpers import run_main

from perfmodel import predict
from perfmodel.errors import UsageError
from perfmodel.hardware import PRECISIONS, precision_hint


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

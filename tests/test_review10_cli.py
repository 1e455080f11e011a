"""plan/predict/compare, tenth review: each case failed before its fix."""

from __future__ import annotations

import pytest
from cli_helpers import run_main


@pytest.mark.parametrize(("argv", "code", "phrase"), [
    # an empty precision list left compare nothing to price: IndexError traceback
    ("compare resnet50 --gpus 8 -H a100-80gb-dgx --precision ,", 2, "--precision needs at least one precision"),
    # a grid larger than the input named no valid choice
    ("predict tiny_cnn --gpus 64 -s sp=64", 2, "e.g. sp=32x32 at most"),
    # a one-channel layer offered 'filter <= 1', which is no split
    ("predict unet --gpus 8 -s filter=8 -B 16", 2, "unet cannot take a filter split"),
])
def test_refusals_say_what_to_do(argv: str, code: int, phrase: str, capsys: pytest.CaptureFixture[str]) -> None:
    got, _, err = run_main(argv.split(), capsys)
    assert got == code and phrase in err and err.count("\n") == 1, err


def test_the_largest_price_the_help_allows_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    # the option takes 0..1e6 but the estimate refused 1e6 itself ("from 0 to 1e6, got 1000000.0")
    argv = ["predict", "resnet50", "--gpus", "8", "-s", "dp=8", "--epochs", "1", "--price-per-gpu-hour", "1000000"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, err
    assert "USD" in out

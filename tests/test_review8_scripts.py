"""benchmarks/mp_balance.py refuses a bad profile or precision in one line with perfmodel's exit code."""

from __future__ import annotations

import pytest
from cli_helpers import load_file


@pytest.mark.parametrize(("argv", "code", "phrase"), [
    (["--hardware", "a100-80gb-dgxx"], 1, "did you mean a100-80gb-dgx"),
    (["--precision", "fp16"], 2, "unknown precision 'fp16' (valid: fp32, tf32, amp, bf16)"),
])
def test_mp_balance_refuses_bad_input_in_one_line(argv: list[str], code: int, phrase: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    mod = load_file("benchmarks/mp_balance.py", "mp_balance_review8")
    assert mod.main(argv) == code
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("error: ") and phrase in err

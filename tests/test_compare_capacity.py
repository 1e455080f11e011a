"""compare keeps the profiles that hold the GPU count when another cannot.

``compare resnet50 --gpus 16 -H titan-v,a100-80gb-dgx`` stopped with "16 GPUs exceed titan-v's 1";
the profile that can run 16 GPUs was never shown. Now the small profile is a row saying so (as a
profile where no plan fits is), and a comparison of only such profiles is still one line, exit 2.
"""

from __future__ import annotations

import json

import pytest

from perfmodel.cli import main


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    out = capsys.readouterr()
    return int(e.value.code or 0), out.out, out.err


@pytest.mark.parametrize("strategy", [[], ["-s", "dp=16"]])
def test_a_profile_too_small_is_a_row(strategy: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    args = ["compare", "resnet50", "--gpus", "16", "-H", "titan-v,a100-80gb-dgx", *strategy]
    code, out, _ = _run(args, capsys)
    assert code == 0
    assert "too few GPUs" in out and "16 GPUs exceed titan-v's 1" in out
    code, out, _ = _run([*args, "--format", "json"], capsys)
    d = json.loads(out)
    assert [r["hardware"] for r in d["rows"]] == ["a100-80gb-dgx"]
    assert d["no_plan"][0]["hardware"] == "titan-v" and d["no_plan"][0]["min_memory_bytes"] is None


def test_only_small_profiles_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["compare", "resnet50", "--gpus", "16", "-H", "titan-v"], capsys)
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "16 GPUs exceed titan-v's 1" in err

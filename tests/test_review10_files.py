"""Bring-your-own-network and file commands, tenth review: each case failed before its fix."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from cli_helpers import run_main

from perfmodel.strategies.baseline import Baseline

pytest.importorskip("torch")

TINY = """
import torch
from torch import nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))


class NoParam(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.ReLU()
        self.p = nn.MaxPool2d(2)
        self.b = nn.Sigmoid()

    def forward(self, x):
        return self.b(self.p(self.a(x)))


class Cyc(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.me = self

    def forward(self, x):
        return self.conv(x)


class ZeroWarn(nn.Module):
    def __init__(self):
        super().__init__()
        import warnings
        warnings.warn("a warning of the user's own while building")
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return self.conv(x)


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(torch.relu(self.conv(x))), 1))


NOT_A_MODULE = 3
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.py"
    path.write_text(TINY)
    return path


@pytest.mark.parametrize("argv", [
    # an ONNX model's program looked its short name up in the zoo: unknown, or another network
    ["export", "{dir}/resnet18.onnx", "-n", "2", "-s", "dp=2", "-o", "{dir}/t.py"],
    ["plan", "{dir}/resnet18.onnx", "-n", "2", "--export", "{dir}/t.py"],
    ["export", "torchvision:convnext_tiny", "-n", "2", "-s", "dp=2", "-o", "{dir}/t.py"],
])
def test_export_refuses_models_the_program_cannot_build(argv: list[str], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main([a.format(dir=tmp_path) for a in argv], capsys)
    assert code == 1 and "cannot be exported yet: the program trains zoo models and file.py:Name" in err
    assert not (tmp_path / "t.py").exists()


def test_export_refuses_an_input_its_row_cannot_state(tiny: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # --input-shape 3,40,50 was priced, but the program (and its row) rebuilt the module at 3x50x50
    out = tmp_path / "t.py"
    base = ["export", f"{tiny}:Tiny", "-n", "2", "-s", "dp=2", "-B", "8", "--precision", "fp32", "-o", str(out)]
    code, _, err = run_main([*base, "--input-shape", "3,40,50"], capsys)
    assert code == 1 and "input 3x40x50" in err and "3 x S x S" in err and not out.exists()
    code, _, err = run_main([*base, "--image-size", "40"], capsys)
    assert code == 0 and out.exists(), err


def test_measure_names_a_file_model_by_its_path(tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    # with -H the predictions looked 'tiny.py:Tiny' up from the working folder: "does not exist"
    monkeypatch.chdir(tmp_path.parent)
    out = tmp_path / "m.csv"
    argv = ["measure", f"{tmp_path.name}/tiny.py:Pooled", "-b", "2", "--steps", "2", "--warmup", "0",
            "--image-size", "16", "--no-layers", "-H", "a100-80gb-dgx", "-o", str(out)]
    code, text, err = run_main(argv, capsys)
    assert code == 0, err
    assert "model (a100-80gb-dgx): step" in text
    row = out.read_text().splitlines()[1]
    assert row.startswith(f"{tiny.resolve()}:Pooled,")


def test_partition_of_a_network_without_parameters(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 1 / break-even 0 raised ZeroDivisionError
    code, text, err = run_main(["partition", f"{tiny}:NoParam", "--parts", "2"], capsys)
    assert code == 0, err
    assert "data parallelism sends nothing" in text and "has no parameters" in text
    code, text, _ = run_main(["partition", f"{tiny}:NoParam", "--parts", "2", "--format", "json"], capsys)
    assert code == 0 and json.loads(text)["reduction_vs_data_parallel"] is None


@pytest.mark.parametrize(("name", "phrase"), [
    ("Cyc", "recursion limit was reached"),  # a ~1,000-frame RecursionError traceback
    ("NOT_A_MODULE", "holds a value of type int, not a torch.nn.Module"),  # "unknown model"
])
def test_model_files_that_are_not_models(name: str, phrase: str, tiny: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(["show", f"{tiny}:{name}"], capsys)
    assert code == 1 and phrase in err and err.count("\n") == 1, err


def test_a_model_file_that_warns_prints_no_warning(tiny: Path) -> None:
    # torch's construction hints (zero-element init) printed two lines before the one error line
    from perfmodel.network import get_model

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        net = get_model(f"{tiny}:ZeroWarn", 16)
    assert net.params == 4 * 3 * 9 + 4 and not seen


@pytest.mark.parametrize(("make", "phrase"), [
    (lambda d: d.mkdir() or d, "is a folder"),  # all three said "does not exist"
    (lambda d: d, "does not exist"),
])
def test_a_model_path_says_what_it_is(make: object, phrase: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.py"
    make(path)  # type: ignore[operator]
    code, _, err = run_main(["show", f"{path}:M"], capsys)
    assert code == 1 and phrase in err


def test_calibrate_refuses_a_shipped_name_and_its_own_input(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from importlib import resources

    runs = str(resources.files("perfmodel.data").joinpath("published_runs.csv"))
    code, _, err = run_main(["calibrate", runs, "-H", "a100-80gb-dgx", "-o", str(tmp_path / "a100-80gb-dgx.toml")],
                            capsys)
    assert code == 2 and "a shipped profile's name" in err and "a100-80gb-dgx-calibrated.toml" in err
    own = tmp_path / "mine.toml"
    code, _, err = run_main(["calibrate", runs, "-H", "a100-80gb-dgx", "-o", str(own)], capsys)
    assert code == 0, err
    before = own.read_text()
    code, _, err = run_main(["calibrate", runs, "-H", str(own), "-o", str(own)], capsys)
    assert code == 2 and "it is the profile being calibrated" in err and own.read_text() == before


def test_small_rates_keep_their_digits() -> None:
    # 0.0175 samples/s was printed as 0.0
    assert Baseline("x", 1, 1, 57.0).text().endswith(": 0.0175 samples/s")

"""Fuzzing: random argument lists at the CLI, random and mutated bytes at the file loaders.

Whatever comes in, the CLI ends with exit code 0, 1 or 2 (one ``error:`` line on stderr when
not 0), and the loaders return a value or raise their :class:`~perfmodel.errors.PerfmodelError`,
never a traceback of something else. Runs are seeded (``derandomize=True``) and small: tiny
models, few GPUs, so that each example takes well under a second.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel.cli import cli, main
from perfmodel.errors import MeasurementError, ProfileError
from perfmodel.hardware import Hardware, load_profile, profiles_dir
from perfmodel.limits import MAX_GPUS
from perfmodel.strategies import predict

ROOT = Path(__file__).resolve().parents[1]
#: Wall-clock bound on one CLI invocation of the fuzzer (tiny inputs: usually < 0.1 s).
MAX_SECONDS = 10.0

FUZZ = settings(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def fuzz(examples: int) -> settings:
    """Seeded settings with ``examples`` examples."""
    return settings(FUZZ, max_examples=examples)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# -- the CLI -------------------------------------------------------------------------------
#: Commands the fuzzer may call (tiny models only: each call is fast).
COMMANDS = ["predict", "plan", "explain", "scale", "partition", "show", "models", "hardware",
            "validate", "calibrate", "measure", "compare", "nonsense"]
model = st.sampled_from(["tiny_cnn"] * 12 + ["resnt", "", "TINY_CNN", "-"])
junk = st.sampled_from(["", "-", "--", "x", "0", "-1", "1e9", "nan", "inf", "2.5", "\u00e9", "--help", "\x00",
                        "a" * 200, "dp=2", "--debug", "1,2", "/nonexistent/x.png", "x.txt", str(10**30)])
count = st.sampled_from(["1", "2", "4", "8"] * 5 + ["3", "0", "-2", "x", "16", "1000001", str(10**30)])
small_int = st.integers(min_value=-2, max_value=70).map(str)
spec_key = st.sampled_from(["dp", "sp", "pp", "mp", "filter", "channel", "mb", "schedule", "comm",
                            "recompute", "balance", "dq", ""])
spec_value = st.sampled_from(["1", "2", "4", "8", "0", "-1", "x", "2x2", "2x1", "1x2x2", "gpipe", "1f1b",
                              "ring", "tree", "ps-central", "ps-sharded", "true", "maybe", "1:2", ""])
random_spec = st.lists(st.tuples(spec_key, spec_value).map(lambda kv: f"{kv[0]}={kv[1]}"),
                       max_size=4).map(",".join)
plausible_spec = st.sampled_from(["dp={g}", "pp=2", "pp=3", "sp=2x1", "sp=2x2", "sp=1x2x1", "pp=2,mb=4",
                                  "pp=2,mb=2,schedule=1f1b,recompute=true", "dp={g},comm=tree",
                                  "dp={g},comm=hierarchical", "dp={g},comm=ps-central", "dp={g},comm=ps-sharded",
                                  "filter=2", "channel=2", "mp=2", "pp=3,balance=1:1:1", "dp={g},mb=2"])
gpu_list = st.sampled_from(["1,2", "1-4", "1-8:log2", "2,4", "1,3", "0", "8-1", "1-4:0", "a", ""])
files = st.sampled_from(["/nonexistent.csv", str(ROOT), "x", str(ROOT / "README.md"),
                         str(ROOT / "hardware_profiles" / "template.toml")])


def often(valid: st.SearchStrategy[str], bad: st.SearchStrategy[str] = junk) -> st.SearchStrategy[str]:
    """Mostly ``valid``, sometimes ``bad``."""
    return st.one_of(valid, valid, valid, valid, valid, bad)


option = st.one_of(
    st.tuples(st.sampled_from(["-b", "--batch-per-gpu", "-B", "--global-batch", "--batch"]),
              often(st.sampled_from(["1", "2", "4", "8", "16", "64", "3", "7"]))),
    st.tuples(st.just("--image-size"), often(st.sampled_from(["8", "16", "32", "64", "3", "5"]))),
    st.tuples(st.just("--format"), often(st.sampled_from(["table", "json", "csv"]))),
    st.tuples(st.just("--precision"), often(st.sampled_from(["fp32", "amp", "bf16", "tf32"]))),
    st.tuples(st.just("--optimizer"), often(st.sampled_from(["sgd", "adam"]))),
    st.tuples(st.sampled_from(["-H", "--hardware"]),
              often(st.sampled_from(["a100-80gb-dgx", "p40-24gb-pcie", "v100-16gb-dgx1", "h100-80gb-dgx"]),
                    st.sampled_from(["a100", "", "x.toml", str(ROOT / "README.md")]))),
    st.tuples(st.just("--top"), often(st.sampled_from(["1", "3", "100"]))),
    st.tuples(st.just("--strategies"), often(st.sampled_from(["dp", "pp,sp", "best", "dp,mp", "filter,channel",
                                                              "hybrid", "ps"]))),
    st.tuples(st.just("--epsilon"), often(st.sampled_from(["0.03", "0.5", "0.1"]))),
    st.tuples(st.just("--granularity"), often(st.sampled_from(["layer", "channel"]))),
    st.tuples(st.just("--seed"), often(st.sampled_from(["0", "1", "42", "-1"]))),
    st.tuples(st.just("--calibrate"), often(st.sampled_from(["none", "single-gpu"]))),
    st.tuples(st.just("--chart"), st.sampled_from(["/nonexistent/x.png", "x.txt", "x.csv", ""])),
    st.tuples(st.just("-o"), st.sampled_from(["/nonexistent/x.toml", "x.txt", "/nonexistent/m.csv"])),
    st.tuples(st.sampled_from(["--steps", "--warmup", "--device", "--full", "--no-layers"]), often(small_int)),
    junk.map(lambda j: (j,)),
)


@st.composite
def argv(draw: st.DrawFn) -> list[str]:
    """A command with plausible required arguments, some options, and now and then a wrong one."""
    command = draw(st.sampled_from(COMMANDS))
    m, g = draw(model), draw(count)
    spec = draw(often(plausible_spec, random_spec)).format(g=g)
    base = {
        "predict": [m, "--gpus", g, "-s", spec],
        "explain": [m, "--gpus", g, "-s", spec],
        "plan": [m, "--gpus", g],
        "compare": [m, "--gpus", g, "-H", draw(often(st.sampled_from(["a100-80gb-dgx,v100-16gb-dgx1",
                                                                    "p40-24gb-pcie"])))],
        "scale": [m, "--gpus", draw(gpu_list)],
        "partition": [m, "-k", draw(often(st.sampled_from(["2", "3", "4"]), small_int))],
        "show": [m],
        "hardware": draw(st.sampled_from([[], ["a100-80gb-dgx"], ["a100"], [str(ROOT / "README.md")]])),
        "validate": [draw(files)],
        "calibrate": [draw(files), "-H", "a100-80gb-dgx", "-o", "/nonexistent/c.toml"],
        "measure": [m],
    }.get(command, [])
    if base and draw(st.integers(0, 9)) == 0:  # now and then, one required piece is missing
        del base[draw(st.integers(0, len(base) - 1))]
    out = [command, *base]
    known = _options(command)
    for opt in draw(st.lists(option, max_size=3)):
        if opt[0] in known or draw(st.integers(0, 9)) == 0:  # now and then, an option of another command
            out.extend(opt)
    return out


def _options(command: str) -> set[str]:
    """The option names ``command`` takes (empty for an unknown command)."""
    import click

    cmd = cli.get_command(click.Context(cli), command)
    return {o for p in cmd.params for o in p.opts} if cmd is not None else set()


def run_cli(args: list[str]) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr, seconds) of ``main(args)``; any other exception propagates."""
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as e:
            code = e.code
    return (code if isinstance(code, int) else -1), out.getvalue(), err.getvalue(), time.perf_counter() - t0


@fuzz(250)
@given(argv())
def test_cli_random_arguments(folder: Path, args: list[str]) -> None:
    if "--debug" in args:
        args = [a for a in args if a != "--debug"]  # --debug re-raises on purpose
    if "measure" in args[:1] and not any(a in ("--help", "-h") for a in args):
        # without torch the command refuses cleanly; with it, it would time a real model
        pytest.importorskip("perfmodel.validation.measure")
        try:
            import torch  # noqa: F401

            return
        except ImportError:
            pass
    with contextlib.chdir(folder):  # relative output paths land in the temporary folder
        code, out, err, seconds = run_cli(args)
    assert code in (0, 1, 2), f"exit {code} for {args}: {err[-500:]}"
    assert "Traceback" not in err
    if code != 0:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), f"{args}: {err!r}"
    assert seconds < MAX_SECONDS, f"{args} took {seconds:.1f} s"


def test_cli_fuzz_covers_listed_commands() -> None:
    listed = cli.list_commands(None)  # type: ignore[arg-type]
    assert set(listed) <= set(COMMANDS)


# -- the hardware profile loader ---------------------------------------------------------------
GOOD_PROFILE = (profiles_dir() / "a100-80gb-dgx.toml").read_text()
VALUES = ['"x"', "-1", "0", "0.0", "nan", "inf", "-inf", "1e400", "[]", "{}", "true", "1", "2", '""',
          "1.5", "100000000000000000000000", '"ring"', "[1, 2]", "{ a = 1 }", ""]


def _check_profile(path: Path) -> None:
    try:
        hw = load_profile(path)
    except ProfileError as e:
        msg = str(e)
        assert msg.startswith(str(path)), msg  # names the file
        assert "\n" not in msg
        return
    assert isinstance(hw, Hardware)
    numbers = [hw.device.memory_bytes, hw.device.memory_bandwidth_bytes_per_s, *hw.device.peak_flops_per_s.values(),
               hw.intra.bandwidth_bytes_per_s, hw.inter.bandwidth_bytes_per_s, hw.intra.latency_s,
               hw.inter.latency_s, hw.kernel_launch_s, hw.framework_reserve_bytes]
    assert all(math.isfinite(x) and x >= 0 for x in numbers)
    assert hw.device.memory_bytes > 0 and hw.intra.bandwidth_bytes_per_s > 0 and hw.gpus_per_node >= 1
    # a profile that loads can be priced: finite, positive step times on one and several nodes
    for gpus in sorted({1, min(hw.max_gpus, 2 * hw.gpus_per_node, MAX_GPUS)}):
        p = predict("tiny_cnn", gpus, f"dp={gpus}", hw, batch_per_gpu=2)
        assert math.isfinite(p.iteration_time_s) and p.iteration_time_s > 0
        assert math.isfinite(p.memory_per_gpu_bytes)


@fuzz(300)
@given(st.binary(max_size=2000))
def test_profile_loader_random_bytes(folder: Path, data: bytes) -> None:
    path = folder / "random.toml"
    path.write_bytes(data)
    _check_profile(path)


@fuzz(400)
@given(st.data())
def test_profile_loader_mutated(folder: Path, data: st.DataObject) -> None:
    """A shipped profile with lines deleted, values replaced or keys misspelt."""
    lines = GOOD_PROFILE.splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(lines) - 1))
        how = data.draw(st.sampled_from(["delete", "value", "key", "duplicate"]))
        line = lines[i]
        if how == "delete":
            del lines[i]
        elif how == "value" and "=" in line:
            lines[i] = line.split("=", 1)[0] + "= " + data.draw(st.sampled_from(VALUES))
        elif how == "key" and "=" in line:
            lines[i] = line.replace("_", "", 1) if "_" in line else "x" + line
        else:
            lines.insert(i, line)
        if not lines:
            break
    path = folder / "a100-80gb-dgx.toml"  # its name is its file's: mutations, not the name, are tested
    path.write_text("\n".join(lines))
    _check_profile(path)


# -- the measurement CSV loader --------------------------------------------------------------
try:
    from perfmodel.validation import measurements
except ImportError:  # the validation package is optional while it is being written
    measurements = None  # type: ignore[assignment]
HEADER = [*(measurements.REQUIRED_COLUMNS if measurements else ()), "image_size", "optimizer"]
CELLS = ["resnet50", "tiny_cnn", "resnt50", "a100-80gb-dgx", "a100", "x.toml", "8", "1", "0", "-1", "2.5",
         "1e400", "nan", "eight", "amp", "fp8", "256", "", "dp=8", "pp=2", "dp=x", "100.0", "-5", "sgd", "lamb",
         '"a,b"', "\u00e9", "1_000"]


def _check_measurements(path: Path) -> None:
    if measurements is None:
        pytest.skip("perfmodel.validation is not available")
    try:
        ms = measurements.load_measurements([path])
    except MeasurementError as e:
        msg = str(e)
        assert msg.startswith(str(path)), msg
        return
    for m in ms.rows:
        assert m.gpus >= 1 and m.measured_throughput > 0 and math.isfinite(m.measured_throughput)
        assert m.strategy.gpus == m.gpus
    # a file that loads can be validated: `perfmodel validate FILE` ends in 0 or a clean error
    code, _, err, _ = run_cli(["validate", str(path), "--format", "json"])
    assert code in (0, 1, 2) and "Traceback" not in err, err[-800:]
    assert code == 0 or len(err.splitlines()) == 1, err


@fuzz(300)
@given(st.binary(max_size=2000))
def test_measurement_loader_random_bytes(folder: Path, data: bytes) -> None:
    path = folder / "random.csv"
    path.write_bytes(data)
    _check_measurements(path)


#: Plausible cells per column ({g} is the row's GPU count).
VALID_CELLS = {
    "model": ["tiny_cnn", "resnet50", "alexnet"], "hardware": ["a100-80gb-dgx", "v100-16gb-dgx1"],
    "gpus": ["1", "2", "8", "8.0"], "precision": ["amp", "fp32", "AMP"], "batch_per_gpu": ["32", "256"],
    "global_batch": [""], "strategy": ["dp={g}", "pp=2", "dp={g},comm=tree"],
    "measured_throughput": ["100", "2500.5", "1_000"], "image_size": ["", "64", "224"],
    "optimizer": ["", "sgd", "adam"],
}


@st.composite
def measurement_row(draw: st.DrawFn, header: list[str]) -> list[str]:
    g = draw(st.sampled_from(VALID_CELLS["gpus"]))
    cells = []
    for col in header:
        valid = VALID_CELLS.get(col, ["x"])
        wrong = draw(st.sampled_from([False] * 9 + [True]))  # about one cell in ten is junk
        cell = draw(st.sampled_from(CELLS if wrong else valid))
        cells.append(g if col == "gpus" else cell.replace("{g}", g.split(".")[0]))
    if draw(st.sampled_from([False] * 9 + [True])):  # a short or long row now and then
        cells = cells[: draw(st.integers(0, len(cells)))] + draw(st.lists(st.sampled_from(CELLS), max_size=2))
    return cells


@fuzz(400)
@given(st.data())
def test_measurement_loader_random_cells(folder: Path, data: st.DataObject) -> None:
    header = data.draw(st.sampled_from(["good"] * 3 + ["shuffled", "random"]))
    if header == "good":
        header = HEADER
    elif header == "shuffled":
        header = data.draw(st.permutations(HEADER))
    else:
        header = data.draw(st.lists(st.sampled_from(HEADER + ["gpu", "", "model"]), max_size=10))
    rows = data.draw(st.lists(measurement_row(header), min_size=0, max_size=4))
    path = folder / "cells.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([header, *rows])
    _check_measurements(path)


# -- the Python API: odd values for every argument ---------------------------------------------
ODD = [None, True, False, 0, -1, 2.5, math.nan, math.inf, 10**400, "", "2", "dp", b"dp=8", {"dp": 8}, [8], ()]


@fuzz(150)
@given(st.data())
def test_api_odd_arguments_give_a_frame_or_the_projects_error(data: st.DataObject) -> None:
    """Any argument replaced by an odd value: a frame, or a PerfmodelError; never another exception."""
    import pandas as pd

    from perfmodel import api
    from perfmodel.errors import PerfmodelError

    args: dict[str, object] = dict(model="tiny_cnn", gpus=4, strategy="dp=4", hardware="a100-80gb-dgx",
                                   precision="amp", batch_per_gpu=2, optimizer="sgd")
    for key in data.draw(st.lists(st.sampled_from([*args, "global_batch", "image_size", "peak_scale"]),
                                  min_size=1, max_size=2, unique=True)):
        args[key] = data.draw(st.sampled_from(ODD), label=key)
    if "global_batch" in args and args.get("batch_per_gpu") is not None:
        args["batch_per_gpu"] = None
    try:
        df = api.predict_frame(**args)  # type: ignore[arg-type]
    except PerfmodelError as e:
        assert "\n" not in str(e) and len(str(e)) < 2000
        return
    assert isinstance(df, pd.DataFrame) and len(df) >= 1
    steps = df["step_s"].dropna()
    assert all(math.isfinite(x) and x > 0 for x in steps)

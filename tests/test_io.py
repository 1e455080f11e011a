"""Outputs are atomic (a failure leaves the old file, never a partial one); inputs are bounded."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from cli_helpers import run_main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure

from perfmodel import io as pio
from perfmodel.errors import DataError, MeasurementError, ProfileError, UsageError
from perfmodel.hardware import load_profile, profiles_dir
from perfmodel.report.charts import save_chart
from perfmodel.validation import load_measurements, shipped_path

GOOD = (profiles_dir() / "a100-80gb-dgx.toml").read_text()


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _disk_full(*args: object, **kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


# -- atomic writes ---------------------------------------------------------------------------
def test_atomic_write_replaces_the_target(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    pio.atomic_write_text(target, "new")
    assert target.read_text() == "new" and _leftovers(tmp_path) == []


def test_a_full_disk_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.txt"
    target.write_text("good")
    monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(DataError, match="No space left on device.*unchanged"):
        pio.atomic_write_text(target, "new")
    assert target.read_text() == "good" and _leftovers(tmp_path) == []


def test_a_failed_rename_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.txt"
    target.write_text("good")
    monkeypatch.setattr(os, "replace", _disk_full)
    with pytest.raises(DataError):
        pio.atomic_write_bytes(target, b"new")
    assert target.read_text() == "good" and _leftovers(tmp_path) == []


def test_a_refusing_check_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("good")

    def refuse(p: Path) -> None:
        assert p.read_text() == "bad" and p.parent == tmp_path  # checked beside the target
        raise ProfileError("refused")

    with pytest.raises(ProfileError, match="refused"):
        pio.atomic_write_text(target, "bad", check=refuse)
    assert target.read_text() == "good" and _leftovers(tmp_path) == []


def test_nothing_written_is_an_error_not_an_empty_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    with pytest.raises(DataError, match="0 bytes"):
        pio.atomic_write_bytes(target, b"")
    assert not target.exists() and _leftovers(tmp_path) == []


@pytest.mark.parametrize(("name", "suffixes", "phrase"), [
    ("missing/x.png", (".png",), "does not exist"),
    ("x.gif", (".png", ".svg"), "unknown extension"),
    ("a\nb.toml", (), "line break"),
])
def test_target_checks(tmp_path: Path, name: str, suffixes: tuple[str, ...], phrase: str) -> None:
    with pytest.raises(UsageError, match=phrase):
        pio.check_target(tmp_path / name, suffixes)


def test_a_file_is_not_a_folder_to_write_into(tmp_path: Path) -> None:
    (tmp_path / "measured.csv").write_text("x\n")
    with pytest.raises(UsageError, match="'.*measured.csv' is a file, not a folder"):
        pio.check_target(tmp_path / "measured.csv" / "cal.toml", (".toml",))


def test_a_folder_is_not_a_target(tmp_path: Path) -> None:
    (tmp_path / "d.png").mkdir()
    with pytest.raises(UsageError, match="is a folder"):
        pio.check_target(tmp_path / "d.png", (".png",))


def test_save_chart_on_a_full_disk_keeps_the_old_chart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fig = Figure()
    fig.add_subplot().plot([1, 2], [3, 4])
    target = tmp_path / "c.svg"
    save_chart(fig, target)
    good = target.read_bytes()
    assert good.lstrip().startswith(b"<?xml")
    monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(DataError):
        save_chart(fig, target)
    assert target.read_bytes() == good and _leftovers(tmp_path) == []


# -- calibrate writes a checked profile, or nothing -----------------------------------------------
def _calibrate(capsys: pytest.CaptureFixture[str], csv: Path, hw: str, out: Path) -> tuple[int, str, str]:
    return run_main(["calibrate", str(csv), "-H", hw, "-o", str(out)], capsys)


def test_calibrate_on_a_full_disk_keeps_the_previous_profile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "cal.toml"
    code, _, err = _calibrate(capsys, shipped_path(), "p40-24gb-pcie", out)
    assert code == 0, err
    good = out.read_text()
    monkeypatch.setattr(os, "fsync", _disk_full)
    code, _, err = _calibrate(capsys, shipped_path(), "p40-24gb-pcie", out)
    assert code == 1 and "No space left" in err and len(err.splitlines()) == 1
    assert out.read_text() == good and _leftovers(tmp_path) == []


def test_calibrate_with_line_breaks_in_description_and_file_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A multi-line description and a CSV whose name holds a newline made invalid TOML."""
    base = tmp_path / "p40-24gb-pcie.toml"
    text = (profiles_dir() / "p40-24gb-pcie.toml").read_text()
    start = text.index("description = ")
    end = text.index("\n", start)
    base.write_text(text[:start] + 'description = """two\nlines \\u007f"""' + text[end:])
    csv = tmp_path / "runs\nof p40.csv"
    csv.write_text(shipped_path().read_text().replace("p40-24gb-pcie", str(base)))
    out = tmp_path / "mine.toml"
    code, _, err = _calibrate(capsys, csv, str(base), out)
    assert code == 0, err
    hw = load_profile(out)
    assert hw.name == "mine" and "two\nlines" in hw.description


def test_calibrate_into_a_folder_that_is_not_there_does_no_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _calibrate(capsys, tmp_path / "none.csv", "a100-80gb-dgx", tmp_path / "no" / "x.toml")
    assert code == 2 and "does not exist" in err  # before the missing CSV is even looked at


def test_calibrate_on_rows_without_a_batch_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "nobatch.csv"
    csv.write_text("model,hardware,gpus,precision,batch_per_gpu,global_batch,strategy,measured_throughput\n"
                   "resnet50,a100-80gb-dgx,1,amp,,,dp=1,2000\n")
    out = tmp_path / "c.toml"
    code, _, err = _calibrate(capsys, csv, "a100-80gb-dgx", out)
    assert code == 1 and "calibrated on 0 runs" in err and "no batch size" in err
    assert not out.exists()


# -- bounded reads ------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_not_read(device: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device}")
    with pytest.raises(ProfileError, match="not a regular file"):
        load_profile(device)
    with pytest.raises(MeasurementError, match="not a regular file"):
        load_measurements([device])


def test_size_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.toml"
    big.write_text("# " + "x" * (pio.MAX_PROFILE_BYTES + 10))
    with pytest.raises(ProfileError, match="more than the 1,048,576 allowed"):
        load_profile(big)
    monkeypatch.setattr("perfmodel.validation.measurements.MAX_CSV_BYTES", 1000)
    with pytest.raises(MeasurementError, match="more than the 1,000 allowed"):
        load_measurements([shipped_path()])


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    f = tmp_path / "a100-80gb-dgx.toml"
    f.write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    assert load_profile(f).name == "a100-80gb-dgx"


def test_a_profile_named_unlike_its_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text(GOOD)
    with pytest.raises(ProfileError, match="field 'name': expected the file name without .toml \\('mine'\\)"):
        load_profile(f)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_atomic_write_round_trips_or_leaves_nothing(tmp_path: Path, data: bytes) -> None:
    target = tmp_path / "blob.bin"
    if data:
        pio.atomic_write_bytes(target, data)
        assert target.read_bytes() == data
    else:
        with pytest.raises(DataError):
            pio.atomic_write_bytes(target, data)
    assert _leftovers(tmp_path) == []

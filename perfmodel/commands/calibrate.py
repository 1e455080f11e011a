"""``perfmodel calibrate``: fit a profile's efficiencies to measured runs, write a new profile."""

from __future__ import annotations

import datetime
import tomllib
from collections.abc import Callable
from pathlib import Path

import click

from ..errors import DataError, UsageError
from ..hardware import Hardware, load_hardware, parse_profile, profile_names, profiles_dir
from ..io import atomic_write_text, check_target
from ..report import to_json
from ..validation import Measurement, calibrate_profile, load_measurements, mape, profile_toml
from ..validation.compare import compare_rows
from ..validation.devices import ran_on_cpu
from ..validation.repeats import without_repeats
from .common import emit, report_format_option

__all__ = ["calibrate_cmd"]


@click.command("calibrate")
@click.argument("file", type=click.Path(path_type=Path))  # a folder is refused by the reader (exit 1)
@click.option(
    "--hardware",
    "-H",
    required=True,
    help="Profile to calibrate: a shipped name or a TOML path; the rows of FILE whose "
    "hardware column names it are used.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Where to write the calibrated profile (.toml).",
)
@report_format_option
def calibrate_cmd(file: Path, hardware: str, output: Path, fmt: str) -> None:
    """Fit the compute efficiencies (by op kind and kernel size) and link efficiencies of a
    hardware profile to the measured runs in FILE, and write the result as a new profile.

    \b
    Compute is fitted per precision on the 1-GPU rows (all rows of that precision if it has
    none), kept only where it lowers those runs' MAPE; then the intra- and inter-node link
    efficiencies on the multi-GPU rows, where the predicted times depend on them. Use the
    result with --hardware calibrated.toml.
    """
    if output.suffix.lower() != ".toml":
        raise UsageError(f"cannot write '{output}': the calibrated profile must be a .toml file")
    check_target(output, (".toml",))
    if output.resolve().parent == profiles_dir().resolve():  # its name would stand for the shipped data
        raise UsageError(f"cannot write '{output}': it is the shipped profiles' folder ({profiles_dir()}), where "
                         f"a calibrated profile would replace or pose as a shipped one; write it elsewhere")
    if output.stem in profile_names():  # named by its file, it would read as the shipped profile
        raise UsageError(f"cannot write '{output}': a profile is named by its file, and '{output.stem}' is a "
                         f"shipped profile's name; name it otherwise (e.g. {output.stem}-calibrated.toml)")
    base = load_hardware(hardware)
    if base.path and Path(base.path).resolve() == output.resolve():
        raise UsageError(f"cannot write '{output}': it is the profile being calibrated (--hardware); "
                         "write the calibrated profile to another file")
    rows = _gpu_rows(file, hardware, base)
    key = rows[0].hardware
    cal = calibrate_profile(rows, base, key)
    hw = cal.profiles[key]
    before = compare_rows(rows, {key: base})
    after = compare_rows(rows, {key: hw})
    mape_before = mape([r.error_pct for r in before])
    mape_after = mape([r.error_pct for r in after])
    used = sum(r.predicted_throughput is not None for r in after)
    if used == 0 or not cal.compute:
        reasons = sorted({r.reason for r in after if r.reason})
        raise DataError(
            f"{file}: calibrated on 0 runs: none of the {len(rows)} row(s) for '{hardware}' could be "
            f"priced ({'; '.join(reasons)[:300] or 'no row has a batch size'}); nothing written"
        )
    today = datetime.date.today().isoformat()
    source = (
        f"{base.name} calibrated by perfmodel calibrate on {today} from {used} measured "
        f"run(s) in {file.name}; throughput MAPE on them "
        f"{_pct(mape_before)} -> {_pct(mape_after)}. Base profile: "
        f"{base.sources.get('profile', '')}"
    )
    notes = {f.precision: f.describe() for f in cal.compute}
    text = profile_toml(
        hw,
        output.stem,  # a profile's name is its file name (hardware_profiles/template.toml)
        f"{base.description} (efficiencies calibrated to {file.name})",
        source,
        notes,
    )
    # written beside the target, re-loaded as a profile, then renamed over it: a file that
    # would not load, or a failed write, leaves the target as it was
    atomic_write_text(output, text, check=_loads_as(output))
    if fmt == "json":
        emit(
            to_json(
                {
                    "output": str(output),
                    "hardware": base.name,
                    "rows": used,
                    "throughput_mape_before_pct": mape_before,
                    "throughput_mape_after_pct": mape_after,
                    "calibration": cal.to_dict(),
                }
            )
        )
        return
    lines = [f"calibrated {base.name} on {used} run(s) of {file}:"]
    lines += [f"  {line}" for line in cal.lines()]
    lines.append(
        f"throughput MAPE on these runs: {_pct(mape_before)} -> {_pct(mape_after)} "
        "(in-sample: check on other runs with `perfmodel validate`)"
    )
    lines.append(f"wrote {output} (use it with --hardware {output})")
    emit("\n".join(lines))


def _gpu_rows(file: Path, hardware: str, base: Hardware) -> list[Measurement]:
    """The rows of ``file`` that name ``hardware`` and ran on a GPU (a usage error if none)."""
    ms = load_measurements([file])
    keys = {hardware, base.name}
    rows = [  # a row equal to an earlier one in every column is fitted once
        m for m in without_repeats(ms.rows) if m.hardware in keys or Path(m.hardware).name == Path(hardware).name
    ]
    cpu = sum(ran_on_cpu(m) for m in rows)
    rows = [m for m in rows if not ran_on_cpu(m)]
    if cpu and not rows:
        raise UsageError(f"{file}: the {cpu} row(s) naming '{hardware}' ran on the CPU (device column); "
                         "a GPU profile cannot be calibrated to them")
    if not rows:
        named = sorted({m.hardware for m in ms.rows})
        raise UsageError(
            f"{file}: no row names hardware '{hardware}' (rows name: {', '.join(named)})"
        )
    return rows


def _loads_as(output: Path) -> Callable[[Path], None]:
    """A check that the temporary file loads as the profile ``output`` will be."""

    def check(tmp: Path) -> None:
        parse_profile(tomllib.loads(tmp.read_text(encoding="utf-8")), str(output))

    return check


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"

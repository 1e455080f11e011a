"""Hardware profiles: every shipped file loads with sane values; the loader rejects bad files."""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from pathlib import Path
from typing import Any

import pytest

from perfmodel.errors import ProfileError, UnknownNameError
from perfmodel.hardware import (
    PRECISIONS,
    Hardware,
    load_hardware,
    load_profile,
    parse_profile,
    profile_names,
    profiles_dir,
)
from perfmodel.hardware.generation import generation
from perfmodel.hardware.profile import PEAK_KEY, TOPOLOGIES

GIB = 2**30
PROFILE_FILES = sorted(profiles_dir().glob("*.toml"))
SHIPPED = [p for p in PROFILE_FILES if p.stem != "template"]
TEMPLATE = profiles_dir() / "template.toml"
EXAMPLE = profiles_dir() / "a100-80gb-dgx.toml"

EXPECTED_PROFILES = {
    "v100-16gb-dgx1",
    "v100-32gb-dgx1",
    "v100-32gb-dgx2",
    "a100-40gb-dgx",
    "a100-80gb-dgx",
    "h100-80gb-dgx",
    "h200-141gb-dgx",
    "p100-16gb-nvlink",
    "p40-24gb-pcie",
    "abci-v100-16gb",
    "p100-16gb-pcie",
    "v100-32gb-pcie",
}
#: GPUs with tensor cores: their fp16 peak must exceed fp32 by far.
TENSOR_CORE_GPUS = ("V100", "A100", "H100", "H200")


def _raw(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())


# ---------------------------------------------------------------- every shipped file


def test_expected_profiles_are_shipped() -> None:
    assert set(profile_names()) >= EXPECTED_PROFILES
    assert "template" not in profile_names()
    assert TEMPLATE.is_file()


@pytest.mark.parametrize("path", PROFILE_FILES, ids=lambda p: p.stem)
def test_profile_loads_with_sane_values(path: Path) -> None:
    hw = load_profile(path)
    raw = _raw(path)
    assert hw.name == path.stem
    assert hw.path == str(path)
    d = hw.device
    assert 1 * GIB < d.memory_bytes <= 256 * GIB
    assert 100e9 <= d.memory_bandwidth_bytes_per_s <= 20e12
    assert 1e12 <= d.peak_flops_per_s["fp32"] <= 200e12
    for key, peak in d.peak_flops_per_s.items():
        assert key in PEAK_KEY.values()
        assert peak >= d.peak_flops_per_s["fp32"], f"{key} peak below fp32: omit the key instead"
        assert peak <= 5e15
    if any(g in d.name for g in TENSOR_CORE_GPUS):
        assert d.peak_flops_per_s["fp16"] >= 4 * d.peak_flops_per_s["fp32"]
    for p in PRECISIONS:
        assert d.peak(p) >= d.peak_flops_per_s["fp32"]
        c = hw.compute[p]
        assert 0.2 <= c.conv <= 1 and 0.2 <= c.linear <= 1 and 0.5 <= c.memory <= 1
        assert 0 <= c.half_work_flops <= 1e11
    assert 1 <= hw.gpus_per_node <= 16
    assert 1e9 <= hw.intra.bandwidth_bytes_per_s <= 2e12
    assert 1e8 <= hw.inter.bandwidth_bytes_per_s <= 1e12
    for tier in (hw.intra, hw.inter):
        assert 0 <= tier.latency_s <= 1e-3
        assert 0 < tier.efficiency <= 1
        assert tier.topology in TOPOLOGIES
    assert 0 <= hw.kernel_launch_s <= 1e-4
    assert 0.5 * GIB <= hw.framework_reserve_bytes <= 4 * GIB
    assert hw.framework_reserve_bytes < d.memory_bytes / 4
    assert hw.max_nodes >= 1
    assert raw["schema_version"] == 1


@pytest.mark.parametrize("path", PROFILE_FILES, ids=lambda p: p.stem)
def test_every_section_has_a_source(path: Path) -> None:
    raw = _raw(path)
    sections = {
        "(top)": raw,
        "device": raw["device"],
        "device.peak_flops_per_s": raw["device"]["peak_flops_per_s"],
        "node": raw["node"],
        "node.link": raw["node"]["link"],
        "network": raw["network"],
        "efficiency": raw["efficiency"],
    }
    for where, table in sections.items():
        src = table.get("source")
        assert isinstance(src, str) and len(src) > 10, f"{path.name}: [{where}] needs a source"
    hw = load_profile(path)
    assert {"profile", "device", "peak_flops_per_s", "node", "link", "network",
            "efficiency"} <= set(hw.sources)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_profile_is_not_placeholder(path: Path) -> None:
    assert "PLACEHOLDER" not in path.read_text()


def test_template_loads_but_is_not_a_shipped_name() -> None:
    hw = load_profile(TEMPLATE)
    assert hw.name == "template"
    assert "PLACEHOLDER" in hw.description
    with pytest.raises(UnknownNameError):
        load_hardware("template")


def test_template_documents_every_field() -> None:
    """Every key any shipped profile uses appears in the template (optional ones included)."""

    def keys(table: dict[str, Any], prefix: str = "") -> set[str]:
        out: set[str] = set()
        for k, v in table.items():
            if isinstance(v, dict):
                out |= keys(v, f"{prefix}{k}.")
            else:
                out.add(f"{prefix}{k}")
        return out

    template_keys = keys(_raw(TEMPLATE))
    # peaks and precisions are families: the template shows some members and lists the rest
    text = TEMPLATE.read_text()
    for path in SHIPPED:
        for k in keys(_raw(path)):
            if k.startswith("device.peak_flops_per_s.") or k.startswith("efficiency.compute."):
                assert k.rsplit(".", 1)[-1] in text
            else:
                assert k in template_keys, f"{path.name}: field {k} not documented in template"
    for opt in ("max_nodes", "tf32", "bf16", "fp16"):
        assert opt in text


def test_gpus_of_one_generation_share_compute_efficiencies() -> None:
    """Fractions are per generation defaults, not tuned per profile."""
    by_gen: dict[str, set[tuple[float, ...]]] = {}
    for name in profile_names():
        hw = load_hardware(name)
        gen = generation(hw.device.name)
        assert gen is not None, name
        fracs = tuple(x for p in PRECISIONS
                      for x in (hw.compute[p].conv, hw.compute[p].linear, hw.compute[p].memory))
        by_gen.setdefault(gen, set()).add(fracs)
    assert all(len(v) == 1 for v in by_gen.values()), by_gen


def test_half_work_follows_the_stated_rule() -> None:
    """n_1/2 = 10 us x peak x linear fraction (template.toml), to two significant digits."""
    for name in profile_names():
        hw = load_hardware(name)
        for p in PRECISIONS:
            c = hw.compute[p]
            expected = 10e-6 * hw.device.peak(p) * c.linear
            assert c.half_work_flops == pytest.approx(expected, rel=0.05), (name, p)


def test_key_figures() -> None:
    v100 = load_hardware("v100-16gb-dgx1")
    assert v100.device.memory_bytes == 16 * GIB
    assert v100.device.peak("amp") == 125e12
    assert v100.device.peak("tf32") == v100.device.peak("bf16") == 15.7e12  # fall back
    assert v100.intra.bandwidth_bytes_per_s == 6 * 25e9
    assert v100.intra.topology == "cube-mesh"
    assert v100.inter.bandwidth_bytes_per_s == 4 * 100e9 / 8
    assert load_hardware("v100-32gb-dgx1").device.memory_bytes == 32 * GIB
    dgx2 = load_hardware("v100-32gb-dgx2")
    assert dgx2.gpus_per_node == 16 and dgx2.inter.bandwidth_bytes_per_s == 8 * 100e9 / 8
    assert load_hardware("a100-40gb-dgx").device.memory_bytes == 40 * GIB
    a100 = load_hardware("a100-80gb-dgx")
    assert a100.device.memory_bytes == 80 * GIB
    assert a100.inter.bandwidth_bytes_per_s == 8 * 200e9 / 8
    h100 = load_hardware("h100-80gb-dgx")
    assert h100.device.memory_bytes == 81559 * 2**20
    assert h100.inter.bandwidth_bytes_per_s == 8 * 400e9 / 8
    h200 = load_hardware("h200-141gb-dgx")
    assert h200.device.memory_bytes == 143771 * 2**20
    assert h200.device.memory_bandwidth_bytes_per_s == 4.8e12
    assert h200.device.peak_flops_per_s == h100.device.peak_flops_per_s
    p100 = load_hardware("p100-16gb-nvlink")
    assert p100.inter.bandwidth_bytes_per_s == 50e9 / 8 and p100.inter.topology == "ethernet"
    assert p100.max_gpus == 256
    p40 = load_hardware("p40-24gb-pcie")
    assert set(p40.device.peak_flops_per_s) == {"fp32"}
    assert all(p40.device.peak(p) == 12e12 for p in PRECISIONS)
    assert p40.intra.topology == "pcie" and p40.max_nodes == 1
    abci = load_hardware("abci-v100-16gb")
    assert abci.gpus_per_node == 4 and abci.max_nodes == 1088
    assert abci.inter.bandwidth_bytes_per_s == 2 * 100e9 / 8


# ---------------------------------------------------------------- by name, by path


def test_load_by_name_and_by_path_agree() -> None:
    by_name = load_hardware("a100-80gb-dgx")
    by_path = load_hardware(str(EXAMPLE))
    by_pathlib = load_hardware(EXAMPLE)
    assert by_name.device == by_path.device == by_pathlib.device
    assert by_name.compute == by_path.compute
    assert load_hardware(by_name) is by_name
    assert load_hardware() == by_name  # the default hardware


def test_unknown_name_names_the_closest_profile() -> None:
    with pytest.raises(UnknownNameError) as e:
        load_hardware("v100-16gb-dgx")
    assert "v100-16gb-dgx1" in str(e.value)
    with pytest.raises(UnknownNameError) as e:
        load_hardware("h100-80gb")
    assert "h100-80gb-dgx" in str(e.value)


def test_path_loads_are_not_cached(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    data = EXAMPLE.read_text().replace('name = "a100-80gb-dgx"', 'name = "mine"')
    f.write_text(data)
    assert load_hardware(f).gpus_per_node == 8
    f.write_text(data.replace("gpus_per_node = 8", "gpus_per_node = 4"))
    assert load_hardware(f).gpus_per_node == 4


# ---------------------------------------------------------------- malformed files


def _write(tmp_path: Path, data: dict[str, Any] | str | bytes, name: str = "bad.toml") -> Path:
    f = tmp_path / name
    if isinstance(data, bytes):
        f.write_bytes(data)
    elif isinstance(data, str):
        f.write_text(data)
    else:
        f.write_text(_dumps(data))
    return f


def _dumps(data: dict[str, Any]) -> str:
    """A tiny TOML writer for the test's nested tables of scalars."""
    lines: list[str] = []

    def scalar(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return repr(v)

    def table(t: dict[str, Any], prefix: str) -> None:
        for k, v in t.items():
            if not isinstance(v, dict):
                lines.append(f"{k} = {scalar(v)}")
        for k, v in t.items():
            if isinstance(v, dict):
                lines.append(f"[{prefix}{k}]")
                table(v, f"{prefix}{k}.")

    table(data, "")
    return "\n".join(lines) + "\n"


def _example() -> dict[str, Any]:
    return copy.deepcopy(_raw(EXAMPLE))


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    t = data
    for k in path:
        t = t[k]
    if value is _DELETE:
        del t[last]
    else:
        t[last] = value


_DELETE = object()


def _assert_error(path: Path, *fragments: str) -> ProfileError:
    with pytest.raises(ProfileError) as e:
        load_profile(path)
    msg = str(e.value)
    assert str(path) in msg, msg
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in {msg!r}"
    return e.value


def test_round_trip_of_the_test_writer(tmp_path: Path) -> None:
    assert load_profile(_write(tmp_path, _example(), "a100-80gb-dgx.toml")).device == load_hardware(
        "a100-80gb-dgx").device


@pytest.mark.parametrize(
    ("field", "value", "fragments"),
    [
        ("device.memory_bytes", _DELETE, ("device.memory_bytes", "expected a number", "missing")),
        ("node.gpus_per_node", _DELETE, ("node.gpus_per_node", "positive integer", "missing")),
        ("network.source", _DELETE, ("network.source", "non-empty string", "missing")),
        ("efficiency.compute.bf16", _DELETE, ("efficiency.compute.bf16", "a table", "missing")),
        ("device.peak_flops_per_s.fp32", _DELETE, ("device.peak_flops_per_s.fp32", "a number")),
        ("node.link", _DELETE, ("node.link", "a table")),
        ("device.memory_bytes", "80 GiB", ("device.memory_bytes", "expected a number",
                                           "string", "80 GiB")),
        ("node.link.bandwidth_bytes_per_s", "300e9", ("node.link.bandwidth_bytes_per_s",
                                                      "expected a number", "string")),
        ("node.gpus_per_node", 8.0, ("node.gpus_per_node", "positive integer", "8.0")),
        ("node.gpus_per_node", True, ("node.gpus_per_node", "positive integer", "boolean")),
        ("node.gpus_per_node", 0, ("node.gpus_per_node", "positive integer")),
        ("device.memory_bytes", -1, ("device.memory_bytes", "> 0", "-1")),
        ("network.latency_s", -1e-6, ("network.latency_s", ">= 0")),
        ("device.peak_flops_per_s.tf32", -156e12, ("device.peak_flops_per_s.tf32", "> 0")),
        ("efficiency.compute.amp.half_work_flops", -1.0,
         ("efficiency.compute.amp.half_work_flops", ">= 0")),
        ("efficiency.framework_reserve_bytes", -2e9, ("efficiency.framework_reserve_bytes",)),
        ("node.link.efficiency", 1.5, ("node.link.efficiency", "fraction from 0.0001 to 1", "1.5")),
        ("network.efficiency", 0.0, ("network.efficiency", "fraction from 0.0001")),
        ("efficiency.compute.fp32.conv", 1.2, ("efficiency.compute.fp32.conv", "fraction from 0.0001 to 1")),
        ("efficiency.compute.tf32.memory", 2, ("efficiency.compute.tf32.memory", "to 1")),
        ("network.max_nodes", 0, ("network.max_nodes", "positive integer")),
        ("network.max_nodes", 2.5, ("network.max_nodes", "positive integer")),
        ("node.link.topology", "torus", ("node.link.topology", "one of", "nvswitch", "torus")),
        ("name", "", ("'name'", "non-empty string")),
        ("description", 3, ("'description'", "non-empty string")),
        ("device", "A100", ("'device'", "a table")),
        ("schema_version", 2, ("schema_version", "expected the integer 1", "2")),
        ("schema_version", "1", ("schema_version", "expected the integer 1", "string")),
        ("schema_version", True, ("schema_version", "expected the integer 1", "boolean")),
        ("schema_version", _DELETE, ("schema_version", "missing")),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_malformed_field_is_named(tmp_path: Path, field: str, value: Any,
                                  fragments: tuple[str, ...]) -> None:
    data = _example()
    _set(data, field, value)
    _assert_error(_write(tmp_path, data), *fragments)


@pytest.mark.parametrize(
    ("field", "name"),
    [
        ("", "bandwith"),                       # top level
        ("device.", "memroy_bytes"),
        ("device.peak_flops_per_s.", "fp61"),
        ("node.", "gpus"),
        ("node.link.", "bandwith_bytes_per_s"),
        ("network.", "max_node"),
        ("efficiency.", "launch_s"),
        ("efficiency.compute.", "fp8"),
        ("efficiency.compute.amp.", "gemm"),
    ],
)
def test_unknown_fields_are_rejected_by_name(tmp_path: Path, field: str, name: str) -> None:
    data = _example()
    _set(data, field + name, 1.0)
    _assert_error(_write(tmp_path, data), f"'{field}{name}'", "unknown field", "allowed")


def test_invalid_toml(tmp_path: Path) -> None:
    f = _write(tmp_path, EXAMPLE.read_text().replace("gpus_per_node = 8", "gpus_per_node = = 8"))
    _assert_error(f, "not valid TOML", "line")


def test_binary_junk(tmp_path: Path) -> None:
    _assert_error(_write(tmp_path, bytes(range(256)) * 4), "not a text TOML file")
    _assert_error(_write(tmp_path, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "png.toml"),
                  "not a text TOML file")
    _assert_error(_write(tmp_path, b"name = \"x\"\x00\x00", "nul.toml"), "not a text TOML file")


@pytest.mark.parametrize("content", ["", "\n\n   \n", "# only a comment\n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    f = _write(tmp_path, content)
    if content.strip():
        _assert_error(f, "schema_version", "missing")
    else:
        _assert_error(f, "empty file")


def test_nonexistent_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    _assert_error(missing, "cannot read")
    with pytest.raises(ProfileError):
        load_hardware(missing)
    with pytest.raises(ProfileError):
        load_hardware(str(missing))


def test_directory_is_not_a_profile(tmp_path: Path) -> None:
    _assert_error(tmp_path, "cannot read")


def test_parse_profile_names_the_given_file() -> None:
    data = _example()
    data["device"]["memory_bytes"] = "lots"
    with pytest.raises(ProfileError) as e:
        parse_profile(data, "<memory>")
    assert str(e.value).startswith("<memory>: field 'device.memory_bytes'")
    assert parse_profile(_example(), "<memory>").path == "<memory>"


# ---------------------------------------------------------------- what-if


def test_what_if_intra_bandwidth_scale_doubles_and_leaves_original() -> None:
    hw = load_hardware("v100-16gb-dgx1")
    before = dataclasses.replace(hw)
    faster = hw.what_if(intra_bandwidth_scale=2)
    assert faster.intra.bandwidth_bytes_per_s == 2 * hw.intra.bandwidth_bytes_per_s
    assert faster.intra.effective_bandwidth_bytes_per_s == pytest.approx(
        2 * hw.intra.effective_bandwidth_bytes_per_s)
    assert faster.inter == hw.inter and faster.device == hw.device
    assert hw == before and hw.intra.bandwidth_bytes_per_s == 150e9
    assert "what-if" in faster.name and hw.name == "v100-16gb-dgx1"
    assert load_hardware("v100-16gb-dgx1").intra.bandwidth_bytes_per_s == 150e9


def test_what_if_other_changes() -> None:
    hw = load_hardware("a100-80gb-dgx")
    w = hw.what_if(inter_bandwidth_scale=4, peak_scale=2, memory_bytes=40 * GIB,
                   gpus_per_node=4, intra={"latency_s": 0.0}, max_nodes=2)
    assert w.inter.bandwidth_bytes_per_s == 4 * hw.inter.bandwidth_bytes_per_s
    assert w.device.peak("amp") == 2 * hw.device.peak("amp")
    assert w.device.memory_bytes == 40 * GIB and w.gpus_per_node == 4
    assert w.intra.latency_s == 0.0 and w.max_gpus == 8
    assert hw.what_if() == hw
    with pytest.raises(ProfileError, match="unknown field 'bandwidth'"):
        hw.what_if(bandwidth=2)
    with pytest.raises(ProfileError):
        hw.what_if(intra_bandwidth_scale=-1)


def test_hardware_is_immutable() -> None:
    hw = load_hardware("a100-80gb-dgx")
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.gpus_per_node = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        hw.device.peak_flops_per_s["fp32"] = 1.0  # type: ignore[index]
    assert isinstance(hw, Hardware)

"""Packaging: every subpackage is listed in pyproject.toml, and profiles and data ship inside the package."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "perfmodel").rglob("__init__.py")}
    assert found <= listed, f"add to pyproject packages: {sorted(found - listed)}"
    assert "perfmodel.hardware_profiles" in listed


def test_shipped_profiles_are_found_without_the_checkout() -> None:
    from perfmodel.hardware import profile_names, profiles_dir

    assert profiles_dir().is_dir()
    assert "a100-80gb-dgx" in profile_names()

"""Test helpers: run the CLI in-process (exit code, stdout, stderr), load a script as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from perfmodel.cli import main

__all__ = ["run_main", "run_main_once", "load_file", "ROOT"]

#: the repository root (scripts/, tools/ and examples/ are not packages)
ROOT = Path(__file__).resolve().parents[1]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``perfmodel.cli.main(argv)``."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (0 if code is None else code if isinstance(code, int) else 1), out, err


_ONCE: dict[tuple[str, ...], tuple[int, str, str]] = {}


def run_main_once(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """:func:`run_main` of a read-only command whose output depends only on ``argv`` (and the
    shipped data), run once per test session: ``validate --kernels`` takes ~16 s on 2 cores and
    several test modules read its JSON."""
    key = tuple(argv)
    if key not in _ONCE:
        _ONCE[key] = run_main(argv, capsys)
    return _ONCE[key]


def load_file(relative: str, name: str) -> ModuleType:
    """The Python file ``ROOT / relative`` as a module called ``name`` (registered in
    ``sys.modules``: a dataclass looks its module up while being defined)."""
    folder = str((ROOT / relative).parent)  # a tool imports its siblings, as when run as a script
    if folder not in sys.path:
        sys.path.append(folder)
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None, relative
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod

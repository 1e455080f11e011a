"""Run the CLI in-process for tests: exit code, stdout and stderr of ``perfmodel.cli.main``."""

from __future__ import annotations

import pytest

from perfmodel.cli import main

__all__ = ["run_main"]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``perfmodel.cli.main(argv)``."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (0 if code is None else code if isinstance(code, int) else 1), out, err

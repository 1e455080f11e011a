"""Suite-wide settings: one compute thread per test process, and how many workers ``-n auto`` starts."""

# The suite runs in parallel (``python -m pytest -q -n auto --dist worksteal``, pytest-xdist: one
# process per core), so every test, old or new, must be safe beside any other test running in
# another process at the same time:
# - write only under ``tmp_path`` (or ``tmp_path_factory``): never next to the repository, into a
#   fixed ``/tmp`` name or into the current folder (``monkeypatch.chdir(tmp_path)`` first);
# - bind no fixed port: torchrun ``--standalone`` (tests/export_helpers.py) picks a free one,
#   notebook kernels talk over Unix sockets in tmp_path (tests/test_notebooks.py), anything else
#   binds port 0;
# - share expensive results through fixtures or in-process caches (each worker builds its own),
#   never through files;
# - assume nothing about which tests ran before in the same process: xdist splits modules over
#   workers, differently from run to run;
# - no timed assertions: a worker shares the cores with the others.

from __future__ import annotations

import os

import pytest

# One OpenMP/BLAS thread per process (unless the caller sets these): with one xdist worker per core,
# torch's and the BLAS's thread pools only fight over the cores (tests/test_measure*.py took 11.9 s
# with two threads, 4.4 s with one, on a loaded 2-core machine). Set before numpy or torch is
# imported (pytest loads this file before any test module); torchrun programs and notebook
# kernels started by the tests inherit it.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from perfmodel.strategies.context import clear_contexts  # noqa: E402  (numpy: after the thread settings)

#: ``-n auto`` starts one worker per available core, at most this many: each worker imports torch
#: and sympy and collects the whole suite (~10 s of CPU), and the longest test (the what_if
#: notebook, ~15 s) bounds the wall time anyway.
MAX_AUTO_WORKERS = 8


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """One worker per available core, at most MAX_AUTO_WORKERS; PYTEST_XDIST_AUTO_NUM_WORKERS wins."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own implementation reads it
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_AUTO_WORKERS, cores))


@pytest.fixture(autouse=True)
def _fresh_contexts() -> None:
    """Each test prices in contexts of its own: the ones ``context`` keeps from an earlier test in
    the process (whatever it patched) are forgotten."""
    clear_contexts()

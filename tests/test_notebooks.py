"""Every notebook in notebooks/ is committed without outputs and runs top to bottom."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
KernelManager = pytest.importorskip("jupyter_client").KernelManager

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: Charts a notebook must draw (PNG outputs), where it promises them.
CHARTS = {"validation": 2}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cells"
    dirty = [
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count is not None)
    ]
    assert not dirty, f"{path.name}: clear the outputs of cells {dirty} before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    # the kernel talks over Unix sockets in tmp_path (a socket path holds ~107 bytes): no TCP port to
    # race for with a kernel another xdist worker starts at the same moment
    sockets = str(tmp_path / "kernel")
    ipc = os.name == "posix" and len(sockets) < 90
    km = KernelManager(kernel_name="python3", transport="ipc" if ipc else "tcp", ip=sockets if ipc else "127.0.0.1")
    client = nbclient.NotebookClient(nb, km=km, timeout=300, resources={"metadata": {"path": str(ROOT)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) >= CHARTS.get(path.stem, 1), f"{path.name} drew {len(images)} charts"

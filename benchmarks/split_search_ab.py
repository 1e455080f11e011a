"""The pipeline split search's speed against another commit's, in one paired run.

Run from the repository root::

    python benchmarks/split_search_ab.py [--baseline b4cca98] [--pairs 5]

The baseline commit's tree is extracted (``git archive``) into a temporary folder; each case
then runs as a fresh process on the baseline and on this working tree in turn, ``--pairs``
times, and the medians of the processes' CPU seconds (user + system, less sensitive than wall
time to other jobs on a shared machine) and wall seconds are printed with their ratio. Cases:
``perfmodel plan resnet50 --gpus 1024`` (whole process), and the search over a synthetic
chain of 1,000 3x3 convolutions on 8 GPUs (dp, sp, pp and hybrid kinds, in process, the
network built before the clock starts), as ``benchmarks/search_speed.py`` times it.
Assumptions: the same interpreter and installed packages for both trees; nothing asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]

CHAIN = """
import time
from perfmodel.network import NetBuilder
from perfmodel.search import plan
b = NetBuilder("chain1000", (16, 32, 32))
x = "input"
for i in range(1000):
    with b.block(f"l{i}"):
        x = b.act(b.conv(x, 16, 3, padding=1, bias=False), "relu", inplace=True)
net = b.build()
t = time.process_time()
plan(net, 8, kinds=("dp", "sp", "pp", "hybrid"))
print(time.process_time() - t)
"""

CASES = {
    "plan resnet50 --gpus 1024 (whole process)": ["-m", "perfmodel", "plan", "resnet50", "--gpus", "1024"],
    "search, chain of 1,000 convolutions, 8 GPUs (in process)": ["-c", CHAIN],
}


def _run(tree: Path, args: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one fresh process importing perfmodel from ``tree``; for
    the in-process case the CPU seconds are the search's own, as printed."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, *args], cwd=tree, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if args[0] == "-c":
        cpu = float(out.stdout.strip().splitlines()[-1])
    return cpu, wall


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="b4cca98")
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", args.baseline], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        base = Path(tmp)
        print(f"baseline {args.baseline} vs this tree, {args.pairs} paired runs, medians")
        print(f"{'case':<58}{'base CPU s':>11}{'new CPU s':>10}{'ratio':>7}{'base wall s':>12}{'new wall s':>11}")
        for name, cmd in CASES.items():
            old, new = [], []
            for _ in range(args.pairs):
                old.append(_run(base, cmd))
                new.append(_run(ROOT, cmd))
            oc, nc = (statistics.median(x[0] for x in v) for v in (old, new))
            ow, nw = (statistics.median(x[1] for x in v) for v in (old, new))
            print(f"{name:<58}{oc:>11.3f}{nc:>10.3f}{nc / oc:>7.2f}{ow:>12.2f}{nw:>11.2f}")


if __name__ == "__main__":
    main()

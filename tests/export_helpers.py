"""Test helpers for exported programs: write one, run it under torchrun on the CPU, and the
one-process oracle it must train like (needs torch: import after ``pytest.importorskip``)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

from perfmodel.cli import main
from perfmodel.export import ExportPlan
from perfmodel.export.runtime import synthetic_batch
from perfmodel.network import get_model
from perfmodel.validation.measure import build_module

__all__ = ["export_program", "torchrun", "reference_run"]


def export_program(tmp: Path, spec: str, gpus: int, extra: Sequence[str] = ()) -> tuple[Path, ExportPlan]:
    """``perfmodel export`` of tiny_cnn (global batch 16, 16x16 pixels, fp32) with ``extra``
    options, and the plan the written program carries."""
    prog = tmp / "train_plan.py"
    argv = ["export", "tiny_cnn", "-n", str(gpus), "-s", spec, "-B", "16", "--image-size", "16",
            "--precision", "fp32", "-o", str(prog), *extra]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    tree = ast.parse(prog.read_text())
    node = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "PLAN")
    assert node.value is not None
    return prog, ExportPlan.from_dict(ast.literal_eval(node.value))


def torchrun(tmp: Path, prog: Path, gpus: int, steps: int, warmup: int,
             extra: Sequence[str] = ()) -> tuple[str, dict[str, Any]]:
    """Run ``prog`` on ``gpus`` CPU processes (gloo), its rows to ``tmp/measured.csv``: its
    standard output and the summary it writes."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}", str(prog),
           "--device", "cpu", "--backend", "gloo", "--steps", str(steps), "--warmup", str(warmup),
           "--output", str(tmp / "measured.csv"), "--summary", str(tmp / "summary.json"), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout, json.loads((tmp / "summary.json").read_text())


def reference_run(plan: ExportPlan, steps: int) -> tuple[list[float], dict[str, Any]]:
    """One process, NCHW, the unsplit network with the plan's seed, trained on the same samples
    cut into the same pieces: the loss of every step and the final weights."""
    net = get_model(plan.model, plan.image_size)
    torch.manual_seed(plan.seed)
    model = build_module(net, torch)
    opt = torch.optim.SGD(model.parameters(), lr=plan.lr, momentum=0.9)
    pieces = []
    for replica in range(plan.dp):
        x, y = synthetic_batch(net, plan.global_batch // plan.dp, plan.seed + replica, "cpu")
        pieces += list(zip(x.chunk(plan.mb), y.chunk(plan.mb), strict=True))
    losses = []
    for _ in range(steps):
        total = 0.0
        for x, y in pieces:
            loss = torch.nn.functional.cross_entropy(model(x), y) / len(pieces)
            loss.backward()
            total += float(loss.detach())
        opt.step()
        opt.zero_grad()
        losses.append(total)
    return losses, {k: p.detach().clone() for k, p in model.named_parameters()}

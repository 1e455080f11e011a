"""Train one perfmodel plan with torch.distributed on synthetic data, time it, write the measured row.

Run with ``torchrun --nproc-per-node GPUS THIS_FILE [--device cuda|cpu] [--backend nccl|gloo]
[--steps K] [--warmup W] [--output measured.csv]``, then score the prediction with
``perfmodel validate measured.csv``. The plan below is what ``perfmodel export`` priced.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from perfmodel.export import runtime
from perfmodel.export.plan import ExportPlan
from perfmodel.export.rows import append_rows, measurement_row
from perfmodel.export.steps import make_step
from perfmodel.export.timing import run_result, run_steps

# the plan as priced (perfmodel export writes it here)
PLAN: dict[str, Any] = {}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None,
                    help="where to train (default: cuda when torch sees a GPU)")
    ap.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                    help="torch.distributed backend (default: nccl on cuda, gloo on cpu)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps; the median is reported")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    ap.add_argument("--output", "-o", type=Path, default=None,
                    help="append the measured row to this CSV (perfmodel validate reads it)")
    ap.add_argument("--summary", type=Path, default=None,
                    help="also write step times and losses to this JSON file")
    ap.add_argument("--save-weights", type=Path, default=None,
                    help="save the trained weights (one file per pipeline stage) as a torch state dict")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        ap.error(f"--steps ({args.steps}) must be >= 1 and --warmup ({args.warmup}) >= 0")
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch sees no GPU (use --device cpu --backend gloo)")
    if args.backend is None:
        args.backend = "nccl" if args.device == "cuda" else "gloo"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = ExportPlan.from_dict(PLAN)
    if args.backend == "nccl" and plan.comm in ("ring", "tree"):
        os.environ.setdefault("NCCL_ALGO", plan.comm.capitalize())  # the algorithm priced
    runtime.set_math_mode(plan.precision)
    topo = runtime.init_distributed(plan, args.device, args.backend)
    net = runtime.build_network(plan)
    module = runtime.build_pieces(plan, net, topo.pp_rank, topo.device.type).to(topo.device)
    step = make_step(plan, net, topo, module)
    times, losses = run_steps(step, topo, args.warmup, args.steps)
    result = run_result(topo, args.backend, args.warmup, times, losses)
    if args.save_weights is not None and topo.dp_rank == 0:
        path = args.save_weights
        if plan.pp > 1:
            path = path.with_name(f"{path.stem}.stage{topo.pp_rank}{path.suffix}")
        torch.save(runtime.flat_state(module), path)
    if topo.rank == 0:
        row = measurement_row(plan, result)
        if args.output is not None:
            append_rows(args.output, [row])
        if args.summary is not None:
            args.summary.write_text(json.dumps({"row": row, "step_times_s": times, "losses": losses}, indent=1))
        print(report(plan, row))
    # every rank leaves together, and the step's objects (gloo work still holding tensors, kept
    # alive by reference cycles) are freed while the interpreter is whole: freed at interpreter
    # shutdown instead they can abort the process ("terminate called without an active
    # exception"; pytorch/pytorch#179291 describes the shutdown path)
    torch.distributed.barrier()
    del step, module
    gc.collect()
    torch.distributed.destroy_process_group()
    return 0


def report(plan: ExportPlan, row: dict[str, object]) -> str:
    """Measured against predicted: throughput, and memory when it ran on GPUs."""
    measured = float(str(row["measured_throughput"]))
    err = 100.0 * (plan.predicted_throughput - measured) / measured
    lines = [
        f"{plan.model} {plan.strategy} on {plan.gpus} x {row['device_name']} ({row['device']}), "
        f"{plan.precision}, {plan.memory_format.upper()}, global batch {plan.global_batch}",
        f"measured  {measured:,.1f} samples/s (step {float(str(row['step_time_s'])) * 1e3:.2f} ms, "
        f"loss {row['first_loss']:.4g} -> {row['last_loss']:.4g})",
        f"predicted {plan.predicted_throughput:,.1f} samples/s on {plan.hardware} "
        f"(step {plan.predicted_step_time_s * 1e3:.2f} ms): {err:+.1f}%"
        + ("  [CPU run: not scored against the GPU profile]" if row["device"] == "cpu" else ""),
    ]
    if row["peak_memory_per_gpu_bytes"] != "":
        lines.append(
            f"memory    {float(str(row['peak_memory_per_gpu_bytes'])) / 2**30:.2f} GiB peak allocated per GPU, "
            f"predicted {plan.predicted_memory_per_gpu_bytes / 2**30:.2f} GiB"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

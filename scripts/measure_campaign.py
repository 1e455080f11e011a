"""Measure the zoo's training on one GPU (``perfmodel measure`` in a loop), within a time budget.

Two steps, so that the GPU's time goes to timing only:

    python scripts/measure_campaign.py plan --hardware h100-80gb-dgx -o campaign/plan.json
    python scripts/measure_campaign.py run campaign/plan.json --out DIR --budget-s 560

``plan`` (here, no GPU) lists the runs in the order they are wanted: per-layer runs of every
model at one batch in the four precisions, then per-step runs over batches 1 to 256 in both memory
formats. Each run carries the compute model's predicted step time on ``--hardware``, used only
to estimate how long the run takes, so that ``run`` starts no run it cannot finish before
its budget. ``run`` (on the GPU) appends each finished run to ``DIR/steps.csv`` (one
``perfmodel validate`` measurement row per run) and ``DIR/layers.csv`` (per-layer medians) as it
goes, so a run killed at its limit keeps what it finished; runs that fail (out of memory) go to
``DIR/failed.csv``. ``--done`` skips the runs a previous ``steps.csv`` already holds.

    python scripts/measure_campaign.py profile --out DIR [--batch 128]

``profile`` (on the GPU, first: a minute) sums each kernel's GPU time over a few whole training
steps of :data:`PROFILES` (``perfmodel.validation.kernel_profile``), to ``DIR/kernels.csv`` (per
kernel name: its class, calls and seconds per step) and ``DIR/kernel_classes.csv`` (per class:
seconds and share of the step): ResNet-50 in AMP and TF32, NCHW and NHWC, which says where the
NCHW AMP step's time goes that perfmodel does not price (``perfmodel/data/MEASUREMENTS.md``,
"The same harness on the A100").

    python scripts/measure_campaign.py norms --out DIR

``norms`` (on the GPU, seconds) times ``nn.InstanceNorm3d(C, affine=True)`` forward and backward,
fp32, NCDHW, at the (channels, edge) pairs of the 3-D U-Net's levels (:data:`NORM_LEVELS`) and
batches 1, 2 and 4, into ``DIR/norms.csv`` with each call's longest kernels: the per-channel
rates of cuDNN's spatial batch-norm path that the 3-D U-Net's 32-bit rows need
(``perfmodel/data/MEASUREMENTS.md``, "The instance norm's kernels, checked").
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfmodel.network import get_model, model_names  # noqa: E402

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
FORMATS = ("nchw", "nhwc")
LAYER_BATCH = 32
#: Per-step batches, in the order wanted (32 comes with the per-layer runs).
STEP_BATCHES = (128, 1, 256, 8, 64)
#: Models whose sample is a volume: 1/16 of each batch (cosmoflow's 128^3 sample takes ~0.2 s).
VOLUME_BATCH_DIVISOR = 16
#: Seconds of host time per timed layer call (launch, two CUDA events, synchronise), for the estimate.
PER_LAYER_CALL_S = 60e-6


#: (model, precision, memory format) of the kernel profiles, in the order wanted.
PROFILES = (("resnet50", "amp", "nchw"), ("resnet50", "amp", "nhwc"), ("resnet50", "tf32", "nchw"),
            ("resnet50", "tf32", "nhwc"), ("efficientnet_b0", "amp", "nchw"), ("vgg16", "amp", "nchw"))


#: (channels, edge of the cubic volume) of the 3-D U-Net's levels (nnU-Net's 128^3 network, the
#: zoo's ``unet3d``), for the instance-norm timings, and the batches they are timed at.
NORM_LEVELS = ((32, 128), (64, 64), (128, 32), (256, 16), (320, 8), (320, 4))
NORM_BATCHES = (1, 2, 4)


def _key(model: str, batch: int, precision: str, fmt: str, layers: bool) -> str:
    return f"{model}/{batch}/{precision}/{fmt}/{'layers' if layers else 'step'}"


def _predicted_step_s(model: str, batch: int, precision: str, fmt: str, hardware: str) -> float:
    from perfmodel.hardware import load_hardware
    from perfmodel.strategies.predict import context, price
    from perfmodel.strategies.spec import Strategy

    net = get_model(model, None)
    ctx = context(net, load_hardware(hardware), precision, "sgd", memory_format=fmt)
    return float(price(ctx, Strategy(), batch).time_s)


def _estimate_s(step_s: float, n_layers: int, layers: bool, steps: int, warmup: int) -> float:
    """Seconds one run takes: build, warm-up and timed steps, and each layer's forward and backward
    timed ``steps + 2`` times alone."""
    est = 2.0 + (steps + warmup) * step_s * 1.5
    if layers:
        est += 2 * (steps + 2) * (step_s + n_layers * PER_LAYER_CALL_S)
    return est


def _tiers() -> list[tuple[int, str, str, bool, int, int]]:
    """(batch, precision, memory format, per-layer?, steps, warm-up) in the order wanted."""
    tensor_core = ("amp", "bf16")
    tiers = [(LAYER_BATCH, p, "nchw", True, 20, 5) for p in PRECISIONS]
    tiers += [(LAYER_BATCH, p, "nhwc", True, 20, 5) for p in tensor_core]
    for b in STEP_BATCHES:
        tiers += [(b, p, "nchw", False, 10, 3) for p in PRECISIONS]
        tiers += [(b, p, "nhwc", False, 10, 3) for p in tensor_core]
    tiers += [(LAYER_BATCH, p, "nhwc", False, 10, 3) for p in ("fp32", "tf32")]
    return tiers


def make_plan(hardware: str, models: list[str]) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for b, precision, fmt, layers, steps, warmup in _tiers():
        for model in models:
            volume = len(get_model(model, None).input_shape) == 4
            batch = max(1, b // VOLUME_BATCH_DIVISOR) if volume else b
            if _key(model, batch, precision, fmt, layers) in seen:
                continue
            seen.add(_key(model, batch, precision, fmt, layers))
            step_s = _predicted_step_s(model, batch, precision, fmt, hardware)
            n = len(get_model(model, None).layers)
            runs.append({
                "key": _key(model, batch, precision, fmt, layers), "hardware": hardware, "model": model, "batch": batch,
                "precision": precision, "memory_format": fmt, "layers": layers, "steps": steps,
                "warmup": warmup, "predicted_step_s": step_s,
                "estimate_s": _estimate_s(step_s, n, layers, steps, warmup),
            })
    return runs


def _append(path: Path, row: dict[str, Any]) -> None:
    new = not path.exists()
    with path.open("a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        if new:
            w.writeheader()
        w.writerow(row)
        fh.flush()
        os.fsync(fh.fileno())


def _environment(out: Path, device: str) -> None:
    import torch

    from perfmodel.validation.measure_env import environment

    env: dict[str, Any] = dict(environment(torch, device))
    env["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
    if device != "cuda":
        (out / "environment.json").write_text(json.dumps(env, indent=1) + "\n")
        return
    env["multiprocessors"] = torch.cuda.get_device_properties(0).multi_processor_count
    q = "name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,memory.total,pstate"
    smi = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv"],
                         capture_output=True, text=True, check=False)
    env["nvidia_smi"] = smi.stdout.strip()
    (out / "environment.json").write_text(json.dumps(env, indent=1) + "\n")


def _label(hardware: str, device_name: str) -> str:
    """The profile a row is written under: the plan's, when its GPU is the one that ran."""
    from perfmodel.hardware import load_hardware

    return hardware if load_hardware(hardware).device.name == device_name else "unspecified"


def run_plan(plan: list[dict[str, Any]], out: Path, budget_s: float, done: set[str], device: str) -> None:
    import torch

    from perfmodel.validation.measure import measure

    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    _environment(out, device)
    ran = skipped = 0
    for r in plan:
        if r["key"] in done:
            continue
        left = budget_s - (time.monotonic() - t0)
        if r["estimate_s"] > left:
            skipped += 1
            continue
        start = time.monotonic()
        try:
            m = measure(r["model"], r["batch"], r["precision"], r["steps"], device, None, r["warmup"],
                        r["layers"], memory_format=r["memory_format"])
        except Exception as e:  # out of memory, an unsupported kernel: note it and go on
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            _append(out / "failed.csv", {"key": r["key"], "error": first})
            if device == "cuda":
                torch.cuda.empty_cache()
            continue
        row = m.measurement_row(_label(r["hardware"], m.device_name))
        row.update(key=r["key"], predicted_step_time_s=r["predicted_step_s"],
                   wall_s=round(time.monotonic() - start, 2), estimate_s=round(r["estimate_s"], 2))
        _append(out / "steps.csv", row)
        for i, lt in enumerate(m.layers):
            _append(out / "layers.csv", {"key": r["key"], "index": i, "layer": lt.name, "kind": lt.kind,
                                         "forward_s": lt.forward_s, "backward_s": lt.backward_s})
        ran += 1
        del m
        if device == "cuda":
            torch.cuda.empty_cache()
    print(f"ran {ran}, left for lack of time {skipped}, in {time.monotonic() - t0:.0f} s", flush=True)


def _failed(out: Path, key: str, e: Exception, device: str) -> int:
    """Say that run ``key`` failed with ``e``, keep it in ``DIR/failed.csv``, free the GPU's cache; 1."""
    import torch

    first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    _append(out / "failed.csv", {"key": key, "error": first})
    print(f"{key}: failed: {first}", flush=True)
    if device == "cuda":
        torch.cuda.empty_cache()
    return 1


def run_profiles(profiles: tuple[tuple[str, str, str], ...], batch: int, out: Path, device: str) -> int:
    """Profile each (model, precision, format) of ``profiles`` at ``batch`` (module docstring);
    the number that failed, each also printed and kept in ``DIR/failed.csv``."""

    from perfmodel.validation.kernel_profile import class_totals, profile_step

    out.mkdir(parents=True, exist_ok=True)
    _environment(out, device)
    failed = 0
    for model, precision, fmt in profiles:
        key = f"{model}/{batch}/{precision}/{fmt}/profile"
        try:
            rows = profile_step(model, batch, precision, fmt, device)
        except Exception as e:  # out of memory: say so, note it and go on
            failed += _failed(out, key, e, device)
            continue
        for r in rows:
            _append(out / "kernels.csv", {"key": key, "kernel": r.name, "class": r.kind,
                                          "calls_per_step": r.calls, "seconds_per_step": r.seconds})
        for kind, (sec, share) in class_totals(rows).items():
            _append(out / "kernel_classes.csv", {"key": key, "class": kind, "seconds_per_step": sec,
                                                 "share": round(share, 6)})
        print(f"{key}: {sum(r.seconds for r in rows) * 1e3:.1f} ms of kernels per step", flush=True)
    return failed


def time_instance_norm(n: int, c: int, edge: int, device: str, reps: int = 10) -> dict[str, Any]:
    """Median forward and backward seconds of ``nn.InstanceNorm3d(c, affine=True)`` on an fp32
    ``(n, c, edge, edge, edge)`` tensor, and the names of the kernels one call runs (GPU only)."""
    import torch

    from perfmodel.validation.kernel_profile import classify, kernel_events
    from perfmodel.validation.measure_timing import make_timer, median_time

    dev = torch.device(device)
    norm = torch.nn.InstanceNorm3d(c, affine=True).to(dev).train()
    x = torch.randn(n, c, edge, edge, edge, device=dev, requires_grad=True)
    dy = torch.randn_like(x)
    timer = make_timer(torch, device)
    fwd_s, _ = median_time(timer, lambda: norm(x), 3, reps)
    y = norm(x)
    bwd_s, _ = median_time(timer, lambda: torch.autograd.grad(y, (x, norm.weight, norm.bias), dy,
                                                              retain_graph=True), 3, reps)
    kernels = ""
    if device == "cuda":
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.autograd.grad(norm(x), (x, norm.weight, norm.bias), dy)
            torch.cuda.synchronize()
        names = sorted({(name, classify(name)) for name, _ in kernel_events(torch, prof, device)})
        kernels = "; ".join(f"{name} [{kind}]" for name, kind in names)[:2000]
    return {"n": n, "c": c, "edge": edge, "precision": "fp32", "memory_format": "ncdhw",
            "forward_s": fwd_s, "backward_s": bwd_s, "kernels": kernels}


def run_norms(levels: tuple[tuple[int, int], ...], batches: tuple[int, ...], out: Path, device: str) -> int:
    """Time the instance norm at every level and batch into ``DIR/norms.csv``; the number that
    failed (out of memory), each printed and kept in ``DIR/failed.csv``."""

    out.mkdir(parents=True, exist_ok=True)
    _environment(out, device)
    failed = 0
    for c, edge in levels:
        for n in batches:
            key = f"instance_norm3d/{n}x{c}x{edge}^3/fp32"
            try:
                row = time_instance_norm(n, c, edge, device)
            except Exception as e:  # out of memory: say so, note it and go on
                failed += _failed(out, key, e, device)
                continue
            _append(out / "norms.csv", {"key": key, **row})
            print(f"{key}: forward {row['forward_s'] * 1e3:.3f} ms, backward {row['backward_s'] * 1e3:.3f} ms",
                  flush=True)
    return failed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--hardware", default="h100-80gb-dgx")
    p.add_argument("--models", nargs="*", default=None)
    p.add_argument("-o", "--output", type=Path, required=True)
    r = sub.add_parser("run")
    r.add_argument("plan", type=Path)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--budget-s", type=float, default=540.0)
    r.add_argument("--done", type=Path, nargs="*", default=[])
    r.add_argument("--device", default="cuda", help="cuda, or cpu to try the script")
    r.add_argument("--only", nargs="*", default=None, help="run only these models")
    f = sub.add_parser("profile")
    f.add_argument("--out", type=Path, required=True)
    f.add_argument("--batch", type=int, default=128)
    f.add_argument("--device", default="cuda", help="cuda, or cpu to try the script (fp32 only)")
    nm = sub.add_parser("norms")
    nm.add_argument("--out", type=Path, required=True)
    nm.add_argument("--device", default="cuda", help="cuda, or cpu to try the script (small volumes)")
    a = ap.parse_args()
    if a.cmd == "norms":
        gpu = a.device == "cuda"
        levels = NORM_LEVELS if gpu else tuple((c // 16, e // 16 or 2) for c, e in NORM_LEVELS[:2])
        sys.exit(1 if run_norms(levels, NORM_BATCHES, a.out, a.device) else 0)
    if a.cmd == "profile":
        if a.batch < 1:
            ap.error(f"--batch must be >= 1, got {a.batch}")
        gpu = a.device == "cuda"
        failed = run_profiles(PROFILES if gpu else tuple((m, "fp32", fmt) for m, _, fmt in PROFILES[:2]),
                              a.batch, a.out, a.device)
        sys.exit(1 if failed else 0)
    if a.cmd == "plan":
        runs = make_plan(a.hardware, a.models or model_names())
        a.output.parent.mkdir(parents=True, exist_ok=True)
        a.output.write_text(json.dumps(runs, indent=0) + "\n")
        total = sum(x["estimate_s"] for x in runs)
        print(f"{len(runs)} runs, estimated {total:.0f} s")
        return
    done: set[str] = set()
    for f in a.done:
        with f.open() as fh:
            done |= {row["key"] for row in csv.DictReader(fh)}
    plan = [x for x in json.loads(a.plan.read_text()) if a.only is None or x["model"] in a.only]
    if a.device != "cuda":
        plan = [x for x in plan if x["precision"] in ("fp32", "bf16")]
    run_plan(plan, a.out, a.budget_s, done, a.device)


if __name__ == "__main__":
    main()

"""Dump predict's step time, breakdown and memory for a broad grid of plans to JSON.

A refactoring of the pricing path must leave these figures unchanged (or explain each
change): run it before, keep the file outside the repository, run it after and compare::

    python tools/pricing_snapshot.py /tmp/before.json
    python tools/pricing_snapshot.py /tmp/after.json --diff /tmp/before.json

``--amp-runtime NAME`` prices the amp plans under another mixed-precision runtime
(``pytorch-half``: a 16-bit model); the fp32 plans ignore it.

Plans that the model refuses (too few links, spatial on a 1-D input, ...) are recorded
with their error message, so a change in what is refused shows up too.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from perfmodel.errors import PerfmodelError
from perfmodel.strategies import predict
from perfmodel.strategies.amp_runtime import AMP_RUNTIMES, DEFAULT_AMP_RUNTIME

#: (model, image size or None, plans); small and mid-sized zoo networks, each kind of plan.
_IMAGE = ("sp=2x2,dp=2", "sp=4,dp=2", "sp=2x2,pp=2", "sp=2x2,dp=2,decomp=auto", "sp=2x2,pp=2,recompute=true")
_COMMON = (
    "dp=8", "dp=8,comm=tree", "dp=8,comm=hierarchical", "dp=8,comm=ps-central", "dp=8,comm=ps-sharded",
    "pp=2,dp=4,mb=4", "pp=4,dp=2,mb=8", "pp=4,dp=2,mb=8,schedule=1f1b", "pp=2,dp=4,mb=4,recompute=true",
    "filter=4,dp=2", "channel=4,dp=2", "filter=8", "mb=2,dp=8",
)
MODELS: tuple[tuple[str, int | None, tuple[str, ...]], ...] = (
    ("tiny_cnn", None, ("dp=8", "pp=2,dp=4,mb=4", "mp=2,dp=4,mb=4", "filter=2,dp=4", "sp=2x2,dp=2")),
    ("alexnet", None, _COMMON + _IMAGE + ("mp=2,dp=4,mb=4",)),
    ("resnet18", None, _COMMON + _IMAGE),
    ("resnet50", None, _COMMON + _IMAGE + ("mp=4,dp=2,mb=8", "sp=4,dp=2,decomp=auto")),
    ("resnet50", 512, ("sp=2x2,pp=2", "sp=2x2,pp=2,mb=4", "sp=2x2,dp=2", "dp=8")),
    ("vgg16", None, _COMMON + _IMAGE + ("mp=4,dp=2,mb=8",)),
    ("googlenet", None, _COMMON + ("sp=2x2,dp=2",)),
    ("mobilenet_v2", None, _COMMON),
    ("squeezenet1_1", None, _COMMON + _IMAGE),
    ("efficientnet_b0", None, ("dp=8", "pp=2,dp=4,mb=4", "filter=4,dp=2", "sp=2x2,dp=2")),
    ("unet", None, ("dp=8", "pp=2,dp=4,mb=4", "sp=2x2,dp=2", "sp=2x2,pp=2", "channel=4,dp=2")),
    ("cosmoflow", 128, ("dp=8", "sp=2x2x1,pp=2", "sp=2x2x2", "sp=2x2x1,dp=2", "pp=2,dp=4,mb=4", "filter=4,dp=2")),
    ("cosmoflow", None, ("sp=2x2x1,pp=2", "sp=2x2x2", "pp=2,sp=2x2x1,mb=2")),
)
PROFILES = ("a100-80gb-dgx", "v100-16gb-dgx1", "h100-80gb-dgx")
PRECISIONS = ("amp", "fp32")
BATCH_PER_GPU = 8


def snapshot(amp_runtime: str = DEFAULT_AMP_RUNTIME) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model, size, plans in MODELS:
        for hw in PROFILES:
            for precision in PRECISIONS:
                for spec in plans:
                    key = f"{model}@{size or 'default'} {hw} {precision} {spec}"
                    try:
                        p = predict(model, 8, spec, hardware=hw, precision=precision,
                                    global_batch=BATCH_PER_GPU * 8, image_size=size, amp_runtime=amp_runtime)
                    except PerfmodelError as exc:
                        out[key] = {"error": str(exc)}
                        continue
                    out[key] = {
                        "iteration_time_s": p.iteration_time_s,
                        "speedup_vs_1gpu": p.speedup_vs_1gpu,
                        "breakdown": p.breakdown,
                        "memory": p.memory,
                    }
    return out


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            flat.update(_flat(v, f"{prefix}{k}."))
        else:
            flat[f"{prefix}{k}"] = v
    return flat


def diff(new: dict[str, Any], old: dict[str, Any], rel: float = 1e-9) -> list[str]:
    """Lines naming every figure that differs by more than ``rel`` (relative)."""
    lines = []
    for key in sorted(set(old) | set(new)):
        a, b = _flat(old.get(key, {})), _flat(new.get(key, {}))
        for name in sorted(set(a) | set(b)):
            x, y = a.get(name), b.get(name)
            if isinstance(x, float) and isinstance(y, float):
                if math.isclose(x, y, rel_tol=rel, abs_tol=1e-15):
                    continue
                change = f"{(y - x) / x:+.2%}" if x else "from 0"
                lines.append(f"{key} | {name}: {x:.6g} -> {y:.6g} ({change})")
            elif x != y:
                lines.append(f"{key} | {name}: {x!r} -> {y!r}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="JSON file to write")
    ap.add_argument("--diff", metavar="OLD", help="an earlier snapshot to compare with")
    ap.add_argument("--amp-runtime", default=DEFAULT_AMP_RUNTIME, choices=list(AMP_RUNTIMES),
                    help="mixed-precision runtime of the amp plans (default %(default)s)")
    args = ap.parse_args()
    snap = snapshot(args.amp_runtime)
    with open(args.out, "w") as fh:
        json.dump(snap, fh, indent=1, sort_keys=True)
    n_err = sum(1 for v in snap.values() if "error" in v)
    print(f"{len(snap)} plans ({n_err} refused) -> {args.out}")
    if args.diff:
        with open(args.diff) as fh:
            lines = diff(snap, json.load(fh))
        print("\n".join(lines) if lines else "no differences")
        sys.exit(1 if lines else 0)


if __name__ == "__main__":
    main()

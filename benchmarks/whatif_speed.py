"""How long re-evaluating one plan after a hardware what-if takes, against a full plan search.

Run from the repository root: ``python benchmarks/whatif_speed.py [--points 1000]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from perfmodel.api import available_kinds, sweep  # noqa: E402
from perfmodel.search import plan  # noqa: E402
from perfmodel.strategies.context import clear_contexts  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--points", type=int, default=1000, help="what-if points per sweep")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--gpus", type=int, default=64)
    ap.add_argument("--hardware", default="a100-80gb-dgx")
    args = ap.parse_args(argv)
    n = args.points
    scales = list(np.geomspace(0.1, 10.0, n))
    sweep(
        args.model, args.gpus, "dp", args.hardware, what_if={"inter_bandwidth_scale": scales[:5]}
    )  # warm-up
    clear_contexts()  # time the search's pricing, not the warm-up's memo
    t0 = time.perf_counter()
    plan(args.model, args.gpus, args.hardware, top=5, kinds=available_kinds())
    t_plan = time.perf_counter() - t0
    print(
        f"{args.model} on {args.gpus} x {args.hardware}: "
        f"one full plan() search {t_plan * 1e3:.1f} ms"
    )
    print(
        f"{'plan':<22} {'what-if axis':<24} {'points':>6} {'ms_per_point':>13} "
        f"{'plan_search/point_x':>20}"
    )
    cases = [
        ("dp", "inter_bandwidth_scale", scales),
        ("pp=4,mb=8", "inter_bandwidth_scale", scales),
        ("pp=4,mb=8", "peak_scale", scales),
        (f"sp=2x2,dp={args.gpus // 4}", "intra_bandwidth_scale", scales),
    ]
    for spec, axis, values in cases:
        clear_contexts()
        t0 = time.perf_counter()
        df = sweep(args.model, args.gpus, spec, args.hardware, what_if={axis: values})
        dt = (time.perf_counter() - t0) / len(values)
        bad = int(df["step_s"].isna().sum())
        note = f"  ({bad} points could not run)" if bad else ""
        print(
            f"{spec:<22} {axis:<24} {len(values):>6} {dt * 1e3:>13.3f} {t_plan / dt:>20.0f}{note}"
        )


if __name__ == "__main__":
    main()

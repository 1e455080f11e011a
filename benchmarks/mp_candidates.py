"""Which candidate partition each ``mp=K`` plan of the zoo runs, and what each candidate prices at.

Run from the repository root::

    python benchmarks/mp_candidates.py [--hardware a100-80gb-dgx] [--precision amp] [--models a,b]

For every zoo model (or ``--models``) at global batches 32 and 256, split over K = 2, 4, 8 GPUs
as ``mp=K,mb=K`` (one replica, K micro-batches of ``B/K`` samples, the search's first
micro-batch count), it prints each candidate partition's predicted step (``balanced``: KaHyPar
at the micro-batch, what the plan ran before it chose; ``weighted_at_32``: KaHyPar at 32
samples, the rule before that; ``contiguous``: the pipeline cut; ``-`` where a candidate has
the same parts as an earlier one), the one chosen and its gain over ``balanced``. It counts
the plans where ``balanced`` was slower than ``weighted_at_32`` (the regressions of weighting
at the micro-batch) and checks that no chosen step is slower than a candidate's.
Assumptions: ``perfmodel predict``'s defaults (SGD with momentum, cuDNN 9, NCHW), KaHyPar at
layer granularity (epsilon 0.03, seed 42).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfmodel.errors import PerfmodelError  # noqa: E402
from perfmodel.network import model_names  # noqa: E402
from perfmodel.strategies import predict  # noqa: E402

__all__ = ["main", "rows"]

BATCHES = (32, 256)
PARTS = (2, 4, 8)
NAMES = ("balanced", "weighted_at_32", "contiguous")


def rows(models: list[str], hardware: str, precision: str) -> list[tuple[str, int, int, dict[str, float], str, float]]:
    """(model, global batch, K, step seconds per candidate, chosen, chosen step seconds) per plan."""
    out = []
    for model in models:
        for batch in BATCHES:
            for k in PARTS:
                try:
                    p = predict(model, k, f"mp={k},mb={k}", hardware, precision, global_batch=batch)
                except PerfmodelError:
                    continue
                choice = p.details["partition_choice"]
                steps = {c["name"]: float(c["step_s"]) for c in choice["candidates"]}
                out.append((model, batch, k, steps, str(choice["chosen"]), p.iteration_time_s))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="a100-80gb-dgx")
    ap.add_argument("--precision", default="amp")
    ap.add_argument("--models", default="", help="comma-separated (default: the whole zoo)")
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m] or [m for m in model_names() if m != "tiny_cnn"]
    print(f"mp=K,mb=K on {args.hardware}, {args.precision}; step (ms) per candidate partition")
    print(f"{'model':<20}{'batch':>6}{'K':>3}" + "".join(f"{n:>16}" for n in NAMES) + f"{'chosen':>16}{'gain %':>8}")
    got = rows(models, args.hardware, args.precision)
    regressed = faster = worse = 0
    for model, batch, k, steps, chosen, step in got:
        cells = "".join(f"{1e3 * steps[n]:>16.2f}" if n in steps else f"{'-':>16}" for n in NAMES)
        gain = 100 * (1 - step / steps["balanced"])
        print(f"{model:<20}{batch:>6}{k:>3}{cells}{chosen:>16}{gain:>8.1f}")
        regressed += steps["balanced"] > steps.get("weighted_at_32", steps["balanced"])
        faster += step < steps["balanced"]
        worse += any(step > t * (1 + 1e-12) for t in steps.values())
    print(f"{len(got)} plans; balanced slower than weighted_at_32 in {regressed}; the chosen faster than balanced "
          f"in {faster}; chosen slower than some candidate in {worse}")


if __name__ == "__main__":
    main()

"""How balanced ``mp=K`` plans' parts are at the batch they run, and their predicted step time.

Run from the repository root::

    python benchmarks/mp_balance.py [--hardware a100-80gb-dgx] [--precision amp]

For resnet50, vgg16, inception_v3 and densenet161 at global batches 32 and 256, split over
K = 2, 4, 8 GPUs as ``mp=K,mb=K`` (one replica, K micro-batches of ``B/K`` samples, the search's
first micro-batch count), it prints the micro-batch each part runs (``m``, also the batch the
partitioner weights the layers at), the slowest part's forward+backward seconds over the mean
part's at that micro-batch on the profile priced (``slowest/mean``, from ``predict``'s
``details.parts``) and the predicted step time. A bad ``--hardware`` or ``--precision`` prints
perfmodel's one-line error and exits with its code. Assumptions: ``perfmodel predict``'s defaults
(SGD with momentum, cuDNN 9, NCHW), KaHyPar's partition at layer granularity (epsilon 0.03, seed 42).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfmodel.errors import PerfmodelError  # noqa: E402
from perfmodel.strategies import predict  # noqa: E402

__all__ = ["main", "rows"]

MODELS = ("resnet50", "vgg16", "inception_v3", "densenet161")
BATCHES = (32, 256)
PARTS = (2, 4, 8)


def rows(hardware: str, precision: str) -> list[tuple[str, int, int, int, float, float]]:
    """(model, global batch, K, micro-batch, slowest / mean part seconds, step seconds) per plan."""
    out = []
    for model in MODELS:
        for batch in BATCHES:
            for k in PARTS:
                p = predict(model, k, f"mp={k},mb={k}", hardware, precision, global_batch=batch)
                loads = [d["forward_s"] + d["backward_s"] for d in p.details["parts"]]
                out.append((model, batch, k, int(p.details["micro_batch"]), max(loads) / (sum(loads) / k),
                            p.iteration_time_s))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="a100-80gb-dgx")
    ap.add_argument("--precision", default="amp")
    args = ap.parse_args(argv)
    try:
        table = rows(args.hardware, args.precision)
    except PerfmodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"mp=K,mb=K on {args.hardware}, {args.precision}; slowest/mean: part compute at the micro-batch")
    print(f"{'model':<13}{'batch':>6}{'K':>3}{'m':>5}{'slowest/mean':>14}{'step (ms)':>11}")
    for model, batch, k, m, ratio, step in table:
        print(f"{model:<13}{batch:>6}{k:>3}{m:>5}{ratio:>14.3f}{step * 1e3:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

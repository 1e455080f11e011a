"""Hypergraph partition vs contiguous split vs data parallelism: volume and imbalance table.

Run from the repository root::

    python benchmarks/partition_report.py [--precision amp] [--granularity layer channel]

For vgg16, resnet50 and googlenet split over K = 2, 4, 8 devices it prints, at a global
batch of 256 and at 32 samples per device (global batch 32 x K), the bytes all devices send
per training step (GB = 1e9 B) and the load imbalance (max / mean - 1) of KaHyPar's
partition, of the best contiguous (pipeline) split and of data parallelism's ring
allreduce of the fp32 gradients on the same K devices; then the largest global batch at
which the partition sends at least 93% less than data parallelism (the thesis's claim).
``kahypar_ms`` is KaHyPar's own time (empty when the partition came from the cache);
``report_ms`` the whole report, hypergraph construction included.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfmodel.partition import partition_report  # noqa: E402
from perfmodel.partition.compare import DP_DEFINITION, VOLUME_DEFINITION  # noqa: E402
from perfmodel.report import render_frame  # noqa: E402
from perfmodel.units import GB  # noqa: E402

__all__ = ["main", "rows"]

MODELS = ("vgg16", "resnet50", "googlenet")
PARTS = (2, 4, 8)
CLAIM = 0.93


def rows(precision: str, granularities: list[str], hardware: str) -> list[dict[str, object]]:
    """One row per (model, granularity, K, batch setting)."""
    out: list[dict[str, object]] = []
    for model in MODELS:
        for gran in granularities:
            for k in PARTS:
                for setting, batch in (("256 global", 256), ("32 per device", 32 * k)):
                    t0 = time.perf_counter()
                    r = partition_report(
                        model, k, gran, global_batch=batch, hardware=hardware, precision=precision
                    )
                    dt = time.perf_counter() - t0
                    c = r.contiguous
                    dp = r.data_parallel_volume_bytes
                    out.append(
                        {
                            "model": model,
                            "granularity": gran,
                            "K": k,
                            "batch": setting,
                            "global_batch": batch,
                            "hypergraph_GB": r.hypergraph.comm_volume_bytes / GB,
                            "hypergraph_imbalance_%": 100 * (r.hypergraph.imbalance or 0.0),
                            "contiguous_GB": None if c is None else c.comm_volume_bytes / GB,
                            "contiguous_imbalance_%": None
                            if c is None
                            else 100 * (c.imbalance or 0.0),
                            "data_parallel_GB": dp / GB,
                            "less_than_dp_%": 100 * r.reduction_vs_data_parallel,
                            "less_than_contiguous_%": None
                            if c is None
                            else 100 * (1 - r.hypergraph.comm_volume_bytes / c.comm_volume_bytes),
                            "batch_for_93%_less": math.floor((1 - CLAIM) * r.break_even_batch),
                            "break_even_batch": r.break_even_batch,
                            "bound_met": r.balanced,
                            "acyclic": r.acyclic,
                            "kahypar_ms": r.partition_seconds * 1e3
                            if r.partition_seconds > 0
                            else None,
                            "report_ms": dt * 1e3,
                        }
                    )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--precision", default="amp", help="activation precision (amp: 2-byte activations)"
    )
    ap.add_argument(
        "--granularity", nargs="+", default=["layer", "channel"], choices=["layer", "channel"]
    )
    ap.add_argument("--hardware", default="a100-80gb-dgx")
    ap.add_argument("--format", default="table", choices=["table", "csv"])
    args = ap.parse_args(argv)
    table = pd.DataFrame(rows(args.precision, args.granularity, args.hardware))
    if args.format == "csv":
        print(render_frame(table, "csv"))
        return
    print(f"precision {args.precision}, hardware {args.hardware}, KaHyPar km1, epsilon 0.03")
    print(f"volume: {VOLUME_DEFINITION}")
    print(f"data parallel: {DP_DEFINITION}")
    print(
        "batch_for_93%_less: the largest global batch at which the partition sends >= 93% less "
        "than data parallelism (activation volume grows with the batch, gradients do not)"
    )
    print()
    print(render_frame(table.drop(columns=["global_batch"]), floatfmt="{:,.2f}"))


if __name__ == "__main__":
    main()

"""Brute-force check of automatic pipeline splits: every contiguous K-stage split priced.

For each case (model, K stages, profile, precision, mixed-precision runtime) the plan
``pp=K,dp=2,mb=2K`` on ``2K`` GPUs (8 samples per GPU) is priced once with its automatic
split and once per contiguous split of the model's chain links (``balance=a:b:...``), through
the same :func:`perfmodel.strategies.compose.price` that ``predict`` calls. The oracle is the
fastest split that fits in memory (the fastest of all if none fits, as the search's rule); a
case misses when the automatic split is slower than it::

    python tools/split_oracle.py                      # default models, K = 2, 3, 4
    python tools/split_oracle.py --models mobilenet_v2 --ks 2

Cases with more than ``--max-splits`` splits are skipped (counted in the summary).
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys

from perfmodel.hardware import load_hardware
from perfmodel.network.zoo import get_model
from perfmodel.strategies.compose import price
from perfmodel.strategies.context import context
from perfmodel.strategies.spec import parse_strategy

MODELS = ("alexnet", "resnet18", "resnet50", "vgg16", "mobilenet_v2", "squeezenet1_1", "googlenet", "unet",
          "efficientnet_b0", "cosmoflow")
PROFILES = ("a100-80gb-dgx", "v100-16gb-dgx1", "h100-80gb-dgx")
RUNS = (("fp32", "pytorch-autocast"), ("amp", "pytorch-autocast"), ("amp", "pytorch-half"))
BATCH_PER_GPU = 8


def splits(n_links: int, k: int) -> list[tuple[int, ...]]:
    """Every composition of ``n_links`` into ``k`` positive parts (links per stage)."""
    out = []
    for cuts in itertools.combinations(range(1, n_links), k - 1):
        bounds = (0, *cuts, n_links)
        out.append(tuple(bounds[i + 1] - bounds[i] for i in range(k)))
    return out


def check(model: str, k: int, hw_name: str, precision: str, runtime: str, max_splits: int) -> dict[str, object] | None:
    """The automatic split's step against the brute-force optimum (None: too many splits)."""
    net = get_model(model)
    every = splits(len(net.links), k)
    if not every or len(every) > max_splits:
        return None
    hw = load_hardware(hw_name)
    ctx = context(net, hw, precision, "sgd", amp_runtime=runtime)
    spec = f"pp={k},dp=2,mb={2 * k}"
    gpus, batch = 2 * k, BATCH_PER_GPU * 2 * k
    auto = price(ctx, parse_strategy(spec, gpus), batch)
    cap = hw.device.memory_bytes
    priced = []
    for bal in every:
        p = price(ctx, parse_strategy(f"{spec},balance={':'.join(map(str, bal))}", gpus), batch)
        priced.append((sum(p.memory.values()) > cap, p.time_s, bal))
    _, best_s, best_bal = min(priced)
    return {"case": f"{model} pp={k} {hw_name} {precision}/{runtime}", "auto_s": auto.time_s,
            "auto_balance": tuple(auto.details["balance"]), "best_s": best_s, "best_balance": best_bal,
            "splits": len(every), "gap": auto.time_s / best_s - 1.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--ks", nargs="+", type=int, default=[2, 3, 4])
    ap.add_argument("--max-splits", type=int, default=1000)
    args = ap.parse_args(argv)
    rows, skipped = [], 0
    for model, k, hw_name, (precision, runtime) in itertools.product(args.models, args.ks, PROFILES, RUNS):
        r = check(model, k, hw_name, precision, runtime, args.max_splits)
        if r is None:
            skipped += 1
            continue
        rows.append(r)
        if r["gap"] > 1e-9:  # type: ignore[operator]
            print(f"MISS {r['case']}: auto {r['auto_balance']} {r['auto_s'] * 1e3:.3f} ms, "
                  f"best {r['best_balance']} {r['best_s'] * 1e3:.3f} ms (+{r['gap'] * 100:.2f}%, "
                  f"{r['splits']} splits)")
    gaps = [float(r["gap"]) * 100 for r in rows if float(r["gap"]) > 1e-9]  # type: ignore[arg-type]
    print(f"{len(rows)} cases ({skipped} skipped: more than {args.max_splits} splits), {len(gaps)} miss "
          f"({sum(g > 0.1 for g in gaps)} by more than 0.1%)"
          + (f": gap median {statistics.median(gaps):.2f}%, max {max(gaps):.2f}% (step time, auto over best)"
             if gaps else ""))
    assert all(math.isfinite(float(r["auto_s"])) for r in rows)  # type: ignore[arg-type]
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())

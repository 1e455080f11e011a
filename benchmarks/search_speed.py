"""Search speed: whole-process `perfmodel plan` times, linearity in depth, and DP vs brute force.

Prints figures; asserts nothing (timed assertions flake). Run: python benchmarks/search_speed.py
"""

from __future__ import annotations

import itertools
import math
import random
import subprocess
import sys
import time

from perfmodel.network import NetBuilder
from perfmodel.partition.stages import brute_force_partition, partition_min_max
from perfmodel.search import plan
from perfmodel.strategies.context import clear_contexts
from perfmodel.strategies.spatial import choose_decomposition


def whole_process(args: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "perfmodel", *args], check=True, capture_output=True)
    return time.perf_counter() - t


def chain(n_layers: int):
    b = NetBuilder(f"chain{n_layers}", (16, 32, 32))
    x = "input"
    for i in range(n_layers):
        with b.block(f"l{i}"):
            x = b.act(b.conv(x, 16, 3, padding=1, bias=False), "relu", inplace=True)
    return b.build()


def main() -> None:
    print("whole process (import + model + search + print), seconds:")
    whole = {}
    for args in (["plan", "resnet50", "--gpus", "8"], ["plan", "resnet50", "--gpus", "1024"],
                 ["plan", "vgg16", "--gpus", "64"], ["plan", "resnet50", "--gpus", "64"],
                 ["plan", "resnet152", "--gpus", "64"]):
        whole[" ".join(args)] = min(whole_process(args) for _ in range(2))
        print(f"  perfmodel {' '.join(args):<32} {whole[' '.join(args)]:6.2f}")
    print(f"  ratio resnet152 / resnet50 at 64 GPUs, whole process (all kinds, hypergraph mp included): "
          f"{whole['plan resnet152 --gpus 64'] / whole['plan resnet50 --gpus 64']:.2f}")
    print("search time in depth (64 GPUs, in-process, excluding hypergraph mp):")
    kinds = ("dp", "ps", "sp", "pp", "hybrid", "filter", "channel")
    times = {}
    for m in ("resnet50", "resnet152"):
        plan(m, 64, kinds=kinds)  # warm the module caches (models, profiles, reference splits)
        clear_contexts()  # but price every plan again: the contexts keep the plans priced
        t = time.perf_counter()
        r = plan(m, 64, kinds=kinds)
        times[m] = time.perf_counter() - t
        print(f"  {m:<10} {times[m]:6.3f} s  ({r.candidates} candidates)")
    print(f"  ratio resnet152 / resnet50: {times['resnet152'] / times['resnet50']:.2f} (layers 515 / 175 = 2.94)")
    for n in (100, 1000):
        net = chain(n)
        t = time.perf_counter()
        r = plan(net, 8, kinds=("dp", "sp", "pp", "hybrid"))
        print(f"  synthetic chain of {n:>4} conv layers: {time.perf_counter() - t:6.3f} s ({r.candidates} candidates)")
    print("exact DPs against brute force on the same small instance (14 links):")
    rnd = random.Random(0)
    n = 14
    costs = [rnd.uniform(0.1, 1) for _ in range(n)]
    t = time.perf_counter()
    opt = brute_force_partition(costs, 4)
    t_bf = time.perf_counter() - t
    t = time.perf_counter()
    runs = partition_min_max(costs, 4)
    t_dp = time.perf_counter() - t
    print(f"  stage partition: brute force {t_bf * 1e3:.2f} ms, bisection {t_dp * 1e3:.3f} ms, "
          f"ratio {t_bf / t_dp:.0f}x, same optimum: {math.isclose(opt, max(_runs_sums(costs, runs)))}")
    net = chain(n)
    sp_c = [rnd.uniform(0, 1) for _ in range(n)]
    sa_c = [rnd.uniform(0, 1) for _ in range(n)]
    sw = [rnd.uniform(0, 0.3) for _ in range(n)]
    ok = [True] * n
    t = time.perf_counter()
    best = min(sum(sp_c[i] if c else sa_c[i] for i, c in enumerate(combo))
               + sum(sw[i] for i in range(1, n) if combo[i] != combo[i - 1])
               for combo in itertools.product((False, True), repeat=n))
    t_bf = time.perf_counter() - t
    t = time.perf_counter()
    _, total = choose_decomposition(net, sp_c, sa_c, ok, sw)
    t_dp = time.perf_counter() - t
    print(f"  spatial/sample chain DP: brute force {t_bf * 1e3:.1f} ms, DP {t_dp * 1e3:.3f} ms, "
          f"ratio {t_bf / t_dp:.0f}x, same optimum: {math.isclose(best, total)}")


def _runs_sums(costs: list[float], runs: tuple[int, ...]) -> list[float]:
    out, i = [], 0
    for r in runs:
        out.append(sum(costs[i:i + r]))
        i += r
    return out


if __name__ == "__main__":
    main()

"""Matrix-multiply FLOPs the kernel model leaves unpriced, per network and layer kind.

Usage: ``python tools/matmul_gaps.py [MODEL ...]`` (default: every zoo model, plus the ViT-B/16-sized
networks of ``tests/torch_nets.py`` where torch is installed).

For every layer of a kind with matrix-multiply FLOPs (``MATMUL_KINDS``) this compares the forward
matmul FLOPs per sample that :mod:`perfmodel.network.counts` counts with the direct FLOPs of the
forward GEMM kernel :mod:`perfmodel.cost.kernels` prices (``2 x products x m x n x k``), and prints
each network and kind where they differ by more than 0.1%, with the kind's share of the network's
matmul FLOPs. No output rows: every counted matmul FLOP is priced by a GEMM of those FLOPs.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from perfmodel.cost.kernels import network_kernels
from perfmodel.network import compile_counts
from perfmodel.network.graph import Network
from perfmodel.network.layers import MATMUL_KINDS
from perfmodel.network.zoo import get_model, model_names


def _networks(names: list[str]) -> Iterator[tuple[str, Network]]:
    for name in names or model_names():
        yield name, get_model(name)
    if names:
        return
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from torch_nets import ViT  # noqa: PLC0415  (optional: needs torch)

        from perfmodel.network.importers import import_module  # noqa: PLC0415
    except ImportError:
        return
    for sdpa in (False, True):
        yield f"vit-b16{'-sdpa' if sdpa else ''}", import_module(lambda s=sdpa: ViT(224, 16, 768, 12, 12, sdpa=s),
                                                                    "vit", (3, 224, 224))


def gaps(net: Network) -> dict[str, tuple[float, float, float]]:
    """Kind -> (counted forward matmul FLOPs per sample, priced forward GEMM FLOPs, share of the
    network's counted matmul FLOPs) for the kinds where the two differ."""
    counted = np.asarray(compile_counts(net).evaluate(1.0)["fwd_matmul_flops"], dtype=float)
    lk = network_kernels(net)
    products = np.where(lk.gemm_batch > 0, lk.gemm_batch, lk.groups)
    priced = 2 * products * lk.m["fwd"] * lk.n["fwd"] * lk.k["fwd"]
    by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for i, layer in enumerate(net.layers):
        if layer.kind in MATMUL_KINDS and layer.kind != "conv_transpose":  # its forward is a zero-inserted dgrad
            by[layer.kind][0] += counted[i]
            by[layer.kind][1] += priced[i]
    total = max(counted.sum(), 1.0)
    return {k: (c, p, c / total) for k, (c, p) in by.items() if abs(p - c) > 1e-3 * max(c, 1.0)}


def main(argv: list[str]) -> int:
    print(f"{'network':24s} {'kind':10s} {'counted GFLOP':>14s} {'priced GFLOP':>13s} {'share %':>8s}")
    for name, net in _networks(argv):
        for kind, (c, p, share) in gaps(net).items():
            print(f"{name:24s} {kind:10s} {c / 1e9:14.3f} {p / 1e9:13.3f} {100 * share:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

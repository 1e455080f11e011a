"""The seeds' claims (SOURCES.md) against perfmodel: the figures of README's table.

Run from the repository root: python benchmarks/seed_claims.py. Prints, for each claim, what
perfmodel predicts with the plans named below (every figure is a `perfmodel predict` or
`perfmodel plan` one; the commands are printed beside them). Asserts nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perfmodel.search import plan  # noqa: E402
from perfmodel.strategies import predict  # noqa: E402

__all__ = ["gropipe", "slampa", "dryden", "main"]

P40 = "p40-24gb-pcie"  # GroPipe's server: one node of 8 GPUs on PCIe (no NVLink)


def gropipe(batch_per_gpu: int = 32) -> list[str]:
    """Grouped pipeline (the best pp x dp plan with pp > 1) against DDP, torch.nn.DataParallel
    and a central parameter server, 8 P40s, fp32 (claims: +59.6% ResNet-50, +111.2% VGG-16)."""
    out = []
    B = 8 * batch_per_gpu
    for model in ("resnet50", "vgg16"):
        grouped = plan(model, 8, P40, "fp32", B, kinds=("hybrid",), top=20)
        best = next(p for p in grouped.plans if p.strategy.pp > 1)
        t = best.throughput_samples_per_s
        for base in ("dp=8", "dp=8,comm=dataparallel", "dp=8,comm=ps-central", "pp=8,mb=32,recompute=true"):
            b = predict(model, 8, base, P40, "fp32", global_batch=B).throughput_samples_per_s
            out.append(f"gropipe {model} B={B}: {best.strategy.spec()} {t:,.0f}/s vs {base} {b:,.0f}/s: "
                       f"{100 * (t / b - 1):+.0f}%")
    return out


def slampa(gpus: int = 16, hardware: str = "abci-v100-16gb") -> list[str]:
    """Central against sharded parameter server, best and worst bounds (work 2)."""
    out = []
    for model in ("googlenet", "squeezenet1_1", "resnet34"):
        for kind in ("ps-central", "ps-sharded"):
            p = predict(model, gpus, f"dp={gpus},comm={kind}", hardware, "fp32", batch_per_gpu=32)
            ps = p.details["parameter_server"]
            one = p.baseline.throughput_samples_per_s if p.baseline else float("nan")
            B = p.global_batch
            out.append(f"slampa {model} {gpus} x {hardware} {kind}: speedup best "
                       f"{B / ps['best_case_s'] / one:.1f}x, worst {B / ps['worst_case_s'] / one:.1f}x")
    return out


def dryden(model: str = "cosmoflow", B: int = 8) -> list[str]:
    """Strong scaling past the batch: data parallelism stops at B GPUs, spatial groups go on."""
    out = []
    for gpus in (8, 16, 32, 64):
        r = plan(model, gpus, "a100-80gb-dgx", "amp", B, kinds=("dp", "sp", "hybrid"), top=100)
        spatial = [p for p in r.plans if p.strategy.sp_degree > 1 and p.strategy.pp == 1]
        for label, p in (("best", r.plans[0]), ("best spatial", spatial[0] if spatial else None)):
            if p is not None:
                out.append(f"dryden {model} B={B} {gpus} GPUs {label}: {p.strategy.spec()} "
                           f"{p.throughput_samples_per_s:,.0f}/s ({p.speedup_vs_1gpu:.2f}x)")
    return out


def main() -> None:
    for line in gropipe() + gropipe(16) + slampa() + dryden():
        print(line)


if __name__ == "__main__":
    main()

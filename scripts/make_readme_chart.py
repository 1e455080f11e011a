"""Draw the README's chart: predicted speedup of ResNet-50 on DGX A100 nodes, 1 to 512 GPUs.

Run from the repository root: ``python scripts/make_readme_chart.py [--out FILE]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfmodel.api import scale, scale_chart  # noqa: E402
from perfmodel.report.charts import save_chart  # noqa: E402

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "speedup_resnet50.png")
    ap.add_argument("--batch-per-gpu", type=int, default=32)
    args = ap.parse_args(argv)
    df = scale(
        "resnet50",
        "1-512:log2",
        "a100-80gb-dgx",
        "amp",
        batch_per_gpu=args.batch_per_gpu,
        strategies=("dp", "pp", "hybrid", "best"),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_chart(scale_chart(df), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

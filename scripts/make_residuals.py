"""Write perfmodel/data/residuals.json: the validation residuals the error bars are drawn from.

    python scripts/make_residuals.py [--check]

Prices every run of the shipped set, its hold-out and the family set (``perfmodel validate``,
with and without single-GPU calibration), stores ``ln(predicted / measured)`` throughput with
each run's group, the intervals' leave-one-out coverage, and their coverage of the family
hold-out (kept out of the table). Rerun it whenever the cost model or the runs change;
``tests/test_intervals.py`` fails while the shipped file is stale. ``--check`` only compares.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from perfmodel.validation.intervals import residuals_path
from perfmodel.validation.residuals import residual_table


def coverage_markdown(coverage: list[dict]) -> str:
    """The README's table: coverage per level, leaving one run out (all, by calibration) or its table."""
    cell = {(c["left_out"], c["level"], c["runs"]): c for c in coverage if c["grouping"] == "closest"}
    n = {k: cell[("run", 0.8, k)]["tried"] for k in ("all", "uncalibrated", "calibrated")}
    lines = [
        f"| interval level | leave one run out ({n['all']} runs) | uncalibrated ({n['uncalibrated']}) | "
        f"calibrated ({n['calibrated']}) | leave the table out |",
        "|---|---|---|---|---|",
    ]
    for level in sorted({c["level"] for c in coverage}):
        vals = [cell[("run", level, k)]["coverage"] for k in ("all", "uncalibrated", "calibrated")]
        vals.append(cell[("source", level, "all")]["coverage"])
        lines.append(f"| {level:.0%} | " + " | ".join(f"{100 * v:.1f}%" for v in vals) + " |")
    pooled = next(c for c in coverage if c["grouping"] == "pooled")
    lines.append("")
    best = cell[("run", 0.8, "all")]
    lines.append(f"80%, leave one run out: closest group {100 * best['coverage']:.1f}% at median width "
                 f"{best['median_width_ratio']:.2f}x; pooled {100 * pooled['coverage']:.1f}% at "
                 f"{pooled['median_width_ratio']:.2f}x")
    return "\n".join(lines)


def holdout_markdown(coverage: list[dict]) -> str:
    """One line per level: the family hold-out's runs inside their intervals."""
    return "\n".join(
        f"{c['set']}, {c['level']:.0%}: {c['covered']}/{c['tried']} = {100 * c['coverage']:.1f}% inside "
        f"(median width {c['median_width_ratio']:.2f}x)" for c in coverage
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the shipped table differs; write nothing")
    ap.add_argument("--markdown", action="store_true", help="also print the README's coverage table")
    args = ap.parse_args()
    table = residual_table()
    if args.markdown:
        print(coverage_markdown(table["coverage"]))
        print(holdout_markdown(table["holdout_coverage"]))
    text = json.dumps(table, indent=1) + "\n"
    path = residuals_path()
    if args.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        print(f"{path}: {'current' if same else 'STALE (rerun scripts/make_residuals.py)'}")
        sys.exit(0 if same else 1)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    print(f"wrote {path}: {len(table['rows'])} residuals")
    for c in table["coverage"]:
        if c["grouping"] == "closest" and (c["runs"] == "all" or c["level"] == 0.8):
            print(f"  leave-one-{c['left_out']}-out, {c['runs']:>12} runs, level {c['level']:.0%}: "
                  f"{c['covered']}/{c['tried']} = {c['coverage']:.1%}")
    for c in table["holdout_coverage"]:
        print(f"  {c['set']} (not in the table), level {c['level']:.0%}: {c['covered']}/{c['tried']} = "
              f"{c['coverage']:.1%}")


if __name__ == "__main__":
    main()

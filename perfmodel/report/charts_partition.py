"""Chart of a hypergraph partition: part loads and communication volume against the baselines."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..partition.compare import PartitionReport
from ..units import GB

__all__ = ["partition_chart"]


def partition_chart(r: PartitionReport) -> Figure:
    """Two panels: compute per part (ms per step) for the hypergraph and contiguous splits,
    and bytes sent per step (GB, all devices) for them and for data parallelism."""
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    ax_load, ax_vol = fig.subplots(1, 2, width_ratios=[max(2, r.parts), 3])
    x = np.arange(r.parts)
    splits = [("hypergraph (KaHyPar)", r.hypergraph, "tab:blue")]
    if r.contiguous is not None:
        splits.append(("contiguous (pipeline cut)", r.contiguous, "tab:orange"))
    width = 0.8 / len(splits)
    for i, (label, sp, color) in enumerate(splits):
        loads = np.array(sp.part_loads_s) * 1e3
        imb = "" if sp.imbalance is None else f", imbalance {100 * sp.imbalance:.1f}%"
        ax_load.bar(
            x + (i - (len(splits) - 1) / 2) * width,
            loads,
            width,
            label=f"{label}{imb}",
            color=color,
        )
    mean = float(np.mean(r.hypergraph.part_loads_s)) * 1e3
    ax_load.axhline(mean, color="black", linestyle="--", linewidth=1, label="mean load")
    ax_load.set_xticks(x, [str(i) for i in x])
    ax_load.set_xlabel("part (device)")
    ax_load.set_ylabel("compute per step (ms)")
    ax_load.set_title("Load per part")
    ax_load.legend(fontsize=8, loc="lower left", framealpha=0.9)

    names = [label.split(" (")[0] for label, _, _ in splits] + ["data parallel"]
    vols = [sp.comm_volume_bytes / GB for _, sp, _ in splits] + [r.data_parallel_volume_bytes / GB]
    colors = [c for _, _, c in splits] + ["tab:green"]
    bars = ax_vol.bar(names, vols, color=colors)
    ax_vol.bar_label(bars, fmt="%.3g", fontsize=8)
    ax_vol.set_ylabel("bytes sent per step, all devices (GB)")
    ax_vol.set_title("Communication volume")
    fig.suptitle(
        f"{r.model}: {r.parts} parts, {r.granularity} granularity, global batch {r.global_batch}, "
        f"{r.precision} on {r.hardware}"
    )
    return fig

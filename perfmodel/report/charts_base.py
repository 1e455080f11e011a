"""Pieces every chart shares: the figure, its title, part colours, stacked bars, atomic saving."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure

from ..io import CHART_SUFFIXES, atomic_write_bytes, check_target

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "CHART_SUFFIXES",
    "DPI",
    "PART_COLOURS",
    "new_figure",
    "part_colour",
    "part_label",
    "positive_keys",
    "save_chart",
    "set_title",
    "stacked_bars",
]

#: Resolution of saved raster charts.
DPI = 150

#: Colours of step-time parts (breakdown keys) and memory parts; unknown keys get the palette.
PART_COLOURS = {
    "compute": "#4C72B0",
    "recompute": "#8DA0CB",
    "gradient_exchange_exposed": "#C44E52",
    "halo_exchange": "#55A868",
    "redistribution": "#A6D854",
    "pipeline_p2p": "#8172B3",
    "pipeline_bubble": "#C7C7C7",
    "optimizer_step": "#937860",
    "gradient_bucket_copies": "#B07AA1",
    "nccl_contention": "#FF9DA7",
    "amp_casts": "#76B7B2",
    "channel_allgather": "#F28E2B",
    "channel_allreduce": "#FFBE7D",
    "filter_allgather": "#499894",
    "filter_reduce_scatter": "#86BCB6",
    "weights": "#264653",
    "gradients": "#E76F51",
    "optimizer_state": "#F4A261",
    "gradient_buckets": "#E9C46A",
    "input_batch": "#A8DADC",
    "activations": "#2A9D8F",
    "workspace": "#8D99AE",
}
#: colours of parts without their own, none of them one of PART_COLOURS (a part would look like another)
_PALETTE = ("#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD", "#1B9E77", "#7570B3", "#D37295")


def part_colour(key: str, seen: dict[str, str]) -> str:
    """The colour of part ``key``: its own, else the next palette colour (remembered in ``seen``)."""
    if key not in seen:
        seen[key] = PART_COLOURS.get(key, _PALETTE[len([k for k in seen if k not in PART_COLOURS]) % len(_PALETTE)])
    return seen[key]


def part_label(key: str) -> str:
    """A breakdown or memory key in words."""
    return key.replace("_", " ")


def new_figure(width: float, height: float) -> Figure:
    """An empty figure of ``width`` x ``height`` inches with constrained layout."""
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def set_title(fig: Figure, head: str, sub: str) -> None:
    """The headline (what, which model, which hardware) and the setting, wrapped to the width."""
    chars = int(fig.get_figwidth() * 11)
    lines = textwrap.wrap(head, int(chars * 0.9)) + textwrap.wrap(sub, chars)
    fig.suptitle("\n".join(lines), fontsize=11)


def save_chart(fig: Figure, path: str | Path) -> None:
    """Save ``fig`` as PNG, SVG or PDF by ``path``'s extension (:class:`UsageError` for others).

    The chart is drawn in memory and written atomically: an existing file is replaced only
    by a complete chart (a full disk leaves it as it was, never a 0-byte or cut file).
    """
    p = check_target(path, CHART_SUFFIXES)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=DPI, format=p.suffix[1:].lower())
    atomic_write_bytes(p, buf.getvalue())  # a failed write leaves no partial chart


def positive_keys(dicts: Iterable[dict[str, float]]) -> list[str]:
    """The keys with a positive value in any of ``dicts``, in first-seen order (``compute`` if none)."""
    out: dict[str, None] = {}
    for d in dicts:
        for k, v in d.items():
            if v > 0:
                out[k] = None
    return list(out) or ["compute"]


def stacked_bars(
    ax: Axes,
    y: np.ndarray,
    parts: list[dict[str, float]],
    keys: list[str],
    colours: dict[str, str],
    hatched: list[bool],
) -> None:
    """Horizontal bars at ``y``, one per dict of ``parts``, stacked by ``keys``; hatched ones in red."""
    left = np.zeros(len(parts))
    for k in keys:
        w = np.array([d.get(k, 0.0) for d in parts])
        bars = ax.barh(y, w, left=left, color=part_colour(k, colours), height=0.62, edgecolor="white", lw=0.5)
        for bar, h in zip(bars, hatched, strict=True):
            if h:
                bar.set_hatch("//")
                bar.set_edgecolor("#C44E52")
        left += w

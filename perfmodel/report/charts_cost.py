"""Time to train and its cost against GPU count (from a ``scale`` frame): where more GPUs stop paying."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from ..errors import UsageError
from ..hardware import Hardware
from ..network import Network
from ..strategies.train_cost import default_dataset_size
from .answers import TrainingRequest, price_of

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["add_training_columns", "time_cost_chart", "TRAINING_COLUMNS"]

#: Columns :func:`add_training_columns` adds (SI units; cost in the frame's currency).
TRAINING_COLUMNS = ("time_to_train_s", "time_to_train_low_s", "time_to_train_high_s", "gpu_hours", "cost")


def add_training_columns(df: pd.DataFrame, net: Network, hw: Hardware, req: TrainingRequest) -> pd.DataFrame:
    """Time to train ``req.epochs`` over the dataset (and its cost) for every row of a scale frame."""
    size = req.dataset_size
    note = f"{size:,} samples (given)" if size is not None else ""
    if size is None:
        default = default_dataset_size(net)
        if default is None:
            raise UsageError(
                f"give --dataset-size for {net.name}: the ImageNet-1k default is for 1000-class classifiers"
            )
        size, note = default
    epochs = 1.0 if req.epochs is None else req.epochs
    price, currency, source = price_of(hw, req)
    out = df.copy()
    steps = np.ceil(epochs * size / out["global_batch"].to_numpy(float))
    out["time_to_train_s"] = steps * out["step_s"].to_numpy(float)
    if "step_s_low" in out:
        out["time_to_train_low_s"] = steps * out["step_s_low"].to_numpy(float)
        out["time_to_train_high_s"] = steps * out["step_s_high"].to_numpy(float)
    out["gpu_hours"] = out["time_to_train_s"] / 3600 * out["gpus"]
    out["cost"] = out["gpu_hours"] * price if price is not None else math.nan
    out.attrs.update(
        epochs=epochs, dataset_size=size, dataset=note, price_per_gpu_hour=price, currency=currency,
        price_source=source,
    )
    return out


def time_cost_chart(df: pd.DataFrame) -> Figure:
    """Two panels against GPU count, one line per strategy: time to train (with its 80% band)
    and its cost; the cheapest point of each line is marked."""
    if "time_to_train_s" not in df:
        raise UsageError("time_cost_chart needs a scale frame with training columns (scale --epochs ...)")
    a = df.attrs
    fig = Figure(figsize=(12, 5.2), layout="constrained")
    ax_t, ax_c = fig.subplots(1, 2)
    has_cost = bool(np.isfinite(df["cost"].to_numpy(float)).any())
    for name in dict.fromkeys(df["strategy"]):
        sub = df[df["strategy"] == name].sort_values("gpus")
        x = sub["gpus"].to_numpy(float)
        t = sub["time_to_train_s"].to_numpy(float) / 3600
        if not np.isfinite(t).any():
            continue
        (line,) = ax_t.plot(x, t, marker="o", ms=4, label=name)
        if "time_to_train_low_s" in sub:
            lo = sub["time_to_train_low_s"].to_numpy(float) / 3600
            hi = sub["time_to_train_high_s"].to_numpy(float) / 3600
            ax_t.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
        if has_cost:
            c = sub["cost"].to_numpy(float)
            ax_c.plot(x, c, marker="o", ms=4, color=line.get_color(), label=name)
            i = int(np.nanargmin(c))
            ax_c.plot([x[i]], [c[i]], marker="*", ms=14, color=line.get_color(), zorder=4)
    cur = a.get("currency", "USD")
    for ax, label in ((ax_t, "time to train (hours, log scale)"), (ax_c, f"cost ({cur}, log scale)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("GPUs (count, log scale)")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    given = a.get("price_per_gpu_hour")
    price = "no price" if given is None else f"{given:g} {cur} per GPU-hour"
    if not np.isfinite(df["time_to_train_s"].to_numpy(float)).any():  # every point is a gap: say why, not "no price"
        for ax in (ax_t, ax_c):
            ax.text(0.5, 0.5, "no plan at any GPU count\n(see the table's notes)", ha="center", va="center",
                    transform=ax.transAxes)
    elif has_cost:
        ax_t.legend(fontsize=8, title="strategy (band: 80% interval)")
        ax_c.legend(fontsize=8, title="strategy (star: cheapest)")
    else:
        ax_t.legend(fontsize=8, title="strategy (band: 80% interval)")
        ax_c.text(0.5, 0.5, "no price: give --price-per-gpu-hour", ha="center", va="center", transform=ax_c.transAxes)
    epochs = a.get("epochs", 1)
    fig.suptitle(
        f"{a.get('model', '?')} on {a.get('hardware', '?')}, {a.get('precision', '?')}: "
        f"{epochs:g} epoch{'' if epochs == 1 else 's'} of {a.get('dataset_size', 0):,} samples; {price}",
        fontsize=11,
    )
    return fig

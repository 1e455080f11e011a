"""A calibrated profile written as TOML of the shipped schema (``load_profile`` reads it back)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

from ..hardware import PRECISIONS, Hardware

__all__ = ["profile_toml"]


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "0.0"
    # JSON string escapes are TOML basic-string escapes; TOML also refuses a raw DEL
    return json.dumps(str(v), ensure_ascii=False).replace("\x7f", "\\u007f")


def _comment(text: str) -> str:
    """``text`` as one TOML comment line: no line breaks or control characters."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def _table(name: str, items: Sequence[tuple[str, object]]) -> list[str]:
    return [f"[{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in items] + [""]


def profile_toml(
    hw: Hardware, name: str, description: str, source: str, notes: Mapping[str, str] | None = None
) -> str:
    """``hw`` as a TOML profile of the shipped schema (loadable with ``load_profile``).

    ``notes`` maps a precision to the ``source`` line written in its compute table.
    """
    notes = notes or {}
    s = hw.sources
    d = hw.device
    lines = [
        f"# {_comment(description)}",
        "schema_version = 1",
        f"name = {_toml_value(name)}",
        f"description = {_toml_value(description)}",
        f"source = {_toml_value(source)}",
        "",
    ]
    lines += _table(
        "device",
        [
            ("name", d.name),
            ("memory_bytes", float(d.memory_bytes)),
            ("memory_bandwidth_bytes_per_s", float(d.memory_bandwidth_bytes_per_s)),
            ("source", s.get("device", "from the base profile")),
        ],
    )
    peaks: list[tuple[str, object]] = [(k, float(v)) for k, v in d.peak_flops_per_s.items()]
    if "peak_flops_per_s" in s:
        peaks.append(("source", s["peak_flops_per_s"]))
    lines += _table("device.peak_flops_per_s", peaks)
    lines += _table(
        "node",
        [("gpus_per_node", hw.gpus_per_node), ("source", s.get("node", "from the base profile"))],
    )
    lines += _table("node.link", _link_items(hw.intra, s.get("link")))
    net = _link_items(hw.inter, None) + [
        ("max_nodes", hw.max_nodes),
        ("source", s.get("network", "from the base profile")),
    ]
    lines += _table("network", net)
    lines += _table(
        "efficiency",
        [
            ("kernel_launch_s", float(hw.kernel_launch_s)),
            ("framework_reserve_bytes", float(hw.framework_reserve_bytes)),
            ("source", s.get("efficiency", "from the base profile")),
        ],
    )
    for p in PRECISIONS:
        c = hw.compute[p]
        items: list[tuple[str, object]] = [
            ("conv", float(c.conv)),
            ("linear", float(c.linear)),
            ("memory", float(c.memory)),
            ("half_work_flops", float(c.half_work_flops)),
        ]
        if p in notes:
            items.append(("source", notes[p]))
        lines += _table(f"efficiency.compute.{p}", items)
    kernels: list[tuple[str, object]] = [(f.name, getattr(hw.kernels, f.name)) for f in fields(hw.kernels)
                                         if getattr(hw.kernels, f.name) is not None]  # None: an optional key absent
    lines += _table("efficiency.kernels", kernels + [("source", s.get("kernels", "from the base profile"))])
    coll: list[tuple[str, object]] = [(f.name, getattr(hw.collectives, f.name)) for f in fields(hw.collectives)]
    lines += _table("collectives", coll + [("source", s.get("collectives", "from the base profile"))])
    if hw.price_per_gpu_hour is not None:
        lines += _table(
            "price",
            [("per_gpu_hour", float(hw.price_per_gpu_hour)), ("currency", hw.price_currency),
             ("date", s.get("price_date", "unknown")), ("source", s.get("price", "from the base profile"))],
        )
    return "\n".join(lines)


def _link_items(link: Any, source: str | None) -> list[tuple[str, object]]:
    items: list[tuple[str, object]] = [
        ("bandwidth_bytes_per_s", float(link.bandwidth_bytes_per_s)),
        ("latency_s", float(link.latency_s)),
        ("efficiency", float(link.efficiency)),
        ("topology", link.topology),
    ]
    if source:
        items.append(("source", source))
    return items

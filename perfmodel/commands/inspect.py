"""``perfmodel models``, ``show`` and ``hardware``: what the zoo and the profiles hold."""

from __future__ import annotations

from typing import Any

import click
import pandas as pd

from ..hardware import Hardware, load_hardware, profile_names
from ..network import compile_counts, get_model, model_names
from ..network.zoo.registry import model_entries
from ..report import render_frame, to_json
from ..units import GIB
from .common import emit, format_option, image_size_option, model_input_options

__all__ = ["models_cmd", "show_cmd", "hardware_cmd", "model_summary"]


def model_summary(name: str, image_size: int | None = None) -> dict[str, Any]:
    """Per-sample totals and per-layer counts of a zoo model (fp32 activation bytes)."""
    net = get_model(name, image_size)
    cc = compile_counts(net)
    ev = cc.evaluate(1)
    layers = []
    for i, layer in enumerate(net.layers):
        layers.append(
            {
                "name": layer.name,
                "kind": layer.kind + (f":{layer.fn}" if layer.fn else ""),
                "link": net.links[int(_link_index(net, i))].name,
                "input_shape": list(layer.in_shape),
                "output_shape": list(layer.out_shape),
                "kernel": list(layer.kernel),
                "stride": list(layer.stride),
                "padding": list(layer.padding),
                "dilation": list(layer.dilation),
                "groups": layer.groups,
                "params": layer.params,
                "forward_flops": float(ev["fwd_flops"][i]),
                "forward_matmul_flops": float(ev["fwd_matmul_flops"][i]),
                "backward_input_flops": float(ev["bwd_input_flops"][i]),
                "backward_weight_flops": float(ev["bwd_weight_flops"][i]),
                "bytes_moved_fp32": float((ev["fwd_mem_elems"][i] + ev["bwd_mem_elems"][i]) * 4 + 3 * layer.params * 4),
                "activation_bytes_fp32": float(ev["saved_elems"][i] * 4 + ev["saved_extra_bytes"][i]),
            }
        )
    return {
        "model": net.name,
        "image_size": net.image_size,
        "input_shape": list(net.input_shape),
        "source": net.source,
        "params": net.params,
        "forward_flops_per_sample": float(ev["fwd_flops"].sum()),
        "forward_matmul_flops_per_sample": float(ev["fwd_matmul_flops"].sum()),
        "backward_flops_per_sample": float(ev["bwd_input_flops"].sum() + ev["bwd_weight_flops"].sum()),
        "activation_bytes_per_sample": float((ev["saved_elems"] * 4 + ev["saved_extra_bytes"]).sum()),
        "chain_links": len(net.links),
        "assumptions": {
            "activation_bytes": "fp32 activations (4 bytes per element), as autograd keeps them; the loss is excluded",
            "flops": "1 multiply-add = 2 FLOPs",
        },
        "layers": layers,
    }


def _link_index(net: Any, i: int) -> int:
    for lk in net.links:
        if lk.start <= i < lk.stop:
            return int(lk.index)
    return 0


@click.command("models")
@format_option
def models_cmd(fmt: str) -> None:
    """List the zoo's models with parameters, input size and GFLOPs per sample."""
    rows = []
    for name in model_names():
        entry = model_entries()[name]
        net = get_model(name)
        cc = compile_counts(net)
        rows.append(
            {
                "model": name,
                "params": net.params,
                "image_size": entry.default_image_size,
                "fwd_GFLOP_per_sample": cc.total("fwd_matmul_flops") / 1e9,
                "layers": len(net.layers),
                "chain_links": len(net.links),
                "source": entry.source,
            }
        )
    # the printed columns carry their unit (the JSON keys are the stable contract and stay)
    df = pd.DataFrame(rows).rename(columns={"image_size": "image_size_px"})
    if fmt == "json":
        emit(to_json({"models": rows}))
    else:
        emit(render_frame(df.drop(columns=["source"]) if fmt == "table" else df, fmt))


@click.command("show")
@click.argument("model")
@image_size_option
@model_input_options
@format_option
def show_cmd(model: str, image_size: int | None, fmt: str) -> None:
    """Per-layer table of MODEL: shapes, parameters, FLOPs (1 multiply-add = 2 FLOPs), activation bytes."""
    s = model_summary(model, image_size)
    if fmt == "json":
        emit(to_json(s))
        return
    df = pd.DataFrame(
        [
            {
                "layer": la["name"],
                "kind": la["kind"],
                "link": la["link"],
                "output": "x".join(map(str, la["output_shape"])),
                "params": la["params"],
                "fwd_MFLOP": la["forward_flops"] / 1e6,
                "bwd_MFLOP": (la["backward_input_flops"] + la["backward_weight_flops"]) / 1e6,
                "act_KiB": la["activation_bytes_fp32"] / 1024,
            }
            for la in s["layers"]
        ]
    )
    if fmt == "csv":
        emit(render_frame(df, "csv"))
        return
    emit(render_frame(df))
    emit("")
    emit(
        f"{s['model']}: input {'x'.join(map(str, s['input_shape']))}, {s['params']:,} parameters, "
        f"{len(s['layers'])} layers in {s['chain_links']} chain links"
    )
    emit(
        f"forward {s['forward_flops_per_sample'] / 1e9:.3f} GFLOP/sample "
        f"(conv+matmul {s['forward_matmul_flops_per_sample'] / 1e9:.3f}), backward "
        f"{s['backward_flops_per_sample'] / 1e9:.3f} GFLOP/sample, activations kept "
        f"{s['activation_bytes_per_sample'] / 2**20:.1f} MiB/sample (fp32)"
    )
    emit(f"source: {s['source']}")


#: Columns of the hardware table's second part: the collective and kernel models' numbers.
MODEL_COLUMNS = ("channels_in_node", "channels_across_nodes", "collective_base_latency_us",
                 "memory_passes_B_per_link_B", "SMs", "memory_latency_ns", "threads_per_SM",
                 "sector_slots_per_SM")


def _shown_unit(seconds: float, unit_s: float) -> float:
    """``seconds`` in units of ``unit_s`` to 12 digits (8.4e-6 s is 8.4 us, not 8.399999999999999)."""
    return float(f"{seconds / unit_s:.12g}")


def _hardware_row(hw: Hardware) -> dict[str, Any]:
    """One profile's row: the device, the links, then the collective and kernel models' numbers."""
    d, c, k = hw.device, hw.collectives, hw.kernels
    return {
        "profile": hw.name,
        "device": d.name,
        "gpus_per_node": hw.gpus_per_node,
        "memory_GiB": d.memory_bytes / GIB,
        "fp32_TFLOP/s": d.peak_flops_per_s["fp32"] / 1e12,
        "fp16_TFLOP/s": d.peak("amp") / 1e12,
        "memory_GB/s": d.memory_bandwidth_bytes_per_s / 1e9,
        "intra_GB/s": hw.intra.bandwidth_bytes_per_s / 1e9,
        "intra_topology": hw.intra.topology,
        "inter_GB/s_per_node": hw.inter.bandwidth_bytes_per_s / 1e9,
        # NCCL channels (one SM each) of an allreduce inside a node / across nodes, its fixed
        # cost, and the device-memory bytes per byte it moves over a link ([collectives])
        "channels_in_node": c.channels_intra,
        "channels_across_nodes": c.channels_net,
        "collective_base_latency_us": _shown_unit(c.base_latency_s, 1e-6),
        "memory_passes_B_per_link_B": c.memory_passes,
        # the latency bound of window kernels ([efficiency.kernels])
        "SMs": k.sm_count,
        "memory_latency_ns": _shown_unit(k.memory_latency_s, 1e-9),
        "threads_per_SM": k.threads_per_sm,
        "sector_slots_per_SM": k.sector_slots_per_sm,
        "sources": dict(hw.sources),
    }


@click.command("hardware")
@click.argument("name", required=False)
@format_option
def hardware_cmd(name: str | None, fmt: str) -> None:
    """List the shipped hardware profiles, or show one (NAME or a path to a TOML file).

    The second table holds the collective model's numbers (NCCL channels in a node and across
    nodes, base latency, memory passes) and the kernel model's latency bound (SMs, memory
    latency, threads and 32-byte sector slots per SM).
    """
    names = [name] if name is not None else profile_names()
    rows = [_hardware_row(load_hardware(n)) for n in names]
    if fmt == "json":
        emit(to_json({"hardware": rows if name is None else rows[0]}))
        return
    df = pd.DataFrame(rows).drop(columns=["sources"])
    if fmt == "csv":
        emit(render_frame(df, "csv"))
        return
    emit(render_frame(df.drop(columns=list(MODEL_COLUMNS)), floatfmt="{:,.1f}"))
    emit("")
    emit(render_frame(df[["profile", *MODEL_COLUMNS]], floatfmt="{:,.1f}"))
    if name is not None:
        emit("")
        hw = load_hardware(name)
        emit(hw.description)
        for k, v in hw.sources.items():
            emit(f"  source ({k}): {v}")

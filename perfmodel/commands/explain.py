"""``perfmodel explain``: the step-time formula of a plan in named symbols, each term with its value."""

from __future__ import annotations

import click

from ..hardware import load_hardware
from ..network import get_model
from ..report import to_json
from ..strategies.explain import SYMBOL_MEANING, explain_plan
from ..strategies.predict import _resolve_batch, context
from ..strategies.spec import parse_strategy
from .common import (
    emit,
    format_option,
    gpus_option,
    hardware_option,
    image_size_option,
    optimizer_option,
    precision_option,
)

__all__ = ["explain_cmd"]


@click.command("explain")
@click.argument("model")
@gpus_option
@click.option("--strategy", "-s", required=True, help="Plan spec, as for `perfmodel predict`.")
@hardware_option
@precision_option
@click.option("--batch-per-gpu", "-b", type=int, default=None, help="Samples per GPU (default 32).")
@click.option("--global-batch", "-B", type=int, default=None, help="Samples per step over all GPUs.")
@optimizer_option
@image_size_option
@click.option("--full", is_flag=True, help="Print every term's whole expression (long).")
@format_option
def explain_cmd(
    model: str,
    gpus: int,
    strategy: str,
    hardware: str,
    precision: str,
    batch_per_gpu: int | None,
    global_batch: int | None,
    optimizer: str,
    image_size: int | None,
    full: bool,
    fmt: str,
) -> None:
    """Print the step time of a plan as a sympy formula with each term named and valued.

    The value is the formula evaluated at the profile's numbers; it equals `predict`'s.
    """
    if batch_per_gpu is None and global_batch is None:
        batch_per_gpu = 32
    net = get_model(model, image_size)
    s = parse_strategy(strategy, gpus)
    B = _resolve_batch(gpus, batch_per_gpu, global_batch)
    ctx = context(net, load_hardware(hardware), precision, optimizer)
    f = explain_plan(ctx, s, B)
    if fmt == "json":
        emit(to_json(f.to_dict()))
        return
    if fmt == "csv":
        emit("term,value_s,expression")
        for k, v in f.terms.items():
            emit(f'{k},{f.term_values[k]!r},"{str(v)}"')
        return
    p = f.prediction
    emit(f"{p.model} on {gpus} x {p.hardware}, {s.spec()}, {precision}, global batch {B}")
    emit("")
    emit("T_step = " + " + ".join(f"T_{k}" for k in f.terms))
    emit("")
    limit = None if full else 400
    for k, v in f.terms.items():
        text = str(v)
        if limit and len(text) > limit:
            text = text[:limit] + f" ... ({len(text):,} characters; --full prints all)"
        emit(f"T_{k} = {text}")
        emit(f"    = {f.term_values[k] * 1e3:.4f} ms")
    emit("")
    emit(f"T_step = {f.iteration_time_s * 1e3:.4f} ms (predict: {p.iteration_time_s * 1e3:.4f} ms)")
    emit("")
    emit("symbols (value, meaning):")
    for sym, val in sorted(f.values.items(), key=lambda kv: str(kv[0])):
        emit(f"  {str(sym):<22} {val:<14.6g} {SYMBOL_MEANING.get(str(sym), 'a named term of the breakdown, s')}")
    emit("")
    emit(
        "Per layer: T_layer = max((b*F + w_half)/(R*eta), b*F_elementwise/R_fp32,"
        " (b*elems*e + params*e)/(beta_mem*eta_mem)) + tau;"
    )
    emit(
        "collectives: ring 2*(p - 1)/p*n/beta + 2*(p - 1)*alpha, tree 2*log2(p)*alpha + 2*n/beta;"
        " buckets of 25 MiB overlap backward."
    )

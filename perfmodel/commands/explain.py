"""``perfmodel explain``: the step-time formula of a plan in named symbols, each term with its value."""

from __future__ import annotations

import math

import click

from ..cost.fusion import fusion_assumption
from ..cost.grouped import loop_candidates
from ..cost.kernels import network_kernels
from ..errors import UsageError, did_you_mean
from ..hardware import load_hardware
from ..limits import shown
from ..network import get_model
from ..report import to_json
from ..report.answers import answers_for
from ..strategies.amp_step import amp_assumption
from ..strategies.explain import HARDWARE_SYMBOLS, StepFormula, explain_plan
from ..strategies.formula import ZERO_OK_SYMBOLS, what_if_value
from ..strategies.predict import Context, context, resolve_batch
from ..strategies.spec import Strategy, parse_strategy
from .common import (
    amp_runtime_option,
    cudnn_option,
    emit,
    format_option,
    fusion_option,
    gpus_option,
    hardware_option,
    image_size_option,
    memory_format_option,
    model_input_options,
    optimizer_option,
    precision_option,
)

__all__ = ["explain_cmd"]


def _parse_set(items: tuple[str, ...]) -> dict[str, float]:
    """``NAME=VALUE`` pairs of hardware symbols, as ``--set`` takes them."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--set '{item}': expected NAME=VALUE, e.g. beta_intra=1.2e11")
        if name not in HARDWARE_SYMBOLS:
            raise UsageError(f"--set: unknown symbol '{name}' (valid: {', '.join(HARDWARE_SYMBOLS)})"
                             + did_you_mean(name, HARDWARE_SYMBOLS))
        if name in out:
            raise UsageError(f"--set {name} is given twice ({out[name]:g} and {text}); give each symbol once")
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"--set {name}: {shown(text, 40)} is not a number") from None
        out[name] = what_if_value(f"--set {name}", name, value, shown(text, 40))
    return out


@click.command("explain")
@click.argument("model")
@gpus_option
@click.option("--strategy", "-s", required=True, help="Plan spec, as for `perfmodel predict`.")
@hardware_option
@precision_option
@click.option("--batch-per-gpu", "-b", type=int, default=None, help="Samples per GPU (default 32).")
@click.option("--global-batch", "-B", type=int, default=None, help="Samples per step over all GPUs.")
@optimizer_option
@cudnn_option
@memory_format_option
@fusion_option
@amp_runtime_option
@image_size_option
@model_input_options
@click.option("--full", is_flag=True, help="Print every term's whole expression (long).")
@click.option(
    "--set",
    "changes",
    multiple=True,
    metavar="NAME=VALUE",
    help="What-if: give a hardware symbol another value (e.g. beta_intra=1.2e11; repeatable) and print "
    f"the step time the formula then gives. Symbols: {', '.join(HARDWARE_SYMBOLS)}; "
    f"{', '.join(sorted(ZERO_OK_SYMBOLS))} may be 0 (e.g. gamma_net=0: no contention), the others must be > 0.",
)
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
    cudnn_major: int,
    memory_format: str,
    fusion: str,
    amp_runtime: str,
    image_size: int | None,
    full: bool,
    changes: tuple[str, ...],
    fmt: str,
) -> None:
    """Print the step time of a plan as a sympy formula with each term named and valued.

    The value is the formula evaluated at the profile's numbers; it equals `predict`'s.
    Communication is a closed form in the link symbols: the collectives of data, filter and
    channel plans (a split's exchanges grouped per collective, their summed elements per
    sample a symbol), the halo exchanges and redistributions of spatial plans, and the
    point-to-point messages of pipeline and mp plans, and the parameter-server exchange (its
    worst case). An mp=K plan's schedule is simulated, so its idle time is evaluated
    numerically (and re-simulated by --set).
    """
    what_if = _parse_set(changes)
    if batch_per_gpu is None and global_batch is None:
        batch_per_gpu = 32
    net = get_model(model, image_size)
    s = parse_strategy(strategy, gpus)
    B = resolve_batch(gpus, batch_per_gpu, global_batch)
    ctx = context(net, load_hardware(hardware), precision, optimizer, cudnn_major=cudnn_major,
                  memory_format=memory_format, fusion=fusion, amp_runtime=amp_runtime)
    f = explain_plan(ctx, s, B)
    at = f.what_if_values(what_if) if what_if else None  # the parts' values too (CSV)
    new = f.evaluate(at=at) if at is not None else None
    if new is not None and not all(math.isfinite(v) for v in new.values()):
        setting = ", ".join(f"{k}={v:g}" for k, v in what_if.items())
        raise UsageError(f"--set {setting}: the step time is not a finite number (choose values nearer the profile's)")
    ans = answers_for(f.prediction, ctx.hw, net=net, largest=False)
    if fmt == "json":
        out = {**f.to_dict(), **{k: v for k, v in ans.fields().items() if "interval" in k},
               "cudnn": f.prediction.assumptions["cudnn"], "memory_format": f.prediction.assumptions["memory_format"],
               "kernels": f.prediction.assumptions["kernels"],
               "fusion": fusion_assumption(f.prediction.fusion), "amp_runtime": f.prediction.amp_runtime,
               "mixed_precision": amp_assumption(f.prediction.precision, f.prediction.amp_runtime),
               "assumptions": f.prediction.assumptions}
        if new is not None:
            out["what_if"] = {"set": what_if, "terms_s": new, "iteration_time_s": sum(new.values()),
                              "kept": _kept_choices(ctx, s)}
        emit(to_json(out))
        return
    if fmt == "csv":
        emit("term,value_s,expression" + (",what_if_s" if new is not None else ""))
        for k, v in f.terms.items():
            emit(f'{k},{f.term_values[k]!r},"{str(v)}"' + (f",{new[k]!r}" if new is not None else ""))
        if f.definitions:  # the named parts the terms read, after a blank line (not terms: they do not add up)
            emit("")
            emit("part,value_s,expression" + (",what_if_s" if new is not None else ""))
            for d, v in f.definitions.items():
                emit(f'{d},{f.values[d]!r},"{str(v)}"' + (f",{at[d]!r}" if at is not None else ""))
        return
    _table(f, s.spec(), gpus, precision, B, full, what_if, new, _kept_choices(ctx, s))
    emit(ans.lines()[0])


def _kept_choices(ctx: Context, s: Strategy) -> str:
    """What a ``--set`` re-evaluation keeps as chosen at the profile's values (empty: nothing): the
    pipeline's stage split, a model-parallel plan's partition (:mod:`perfmodel.strategies.mp_candidates`),
    a spatial group's decomposition per link, and each grouped convolution's implementation (cuDNN's
    one kernel or a loop of per-group calls, :mod:`perfmodel.cost.grouped`)."""
    lk = network_kernels(ctx.net)
    grouped = int(loop_candidates(lk.groups, lk.depthwise, ctx.cudnn_major).sum())
    kept = (["the stage split"] if s.pp > 1 else []) + (["the model-parallel partition"] if s.mp > 1 else [])
    kept += ["each link's decomposition"] if s.decomp == "auto" else []
    if grouped:
        kept.append(f"the implementation of the {grouped} grouped convolutions (one kernel or a loop over groups)")
    if not kept:
        return ""
    return f"kept as chosen at the profile's values: {', '.join(kept)}; at the values set another choice may be faster"


def _cut(expr: object, limit: int | None) -> str:
    """``expr`` as text, cut at ``limit`` characters (None: whole) with a note of its length."""
    text = str(expr)
    if limit and len(text) > limit:
        text = text[:limit] + f" ... ({len(text):,} characters; --full prints all)"
    return text


def _table(
    f: StepFormula,
    spec: str,
    gpus: int,
    precision: str,
    B: int,
    full: bool,
    what_if: dict[str, float],
    new: dict[str, float] | None,
    kept: str = "",
) -> None:
    p = f.prediction
    emit(f"{p.model} on {gpus} x {p.hardware}, {spec}, {precision}, global batch {B}")
    emit("")
    emit("T_step = " + " + ".join(f"T_{k}" for k in f.terms))
    emit("(one term per part of predict's breakdown, in its order, each valued as there)")
    emit(p.assumptions["cudnn"])
    emit(p.assumptions["memory_format"])
    emit(fusion_assumption(p.fusion))
    emit("kernels: " + p.assumptions["kernels"])
    emit("mixed precision: " + amp_assumption(p.precision, p.amp_runtime))
    said = ("cudnn", "memory_format", "fusion", "kernels", "mixed_precision")  # the lines above
    emit("\n".join(f"{k}: {v}" for k, v in p.assumptions.items() if k not in said))
    emit("")
    limit = None if full else 400
    for k, v in f.terms.items():
        if v == 0 and p.breakdown[k] == 0:
            emit(f"T_{k} = 0")
            emit(f"    (zero in predict's breakdown too: {f.legend.get(k, 'nothing of this part in this plan')})")
            continue
        emit(f"T_{k} = {_cut(v, limit)}")
        emit(f"    = {f.term_values[k] * 1e3:.4f} ms")
        if k in f.legend:
            emit(f"    ({f.legend[k]})")
    if f.definitions:
        emit("")
        emit("where (parts several terms read, each written once):")
        for d, v in f.definitions.items():
            emit(f"{d} = {_cut(v, limit)}")
            emit(f"    = {f.values[d] * 1e3:.4f} ms ({f.meaning_of(str(d))})")
    emit("")
    emit(f"T_step = {f.iteration_time_s * 1e3:.4f} ms (predict: {p.iteration_time_s * 1e3:.4f} ms)")
    if new is not None:
        emit("")
        setting = ", ".join(f"{k} = {v:.6g}" for k, v in what_if.items())
        total = sum(new.values())
        emit(f"what-if {setting}:")
        for k, v in new.items():
            if not math.isclose(v, f.term_values[k], rel_tol=1e-9, abs_tol=1e-15):
                emit(f"  T_{k} = {v * 1e3:.4f} ms (was {f.term_values[k] * 1e3:.4f} ms)")
        emit(f"  T_step = {total * 1e3:.4f} ms (was {f.iteration_time_s * 1e3:.4f} ms, "
             f"{(total / f.iteration_time_s - 1) * 100:+.2f}%)")
        unused = [k for k in what_if if k not in {str(x) for x in f.values}]
        if unused:
            emit(f"  (the formula does not contain {', '.join(unused)})")
        if kept:
            emit(f"  ({kept})")
    emit("")
    emit("symbols (value, meaning):")
    for sym, val in sorted(f.values.items(), key=lambda kv: str(kv[0])):
        if sym not in f.definitions:
            emit(f"  {str(sym):<22} {val:<14.6g} {f.meaning_of(str(sym))}")
    emit("")
    emit(
        "Per layer: T_layer = max(ops*h, sum over its GEMM kernels of max(b*W/(R*eta), b*W_dw/R_fp32,"
        " (b*elems*e + params*e)/(beta_mem*eta_mem)) + memory kernels max(bytes/(beta_mem*eta_mem),"
        " b*F_elementwise/R_fp32[, loads*L_mem]) + launches*tau; the memory kernels include autograd's sums of"
        " the gradients into a tensor several layers read), W = a kernel's FLOPs over its shape"
        " efficiency (tiles, waves, Winograd) at the micro-batch b, loads = a pooling forward's loads on"
        " its critical path (Little's law over the threads in flight);"
    )
    emit(
        "collectives (k nodes, q GPUs each): ring allreduce alpha_0 + 2*(p - 1)/p * n/beta + 2*(p - k)*alpha_intra"
        " + 2*(k - 1)*alpha_net, tree alpha_0 + 2*n/beta + 2*((q - 1)*alpha_intra + log2(k)*alpha_net),"
        " ring all-gather / reduce-scatter alpha_0 + (p - 1)/p * n/beta + (p - k)*alpha_intra + (k - 1)*alpha_net,"
        " point-to-point alpha + n/beta;"
        " buckets of 25 MiB overlap backward, slowed by NCCL's SMs (gamma) and memory traffic (kappa)."
    )
    for note in f.notes:
        emit(f"note: {note}")

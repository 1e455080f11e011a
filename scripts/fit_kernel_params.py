"""Fit the kernel model's few global numbers per GPU generation to the shipped kernel data.

Usage: ``python scripts/fit_kernel_params.py [SET ...] [--only NAME,...] [--write] [--report] [--split]
[--transfer FROM:TO] [--leave-out-model MODEL] [--lomo] [--starts N]`` (``--only memory``: fit just
those numbers, the others kept at the profile's; ``--starts 8``: seven more seeded starts inside
the bounds, the best optimum kept, also in the ``--split`` and ``--transfer`` fits)

For each generation, minimises the mean |log(predicted / measured)| over all rows of its
sources (never per row) with Nelder-Mead, and prints the values to write into the profiles'
``[efficiency.compute.<precision>]`` (conv, linear, memory) and ``[efficiency.kernels]``
tables:

* volta-fp32: DeepBench V100 fp32 convolutions and GEMMs + PipeDream's V100 layers;
* volta-amp: DeepBench V100 fp16 tensor-core convolutions and GEMMs (conv, linear, the
  tensor-core weight-gradient rate);
* pascal-fp32: DeepBench P100 fp32 convolutions and GEMMs;
* ampere-fp32: NeuSight's forward fp32 3x3 convolutions, linear layers and element-wise
  kernels on A100 (40/80GB PCIe): the fp32 conv, linear and memory efficiencies and the shape
  numbers forward kernels inform (:data:`NEUSIGHT_FITS`: tile intensity, Winograd gain and
  transform cost);
* hopper-fp32: NeuSight's forward fp32 linear layers on H100 (no convolution or element-wise
  rows): the fp32 linear efficiency and the tile intensity.

``--write`` writes them into the profiles (:data:`WRITES`: a generation's profiles; Volta's
numbers also into the Ampere/Hopper profiles, except those the Ampere/Hopper sets fit there
themselves, :data:`OWN_SET`; Volta's tile intensity goes there as
``tile_half_intensity_tensor_cores``, the one their borrowed tensor-core efficiencies were fitted
with), each line with this command in a comment; sets are fitted in the
order given, each on the profiles as the previous ones left them (fit volta-fp32 before
volta-amp: the tensor-core fit uses the generation's shape-rule numbers). A set's trial values
price every row on the row's own profile (its SMs, peaks and bandwidth).

``--report`` prints the fitted set's MAPE per GPU, precision and kernel (``perfmodel validate
--kernels`` at the fitted values). Generalisation checks, never used to set a profile value:
``--split`` fits on the even problems of the set (a layer shape at a batch, with all its
kernels) and scores the odd ones (and the reverse); ``--transfer volta-fp32:pascal-fp32`` fits
on the first set and scores the second with the first's fitted numbers, only the second
profile's own SM count, peaks and bandwidths changed (only the second set's kernel kinds the
first set has rows of are scored); ``--leave-out-model nasnetalarge`` fits
without that network's PipeDream rows and scores them (with ``--only``: the depthwise numbers
fitted on one NASNet, scored on the other); ``--lomo`` (sets with PipeDream's rows)
refits every number without each PipeDream model in turn and scores that model (:func:`lomo_check`,
about a minute per model).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from perfmodel.hardware import load_hardware
from perfmodel.validation.fit_bounds import LATENCY_PARAMS, PARAMS, TC_PARAMS, UNIT
from perfmodel.validation.fit_values import COMPUTE, neutral_start, set_in_table, with_values
from perfmodel.validation.kernel_rows import KernelRow, load_rows
from perfmodel.validation.kernels import price_rows
from perfmodel.validation.multistart import best_of, start_points
from perfmodel.validation.pipedream_lomo import derive, with_numbers

SETS = {
    "volta-fp32": ("v100-16gb-dgx1", "fp32", ("deepbench", "pipedream"), "V100"),
    "volta-amp": ("v100-16gb-dgx1", "amp", ("deepbench",), "V100"),
    "pascal-fp32": ("p100-16gb-nvlink", "fp32", ("deepbench",), "P100"),
    # no training kernels measured on these: NeuSight's forward fp32 kernels fit conv and linear only
    "ampere-fp32": ("a100-80gb-pcie", "fp32", ("neusight",), "A100"),
    "hopper-fp32": ("h100-80gb-dgx", "fp32", ("neusight",), "H100"),
}
#: numbers only PipeDream's rows inform (memory-bound kernels, depthwise convolutions): the
#: fp32 sets without PipeDream's rows keep the profile's values
PIPEDREAM_ONLY = ("memory", "depthwise_efficiency", "depthwise_output_flops", "depthwise_wgrad_flops")
#: what NeuSight's forward-only kernels fit per set: the efficiencies of the kernel kinds it
#: measured, the GEMM tile intensity (linear layers and implicit-GEMM convolutions) and, with
#: 3x3 convolutions, the Winograd gain and transform cost; never the weight/data-gradient,
#: depthwise or window-kernel (pooling latency) numbers, which no forward kernel there informs
NEUSIGHT_FITS = {
    "ampere-fp32": ("conv", "linear", "memory", "tile_half_intensity", "winograd_gain", "winograd_transform_flops"),
    "hopper-fp32": ("linear", "tile_half_intensity"),
}
#: Nelder-Mead's iteration cap per start: a start far from an optimum (a seeded draw, the neutral
#: start) may stop here, short of one. 2026-11-24: pascal-fp32 --starts 6 draws 1, 4 and 5 and
#: volta-fp32's neutral start and draw 3 stopped at it; rerun with a cap of 4000 each converged
#: (1065-2263 iterations) to a loss no lower than the profile start's (P100 0.230, V100 0.218)
MAXITER = 1000
#: (the fitted numbers and their bounds, PARAMS, LATENCY_PARAMS, TC_PARAMS and UNIT, are in
#: perfmodel.validation.fit_bounds; LATENCY_PARAMS are fitted only when named with --only)
_V100 = ("v100-16gb-dgx1", "v100-32gb-dgx1", "v100-32gb-dgx2", "abci-v100-16gb", "v100-32gb-pcie", "titan-v")
#: the Pascal profiles: the P100 SXM2 and PCIe cards (GP100), the P40, TITAN X and GTX 1080 Ti
#: (GP102), the GTX 1080 (GP104)
_PASCAL = ("p100-16gb-nvlink", "p100-16gb-pcie", "p40-24gb-pcie", "titan-x-pascal", "gtx-1080",
           "gtx-1080-ti")
_AMPERE = ("a100-40gb-dgx", "a100-40gb-pcie", "a100-80gb-dgx", "a100-80gb-pcie")
_HOPPER = ("h100-80gb-dgx", "h100-80gb-pcie", "h200-141gb-dgx")
_LATER = _AMPERE + _HOPPER
#: profile -> the set that fits its own generation's numbers (NEUSIGHT_FITS): Volta's --write
#: leaves those keys alone there
OWN_SET = {**{p: "ampere-fp32" for p in _AMPERE}, **{p: "hopper-fp32" for p in _HOPPER}}
#: ``--write``: set -> ({profile: precisions whose compute efficiencies it sets}, profiles whose
#: [efficiency.kernels] numbers it sets). Volta's precisions without their own units (tf32,
#: bf16) run as fp32; Ampere and Hopper have no training-kernel data, so their gradient and
#: depthwise numbers are the Volta fit's (said in their sources), their forward shape numbers
#: and fp32 efficiencies their own NeuSight fit's (the memory efficiency too, on Ampere: every
#: precision's, as on Volta).
WRITES: dict[str, tuple[dict[str, tuple[str, ...]], tuple[str, ...]]] = {
    "volta-fp32": ({p: ("fp32", "tf32", "bf16") for p in _V100}, _V100 + _LATER),
    "volta-amp": ({**{p: ("amp",) for p in _V100}, **{p: ("amp", "bf16") for p in _LATER}}, _V100 + _LATER),
    "pascal-fp32": ({p: ("fp32", "tf32", "amp", "bf16") for p in _PASCAL}, _PASCAL),
    "ampere-fp32": ({p: ("fp32",) for p in _AMPERE}, _AMPERE),
    "hopper-fp32": ({p: ("fp32",) for p in _HOPPER}, _HOPPER),
}
PROFILE_DIR = Path(__file__).resolve().parent.parent / "hardware_profiles"


def set_rows(name: str) -> list[KernelRow]:
    """The measured rows a set is fitted on."""
    _, precision, sources, gpu = SETS[name]
    rows = [r for r in load_rows(sources) if r.precision == precision and gpu in r.gpu]
    return [r for r in rows if r.source == "deepbench"] if precision != "fp32" else rows


def free_params(name: str) -> tuple[tuple[str, float, float], ...]:
    """The numbers (name, lower, upper) set ``name`` fits, chosen by name (:data:`PIPEDREAM_ONLY`,
    :data:`FORWARD_ONLY`): a number appended to :data:`PARAMS` is fitted by every fp32 set with
    training kernels unless listed in :data:`PIPEDREAM_ONLY`."""
    _, precision, sources, _ = SETS[name]
    if "pipedream" in sources:
        return PARAMS
    if sources == ("neusight",):
        return tuple(p for p in PARAMS if p[0] in NEUSIGHT_FITS[name])
    return tuple(p for p in PARAMS if p[0] not in PIPEDREAM_ONLY) if precision == "fp32" else TC_PARAMS


def priced(rows: Sequence[KernelRow], precision: str, v: dict[str, float]) -> np.ndarray:
    """Predicted seconds of ``rows``, each on its own profile with the numbers ``v``."""
    profiles = {r.profile: with_values(load_hardware(r.profile), precision, v) for r in rows}
    return price_rows(rows, profiles, before=False)[0]


def fit(
    name: str, rows: Sequence[KernelRow] | None = None, quiet: bool = False, only: tuple[str, ...] = (),
    neutral: bool = False, starts: int = 1,
) -> dict[str, float]:
    """The set's free numbers (those in ``only`` if given) minimising the source-weighted mean
    |log(pred / meas)| over ``rows``, started from the profile's values, or with ``neutral`` (every
    held-out check) from :func:`neutral_start`, so that a fit on part of the rows does not lean
    toward the shipped values fitted on all of them; with ``starts`` > 1 also from that many - 1
    seeded points inside the bounds (:mod:`perfmodel.validation.multistart`), keeping the best."""
    profile, precision, sources, _ = SETS[name]
    rows = list(set_rows(name) if rows is None else rows)
    meas = np.array([r.measured_s for r in rows])
    hw0 = load_hardware(profile)
    extra = LATENCY_PARAMS if "pipedream" in sources else ()
    free = tuple(p for p in free_params(name) + extra if p[0] in only) if only else free_params(name)
    # each source weighs the same in the loss, whatever its number of rows
    n_of = {s: sum(1 for r in rows if r.source == s) for s in sources}
    weight = np.array([1.0 / n_of[r.source] for r in rows])
    weight /= weight.sum()

    def at(x: np.ndarray) -> dict[str, float]:
        return {p[0]: float(np.clip(v * UNIT.get(p[0], 1.0), p[1], p[2])) for p, v in zip(free, x, strict=True)}

    def loss(x: np.ndarray) -> float:
        pred = priced(rows, precision, at(x))
        return float(np.sum(weight * np.abs(np.log(pred / meas))))

    x0 = neutral_start(precision, free) if neutral else [
        (getattr(hw0.compute[precision], p[0]) if p[0] in COMPUTE else getattr(hw0.kernels, p[0]))
        / UNIT.get(p[0], 1.0) for p in free]
    capped: list[bool] = []  # per start: whether the simplex stopped at MAXITER, short of an optimum

    def local(start: np.ndarray) -> tuple[np.ndarray, float]:
        sol = minimize(loss, start, method="Nelder-Mead", options={"maxiter": MAXITER, "xatol": 1e-3, "fatol": 1e-4})
        capped.append(int(sol.nit) >= MAXITER)
        return sol.x, float(sol.fun)

    bounds = [(p[1] / UNIT.get(p[0], 1.0), p[2] / UNIT.get(p[0], 1.0)) for p in free]
    best = best_of(local, start_points(x0, bounds, starts))
    v = at(best.x)
    if not quiet:
        pred = priced(rows, precision, v)
        mape = float(np.mean(np.abs(pred - meas) / meas) * 100)
        print(f"{name}: {len(rows)} rows, mean |log ratio| {best.loss:.3f}, MAPE {mape:.1f}%")
        if starts > 1:
            print(f"  {starts} starts, losses " + " ".join(f"{x:.4f}{'*' * c}" for x, c in
                                                           zip(best.start_losses, capped, strict=True))
                  + f"; best from start {best.best_start} (0 = {'neutral' if neutral else 'profile'} values)"
                  + (f"; * stopped at the {MAXITER}-iteration cap, not at an optimum" if any(capped) else ""))
        elif capped[0]:
            print(f"  stopped at the {MAXITER}-iteration cap, not at an optimum")
        for k, val in v.items():
            print(f"  {k} = {val:.3g}")
    return v


def _kind(r: KernelRow) -> str:
    if r.source == "deepbench":
        return "gemm" if r.op == "gemm" else f"conv {r.what}"
    return r.op if r.source == "neusight" else f"{r.op.split(' ')[0]} {r.what[6:]}"


def mape_by_kind(rows: Sequence[KernelRow], precision: str, v: dict[str, float]) -> dict[str, tuple[int, float]]:
    """(rows, MAPE %) per source and kernel kind of ``rows``, each priced on its own profile with ``v``."""
    pred = priced(rows, precision, v)
    err: dict[str, list[float]] = defaultdict(list)
    for r, p in zip(rows, pred, strict=True):
        err[f"{r.source} {_kind(r)}"].append(abs(p / r.measured_s - 1))
    return {k: (len(e), 100 * float(np.mean(e))) for k, e in sorted(err.items())}


def _print_scores(title: str, scores: dict[str, tuple[int, float]]) -> None:
    print(f"  {title}: " + "; ".join(f"{k} {m:.1f}% ({n})" for k, (n, m) in scores.items()))


def report(name: str, v: dict[str, float]) -> None:
    _print_scores("in-sample", mape_by_kind(set_rows(name), SETS[name][1], v))


def _problem(r: KernelRow) -> tuple[object, ...]:
    """A measured problem: a layer shape at a batch (its forward and gradient rows share it)."""
    lay = r.layer
    return r.source, lay.kind, lay.in_shapes, lay.out_shape, lay.kernel, lay.stride, r.batch


def split_check(name: str, starts: int = 1) -> None:
    """Fit on the even problems (a layer shape at a batch, all its kernels) and score the odd
    ones, then the reverse (numbers never written); each half's fit from the neutral start and,
    with ``starts`` > 1, seeded draws inside the bounds (never the shipped values)."""
    precision = SETS[name][1]
    rows = set_rows(name)
    order: dict[tuple[object, ...], int] = {}
    for r in rows:
        order.setdefault(_problem(r), len(order))
    half = [[r for r in rows if order[_problem(r)] % 2 == lo] for lo in (0, 1)]
    for lo in (0, 1):
        v = fit(name, half[lo], quiet=True, neutral=True, starts=starts)
        _print_scores(f"fit on {'even' if lo == 0 else 'odd'} problems, scored on the others",
                      mape_by_kind(half[1 - lo], precision, v))


def transfer_check(src: str, dst: str, starts: int = 1) -> None:
    """Score ``dst``'s rows with ``src``'s fitted numbers on ``dst``'s own profile (SMs, peaks,
    bandwidth): only the kernel kinds ``src`` has rows of (the others' numbers ``src`` never fits);
    ``src`` fitted from the neutral start and ``starts`` - 1 seeded draws inside the bounds."""
    v = fit(src, quiet=True, neutral=True, starts=starts)
    kinds = {_kind(r) for r in set_rows(src)}
    rows = [r for r in set_rows(dst) if _kind(r) in kinds]
    if not rows:
        raise SystemExit(f"--transfer: {dst} has no kernel kind {src} is fitted on ({', '.join(sorted(kinds))})")
    _print_scores(f"{src} numbers on {dst}", mape_by_kind(rows, SETS[dst][1], v))


def leave_out_check(name: str, model: str, only: tuple[str, ...]) -> None:
    """Fit the set without ``model``'s rows (PipeDream's network column) and score that model's
    rows per op (numbers never written): e.g. the depthwise numbers fitted on nasnetamobile alone,
    scored on nasnetalarge."""
    profile, precision, _, _ = SETS[name]
    rows = set_rows(name)
    held = [r for r in rows if r.model == model]
    if not held:
        models = sorted({r.model for r in rows if r.model})
        raise SystemExit(f"--leave-out-model: {name} has no rows of {model!r}; its models: {', '.join(models)}")
    v = fit(name, [r for r in rows if r.model != model], quiet=True, only=only, neutral=True)
    print(f"  fitted without {model}: " + ", ".join(f"{k} = {x:.3g}" for k, x in v.items()))
    pred, _ = price_rows(held, {profile: with_values(load_hardware(profile), precision, v)}, before=False)
    err: dict[str, list[float]] = defaultdict(list)
    for r, p in zip(held, pred, strict=True):
        err[r.op].append(abs(p / r.measured_s - 1))
    _print_scores(f"scored on {model}", {k: (len(e), 100 * float(np.mean(e))) for k, e in sorted(err.items())})


def lomo_check(name: str) -> None:
    """Leave-one-model-out over PipeDream's models (numbers never written): for each model, every
    free number of ``name`` is refitted on the set's rows without that model's (DeepBench's kept;
    the module host work of the other models' profiles), the window-kernel latency, sector slots
    and forward prologue are derived from the other models
    (:func:`perfmodel.validation.pipedream_lomo.derive`), and the model's rows are scored."""
    profile, precision, sources, _ = SETS[name]
    if "pipedream" not in sources:
        raise SystemExit(f"--lomo: {name} has no PipeDream rows; sets with them: "
                         f"{[k for k, v in SETS.items() if 'pipedream' in v[2]]}")
    rows, hw0 = set_rows(name), load_hardware(profile)
    pipe = [r for r in rows if r.source == "pipedream"]
    meas = np.array([r.measured_s for r in pipe])
    pred_in, _ = price_rows(pipe, before=False)
    pred_out = np.zeros(len(pipe))
    for m in sorted({r.model for r in pipe}):
        others = [r for r in pipe if r.model != m]
        shipped = derive(others, hw0, refit=())
        train, _ = with_numbers(others, hw0, shipped)
        hw = with_values(hw0, precision, fit(name, [r for r in rows if r.source != "pipedream"] + train, quiet=True,
                                              neutral=True))
        idx = [i for i, r in enumerate(pipe) if r.model == m]
        scored, h = with_numbers([pipe[i] for i in idx], hw, derive(others, hw, refit=()))
        pred_out[idx], _ = price_rows(scored, {profile: h}, before=False)
        print(f"  {m}: left-out MAPE {100 * float(np.mean(np.abs(pred_out[idx] / meas[idx] - 1))):.1f}%", flush=True)
    print(f"{name}: PipeDream MAPE %, in sample / every number refitted without the scored model")
    for op in [*sorted({_kind(r) for r in pipe}), "all"]:
        ix = [i for i, r in enumerate(pipe) if op in ("all", _kind(r))]
        print(f"  {op:15s} {len(ix):5d}  {100 * float(np.mean(np.abs(pred_in[ix] / meas[ix] - 1))):5.1f}  "
              f"{100 * float(np.mean(np.abs(pred_out[ix] / meas[ix] - 1))):5.1f}")


def _owned_elsewhere(name: str, prof: str, key: str) -> bool:
    """Whether ``key`` of profile ``prof`` is fitted by the profile's own generation's set, not ``name``."""
    own = OWN_SET.get(prof)
    # the GEMM I_1/2 goes with the convolutions' where a generation fits that on its own rows
    mine = "tile_half_intensity" if key == "tile_half_intensity_gemm" else key
    return own is not None and own != name and mine in NEUSIGHT_FITS[own]


def write(name: str, v: dict[str, float]) -> None:
    """Write ``name``'s fitted numbers into the profiles :data:`WRITES` lists, each with the command."""
    if name not in WRITES:
        raise SystemExit(f"--write: {name} is fitted on forward-only kernels; write one of {sorted(WRITES)}")
    compute_profiles, kernel_profiles = WRITES[name]
    note = f"fitted: python scripts/fit_kernel_params.py {name} --write"
    for prof in sorted(set(compute_profiles) | set(kernel_profiles)):
        path = PROFILE_DIR / f"{prof}.toml"
        text = path.read_text(encoding="utf-8")
        for key, val in v.items():
            if key in COMPUTE:
                # the memory rate is the device's, whatever the precision of the math
                precs = tuple(load_hardware(prof).compute) if key == "memory" and prof in compute_profiles \
                    else compute_profiles.get(prof, ())
                for prec in precs:
                    text = set_in_table(text, f"efficiency.compute.{prec}", key, val, note)
            elif prof in kernel_profiles and not _owned_elsewhere(name, prof, key):
                text = set_in_table(text, "efficiency.kernels", key, val, note)
        if name == "volta-fp32" and prof in OWN_SET and "tile_half_intensity" in v:
            # the tensor-core efficiencies these profiles borrow (volta-amp) are fitted with Volta's I_1/2
            text = set_in_table(text, "efficiency.kernels", "tile_half_intensity_tensor_cores",
                                 v["tile_half_intensity"], f"{note} (Volta's tile_half_intensity)")
        load_hardware(prof)  # still a valid profile before it is replaced
        tmp = path.with_suffix(".toml.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
        print(f"  wrote {path.name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="*", choices=[[], *SETS], default=[])
    ap.add_argument("--report", action="store_true", help="MAPE per kernel kind at the fitted values")
    ap.add_argument("--split", action="store_true", help="split-half check: fit on even problems, score odd")
    ap.add_argument("--transfer", metavar="FROM:TO", help="fit FROM, score TO with only its hardware changed")
    ap.add_argument("--lomo", action="store_true", help="leave-one-model-out over PipeDream's models (slow)")
    ap.add_argument("--write", action="store_true", help="write the fitted numbers into the profiles (WRITES)")
    ap.add_argument("--only", metavar="NAME,...", default="", help="fit just these numbers (e.g. memory)")
    ap.add_argument("--starts", type=int, default=1, metavar="N",
                    help="also start from N - 1 seeded points inside the bounds, keep the best; --split and "
                         "--transfer fits too, from the neutral start (default 1)")
    ap.add_argument("--leave-out-model", metavar="MODEL", default="",
                    help="fit without MODEL's rows (PipeDream network), score them per op")
    a = ap.parse_args()
    only = tuple(x for x in a.only.split(",") if x)
    if a.starts < 1:
        ap.error(f"--starts must be at least 1 (got {a.starts})")
    if a.transfer:
        src, _, dst = a.transfer.partition(":")
        transfer_check(src, dst, a.starts)
        return
    if a.leave_out_model:
        for n in a.sets or ["volta-fp32"]:
            leave_out_check(n, a.leave_out_model, only)
        return
    if a.lomo:
        for n in a.sets or ["volta-fp32"]:
            lomo_check(n)
        return
    for n in a.sets or list(SETS):
        v = fit(n, only=only, starts=a.starts)
        if a.write:
            write(n, v)
        if a.report:
            report(n, v)
        if a.split:
            split_check(n, a.starts)


if __name__ == "__main__":
    main()

"""Fit the kernel model's few global numbers per GPU generation to the shipped kernel data.

Usage: ``python scripts/fit_kernel_params.py [--only NAME,...] [volta-fp32|volta-amp|pascal-fp32 ...]``
(``--only memory``: fit just those numbers, the others kept at the profile's values)

For each generation, minimises the mean |log(predicted / measured)| over all rows of its
sources (never per row) with Nelder-Mead, and prints the values to write into the profiles'
``[efficiency.compute.<precision>]`` (conv, linear, memory) and ``[efficiency.kernels]``
(tile_half_intensity, winograd_gain, wgrad_efficiency, depthwise_efficiency) tables:

* volta-fp32: DeepBench V100 fp32 convolutions and GEMMs + PipeDream's V100 layers;
* volta-amp: DeepBench V100 fp16 tensor-core convolutions and GEMMs (conv, linear only);
* pascal-fp32: DeepBench P100 fp32 convolutions and GEMMs;
* ampere-fp32, hopper-fp32: NeuSight's forward fp32 convolutions and linear layers on A100
  (40/80GB PCIe) and H100 (linear only): conv and linear efficiencies of fp32 only.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
from scipy.optimize import minimize

from perfmodel.hardware import load_hardware
from perfmodel.validation.kernel_rows import load_rows
from perfmodel.validation.kernels import price_rows

SETS = {
    "volta-fp32": ("v100-16gb-dgx1", "fp32", ("deepbench", "pipedream"), "V100"),
    "volta-amp": ("v100-16gb-dgx1", "amp", ("deepbench",), "V100"),
    "pascal-fp32": ("p100-16gb-nvlink", "fp32", ("deepbench",), "P100"),
    # no training kernels measured on these: NeuSight's forward fp32 kernels fit conv and linear only
    "ampere-fp32": ("a100-80gb-pcie", "fp32", ("neusight",), "A100"),
    "hopper-fp32": ("h100-80gb-dgx", "fp32", ("neusight",), "H100"),
}
#: name, lower, upper bound of each fitted number
PARAMS = (
    ("conv", 0.3, 1.0), ("linear", 0.3, 1.0), ("memory", 0.4, 1.0), ("tile_half_intensity", 0.5, 64.0),
    ("winograd_gain", 1.0, 4.0), ("wgrad_efficiency", 0.2, 1.0), ("depthwise_efficiency", 0.005, 0.5),
    # the latency bound of window kernels (only PipeDream's pooling rows inform them): fitted only
    # when named with --only
    ("memory_latency_s", 1e-7, 2e-6), ("sector_slots_per_sm", 32.0, 4096.0),
)
#: numbers the simplex sees in other units, so that every coordinate is of order one
UNIT = {"memory_latency_s": 1e-6, "sector_slots_per_sm": 100.0}
#: tensor-core precisions: their conv/linear efficiencies and weight-gradient rate; the shape
#: rules' tile intensity is the generation's (fitted on fp32)
TC_PARAMS = (("conv", 0.2, 1.0), ("linear", 0.2, 1.0), ("wgrad_efficiency_tensor_cores", 0.2, 1.0))


def fit(name: str, only: tuple[str, ...] = ()) -> dict[str, float]:
    profile, precision, sources, gpu = SETS[name]
    rows = [r for r in load_rows(sources) if r.precision == precision and gpu in r.gpu]
    if precision != "fp32":
        rows = [r for r in rows if r.source == "deepbench"]
    meas = np.array([r.measured_s for r in rows])
    hw0 = load_hardware(profile)
    # memory-bound kernels (memory efficiency) and depthwise convolutions are only in PipeDream's rows
    free = PARAMS if "pipedream" in sources else PARAMS[:2] if sources == ("neusight",) else \
        PARAMS[:2] + PARAMS[3:6] if precision == "fp32" else TC_PARAMS
    free = tuple(p for p in PARAMS if p[0] in only and p in free) if only else \
        tuple(p for p in free if p[0] not in UNIT)
    # each source weighs the same in the loss, whatever its number of rows
    n_of = {s: sum(1 for r in rows if r.source == s) for s in sources}
    weight = np.array([1.0 / n_of[r.source] for r in rows])
    weight /= weight.sum()

    def at(x: np.ndarray) -> dict[str, float]:
        return {p[0]: float(np.clip(v * UNIT.get(p[0], 1.0), p[1], p[2])) for p, v in zip(free, x, strict=True)}

    def hardware(v: dict[str, float]):  # type: ignore[no-untyped-def]
        eff = hw0.compute[precision]
        comp = dict(hw0.compute)
        comp[precision] = dataclasses.replace(eff, **{k: v[k] for k in ("conv", "linear", "memory") if k in v})
        kern = dataclasses.replace(hw0.kernels, **{k: v[k] for k in v if k not in ("conv", "linear", "memory")})
        return dataclasses.replace(hw0, compute=comp, kernels=kern)

    def loss(x: np.ndarray) -> float:
        pred, _ = price_rows(rows, {profile: hardware(at(x))}, before=False)
        return float(np.sum(weight * np.abs(np.log(pred / meas))))

    x0 = []
    for p in free:
        cur = getattr(hw0.compute[precision], p[0], None)
        x0.append((cur if cur is not None else getattr(hw0.kernels, p[0])) / UNIT.get(p[0], 1.0))
    sol = minimize(loss, np.array(x0, dtype=float), method="Nelder-Mead",
                   options={"maxiter": 400, "xatol": 1e-3, "fatol": 1e-4})
    v = at(sol.x)
    pred, _ = price_rows(rows, {profile: hardware(v)}, before=False)
    mape = float(np.mean(np.abs(pred - meas) / meas) * 100)
    print(f"{name}: {len(rows)} rows, mean |log ratio| {sol.fun:.3f}, MAPE {mape:.1f}%")
    for k, val in v.items():
        print(f"  {k} = {val:.3g}")
    return v


if __name__ == "__main__":
    args = sys.argv[1:]
    subset: tuple[str, ...] = ()
    if args[:1] == ["--only"]:
        subset, args = tuple(args[1].split(",")), args[2:]
    for n in args or list(SETS):
        fit(n, subset)

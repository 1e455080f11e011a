"""The kernel model's fitted numbers and the range each may take when fitted to kernel data.

One list for ``scripts/fit_kernel_params.py`` (which fits them per GPU generation) and for
:mod:`.pipedream_lomo` (which re-derives the PipeDream-only ones without each scored model).
"""

from __future__ import annotations

__all__ = ["PARAMS", "LATENCY_PARAMS", "TC_PARAMS", "UNIT", "BOUNDS"]

#: name, lower, upper bound of each fitted number: efficiencies stop at 1 (the peak). (A bound
#: of 0.95 on ``conv``, chosen on 2026-11-23 after seeing the shipped hold-out's calibrated
#: figure, was removed the same day: a bound picked on the hold-out makes it no hold-out.)
PARAMS: tuple[tuple[str, float, float], ...] = (
    ("conv", 0.3, 1.0), ("linear", 0.3, 1.0), ("memory", 0.4, 1.0), ("tile_half_intensity", 0.5, 64.0),
    ("winograd_gain", 1.0, 4.0), ("wgrad_efficiency", 0.2, 1.0), ("depthwise_efficiency", 0.005, 0.5),
    ("winograd_transform_flops", 0.0, 500.0), ("wgrad_split_efficiency", 0.1, 1.0),
    # depthwise kernels per output element (perfmodel/cost/depthwise.py): one thread's fixed work
    # (an index split by three integer divisions is ~50-100 issue slots, plus its loads and
    # store) and one iteration of the weight gradient's reduction, FLOPs at the fp32 peak
    ("depthwise_output_flops", 0.0, 2000.0), ("depthwise_wgrad_flops", 2.0, 1000.0),
    # weight-gradient split-K (perfmodel/cost/work.py _slot_rules): fitted on fp32 DeepBench rows
    ("wgrad_max_split", 1.0, 256.0), ("wgrad_tile_passes", 1.0, 64.0),
    # atomic add of a data gradient's sum of products (perfmodel/cost/work.py), FLOP-equivalents
    # at the matmul peak: 0 (free) to 1000 (an L2 atomic rate ~1/1000 of the FMA rate)
    ("dgrad_atomic_flops", 0.0, 1000.0),
    # I_1/2 of cuBLAS GEMMs on CUDA cores (perfmodel/cost/tile_intensity.py), as the convolutions' above
    ("tile_half_intensity_gemm", 0.5, 64.0),
)
#: the latency bound of window kernels (only PipeDream's pooling rows inform them)
LATENCY_PARAMS: tuple[tuple[str, float, float], ...] = (
    ("memory_latency_s", 1e-7, 2e-6), ("sector_slots_per_sm", 32.0, 4096.0))
#: tensor-core precisions: their conv/linear efficiencies and weight-gradient rate; the shape
#: rules' tile intensity is the generation's (fitted on fp32)
TC_PARAMS: tuple[tuple[str, float, float], ...] = (
    ("conv", 0.2, 1.0), ("linear", 0.2, 1.0), ("wgrad_efficiency_tensor_cores", 0.2, 1.0),
    ("wgrad_split_efficiency_tensor_cores", 0.1, 1.0))
#: numbers a simplex sees in other units, so that every coordinate is of order one
UNIT = {"memory_latency_s": 1e-6, "sector_slots_per_sm": 100.0, "depthwise_output_flops": 100.0,
        "depthwise_wgrad_flops": 10.0, "dgrad_atomic_flops": 100.0}
#: (lower, upper) of every fp32 and latency number by name
BOUNDS = {name: (lo, hi) for name, lo, hi in PARAMS + LATENCY_PARAMS}

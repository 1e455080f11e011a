"""Frames of single plans and of a search: one row per plan, SI units, assumptions in ``attrs``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from ..cost.fusion import DEFAULT_FUSION, check_fusion
from ..cost.grouped import DEFAULT_CUDNN_MAJOR, check_cudnn_major
from ..cost.layout import DEFAULT_MEMORY_FORMAT, check_memory_format
from ..hardware import DEFAULT_HARDWARE, Hardware
from ..network import Network
from ..report.answers import answers_for
from ..search.plan import plan
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME
from ..strategies.spec import Strategy
from .args import check_batches, check_gpus, check_kinds, check_optimizer, check_precision, check_strategy, check_top
from .loading import available_kinds, load_hardware, load_model
from .rows import as_list, software_attrs, text_columns
from .sweeps import sweep

__all__ = ["predict_frame", "plan_frame"]


def predict_frame(
    model: str | Network,
    gpus: int,
    strategy: str | Strategy | Sequence[str],
    hardware: str | Hardware = DEFAULT_HARDWARE,
    precision: str = "amp",
    batch_per_gpu: int | None = None,
    global_batch: int | None = None,
    optimizer: str = "sgd",
    image_size: int | None = None,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    fusion: str = DEFAULT_FUSION,
    amp_runtime: str = DEFAULT_AMP_RUNTIME,
    **what_if: Any,
) -> pd.DataFrame:
    """One row per plan in ``strategy`` (a spec or a list of specs): step, throughput, speedup,
    memory and the step by part (``breakdown_compute_s``, ...), in SI units.

    Accepts what :func:`~perfmodel.api.sweep` does, with ``strategy`` required (a spec string,
    a :class:`Strategy` or a list of them) and one ``hardware``; ``what_if`` keys change the
    hardware profile in memory (see :func:`load_hardware`); ``cudnn_major`` the cuDNN of the
    run's framework (before 8, grouped convolutions run one kernel per group); ``memory_format``
    the activations' layout, nchw or nhwc (:mod:`perfmodel.cost.layout`); ``fusion`` the batch-norm/add/ReLU
    chains the run's framework fuses (:mod:`perfmodel.cost.fusion`); ``amp_runtime`` the mixed-precision
    runtime of an amp or bf16 run (:mod:`perfmodel.strategies.amp_runtime`). Wrong kinds of
    argument raise :class:`~perfmodel.errors.UsageError`. ``speedup_x`` is against one GPU training
    the same global batch, as :func:`~perfmodel.strategies.predict` says it.
    """
    specs = as_list(strategy)
    for spec in specs if specs is not None else [strategy]:
        check_strategy(spec)
    return sweep(
        model,
        gpus,
        specs if specs is not None else strategy,
        load_hardware(hardware, **what_if),
        precision,
        batch_per_gpu=batch_per_gpu,
        global_batch=global_batch,
        optimizer=optimizer,
        image_size=image_size,
        cudnn_major=cudnn_major,
        memory_format=memory_format,
        fusion=fusion,
        amp_runtime=amp_runtime,
        speedup_against="global-batch",
    )


def plan_frame(
    model: str | Network,
    gpus: int,
    hardware: str | Hardware = DEFAULT_HARDWARE,
    precision: str = "amp",
    global_batch: int | None = None,
    optimizer: str = "sgd",
    image_size: int | None = None,
    top: int = 5,
    kinds: Sequence[str] | str | None = None,
    cudnn_major: int = DEFAULT_CUDNN_MAJOR,
    memory_format: str = DEFAULT_MEMORY_FORMAT,
    fusion: str = DEFAULT_FUSION,
    amp_runtime: str = DEFAULT_AMP_RUNTIME,
    **what_if: Any,
) -> pd.DataFrame:
    """The ``top`` plans of a search, fastest first, with why each runner-up loses (SI units).

    Accepts: ``model`` a zoo name or :class:`Network`; ``gpus`` an integer from 1 to
    1,000,000; ``hardware`` a profile name, path or :class:`Hardware`; ``precision`` fp32, tf32,
    amp or bf16; ``global_batch`` None (the default) or an integer from 1 to 1e9; ``optimizer``
    sgd or adam; ``top`` an integer from 1 to 1,000; ``kinds`` strategy kinds (a list or a
    comma list; default every kind); ``cudnn_major`` the cuDNN of the run's framework (before 8,
    grouped convolutions run one kernel per group); ``memory_format`` nchw or nhwc (the
    activations' layout); ``fusion`` one of :data:`~perfmodel.cost.fusion.FUSIONS`;
    ``amp_runtime`` one of :data:`~perfmodel.strategies.amp_runtime.AMP_RUNTIMES`. ``what_if`` keys change
    the hardware profile in memory.
    ``speedup_x`` is the plan's own (:attr:`~perfmodel.strategies.Prediction.speedup_baseline`).
    Wrong kinds of argument raise :class:`~perfmodel.errors.UsageError`.
    """
    net = load_model(model, image_size)
    gpus = check_gpus(gpus)
    _, global_batch = check_batches(None, global_batch)
    hw = load_hardware(hardware, **what_if)
    r = plan(
        net,
        gpus,
        hw,
        check_precision(precision),
        global_batch,
        check_optimizer(optimizer),
        None,
        check_top(top),
        check_kinds(kinds) or available_kinds(),
        check_cudnn_major(cudnn_major),
        check_memory_format(memory_format),
        check_fusion(fusion),
        amp_runtime=amp_runtime,
    )
    rows = []
    for i, (p, why) in enumerate(zip(r.plans, r.reasons, strict=True), 1):
        row: dict[str, Any] = {
            "rank": i,
            "plan": p.strategy.spec(),
            "plan_kind": p.strategy.kind,
            "step_s": p.iteration_time_s,
            "samples_per_s": p.throughput_samples_per_s,
            "speedup_x": math.nan if p.speedup_vs_1gpu is None else p.speedup_vs_1gpu,
            "efficiency_%": math.nan if p.parallel_efficiency is None else 100 * p.parallel_efficiency,
            "memory_per_gpu_bytes": p.memory_per_gpu_bytes,
            "memory_capacity_bytes": p.memory_capacity_bytes,
            "dominant": p.dominant,
            "why": why,
        }
        row.update(answers_for(p, hw, net=net).frame_row())
        row.update({f"breakdown_{k}_s": v for k, v in p.breakdown.items()})
        rows.append(row)
    df = text_columns(pd.DataFrame(rows))
    best = r.plans[0]
    df.attrs.update(
        model=best.model,
        hardware=best.hardware,
        precision=best.precision,
        global_batch=r.global_batch,
        gpus=gpus,
        baseline=best.speedup_baseline,
        **software_attrs(best.cudnn_major, best.memory_format, best.fusion, best.amp_runtime),
        assumptions=dict(r.assumptions),  # the profile and its source, precision, optimizer, exclusions, search
    )
    return df

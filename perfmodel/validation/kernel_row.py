"""One measured kernel or layer time as a one-layer problem: the row type every kernel-data reader yields."""

from __future__ import annotations

from dataclasses import dataclass

from ..cost.grouped import DEFAULT_CUDNN_MAJOR
from ..network.layers import Layer

__all__ = ["KernelRow"]


@dataclass(frozen=True)
class KernelRow:
    """One measured time: ``layer`` at ``batch`` samples, ``what`` (a GEMM slot fwd/dgrad/wgrad,
    or a phase ``layer_fwd``/``layer_bwd`` for whole layers) on ``profile`` at ``precision``."""

    source: str
    gpu: str
    profile: str
    precision: str
    op: str
    what: str
    layer: Layer
    first: bool
    batch: float
    measured_s: float
    #: the network the layer belongs to, where the source says (PipeDream's profiles; else "")
    model: str = ""
    #: GPU work the measured window holds besides ``layer``: (phase of that work's formula,
    #: layer) pairs, priced by the same kernel model (PipeDream: untimed neighbours, see
    #: ``kernel_rows._untimed_work``)
    extra: tuple[tuple[str, Layer], ...] = ()
    #: seconds of ``extra`` that can run hidden behind the window's own host work (at most: the
    #: profiler's prologue :data:`.kernel_rows.PIPEDREAM_FWD_PROLOGUE_S` plus ``host_s``)
    extra_hidden_s: float = 0.0
    #: host seconds of the module's own forward work before its first launch beyond the profiler
    #: overhead removed from ``measured_s`` (PipeDream forward rows: :func:`.kernel_rows.module_host_s`),
    #: added to the price: the GPU idles through it
    host_s: float = 0.0
    #: the cuDNN major version the row was measured with (:data:`.kernel_rows.CUDNN_MAJOR`)
    cudnn_major: int = DEFAULT_CUDNN_MAJOR
    #: the source's fastest problem of this GPU and op, whose measured time is the host work and
    #: small kernel every row's timing window holds (NeuSight: :mod:`.neusight_window`); None if none
    window_floor: KernelRow | None = None

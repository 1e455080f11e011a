"""The per-GPU-generation numbers of a hardware profile's kernel model (``[efficiency.kernels]``)
and of NCCL's collectives (``[collectives]``), each field checked against its range."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..errors import ProfileError
from .ranges import in_range

__all__ = ["KernelParams", "CollectiveParams"]


@dataclass(frozen=True)
class KernelParams:
    """Per-GPU-generation numbers of the kernel-level compute model (``[efficiency.kernels]``).

    Meanings, units and sources: ``hardware_profiles/template.toml``; how each is used:
    :mod:`perfmodel.cost.efficiency` and :mod:`perfmodel.cost.work`. Defaults: a Volta-class
    GPU (80 SMs) with the values fitted on V100 (``scripts/fit_kernel_params.py``).
    """

    sm_count: int = 80
    tile_half_intensity: float = 12.9
    winograd_gain: float = 2.78
    winograd_min_channels: float = 1.0
    winograd_transform_flops: float = 201.0
    wgrad_efficiency: float = 0.984
    wgrad_efficiency_tensor_cores: float = 1.0
    wgrad_split_efficiency: float = 0.525
    wgrad_split_efficiency_tensor_cores: float = 0.456
    depthwise_efficiency: float = 0.107
    host_op_s: float = 1.0e-5
    step_overhead_s: float = 3.0e-4
    #: the latency bound of window kernels (perfmodel.cost.work.window_path_loads): effective
    #: latency of one window load (fitted on V100), resident threads per SM (CUDA C++ Programming
    #: Guide, compute capabilities 6.0-9.0: 2048) and the 32-byte sector requests an SM keeps in
    #: flight (fitted on V100)
    memory_latency_s: float = 5.28e-07
    threads_per_sm: int = 2048
    sector_slots_per_sm: float = 369.0
    #: depthwise convolutions priced per output element (perfmodel.cost.depthwise): FLOP-equivalents
    #: at the fp32 peak of one thread's fixed work, and of one weight-gradient reduction iteration
    #: (fitted on V100; depthwise_efficiency above is the tap loop's FMA rate)
    depthwise_output_flops: float = 358.0
    depthwise_wgrad_flops: float = 84.2
    #: convolution weight-gradient split-K (perfmodel.cost.work): the most slices a kernel splits
    #: its N*P*Q reduction into per output tile, and the passes over its output tile (partial
    #: tiles written and reduced, or atomically added); fitted per generation (defaults: V100's)
    wgrad_max_split: float = 17.0
    wgrad_tile_passes: float = 26.6
    #: FLOP-equivalents at the matmul peak of one atomic add of a data gradient computed as a sum
    #: of products (perfmodel.cost.work); fitted on the P100 (144); the default is not fitted: the
    #: V100's DeepBench rows leave it undetermined (fitted alone it ran to 736 with no MAPE gain;
    #: 29.8 in a full volta-fp32 refit), so V100 and later profiles keep 30
    dgrad_atomic_flops: float = 30.0
    #: the tile intensity I_1/2 of tensor-core kernels (tf32, amp, bf16) where it differs from the
    #: CUDA-core one above; None: the same. A tensor-core precision's conv/linear efficiencies are
    #: fitted together with the shape rule's I_1/2 (scripts/fit_kernel_params.py volta-amp); a
    #: profile borrowing another generation's tensor-core efficiencies keeps the I_1/2 they were
    #: fitted with (Ampere/Hopper: Volta's), not its own CUDA-core fit's
    tile_half_intensity_tensor_cores: float | None = None
    #: the tile intensity I_1/2 of cuBLAS GEMMs (linear layers) on CUDA cores where it differs from
    #: the convolutions' above; None: the same (perfmodel.cost.tile_intensity); fitted per generation
    tile_half_intensity_gemm: float | None = None

    def half_intensity(self, tensor_cores: bool, gemm: bool = False) -> float:
        """I_1/2 of the shape rule for kernels on tensor cores or on CUDA cores (``gemm``: of a
        cuBLAS GEMM rather than an implicit-GEMM convolution)."""
        tc = self.tile_half_intensity_tensor_cores
        if tensor_cores:
            return tc if tc is not None else self.tile_half_intensity
        g = self.tile_half_intensity_gemm
        return g if gemm and g is not None else self.tile_half_intensity

    def __post_init__(self) -> None:
        for k in _COUNTS:
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ProfileError(f"efficiency.kernels: '{k}' must be a positive integer, got {v!r}")
        # every other field is a number in its range (RANGES), checked in field order; None: not set
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _COUNTS}
        in_range("efficiency.kernels", **{k: v for k, v in values.items() if v is not None})


#: The fields of :class:`KernelParams` that are whole counts, checked apart from the ranged numbers.
_COUNTS = ("sm_count", "threads_per_sm")


@dataclass(frozen=True)
class CollectiveParams:
    """How NCCL's collectives share the GPU with compute, and their fixed cost (``[collectives]``).

    ``channels_intra`` / ``channels_net``: SMs an allreduce holds inside a node / across nodes
    (NCCL runs one thread block per channel, on an SM of its own); ``base_latency_s``: the
    fixed cost of launching one collective; ``memory_passes``: bytes of device memory traffic
    per byte a collective moves over its link. Meanings and sources:
    ``hardware_profiles/template.toml``; used by :mod:`perfmodel.cost.collectives`. Defaults:
    NCCL's tuning model and a PCIe system's 2 channels (the fewest NCCL launches).
    """

    channels_intra: int = 2
    channels_net: int = 2
    base_latency_s: float = 8.4e-6
    memory_passes: float = 3.0

    def __post_init__(self) -> None:
        for k in ("channels_intra", "channels_net"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1024:
                raise ProfileError(f"collectives: '{k}' must be an integer from 1 to 1,024, got {v!r:.40}")
        in_range("collectives", base_latency_s=self.base_latency_s, memory_passes=self.memory_passes)

"""``perfmodel validate --kernels``: the compute model against measured kernels and layers."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..report import render_frame, to_json
from ..validation.kernel_rows import PIPEDREAM_BWD_OVERHEAD_S, PIPEDREAM_FWD_OVERHEAD_S, PIPEDREAM_MIN_S, load_rows
from ..validation.kernels import score_kernels
from ..validation.pipedream_lomo import held_out_prices
from .common import emit

__all__ = ["emit_kernel_scores", "KERNEL_ASSUMPTIONS"]

#: What the kernel scores compare (printed with every output).
KERNEL_ASSUMPTIONS = (
    "GPU time of the kernel model (host dispatch excluded where the source times kernels); 'before' is "
    "the per-layer roofline of perfmodel 0.1.0 on the same profiles. DeepBench: one cuDNN/cuBLAS call per row (P100, "
    "V100-SXM2). PipeDream: per-layer forward/backward of PyTorch training on a V100-class GPU, "
    f"minus {PIPEDREAM_FWD_OVERHEAD_S * 1e3:.2f} ms forward / {PIPEDREAM_BWD_OVERHEAD_S * 1e3:.2f} ms "
    f"backward of profiler hooks and synchronisation, rows below {PIPEDREAM_MIN_S * 1e3:.1f} ms "
    "after that not scored; each row also prices the untimed ops its window waits for (residual adds, "
    "concatenations, dropout, gradient sums at forks), and each forward row its module's host work before "
    "its first launch beyond a one-op module's (the empty-module time of its type in the profiles). "
    "'MAPE_out' (PipeDream): leave-one-model-out, "
    "each model's rows priced with the numbers only PipeDream's rows inform (memory efficiency, "
    "window-kernel latency and sector slots, depthwise numbers, forward prologue, modules' host work) "
    "derived from the "
    "other models' rows; the other numbers are shared with DeepBench's fit. NeuSight: forward fp32 "
    "kernels (TF32 off) on P100, V100, A100, H100, "
    "each priced on its card's profile (the P100/V100 on the PCIe ones; perfmodel/data/KERNELS.md) plus the "
    "host work its CUDA-event window holds (the GPU's and op's smallest time in NeuSight's collection less "
    "the model's time of that problem; no row priced below that time; perfmodel/validation/neusight_window.py; "
    "none for A100 80GB linear/element-wise and H100, which measured no small problem). Each source's rows "
    "are priced with "
    "the cuDNN they were measured with (grouped convolutions, perfmodel/cost/grouped.py): DeepBench P100 6, "
    "V100 7; PipeDream 7; NeuSight 8. ampere_gemm: A100 fp16 (cuBLASLt, Azure) and bf16 (torch.matmul, "
    "LLMCompass, host-timed: its own 21 us overhead added, rows under 0.1 ms not scored) GEMMs on a100-80gb-dgx. "
    "ladder_conv: fp16 NCHW forward convolutions of ResNet layers (torch F.conv2d, cuDNN 8 heuristics) on A100 "
    "80GB PCIe and V100 PCIe, priced with NeuSight's window-floor rule (each GPU's fastest row, not scored)."
)


def emit_kernel_scores(files: tuple[Path, ...], calibrate: str, fmt: str, chart: Path | None) -> None:
    """Print the per-kernel scores (``validate --kernels``)."""
    if files or calibrate != "none" or chart is not None:
        raise UsageError("--kernels scores the shipped kernel data only: it takes no FILES, "
                         "--calibrate or --chart")
    measured = load_rows()
    held_out, _ = held_out_prices(measured)
    scores = [s.to_dict() for s in score_kernels(measured, held_out=held_out)]
    if fmt == "json":
        emit(to_json({"kernels": scores, "assumptions": KERNEL_ASSUMPTIONS}))
        return
    rows = [
        {
            "source": d["source"], "gpu": d["gpu"], "op": d["op"], "rows": d["rows"],
            "MAPE_%": d["mape_pct"], "MAPE_out_%": d["mape_held_out_pct"], "MAPE_before_%": d["mape_before_pct"],
            "median_pred/meas_x": d["median_pred_over_meas"],
        }
        for d in scores
    ]
    emit(render_frame(rows, fmt))
    if fmt != "csv":
        emit("")
        emit(f"assumptions: {KERNEL_ASSUMPTIONS}")

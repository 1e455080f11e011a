"""Write examples/mynet.py's MyNet as ONNX in training mode: ``python examples/export_onnx.py [OUT]``.

Training mode keeps dropout and batch norm as they train, and no constant folding keeps every
parameter an initializer, so ``perfmodel plan mynet.onnx --gpus 8`` prices what training runs.
Opset 20 writes GELU as one node (older opsets spell it out with Erf, which perfmodel refuses).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mynet import MyNet  # noqa: E402


def export(out: str = "mynet.onnx", size: int = 224, batch: int = 2) -> None:
    """Export MyNet at ``size`` x ``size`` pixels and ``batch`` samples (fixed in the file)."""
    model = MyNet().train()
    warnings.filterwarnings("ignore", category=UserWarning)  # the exporter's notes on batch-norm counters
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # dynamo=False: the TorchScript exporter
    torch.onnx.export(
        model,
        (torch.randn(batch, 3, size, size),),
        out,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        dynamo=False,
        opset_version=20,
        input_names=["input"],
    )


if __name__ == "__main__":
    export(*sys.argv[1:2])
    print(f"wrote {sys.argv[1] if len(sys.argv) > 1 else 'mynet.onnx'}")

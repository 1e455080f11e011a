"""Options and helpers shared by every CLI command."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..cost.fusion import DEFAULT_FUSION, FUSIONS
from ..cost.grouped import CUDNN_MAJORS, DEFAULT_CUDNN_MAJOR
from ..cost.layout import DEFAULT_MEMORY_FORMAT, MEMORY_FORMATS
from ..errors import UsageError, did_you_mean
from ..hardware import DEFAULT_HARDWARE, PRECISIONS, precision_hint
from ..io import CHART_SUFFIXES, check_target
from ..limits import MAX_GPUS, MAX_IMAGE_SIZE
from ..network.importers import input_options, is_import_spec
from ..report import FORMATS
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME, check_amp_runtime

__all__ = [
    "Choice",
    "format_option",
    "report_format_option",
    "hardware_option",
    "precision_option",
    "optimizer_option",
    "cudnn_option",
    "memory_format_option",
    "fusion_option",
    "amp_runtime_option",
    "image_size_option",
    "model_input_options",
    "gpus_option",
    "chart_option",
    "emit",
    "check_writable",
    "CHART_SUFFIXES",
]

F = TypeVar("F", bound=Callable[..., Any])


class Choice(click.Choice):  # type: ignore[type-arg]
    """``click.Choice`` whose refusal also names the closest valid choices (or what ``hint`` says
    of the value: another name of a choice)."""

    def __init__(self, choices: Any, hint: Callable[[object], str] | None = None) -> None:
        super().__init__(choices)
        self.hint = hint

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as e:
            hint = (self.hint(value) if self.hint else "") or did_you_mean(str(value), [str(c) for c in self.choices])
            if not hint:
                raise
            self.fail(f"{e.message.rstrip('.')}{hint}", param, ctx)


def format_option(f: F) -> F:
    return click.option("--format", "fmt", type=Choice(FORMATS), default="table", show_default=True,
                        help="Output format; JSON is the stable contract.")(f)


def report_format_option(f: F) -> F:
    """``--format`` of a command whose output is a report, not rows: table (text) or JSON, no CSV."""
    return click.option("--format", "fmt", type=Choice(("table", "json")), default="table",
                        show_default=True, help="Output format (a text report or JSON, the stable contract).")(f)


def hardware_option(f: F) -> F:
    return click.option("--hardware", "-H", default=DEFAULT_HARDWARE, show_default=True,
                        help="Shipped profile name (see `perfmodel hardware`) or path to a TOML profile.")(f)


def precision_option(f: F) -> F:
    return click.option("--precision", type=Choice(PRECISIONS, precision_hint), default="amp", show_default=True,
                        help="fp32, tf32, amp (fp16 mixed precision) or bf16.")(f)


def optimizer_option(f: F) -> F:
    return click.option("--optimizer", type=Choice(["sgd", "sgd-plain", "adam"]), default="sgd",
                        show_default=True,
                        help="sgd (with momentum), sgd-plain (without) or adam: sets optimizer state and "
                        "update cost.")(f)


def cudnn_option(f: F) -> F:
    return click.option("--cudnn", "cudnn_major", type=Choice([str(m) for m in CUDNN_MAJORS]),
                        default=str(DEFAULT_CUDNN_MAJOR), show_default=True, callback=lambda _c, _p, v: int(v),
                        help="cuDNN major version of the run's framework: before 8, grouped convolutions "
                        "(ResNeXt) run one kernel per group. Volta needs >= 7, Ampere and Hopper >= 8.")(f)


def memory_format_option(f: F) -> F:
    return click.option("--memory-format", "memory_format", type=Choice(list(MEMORY_FORMATS)),
                        default=DEFAULT_MEMORY_FORMAT, show_default=True,
                        help="Activations' layout: nchw (PyTorch's default contiguous format; cuDNN transposes "
                        "the tensors of every tensor-core convolution) or nhwc (torch.channels_last).")(f)


def fusion_option(f: F) -> F:
    return click.option("--fusion", "fusion", type=Choice(list(FUSIONS)), default=DEFAULT_FUSION,
                        show_default=True,
                        help="Batch-norm/add/ReLU chains the run's framework fuses: eager (PyTorch, none), "
                        "mxnet-bn-add-relu (NGC MXNet --fuse-bn-relu/--fuse-bn-add-relu, fp16 NHWC) or xla "
                        "(TensorFlow with XLA).")(f)


def _amp_runtime(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    check_amp_runtime(value)  # one usage line naming the closest runtimes, exit 2
    return value


def amp_runtime_option(f: F) -> F:
    return click.option("--amp-runtime", "amp_runtime", default=DEFAULT_AMP_RUNTIME, show_default=True,
                        callback=_amp_runtime, metavar="RUNTIME",
                        help="Mixed-precision runtime of an amp or bf16 run: pytorch-autocast (per-forward weight "
                        "casts, GradScaler at amp), pytorch-half (model.half(): no casts, no scaler), "
                        "mxnet-multi-precision (fp32 master weights, fp16 copy written by the update) or "
                        "tensorflow-amp (priced as autocast). Ignored at fp32 and tf32.")(f)


def image_size_option(f: F) -> F:
    return click.option("--image-size", type=click.IntRange(min=1, max=MAX_IMAGE_SIZE), default=None,
                        help="Input height/width in pixels (default: the model's evaluation size).")(f)


def _shape(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        shape = tuple(int(v) for v in value.replace("x", ",").split(","))
    except ValueError:
        raise click.BadParameter(f"'{value}' is not C,H,W or C,D,H,W (integers)") from None
    if len(shape) not in (2, 3, 4) or not all(1 <= d <= MAX_IMAGE_SIZE for d in shape):
        raise click.BadParameter(f"'{value}' must be 2 to 4 extents from 1 to {MAX_IMAGE_SIZE:,}")
    return shape


def model_input_options(f: F) -> F:
    """``--in-channels`` and ``--input-shape`` for MODEL given as ``file.py:Name``, ``model.onnx``,
    ``torchvision:NAME`` or ``timm:NAME``; the command runs with them as the import's input."""

    @functools.wraps(f)
    def run(*args: Any, in_channels: int | None = None, input_shape: tuple[int, ...] | None = None,
            **kwargs: Any) -> Any:
        model = kwargs.get("model")
        given = [o for o, v in (("--in-channels", in_channels), ("--input-shape", input_shape)) if v is not None]
        if given and isinstance(model, str) and not is_import_spec(model):
            verb = "applies" if len(given) == 1 else "apply"
            raise UsageError(f"{' and '.join(given)} {verb} to an imported model only (file.py:Name, model.onnx, "
                             f"torchvision:NAME, timm:NAME), not to the zoo's '{model}', whose input is fixed "
                             f"(--image-size sets its height and width where the model allows)")
        with input_options(in_channels, input_shape):
            return f(*args, **kwargs)

    run = click.option("--input-shape", default=None, callback=_shape, metavar="C,H,W",
                       help="Per-sample input of an imported model (C,H,W or C,D,H,W; "
                            "default 3 x image size x image size).")(run)
    run = click.option("--in-channels", type=click.IntRange(min=1, max=MAX_IMAGE_SIZE), default=None,
                       help="Input channels of an imported model (default 3).")(run)
    return run  # type: ignore[return-value]


def gpus_option(f: F) -> F:
    return click.option("--gpus", "-n", type=click.IntRange(min=1, max=MAX_GPUS), required=True,
                        help="Total number of GPUs.")(f)


def chart_option(f: F) -> F:
    return click.option("--chart", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help=f"Also draw a chart to this file ({', '.join(CHART_SUFFIXES)}).")(f)



def check_writable(path: Path | None, suffixes: tuple[str, ...] = CHART_SUFFIXES) -> None:
    """Fail before any work if ``path`` cannot be written (nothing partial is left).

    ``suffixes`` are the extensions the file may have (by default those of a chart).
    """
    if path is not None:
        check_target(path, suffixes)


def emit(text: str) -> None:
    click.echo(text)

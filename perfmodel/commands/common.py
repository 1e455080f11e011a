"""Options and helpers shared by every CLI command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..hardware import DEFAULT_HARDWARE, PRECISIONS
from ..io import check_target
from ..limits import MAX_GPUS, MAX_IMAGE_SIZE
from ..report import FORMATS

__all__ = [
    "format_option",
    "hardware_option",
    "precision_option",
    "optimizer_option",
    "image_size_option",
    "gpus_option",
    "chart_option",
    "emit",
    "check_writable",
    "CHART_SUFFIXES",
]

F = TypeVar("F", bound=Callable[..., Any])


def format_option(f: F) -> F:
    return click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                        help="Output format; JSON is the stable contract.")(f)


def hardware_option(f: F) -> F:
    return click.option("--hardware", "-H", default=DEFAULT_HARDWARE, show_default=True,
                        help="Shipped profile name (see `perfmodel hardware`) or path to a TOML profile.")(f)


def precision_option(f: F) -> F:
    return click.option("--precision", type=click.Choice(PRECISIONS), default="amp", show_default=True,
                        help="fp32, tf32, amp (fp16 mixed precision) or bf16.")(f)


def optimizer_option(f: F) -> F:
    return click.option("--optimizer", type=click.Choice(["sgd", "sgd-plain", "adam"]), default="sgd",
                        show_default=True,
                        help="sgd (with momentum), sgd-plain (without) or adam: sets optimizer state and "
                        "update cost.")(f)


def image_size_option(f: F) -> F:
    return click.option("--image-size", type=click.IntRange(min=1, max=MAX_IMAGE_SIZE), default=None,
                        help="Input height/width in pixels (default: the model's evaluation size).")(f)


def gpus_option(f: F) -> F:
    return click.option("--gpus", "-n", type=click.IntRange(min=1, max=MAX_GPUS), required=True,
                        help="Total number of GPUs.")(f)


def chart_option(f: F) -> F:
    return click.option("--chart", type=click.Path(dir_okay=False, path_type=Path), default=None,
                        help="Also draw a chart to this file (.png or .svg).")(f)


#: The files ``--chart`` can draw, by extension.
CHART_SUFFIXES = (".png", ".svg", ".pdf")


def check_writable(path: Path | None, suffixes: tuple[str, ...] = CHART_SUFFIXES) -> None:
    """Fail before any work if ``path`` cannot be written (nothing partial is left).

    ``suffixes`` are the extensions the file may have (by default those of a chart).
    """
    if path is not None:
        check_target(path, suffixes)


def emit(text: str) -> None:
    click.echo(text)

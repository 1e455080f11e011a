"""CLI options shared by the commands that answer time-to-train and cost (predict, plan, scale)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..errors import UsageError
from ..report.answers import Answers, TrainingRequest
from ..search import PlanResult
from ..strategies.train_cost import MAX_DATASET, MAX_EPOCHS

__all__ = ["training_options", "training_request", "rank", "RANK_BY"]

F = TypeVar("F", bound=Callable[..., Any])


def training_options(f: F) -> F:
    """``--epochs``, ``--dataset-size``, ``--price-per-gpu-hour`` and ``--currency``."""
    f = click.option("--currency", default=None, help="Currency of --price-per-gpu-hour (default USD).")(f)
    f = click.option(
        "--price-per-gpu-hour", type=click.FloatRange(min=0, max=1e6), default=None,
        help="Price of one GPU for one hour: with --epochs, the cost of training (default: the "
        "profile's cited list price, where it has one).",
    )(f)
    f = click.option(
        "--dataset-size", type=click.IntRange(min=1, max=MAX_DATASET), default=None,
        help="Samples per epoch (default for 1000-class image classifiers: ImageNet-1k's 1,281,167 "
        "training images, Russakovsky et al. 2015).",
    )(f)
    f = click.option(
        "--epochs", type=click.FloatRange(min=0, min_open=True, max=MAX_EPOCHS), default=None,
        help="Epochs to train: adds the wall-clock time to train (and its cost with a price).",
    )(f)
    return f


def training_request(
    epochs: float | None, dataset_size: int | None, price_per_gpu_hour: float | None, currency: str | None
) -> TrainingRequest:
    if currency is not None and price_per_gpu_hour is None:  # it would be ignored: a profile's price has its own
        raise UsageError(f"--currency {currency} names the currency of --price-per-gpu-hour: give the price too "
                         f"(without one, the profile's own price is used, in its own currency)")
    return TrainingRequest(epochs, dataset_size, price_per_gpu_hour, currency)


#: What ``plan --rank-by`` orders the plans by.
RANK_BY = ("throughput", "time", "cost")


def rank(r: PlanResult, answers: list[Answers], by: str) -> tuple[PlanResult, list[Answers]]:
    """The plans (and their answers) ordered by throughput, time to train or cost; ties keep the search's order.

    Time to train is steps x step time and cost is time x GPUs x price, so at one GPU count and
    global batch both order the plans as throughput does; ranking by cost needs a price.
    """
    if by not in RANK_BY:
        raise UsageError(f"unknown ranking '{by}' (valid: {', '.join(RANK_BY)})")
    if by == "throughput":
        return r, answers
    if any(a.training is None for a in answers):
        raise UsageError(
            f"--rank-by {by} needs --epochs (and --dataset-size for a model that is not an ImageNet classifier)"
        )
    if by == "cost" and any(a.training is not None and a.training.cost is None for a in answers):
        raise UsageError("--rank-by cost needs a price: --price-per-gpu-hour P (the profile has none)")

    def key(i: int) -> float:
        t = answers[i].training
        assert t is not None
        value = t.cost if by == "cost" else t.time_s
        return float("inf") if value is None else value

    order = sorted(range(len(answers)), key=lambda i: (key(i), i))
    plans = tuple(r.plans[i] for i in order)
    reasons = tuple(r.reasons[i] for i in order)
    assumptions = dict(r.assumptions, ranking=f"by {by} to train (lowest first)")
    return dataclasses.replace(r, plans=plans, reasons=reasons, assumptions=assumptions), [answers[i] for i in order]

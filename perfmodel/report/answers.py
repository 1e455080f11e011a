"""What a user acts on, for one prediction: its error bars, the memory verdict, time to train and cost.

:func:`answers_for` gathers them from :mod:`perfmodel.validation.intervals`,
:mod:`perfmodel.strategies.headroom` and :mod:`perfmodel.strategies.train_cost`; the commands
and the API add :meth:`Answers.fields` to their JSON and rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..hardware import Hardware
from ..network import Network, get_model
from ..strategies.headroom import MemoryVerdict, largest_batch_per_gpu, memory_verdict
from ..strategies.predict import Prediction, context
from ..strategies.train_cost import TrainingEstimate, default_dataset_size, training_estimate
from ..validation.intervals import DEFAULT_LEVEL, Interval, group_key, interval_for
from ..validation.memory_margin import activation_error
from .render import assumption_columns, fmt_rate

__all__ = ["Answers", "TrainingRequest", "answers_for", "price_of", "frame_columns", "FRAME_COLUMNS", "interval_notes",
           "standalone_columns"]


@dataclass(frozen=True)
class TrainingRequest:
    """What the user asked about training: epochs, dataset size and price (None = not asked / default)."""

    epochs: float | None = None
    dataset_size: int | None = None
    price_per_gpu_hour: float | None = None
    currency: str | None = None

    @property
    def asked(self) -> bool:
        return self.epochs is not None or self.dataset_size is not None or self.price_per_gpu_hour is not None


@dataclass(frozen=True)
class Answers:
    """Interval, memory verdict and (when asked) training time and cost of one prediction."""

    interval: Interval
    throughput_interval: tuple[float, float]
    step_interval_s: tuple[float, float]
    memory: MemoryVerdict
    training: TrainingEstimate | None = None

    def fields(self) -> dict[str, Any]:
        """The JSON contract's fields (SI units)."""
        d: dict[str, Any] = {
            "throughput_interval_samples_per_s": list(self.throughput_interval),
            "iteration_time_interval_s": list(self.step_interval_s),
            "interval": self.interval.to_dict(),
            "memory_headroom_bytes": self.memory.headroom_bytes,
            "memory_verdict": self.memory.text(),
            "memory_error_margin_bytes": self.memory.margin_bytes,
            "memory_error_source": self.memory.margin_note,
            "largest_batch_per_gpu_that_fits": self.memory.largest_batch_per_gpu,
        }
        if self.training is not None:
            d.update(self.training.to_dict())
        return d

    def flat_fields(self) -> dict[str, Any]:
        """:meth:`fields` for CSV: ``[low, high]`` as ``*_low``/``*_high``, the interval's keys prefixed."""
        out: dict[str, Any] = {}
        for k, v in self.fields().items():
            if isinstance(v, list):
                out[f"{k}_low"], out[f"{k}_high"] = v
            elif isinstance(v, dict):
                out.update({f"{k}_{kk}": vv for kk, vv in v.items() if not isinstance(vv, dict | list)})
            elif v is not None:
                out[k] = v
        return out

    def lines(self) -> list[str]:
        """Text lines for a prediction's report."""
        lo, hi = self.throughput_interval
        tlo, thi = self.step_interval_s
        iv = self.interval
        out = [
            f"{100 * iv.level:.0f}% interval: step {tlo * 1e3:.2f} - {thi * 1e3:.2f} ms, "
            f"throughput {fmt_rate(lo)} - {fmt_rate(hi)} samples/s (from {iv.runs} measured runs: {iv.group})",
        ]
        if iv.fallback or "(few" in iv.note:
            out.append(f"  note: {iv.note}")
        out.append(f"memory: {self.memory.text()}")
        if self.training is not None:
            out.append(self.training.text())
        return out

    def frame_row(self) -> dict[str, Any]:
        """An API frame row's columns (SI units): :data:`FRAME_COLUMNS` and the largest batch."""
        lo, hi = self.throughput_interval
        tlo, thi = self.step_interval_s
        return {
            "samples_per_s_low": lo,
            "samples_per_s_high": hi,
            "step_s_low": tlo,
            "step_s_high": thi,
            "interval_group": self.interval.group,
            "interval_runs": self.interval.runs,
            "memory_headroom_bytes": self.memory.headroom_bytes,
            "largest_batch_per_gpu_that_fits": self.memory.largest_batch_per_gpu,
        }

    def row(self) -> dict[str, Any]:
        """Extra columns of a plan table row (table units)."""
        lo, hi = self.throughput_interval
        row: dict[str, Any] = {
            f"{100 * self.interval.level:.0f}%_range_samples/s": f"{fmt_rate(lo)}-{fmt_rate(hi)}",
            "headroom_%": 100 * self.memory.headroom_fraction,
        }
        if self.training is not None:
            row["train_h"] = self.training.time_s / 3600
            if self.training.cost is not None:
                row[f"cost_{self.training.currency}"] = self.training.cost
        return row


def price_of(hw: Hardware, req: TrainingRequest) -> tuple[float | None, str, str]:
    """(price per GPU-hour, currency, where it comes from): the request's, else the profile's."""
    if req.price_per_gpu_hour is not None:
        return req.price_per_gpu_hour, req.currency or "USD", "given with --price-per-gpu-hour"
    if hw.price_per_gpu_hour is not None:
        date = hw.sources.get("price_date", "an unknown date")
        src = f"{hw.name} profile, price as of {date}: {hw.sources.get('price', '')}"
        return hw.price_per_gpu_hour, hw.price_currency, src
    return None, req.currency or "USD", ""


def answers_for(
    p: Prediction,
    hw: Hardware,
    req: TrainingRequest | None = None,
    net: Network | None = None,
    level: float = DEFAULT_LEVEL,
    largest: bool = True,
) -> Answers:
    """The answers for ``p`` priced on ``hw`` (``net``: the network, when not a zoo model)."""
    req = req or TrainingRequest()
    iv = interval_for(group_key(p.model, hw, p.precision, p.strategy.kind), level)
    net = net or get_model(p.model, p.image_size)
    big = None
    if largest:
        b0, rem = divmod(p.global_batch, p.gpus)
        known = (b0, p.memory_per_gpu_bytes) if rem == 0 else None
        ctx = context(net, hw, p.precision, p.optimizer, cudnn_major=p.cudnn_major, memory_format=p.memory_format,
                      fusion=p.fusion, amp_runtime=p.amp_runtime)
        big = largest_batch_per_gpu(ctx, p.strategy, known=known)
    err = activation_error(p.model)
    note = f"{100 * abs(err.fraction):.1f}% of the activations ({err.note}); other parts not measured (no GPU data)"
    verdict = memory_verdict(p, err.fraction, note, big)
    step = iv.step_time(p.iteration_time_s)
    training = None
    price, currency, source = price_of(hw, req)
    if req.asked:  # a price alone prices one epoch
        training = _training(p, net, req, step, price, currency, source)
    return Answers(iv, iv.throughput(p.throughput_samples_per_s), step, verdict, training)


def _training(
    p: Prediction,
    net: Network,
    req: TrainingRequest,
    step: tuple[float, float],
    price: float | None,
    currency: str,
    source: str,
) -> TrainingEstimate:
    if req.dataset_size is not None:
        size, what = req.dataset_size, f"{req.dataset_size:,} samples (given)"
    else:
        default = default_dataset_size(net)
        if default is None:
            raise UsageError(
                f"give --dataset-size for {p.model}: the ImageNet-1k default (1,281,167 images) is only "
                f"taken for 1000-class image classifiers"
            )
        size, what = default
    epochs = 1.0 if req.epochs is None else req.epochs
    return training_estimate(p, epochs, size, what, step, price, currency, source)



#: The columns :func:`frame_columns` adds to an API frame row (SI units).
FRAME_COLUMNS = (
    "samples_per_s_low",
    "samples_per_s_high",
    "step_s_low",
    "step_s_high",
    "interval_group",
    "interval_runs",
    "memory_headroom_bytes",
)


def frame_columns(
    model: str, hw: Hardware, precision: str, kind: str, step_s: float, samples_per_s: float, memory_bytes: float
) -> dict[str, Any]:
    """A frame row's 80% interval and memory headroom, from the row's own numbers (no pricing)."""
    iv = interval_for(group_key(model, hw, precision, kind))
    lo, hi = iv.throughput(samples_per_s)
    tlo, thi = iv.step_time(step_s)
    return {
        "samples_per_s_low": lo,
        "samples_per_s_high": hi,
        "step_s_low": tlo,
        "step_s_high": thi,
        "interval_group": iv.group,
        "interval_runs": iv.runs,
        "memory_headroom_bytes": hw.device.memory_bytes - memory_bytes,
    }


def standalone_columns(p: Prediction) -> dict[str, Any]:
    """What a CSV row needs to stand alone: the model and setting it was priced for, its SI values and
    its assumptions (:func:`~.render.assumption_columns`)."""
    return {"model": p.model, "hardware": p.hardware, "gpus": p.gpus, "global_batch": p.global_batch,
            "image_size": p.image_size,
            "optimizer": p.optimizer, "precision": p.precision, "cudnn_major": p.cudnn_major,
            "memory_format": p.memory_format, "fusion": p.fusion, "amp_runtime": p.amp_runtime,
            "iteration_time_s": p.iteration_time_s, "throughput_samples_per_s": p.throughput_samples_per_s,
            "memory_per_gpu_bytes": p.memory_per_gpu_bytes, **assumption_columns(p.assumptions)}


def interval_notes(rows: list[tuple[str, str, int]]) -> list[str]:
    """Lines naming each distinct interval group of (row label, group, runs), with the rows using it."""
    seen: dict[tuple[str, int], list[str]] = {}
    for label, group, runs in rows:
        seen.setdefault((group, runs), []).append(label)
    out = [f"  {', '.join(labels)}: {n} measured runs of {g}" for (g, n), labels in seen.items()]
    head = f"{100 * DEFAULT_LEVEL:.0f}% ranges: conformal, from the shipped measured runs of the closest group"
    return [head, *out] if out else []

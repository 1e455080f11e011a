"""A priced step as a Chrome trace (the JSON event format chrome://tracing and Perfetto open).

Format: Google's "Trace Event Format" document: a JSON object with a ``traceEvents`` array;
complete events (``ph: "X"``) carry ``name``, ``cat``, ``ts`` and ``dur`` in microseconds,
``pid`` and ``tid``; metadata events (``ph: "M"``) name the processes and threads.

Process 0 is the step of one GPU as the model prices it: the breakdown's parts one after the
other (they add up to the step time). For a pipeline, process 1 has one thread per stage with
every micro-batch's forward and backward pass (each with the send that follows it) as the
pricing schedules them (:meth:`Prediction.pipeline_schedule`, GPipe or 1F1B, what the Gantt
chart draws), followed by the exposed gradient exchange and the optimizer step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..io import atomic_write_text
from ..strategies.predict import Prediction

__all__ = ["trace_events", "write_trace", "US_PER_S"]

US_PER_S = 1e6

#: The breakdown's parts in the order they happen in a step (others follow in their own order).
_ORDER = (
    "compute",
    "recompute",
    "halo_exchange",
    "redistribution",
    "pipeline_p2p",
    "pipeline_bubble",
    "gradient_exchange_exposed",
    "amp_casts",
    "optimizer_step",
)


def _meta(pid: int, tid: int, kind: str, name: str) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}


def _event(name: str, cat: str, start_s: float, dur_s: float, pid: int, tid: int, **args: Any) -> dict[str, Any]:
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": start_s * US_PER_S,
        "dur": max(0.0, dur_s) * US_PER_S,
        "pid": pid,
        "tid": tid,
        "args": args,
    }


def trace_events(p: Prediction) -> dict[str, Any]:
    """The trace of ``p`` as a JSON-able dict (``traceEvents`` plus what it shows in ``otherData``)."""
    events: list[dict[str, Any]] = [
        _meta(0, 0, "process_name", f"{p.model}: one step of {p.strategy.spec()} on {p.gpus} x {p.hardware}"),
        _meta(0, 0, "thread_name", "step time by part (the busiest GPU)"),
    ]
    t = 0.0
    parts = [k for k in _ORDER if k in p.breakdown] + [k for k in p.breakdown if k not in _ORDER]
    for k in parts:
        v = p.breakdown[k]
        if v > 0:
            events.append(_event(k, "step", t, v, 0, 0, seconds=v, share_of_step=v / p.iteration_time_s))
            t += v
    stages = p.details.get("stages") if isinstance(p.details, dict) else None
    if p.strategy.pp > 1 and isinstance(stages, list) and len(stages) > 1:
        events += _pipeline_events(p, stages)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "model": p.model,
            "hardware": p.hardware,
            "strategy": p.strategy.spec(),
            "global_batch": p.global_batch,
            "iteration_time_s": p.iteration_time_s,
            "time_unit": "microseconds",
            "assumptions": dict(p.assumptions),
        },
    }


def _pipeline_events(p: Prediction, stages: list[Any]) -> list[dict[str, Any]]:
    ops = p.pipeline_schedule()
    m = p.strategy.mb
    schedule = str(p.details.get("schedule", p.strategy.schedule))
    per_stage = p.gpus // p.strategy.pp
    out = [_meta(1, 0, "process_name", f"pipeline schedule ({schedule}, {m} micro-batches)")]
    for i in range(len(stages)):
        out.append(_meta(1, i, "thread_name", f"stage {i} ({per_stage} GPU{'s' if per_stage > 1 else ''})"))
    for o in ops:
        kind = "backward" if o.backward else "forward"
        out.append(_event(f"{kind[0].upper()}{o.micro_batch}", kind, o.start_s, o.end_s - o.start_s, 1, o.stage,
                          micro_batch=o.micro_batch, stage=o.stage))
    end = max((o.end_s for o in ops), default=0.0)
    for i in range(len(stages)):
        t = end
        for k in ("gradient_exchange_exposed", "amp_casts", "optimizer_step"):
            v = p.breakdown.get(k, 0.0)
            if v > 0:
                out.append(_event(k, "step", t, v, 1, i, seconds=v))
                t += v
    return out


def write_trace(p: Prediction, path: str | Path) -> None:
    """Write the trace of ``p`` to ``path`` atomically (temporary file, parsed back, renamed)."""
    atomic_write_text(path, json.dumps(trace_events(p), allow_nan=False), _parses)


def _parses(tmp: Path) -> None:
    json.loads(tmp.read_text(encoding="utf-8"))

"""Delays of each pipeline stage's last backward pass (NCCL's contention, DDP's copy into its
buckets) compose along the schedule's critical path: checked against a brute-force
simulation of GPipe's schedule with the delays put on the passes, and through predict,
the search and explain on pipelines with data parallelism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import predict
from perfmodel.strategies.context import context
from perfmodel.strategies.data import Drain, drain_delays, drain_stage, stage_backward_s
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.spec import parse_strategy


def gpipe_last_passes(fwd: list[float], bwd: list[float], m: int, delays: list[float]) -> list[float]:
    """When each stage's last backward pass ends in GPipe's schedule, simulated pass by pass:
    every stage runs all forward passes (micro-batch 0 first), then the backward passes last
    micro-batch first; a pass starts when its stage is free and its input is there (the
    previous stage's forward, the next stage's backward of the same micro-batch); stage s's
    last backward pass takes ``delays[s]`` longer. The step ends with stage 0's."""
    n = len(fwd)
    done: dict[tuple[int, bool, int], float] = {}
    for s in range(n):  # forward passes: stage by stage is a valid order (inputs come from s - 1)
        free = 0.0
        for k in range(m):
            start = max(free, done[(s - 1, False, k)] if s > 0 else 0.0)
            done[(s, False, k)] = free = start + fwd[s]
    for s in reversed(range(n)):
        free = done[(s, False, m - 1)]
        for k in reversed(range(m)):
            dep = done[(s + 1, True, k)] if s + 1 < n else done[(s, False, k)]
            start = max(free, dep)
            done[(s, True, k)] = free = start + bwd[s] + (delays[s] if k == 0 else 0.0)
    return [done[(s, True, 0)] for s in range(n)]


def gpipe_end(fwd: list[float], bwd: list[float], m: int, delays: list[float]) -> float:
    return max(gpipe_last_passes(fwd, bwd, m, delays))


times = st.floats(0.1, 10.0)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(data=st.data(), n=st.integers(1, 6), m=st.integers(1, 8))
def test_delays_compose_as_the_simulated_schedule(data: st.DataObject, n: int, m: int) -> None:
    fwd = data.draw(st.lists(times, min_size=n, max_size=n))
    bwd = data.draw(st.lists(times, min_size=n, max_size=n))
    delays = data.draw(st.lists(st.one_of(st.just(0.0), st.floats(0.0, 1.0), st.floats(0.0, 50.0)),
                                min_size=n, max_size=n))
    zero = [0.0] * n
    rb = stage_backward_s(fwd, bwd, zero, zero, False)
    drain = Drain(rb, m, drain_stage(rb, m))
    # the closed form (sum f + (m - 1) max f + sum b + (m - 1) max b) is the simulated step
    base = gpipe_end(fwd, bwd, m, zero)
    assert base == pytest.approx(sum(fwd) + (m - 1) * max(fwd) + sum(bwd) + (m - 1) * max(bwd), rel=1e-12)
    growth, start, slack = drain_delays(drain, delays)
    assert growth == pytest.approx(gpipe_end(fwd, bwd, m, delays) - base, rel=1e-9, abs=1e-9)
    assert growth >= sum(delays[: drain.stage + 1]) - 1e-9  # the critical path's delays all count
    # each stage's last pass: how much later it starts, and how much earlier than the closed
    # form's ends (every stage on the critical path: total - sum of the backward passes below)
    before, after = gpipe_last_passes(fwd, bwd, m, zero), gpipe_last_passes(fwd, bwd, m, delays)
    ends = [base - sum(bwd[:i]) for i in range(n)]
    for i in range(n):
        assert start[i] == pytest.approx(after[i] - delays[i] - before[i], rel=1e-9, abs=1e-9)
        assert slack[i] == pytest.approx(ends[i] - before[i], rel=1e-9, abs=1e-9)


def test_the_worked_numbers_of_the_docstring() -> None:
    rb = [4.0, 6.0, 5.0, 3.0]
    assert drain_stage(rb, 8) == 1 and drain_stage(rb, 1) == 3
    growth, _, slack = drain_delays(Drain(rb, 8, 1), [0.3] * 4)
    assert growth == pytest.approx(0.6) and slack == pytest.approx([0.0, 0.0, 7.0, 21.0])
    growth, _, slack = drain_delays(Drain(rb, 1, 3), [0.3] * 4)
    assert growth == pytest.approx(1.2) and slack == [0.0] * 4
    # the largest single delay is a lower bound of what the step takes
    fwd = [1.0, 1.0, 1.0, 1.0]
    grown = gpipe_end(fwd, rb, 8, [0.3] * 4) - gpipe_end(fwd, rb, 8, [0.0] * 4)
    assert grown == pytest.approx(0.6) and grown > 0.3


V100 = load_hardware("v100-16gb-dgx1")


@pytest.mark.parametrize("spec", ["pp=4,dp=2,mb=8", "pp=4,dp=2,mb=1", "pp=2,dp=4,mb=4,recompute=true",
                                  "pp=4,dp=2,mb=8,schedule=1f1b"])
def test_predict_search_and_explain_agree_on_pipelines(spec: str) -> None:
    """The search chooses among splits with the same terms predict prints, and explain's terms
    are predict's; the delays counted are those of the stages up to the drain's bottleneck."""
    ctx = context(get_model("vgg16"), V100, "fp32", "sgd")
    s = parse_strategy(spec, 8)
    f = explain_plan(ctx, s, 8 * 32)
    p = f.prediction
    for k in ("nccl_contention", "gradient_bucket_copies", "gradient_exchange_exposed"):
        assert f.term_values[k] == pytest.approx(p.breakdown[k], rel=1e-9, abs=1e-15)
    assert f.iteration_time_s == pytest.approx(p.iteration_time_s, rel=1e-9)
    c = p.details["drain_stage"]
    stages = p.details["stages"]
    rb = [x["backward_s"] + x["send_backward_s"] + (x["forward_s"] + x["send_forward_s"] if s.recompute else 0.0)
          for x in stages]
    assert c == drain_stage(rb, s.mb)
    if s.mb == 1:
        assert c == len(stages) - 1  # no slack anywhere: every stage's delays are on the path
    # pinning the chosen split prices the same step (the search's number is predict's)
    pinned = predict("vgg16", 8, spec + ",balance=" + ":".join(map(str, p.details["balance"])), V100, "fp32",
                     global_batch=8 * 32)
    assert pinned.iteration_time_s == pytest.approx(p.iteration_time_s, rel=1e-12)

"""explain's terms are predict's breakdown: one ``T_<key>`` per key, each equal to that entry.

Both come from the same term builders (``chain_terms``, ``split_terms``) evaluated on numbers
and on symbols, so these checks hold by construction; they fail if explain lays out terms
of its own again, or if a term has no symbolic form (it would enter as a numeric term).
"""

from __future__ import annotations

import math

import pytest
import sympy as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from perfmodel.errors import BatchSplitError, StrategyError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import parse_strategy
from perfmodel.strategies.explain import StepFormula, explain_plan
from perfmodel.strategies.predict import Context, context

_CONTEXTS: dict[tuple[str, int | None, str], Context] = {}


def _ctx(model: str, size: int | None, hw: str) -> Context:
    key = (model, size, hw)
    if key not in _CONTEXTS:
        _CONTEXTS[key] = context(get_model(model, size), load_hardware(hw), "amp", "sgd")
    return _CONTEXTS[key]


#: (plan kind, model, image size, hardware, GPUs, spec, global batch): every plan kind, on
#: three profiles (one and several nodes) and four networks (2-D, 3-D, with and without a tiled chain)
MATRIX = [
    ("data", "resnet18", 64, "a100-80gb-dgx", 8, "dp=8", 256),
    ("data over nodes", "resnet18", 64, "abci-v100-16gb", 16, "dp=16,comm=hierarchical", 512),
    ("data, tree", "alexnet", None, "v100-16gb-dgx1", 8, "dp=8,comm=tree", 256),
    ("parameter server central", "alexnet", None, "v100-16gb-dgx1", 8, "dp=8,comm=ps-central", 256),
    ("parameter server sharded", "resnet18", 64, "abci-v100-16gb", 16, "dp=16,comm=ps-sharded", 256),
    ("spatial", "resnet18", 128, "a100-80gb-dgx", 4, "sp=2x2", 8),
    ("spatial, auto decomposition", "cosmoflow", 128, "a100-80gb-dgx", 8, "sp=2x2x2,decomp=auto", 8),
    ("sp x dp", "cosmoflow", 128, "abci-v100-16gb", 16, "sp=2x2x1,dp=4", 16),
    ("sp over nodes", "resnet18", 128, "abci-v100-16gb", 8, "sp=4x2", 8),
    ("pipeline", "resnet18", 64, "a100-80gb-dgx", 8, "pp=2,dp=4", 256),
    ("pipeline 1f1b over nodes", "resnet18", 64, "abci-v100-16gb", 16, "pp=8,dp=2,mb=8,schedule=1f1b", 256),
    ("sp x pp", "cosmoflow", 128, "abci-v100-16gb", 8, "sp=2x2x1,pp=2", 8),
    ("sp x pp x dp", "resnet18", 128, "a100-80gb-dgx", 16, "pp=2,sp=2x2,dp=2,mb=2", 16),
    ("filter", "resnet18", 64, "a100-80gb-dgx", 4, "filter=4", 64),
    ("filter x dp", "resnet18", 64, "abci-v100-16gb", 16, "filter=4,dp=4", 128),
    ("channel x dp", "alexnet", None, "v100-16gb-dgx1", 8, "channel=2,dp=4", 128),
    ("mp", "tiny_cnn", None, "a100-80gb-dgx", 2, "mp=2", 16),
    ("mp, recompute", "tiny_cnn", None, "v100-16gb-dgx1", 4, "mp=2,dp=2,mb=4,recompute=true", 32),
    ("mp, uneven micro-batches", "tiny_cnn", None, "a100-80gb-dgx", 4, "mp=2,dp=2,mb=3", 40),
    ("mp x dp", "resnet18", 64, "abci-v100-16gb", 8, "mp=2,dp=4,mb=2", 64),
    ("dataparallel", "resnet18", 64, "p40-24gb-pcie", 8, "dp=8,comm=dataparallel", 256),
    ("overlap=none", "resnet18", 64, "abci-v100-16gb", 16, "dp=16,overlap=none", 512),
    ("accumulation, uneven micro-batches", "resnet18", 64, "a100-80gb-dgx", 4, "dp=4,mb=3", 40),
    ("recompute, pipeline", "resnet18", 64, "a100-80gb-dgx", 8, "pp=4,dp=2,mb=8,recompute=true", 256),
    ("recompute, spatial", "resnet18", 128, "a100-80gb-dgx", 8, "sp=2x2,dp=2,recompute=true", 16),
]


def check_terms(f: StepFormula) -> None:
    """explain's terms are predict's breakdown: names, order and values."""
    breakdown = f.prediction.breakdown
    assert list(f.terms) == list(breakdown)
    assert f.numeric_terms == ()  # every term has its symbolic form
    for k, v in f.term_values.items():
        assert v == pytest.approx(breakdown[k], rel=1e-9, abs=1e-15), k
        if breakdown[k] != 0:
            assert isinstance(f.terms[k], sp.Basic) and f.terms[k].free_symbols, k
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)
    # the formula is the terms' sum, and each term is a function of its symbols only
    assert sum(f.evaluate().values()) == pytest.approx(f.iteration_time_s, rel=1e-12)


@pytest.mark.parametrize("kind, model, size, hw, gpus, spec, batch", MATRIX, ids=[m[0] for m in MATRIX])
def test_explain_terms_are_the_breakdown(kind: str, model: str, size: int | None, hw: str, gpus: int, spec: str,
                                         batch: int) -> None:
    s = parse_strategy(spec, gpus)
    f = explain_plan(_ctx(model, size, hw), s, batch)
    check_terms(f)
    names = {str(x) for x in f.values}
    if s.mp > 1:  # the simulated quantities are the only numbers, and the bubble says so
        assert {n for n in names if n.startswith("T_")} <= {"T_idle_sim"} | {n for n in names if "bwd_start" in n}
        assert "simulated" in f.legend["pipeline_bubble"]
    else:
        assert not {n for n in names if n.startswith("T_")}
    if s.sp_degree > 1 and f.prediction.breakdown["halo_exchange"] > 0:
        halo = {str(x) for x in f.terms["halo_exchange"].free_symbols}
        assert any(n.startswith("N_halo") for n in halo)


def test_what_if_moves_the_terms_that_use_the_link() -> None:
    """A what-if re-evaluates each term: the halo exchange follows beta_intra, the compute does not."""
    f = explain_plan(_ctx("cosmoflow", 128, "abci-v100-16gb"), parse_strategy("sp=2x2x1,pp=2", 8), 8)
    beta = next(v for s, v in f.all_values.items() if str(s) == "beta_intra")
    new = f.evaluate({"beta_intra": beta / 4})
    assert new["halo_exchange"] > f.term_values["halo_exchange"] > 0
    assert new["compute"] == pytest.approx(f.term_values["compute"], rel=1e-12)


_SPECS = st.builds(
    lambda dp, pp, sp, mb, recompute, comm, overlap: (dp, pp, sp, mb, recompute, comm, overlap),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2, 3]),
    st.sampled_from(["", "2x1", "2x2"]),
    st.sampled_from([1, 2, 3]),
    st.booleans(),
    st.sampled_from(["ring", "tree", "ps-central", "ps-sharded"]),
    st.sampled_from(["bucketed", "none"]),
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=_SPECS, per_sample=st.sampled_from([1, 2, 3]))
def test_random_plans_explain_as_predicted(plan: tuple[int, int, str, int, bool, str, str], per_sample: int) -> None:
    dp, pp, grid, mb, recompute, comm, overlap = plan
    parts = [f"dp={dp}", f"mb={mb}", f"comm={comm}", f"overlap={overlap}"]
    parts += [f"pp={pp}"] if pp > 1 else []
    parts += [f"sp={grid}"] if grid else []
    parts += ["recompute=true"] if recompute else []
    gpus = dp * pp * (math.prod(int(x) for x in grid.split("x")) if grid else 1)
    batch = dp * mb * per_sample
    try:
        s = parse_strategy(",".join(parts), gpus)
        f = explain_plan(_ctx("tiny_cnn", None, "abci-v100-16gb"), s, batch)
    except (StrategyError, BatchSplitError):
        assume(False)
        return
    check_terms(f)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["mp", "filter", "channel"]), degree=st.sampled_from([2, 3, 4]),
       dp=st.sampled_from([1, 2]), mb=st.sampled_from([1, 2, 3]), per_sample=st.sampled_from([1, 2, 5]),
       recompute=st.booleans(), hw=st.sampled_from(["a100-80gb-dgx", "abci-v100-16gb"]))
def test_random_split_and_mp_plans_explain_as_predicted(kind: str, degree: int, dp: int, mb: int, per_sample: int,
                                                        recompute: bool, hw: str) -> None:
    spec = f"{kind}={degree},dp={dp},mb={mb}" + (",recompute=true" if recompute and kind == "mp" else "")
    try:
        s = parse_strategy(spec, degree * dp)
        f = explain_plan(_ctx("tiny_cnn", None, hw), s, dp * mb * per_sample)
    except (StrategyError, BatchSplitError):
        assume(False)
        return
    check_terms(f)

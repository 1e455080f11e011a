"""explain: the symbolic step formula evaluates to predict's iteration time."""

from __future__ import annotations

import json

import pytest
import sympy as sp
from cli_helpers import run_main as _run

from perfmodel.cost.collectives import link_params
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.network.graph import Network
from perfmodel.strategies import parse_strategy
from perfmodel.strategies.explain import HARDWARE_SYMBOLS, StepFormula, explain_plan
from perfmodel.strategies.predict import Context, context, predict_in


def _sym(f: StepFormula, name: str) -> sp.Symbol:
    return next(s for s in f.all_values if str(s) == name)




@pytest.mark.parametrize("model, gpus, spec, batch", [
    ("resnet18", 8, "dp=8", 256),
    ("resnet18", 64, "dp=64,comm=hierarchical", 2048),
    ("resnet18", 8, "pp=4,dp=2,mb=8", 256),
    ("resnet18", 8, "pp=2,dp=4,mb=4,recompute=true,comm=tree", 256),
    ("resnet18", 4, "sp=2x2", 4),
    ("resnet18", 4, "pp=2,sp=2x1,mb=2", 6),  # micro-batches of 3: sample-decomposed cuts send ceil(3/2)
    ("resnet18", 16, "pp=2,sp=2x2,dp=2,mb=2", 16),
    ("resnet18", 4, "pp=2,sp=2x1,mb=2,decomp=auto", 6),
    ("cosmoflow", 16, "pp=2,sp=2x2x2", 2),  # tiled stages carry halos and a redistribution
    ("alexnet", 8, "dp=8,comm=ps-sharded", 256),
])
def test_formula_equalspredict_in(model: str, gpus: int, spec: str, batch: int) -> None:
    ctx = context(get_model(model, 128 if model == "resnet18" and "sp=" in spec else None),
                  load_hardware("a100-80gb-dgx"), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy(spec, gpus), batch)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)
    if "sp=" in spec and "decomp=auto" not in spec:
        assert f.prediction.details["spatial_links"], "a tiled plan must exercise the halo terms"
    names = {str(s) for s in f.values}
    if spec == "dp=8":
        assert {"b", "R", "beta_intra", "alpha_intra", "tau"} <= names
        # the formula really depends on the link: doubling beta_intra cannot make it slower, halving it
        # makes the exposed gradient exchange longer
        beta = f.values[_sym(f, "beta_intra")]
        assert f.time_s({"beta_intra": 2 * beta}) <= f.iteration_time_s < f.time_s({"beta_intra": beta / 2})


# -- filter / channel splits and hypergraph model parallelism --------------------------------
MODELS = {"resnet50": 64, "vgg16": None, "tiny_cnn": None, "cosmoflow": 128}
PROFILES = ("a100-80gb-dgx", "abci-v100-16gb", "v100-16gb-dgx1")
SPECS = ("filter=2", "filter=4", "channel=2", "channel=4", "filter=4,dp=8", "channel=2,dp=4", "mp=2", "mp=2,dp=2")
_CONTEXTS: dict[tuple[str, str], Context] = {}


def _ctx(model: str, hw: str) -> Context:
    key = (model, hw)
    if key not in _CONTEXTS:
        _CONTEXTS[key] = context(get_model(model, MODELS.get(model)), load_hardware(hw), "amp", "sgd")
    return _CONTEXTS[key]


def _degree(spec: str) -> int:
    """The GPUs a spec uses (the product of its degrees)."""
    return parse_strategy(spec).gpus


# every (model, spec) pair, the profile rotating so each profile meets every model and spec
SPLIT_CASES = [
    (model, PROFILES[(i + j) % len(PROFILES)], spec)
    for i, model in enumerate(MODELS)
    for j, spec in enumerate(SPECS)
]


@pytest.mark.parametrize("model, hw, spec", SPLIT_CASES)
def test_split_and_mp_formula_equalspredict_in(model: str, hw: str, spec: str) -> None:
    gpus = _degree(spec)
    f = explain_plan(_ctx(model, hw), parse_strategy(spec, gpus), 8 * gpus)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)
    assert sum(f.term_values.values()) == pytest.approx(f.iteration_time_s, rel=1e-12)
    names = {str(s) for s in f.values}
    # no breakdown entry enters as an opaque constant any more
    assert not {f"T_{k}" for k in f.prediction.breakdown} & names
    opaque = {n for n in names if n.startswith("T_")}
    if spec.startswith("mp"):
        # only the simulated quantities are numbers: the busiest GPU's idle time, and with dp when each
        # segment's last backward begins
        starts = {n for n in opaque if n.startswith("T_bwd_start_")}
        assert "T_idle_sim" in opaque and opaque == {"T_idle_sim"} | starts
        assert bool(starts) == ("dp=" in spec)
        assert "simulated" in " ".join(f.notes) and "numerically" in " ".join(f.notes)
        sends = f.terms.get("pipeline_p2p")
        assert sends is not None and {"alpha_intra", "beta_intra"} <= {str(s) for s in sends.free_symbols}
    else:
        assert not opaque
        mode = "channel" if spec.startswith("channel") else "filter"
        comm = [k for k in f.terms if k.startswith(mode)]
        assert comm, f.terms
        for k in comm:
            # a closed form in the link symbols, whose value is the breakdown's exchange time
            assert {"b", "e", "M", "beta_intra", "alpha_intra"} <= {str(s) for s in f.terms[k].free_symbols}
            assert f.term_values[k] == pytest.approx(f.prediction.breakdown[k], rel=1e-9)
            assert "ring" in f.legend[k]
    assert f.term_values.get("compute", 0.0) > 0


def _two_convs(channels: int) -> Network:
    """conv3x3 (3 -> c) then conv3x3 (c -> c) on 8x8: the second all-gathers the first's output."""
    b = NetBuilder("two_convs", (3, 8, 8))
    x = b.conv("input", channels, 3, padding=1, bias=False, name="conv0")
    b.conv(x, channels, 3, padding=1, bias=False, name="conv1")
    return b.build()


@pytest.mark.parametrize("n", [4, 8])
def test_filter_allgather_worked_by_hand(n: int) -> None:
    """One all-gather of conv0's output (C x H x W = 16 x 8 x 8 per sample) over n GPUs.

    abci-v100-16gb has 4 GPUs per node: filter=4 gathers over NVLink, filter=8 over two
    nodes (the ring runs at min(beta_intra, 4*beta_net)); NCCL's ring model: its base latency
    once, p - 1 hops of which the k - 1 crossing nodes are at the network's latency.
    """
    hw = load_hardware("abci-v100-16gb")
    ctx = context(_two_convs(16), hw, "amp", "sgd")
    batch = 16
    f = explain_plan(ctx, parse_strategy(f"filter={n}", n), batch)
    b, e, m = _sym(f, "b"), _sym(f, "e"), _sym(f, "M")
    k = -(-n // hw.gpus_per_node)  # nodes
    if n <= hw.gpus_per_node:
        beta = _sym(f, "beta_intra")
    else:
        beta = sp.Min(_sym(f, "beta_intra"), hw.gpus_per_node * _sym(f, "beta_net"))
    hops = (n - k) * _sym(f, "alpha_intra") + (k - 1) * sp.Symbol("alpha_net", positive=True)
    C, H, W = 16, 8, 8
    p = sp.Integer(n)
    by_hand = m * (_sym(f, "alpha_0") + (p - 1) / p * b * C * H * W * e / beta + hops)
    term = f.terms["filter_allgather"]
    assert sp.simplify(term.subs(_sym(f, "N_ag_fwd"), C * H * W) - by_hand) == 0
    # in numbers: 16 samples, 2-byte elements, the profile's effective link
    lp = f.all_values
    bw = lp[_sym(f, "beta_intra")] if n <= hw.gpus_per_node else min(
        lp[_sym(f, "beta_intra")], hw.gpus_per_node * lp[_sym(f, "beta_net")])
    lat = hw.collectives.base_latency_s + (n - k) * hw.intra.latency_s + (k - 1) * hw.inter.latency_s
    assert lp[b] == batch and lp[e] == 2
    seconds = (n - 1) / n * batch * C * H * W * 2 / bw + lat
    assert f.term_values["filter_allgather"] == pytest.approx(seconds, rel=1e-12)
    assert float(term.subs(f.values)) == pytest.approx(seconds, rel=1e-12)  # plain sympy substitution too
    assert f.prediction.breakdown["filter_allgather"] == pytest.approx(seconds, rel=1e-12)
    # the gradient of the gathered copy goes back by a reduce-scatter of the same size
    assert f.term_values["filter_reduce_scatter"] == pytest.approx(seconds, rel=1e-12)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)


@pytest.mark.parametrize("model, hw, spec, symbol, scale", [
    ("resnet50", "a100-80gb-dgx", "filter=4,dp=8", "beta_intra", 0.5),
    ("resnet50", "a100-80gb-dgx", "filter=4,dp=8", "beta_net", 3.0),
    ("vgg16", "abci-v100-16gb", "channel=2,dp=4", "beta_net", 0.25),
    ("cosmoflow", "v100-16gb-dgx1", "channel=4", "beta_intra", 0.1),
    ("tiny_cnn", "abci-v100-16gb", "filter=8", "beta_net", 0.5),
    ("vgg16", "a100-80gb-dgx", "mp=2,dp=2", "beta_intra", 0.05),
    ("cosmoflow", "abci-v100-16gb", "mp=4,dp=4,mb=4", "beta_intra", 0.2),
    ("resnet50", "abci-v100-16gb", "mp=4,dp=4,mb=4", "beta_net", 4.0),
    ("vgg16", "a100-80gb-dgx", "dp=16,comm=ps-central", "beta_net", 2.0),
    ("vgg16", "abci-v100-16gb", "dp=16,comm=ps-sharded", "beta_net", 0.5),
    ("alexnet", "v100-16gb-dgx1", "dp=8,comm=ps-central", "beta_intra", 0.5),
])
def test_what_if_equals_predict_on_changed_hardware(model: str, hw: str, spec: str, symbol: str,
                                                    scale: float) -> None:
    """Substituting another link bandwidth gives predict's time on a profile with that link
    (mp plans re-run their simulated schedule on the closed forms, on the partition chosen at the
    profile's values: predict prices every candidate partition on the changed profile)."""
    gpus = _degree(spec)
    ctx = _ctx(model, hw)
    s = parse_strategy(spec, gpus)
    f = explain_plan(ctx, s, 8 * gpus)
    tier = "intra" if symbol == "beta_intra" else "inter"
    hw2 = ctx.hw.what_if(**{f"{tier}_bandwidth_scale": scale})
    p2 = predict_in(context(ctx.net, hw2, "amp", "sgd"), s, 8 * gpus, baseline=False)
    expected = p2.iteration_time_s
    if s.mp > 1:  # explain keeps the parts chosen at the profile's values
        kept = f.prediction.details["partition_choice"]["chosen"]
        expected = next(c["step_s"] for c in p2.details["partition_choice"]["candidates"] if c["name"] == kept)
        assert expected >= p2.iteration_time_s
    new = f.time_s({symbol: f.all_values[_sym(f, symbol)] * scale})
    assert new == pytest.approx(expected, rel=1e-9)
    assert new != pytest.approx(f.iteration_time_s, rel=1e-6)  # the link matters in each case
    assert (new > f.iteration_time_s) == (scale < 1)
    # and the profile's own values give the prediction back
    assert f.time_s({}) == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)


def test_parameter_server_exchange_by_hand() -> None:
    # central, one node: 8 workers push and pull G bytes through the server's NVLink at once
    ctx = _ctx("alexnet", "v100-16gb-dgx1")
    f = explain_plan(ctx, parse_strategy("dp=8,comm=ps-central", 8), 8 * 32)
    g_bytes = float(ctx.cc.params.sum()) * 4
    lp = link_params(ctx.hw)
    seconds = 2 * 8 * g_bytes / lp.bw_intra + 2 * 8 * lp.alpha_intra
    assert f.term_values["gradient_exchange_exposed"] == pytest.approx(seconds, rel=1e-12)
    assert not [str(x) for x in f.values if str(x).startswith("T_")]  # no valued constants left
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)


def test_what_if_changes_only_hardware_symbols() -> None:
    f = explain_plan(_ctx("tiny_cnn", "a100-80gb-dgx"), parse_strategy("filter=4", 4), 32)
    for bad in ({"b": 3.0}, {"N_ag_fwd": 1.0}, {"M": 2.0}):
        with pytest.raises(UsageError, match="only hardware symbols"):
            f.time_s(bad)
    for value in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="positive finite"):
            f.time_s({"beta_intra": value})
    # a hardware symbol the formula does not contain changes nothing
    assert "beta_net" not in {str(s) for s in f.values} and "beta_net" in HARDWARE_SYMBOLS
    assert f.time_s({"beta_net": 1e9}) == pytest.approx(f.iteration_time_s, rel=1e-12)


def test_cli_prints_closed_forms_and_what_if(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["explain", "resnet50", "--gpus", "8", "-s", "filter=4,dp=2", "--image-size", "64"]
    code, out, err = _run(args + ["--set", "beta_intra=1.2e11"], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("T_filter_allgather = "))
    assert "beta_intra" in line and "alpha_intra" in line and "N_ag_fwd" in line
    assert "T_filter_allgather = T_filter_allgather" not in out
    assert "what-if beta_intra = 1.2e+11:" in out
    code, out, err = _run(args + ["--set", "beta_intra=1.2e11", "--format", "json"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    f = explain_plan(_ctx("resnet50", "a100-80gb-dgx"), parse_strategy("filter=4,dp=2", 8), 256)
    assert doc["iteration_time_s"] == pytest.approx(doc["predict_iteration_time_s"], rel=1e-9)
    assert doc["what_if"]["iteration_time_s"] == pytest.approx(f.time_s({"beta_intra": 1.2e11}), rel=1e-12)
    assert doc["what_if"]["iteration_time_s"] > doc["iteration_time_s"]  # half the profile's 240 GB/s
    assert "N_ag_fwd" in doc["symbols"] and doc["terms"]["filter_allgather"]["legend"]


def test_cli_mp_says_the_schedule_is_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["explain", "tiny_cnn", "--gpus", "4", "-s", "mp=2,dp=2", "--set", "alpha_intra=1e-3"],
                          capsys)
    assert code == 0, err
    assert "critical path is simulated" in out and "T_pipeline_bubble = T_idle_sim" in out
    assert next(x for x in out.splitlines() if x.startswith("T_pipeline_p2p = ")).count("alpha_intra") == 1


@pytest.mark.parametrize("value, message", [
    ("beta_intr=1e11", "; did you mean beta_intra"),
    ("b=4", "unknown symbol 'b'"),
    ("beta_intra", "expected NAME=VALUE"),
    ("beta_intra=fast", "'fast' is not a number"),
    ("beta_intra=0", "positive finite"),
    ("beta_intra=nan", "positive finite"),
    ("eta_conv=7", "valid: 0 < eta_conv <= 1"),
    ("R=1e-320", "within 1e6 to 1e18 FLOP/s"),  # out of the profile's physical range
])
def test_cli_bad_set_is_a_usage_error(value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["explain", "tiny_cnn", "--gpus", "4", "-s", "filter=4", "--set", value], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


# -- spatial plans: halo exchange and redistribution as closed forms ---------------------------
SPATIAL_CASES = [
    ("resnet18", 128, "a100-80gb-dgx", 4, "sp=2x2", 4),
    ("resnet18", 128, "a100-80gb-dgx", 4, "sp=2x2,decomp=auto", 4),
    ("resnet18", 128, "a100-80gb-dgx", 4, "pp=2,sp=2x1,mb=2", 6),
    ("resnet18", 128, "a100-80gb-dgx", 16, "pp=2,sp=2x2,dp=2,mb=2", 16),
    ("cosmoflow", None, "a100-80gb-dgx", 16, "pp=2,sp=2x2x2", 2),
    ("cosmoflow", None, "a100-80gb-dgx", 8, "sp=2x2x2", 2),
    ("resnet50", None, "abci-v100-16gb", 32, "sp=4,dp=8", 2048),  # the spatial group in one node
    ("resnet18", 128, "a100-80gb-dgx", 16, "sp=4x4", 16),  # the spatial group spans two nodes
    ("resnet18", 128, "a100-80gb-dgx", 8, "sp=2x2,dp=2,recompute=true", 16),
    ("cosmoflow", None, "a100-80gb-dgx", 8, "sp=2x2x2,decomp=auto", 4),  # tiled, then sample-decomposed
]
_SP_CONTEXTS: dict[tuple[str, int | None, str], Context] = {}


def _sp_ctx(model: str, size: int | None, hw: str) -> Context:
    key = (model, size, hw)
    if key not in _SP_CONTEXTS:
        _SP_CONTEXTS[key] = context(get_model(model, size), load_hardware(hw), "amp", "sgd")
    return _SP_CONTEXTS[key]


@pytest.mark.parametrize("model, size, hw, gpus, spec, batch", SPATIAL_CASES)
def test_spatial_formula_equalspredict_in(model: str, size: int | None, hw: str, gpus: int, spec: str,
                                        batch: int) -> None:
    ctx = _sp_ctx(model, size, hw)
    s = parse_strategy(spec, gpus)
    f = explain_plan(ctx, s, batch)
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)
    if model == "resnet18" and "decomp=auto" in spec:  # sample decomposition wins everywhere at 4 samples
        assert f.prediction.details["spatial_links"] == [] and f.terms["halo_exchange"] == 0
        return
    assert f.prediction.details["spatial_links"], "a tiled plan must exercise the halo terms"
    # no valued constants: halos and redistributions are closed forms in the link symbols
    names = {str(x) for x in f.values}
    assert not {n for n in names if n.startswith("T_")}
    assert not any("constant" in n for n in f.notes)
    in_node = s.sp_degree <= ctx.hw.gpus_per_node
    beta, alpha = ("beta_intra", "alpha_intra") if in_node else ("beta_net", "alpha_net")
    if s.pp == 1:
        halo = f.terms["halo_exchange"]
        assert {"N_halo", "b", "e", "M", beta, alpha} <= {str(x) for x in halo.free_symbols}
        assert f.term_values["halo_exchange"] == pytest.approx(f.prediction.breakdown["halo_exchange"], rel=1e-9)
        assert f.term_values["redistribution"] == pytest.approx(f.prediction.breakdown["redistribution"], rel=1e-9)
        if f.prediction.breakdown["redistribution"]:
            assert "N_redist" in {str(x) for x in f.terms["redistribution"].free_symbols}
        else:
            assert f.terms["redistribution"] == 0
        assert "point-to-point" in f.legend["halo_exchange"]
    else:  # the critical stage's halos, a closed form of its own count
        crit = f.prediction.details["critical_stage"]
        halo = {str(x) for x in f.terms["halo_exchange"].free_symbols}
        assert f"N_halo_{crit}" in halo and {beta, alpha} <= halo
        assert f.term_values["halo_exchange"] == pytest.approx(f.prediction.breakdown["halo_exchange"], rel=1e-9)


@pytest.mark.parametrize("model, size, hw, gpus, spec, batch, symbol, scale", [
    ("resnet18", 128, "a100-80gb-dgx", 4, "sp=2x2", 4, "beta_intra", 0.25),
    ("resnet18", 128, "a100-80gb-dgx", 4, "sp=2x2", 4, "alpha_intra", 50.0),
    ("resnet50", None, "abci-v100-16gb", 32, "sp=4,dp=8", 2048, "beta_intra", 0.5),
    ("resnet18", 128, "a100-80gb-dgx", 16, "sp=4x4", 16, "beta_net", 0.5),
    # pipelines with their stage split fixed (predict picks the fastest split on each hardware)
    ("resnet18", 128, "a100-80gb-dgx", 16, "pp=2,sp=2x2,dp=2,mb=2,balance=5:5", 16, "beta_intra", 0.1),
    ("cosmoflow", None, "a100-80gb-dgx", 16, "pp=2,sp=2x2x2", 2, "beta_intra", 0.2),
])
def test_spatial_what_if_equals_predict_on_changed_hardware(model: str, size: int | None, hw: str, gpus: int,
                                                            spec: str, batch: int, symbol: str,
                                                            scale: float) -> None:
    """The halo exchange and redistribution follow the link: a what-if of a spatial plan (the
    default tiled decomposition, so the tiled links stay the same) is predict on that hardware."""
    ctx = _sp_ctx(model, size, hw)
    s = parse_strategy(spec, gpus)
    f = explain_plan(ctx, s, batch)
    name, kind = symbol.split("_")
    tier = "intra" if kind == "intra" else "inter"
    what = "bandwidth" if name == "beta" else "latency"
    hw2 = ctx.hw.what_if(**{f"{tier}_{what}_scale": scale})
    expected = predict_in(context(ctx.net, hw2, "amp", "sgd"), s, batch, baseline=False).iteration_time_s
    new = f.time_s({symbol: f.all_values[_sym(f, symbol)] * scale})
    assert new == pytest.approx(expected, rel=1e-9)
    assert new != pytest.approx(f.iteration_time_s, rel=1e-6)
    assert (new > f.iteration_time_s) == ((scale < 1) == (name == "beta"))


def test_halo_worked_by_hand() -> None:
    """One 3x3 conv (padding 1) on C x H x W, tiled 2x2: each GPU receives a row and a column of
    its neighbours' tiles plus the corner, C*(H/2 + W/2 + 1) elements per sample, in two
    supersteps (one per tiled dimension), forward and backward."""
    C, H, W = 4, 16, 16
    nb = NetBuilder("one_conv", (C, H, W))
    nb.conv("input", 8, 3, padding=1, bias=False, name="conv0")
    ctx = context(nb.build(), load_hardware("a100-80gb-dgx"), "amp", "sgd")
    batch = 8
    f = explain_plan(ctx, parse_strategy("sp=2x2", 4), batch)
    assert f.prediction.details["spatial_links"]
    assert f.all_values[_sym(f, "N_halo")] == C * (H // 2 + W // 2 + 1)
    b, e, m = _sym(f, "b"), _sym(f, "e"), _sym(f, "M")
    beta, alpha = _sym(f, "beta_intra"), _sym(f, "alpha_intra")
    by_hand = m * (2 * (alpha + b * C * (sp.Rational(H, 2) + sp.Rational(W, 2) + 1) * e / beta) + 2 * (2 - 1) * alpha)
    term = f.terms["halo_exchange"]
    assert sp.simplify(term.subs(_sym(f, "N_halo"), C * (H // 2 + W // 2 + 1)) - by_hand) == 0
    lp = f.all_values
    seconds = 2 * (lp[alpha] + batch * C * (H / 2 + W / 2 + 1) * 2 / lp[beta]) + 2 * lp[alpha]
    assert lp[b] == batch and lp[e] == 2 and lp[m] == 1
    assert f.term_values["halo_exchange"] == pytest.approx(seconds, rel=1e-12)
    assert f.prediction.breakdown["halo_exchange"] == pytest.approx(seconds, rel=1e-12)
    assert f.terms["redistribution"] == 0 == f.prediction.breakdown["redistribution"]
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)


def test_cli_prints_spatial_halo_closed_form(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["explain", "resnet18", "--gpus", "4", "-s", "sp=2x2", "--image-size", "128", "-B", "4"],
                          capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("T_halo_exchange = "))
    assert "N_halo" in line and "beta_intra" in line and "alpha_intra" in line
    assert "T_halo_redistribution" not in out and "named constant" not in out

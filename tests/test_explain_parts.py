"""explain names the parts several terms read (stage sums, the body, each DDP bucket's backward) once.

Before, each term repeated them in full: densenet121 pp=2,dp=4,mb=2 printed a 1,127,511-character
gradient exchange (its pipeline's stage ends and the body in every path) and took 18 s, densenet161
64.6 s. The oracle for the values is ``predict`` on a profile changed the same way (``Hardware.what_if``),
so the named parts must be re-evaluated by a what-if, not frozen at the profile's values.
"""

from __future__ import annotations

import pytest
import sympy as sp

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import context, parse_strategy
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.predict import predict_in

PLANS = [("densenet121", 32, "pp=2,dp=4,mb=2", 8, 64), ("resnet18", 64, "dp=4", 4, 64),
         ("resnet18", 64, "sp=2,dp=2", 4, 16), ("vgg11", 32, "pp=4,mb=4,schedule=1f1b", 4, 32),
         ("densenet121", 32, "filter=2,dp=2", 4, 32), ("resnet18", 64, "channel=2,dp=2,mb=2", 4, 32)]


@pytest.mark.parametrize("model, size, spec, gpus, batch", PLANS)
def test_parts_are_written_once_and_follow_a_what_if(model: str, size: int, spec: str, gpus: int, batch: int) -> None:
    hw = load_hardware("a100-80gb-dgx")
    ctx = context(get_model(model, size), hw, "amp", "sgd")
    s = parse_strategy(spec, gpus)
    f = explain_plan(ctx, s, batch)
    if s.pp > 1:  # keep the stage split predict chose (on another profile it may choose another)
        s = parse_strategy(f"{spec},balance={':'.join(map(str, f.prediction.details['balance']))}", gpus)
    assert f.definitions, "a pipeline or a gradient exchange reads shared parts"
    read = set().union(*(e.free_symbols for e in f.terms.values() if isinstance(e, sp.Basic)))
    for d, e in f.definitions.items():
        assert d not in e.free_symbols
        assert f.values[d] == pytest.approx(float(e.xreplace({k: sp.Float(v) for k, v in f.values.items()})), rel=1e-9)
        read |= e.free_symbols
    assert set(f.definitions) <= read  # every part is read by a term or a later part
    # a what-if moves the parts with the symbols they hold: predict on the changed profile
    for name, scale in [("beta_mem", 0.5), ("h", 4.0)]:
        value = next(v for k, v in f.all_values.items() if str(k) == name) * scale
        changed = hw.what_if(memory_bandwidth_scale=scale) if name == "beta_mem" else hw.what_if(
            kernels={"host_op_s": value})
        want = predict_in(context(ctx.net, changed, "amp", "sgd"), s, batch).iteration_time_s
        assert f.time_s({name: value}) == pytest.approx(want, rel=1e-9), name


def test_a_densenet_pipeline_formula_is_short() -> None:
    ctx = context(get_model("densenet121"), load_hardware("a100-80gb-dgx"), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy("pp=2,dp=4,mb=2", 8), 256)
    sizes = {k: len(str(v)) for k, v in f.terms.items()}
    assert sizes["gradient_exchange_exposed"] < 10_000, sizes  # 1,127,511 characters before
    assert sizes["pipeline_bubble"] < 1_000, sizes  # 140,864 before: the stage sums are F_i, B_i
    assert {"F_0", "B_0", "F_1", "B_1", "E_body"} <= {str(d) for d in f.definitions}
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)


def test_a_densenet_split_formula_is_short() -> None:
    """A filter split's exchange read the whole backward per layer: densenet161 filter=2,dp=4 printed a
    577,472-character exposed term and took 17 s; its parts are now the body and the buckets' sums."""
    ctx = context(get_model("densenet161"), load_hardware("a100-80gb-dgx"), "amp", "sgd")
    f = explain_plan(ctx, parse_strategy("filter=2,dp=4", 8), 256)
    sizes = {k: len(str(v)) for k, v in f.terms.items()}
    assert sizes["gradient_exchange_exposed"] < 2_000, sizes
    assert sizes["nccl_contention"] < 1_000, sizes  # 98,055 before
    assert {"E_body", "G_0_0"} <= {str(d) for d in f.definitions}
    assert f.iteration_time_s == pytest.approx(f.prediction.iteration_time_s, rel=1e-9)


def test_the_table_and_json_show_the_parts(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from perfmodel.cli import main

    args = ["explain", "resnet18", "--gpus", "4", "-s", "pp=2,dp=2,mb=2", "--image-size", "64"]
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "where (parts several terms read, each written once):" in out and "\nF_0 = " in out
    symbols = out.split("symbols (value, meaning):")[1]
    assert "  F_0 " not in symbols  # a part is listed with its expression, not as a symbol
    with pytest.raises(SystemExit):
        main([*args, "--format", "json"])
    d = json.loads(capsys.readouterr().out)
    assert "F_0" in d["definitions"] and "F_0" not in d["symbols"]
    assert d["definitions"]["F_0"]["value_s"] > 0

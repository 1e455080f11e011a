"""Every output states the pricing rules added at b4cca98: the kernels a layer is priced as
(autograd's gradient sums at forks, layer norm / group norm / softmax as PyTorch's kernels) and
how a pipeline's stage split was chosen; and the split search's lower bound is one (review 8)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from cli_helpers import run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import predict
from perfmodel.cost.cudnn_release import release_hardware
from perfmodel.cost.kernels import network_kernels
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.builder import NetBuilder
from perfmodel.strategies.compose import price
from perfmodel.strategies.context import context
from perfmodel.strategies.spatial import sample_layers
from perfmodel.strategies.spec import parse_strategy
from perfmodel.strategies.split_search import EXHAUSTIVE_SPLITS, fill_drain_s, split_pool, tail_s


def test_predict_plan_and_explain_state_the_kernels(capsys: pytest.CaptureFixture[str]) -> None:
    outs = {}
    for argv in (["predict", "resnet50", "-n", "2", "-s", "dp=2", "-b", "8"], ["plan", "resnet50", "-n", "2"],
                 ["explain", "resnet50", "-n", "2", "-s", "dp=2"],
                 ["scale", "resnet50", "--gpus", "1,2", "--strategies", "dp"],
                 ["compare", "resnet50", "-n", "2", "-H", "a100-80gb-dgx,v100-16gb-dgx1"]):
        code, out, err = run_main(argv, capsys)
        assert code == 0, err
        outs[argv[0]] = out
    code, out, _ = run_main(["explain", "resnet50", "-n", "2", "-s", "dp=2", "--format", "json"], capsys)
    assert code == 0
    outs["explain json"] = json.loads(out)["kernels"]
    code, out, _ = run_main(["scale", "resnet50", "--gpus", "1,2", "--strategies", "dp", "--format", "json"], capsys)
    assert code == 0
    outs["scale json"] = json.loads(out)["setting"]["kernels"]
    for name, text in outs.items():
        assert "autograd adds the gradients of every tensor that k > 1 layers read" in text, name
        assert "layer norm, group norm and softmax" in text, name


def test_the_stated_gradient_sum_is_what_a_fork_is_priced() -> None:
    """A tensor read by 3 layers: the words' ``k - 1`` adds of ``Xn`` elements are the elements and
    launches its producer's backward is priced with (network_kernels, an independent count)."""
    text = predict("resnet18", 1, "dp=1", batch_per_gpu=1).assumptions["kernels"]
    passes = float(re.search(r"k - 1 elementwise adds of ([\d.]+)n elements", text).group(1))  # type: ignore[union-attr]
    b = NetBuilder("fork3", (8, 6, 6))
    x = b.act(b.conv("input", 8, 3, padding=1, name="producer"), "relu", name="forked")
    y = b.add(b.add(b.conv(x, 8, 1), b.conv(x, 8, 1)), x)
    b.linear(b.flatten(b.adaptive_avgpool(y, 1)), 2)
    net = b.build()
    lk = network_kernels(net)
    i = [ly.name for ly in net.layers].index("forked")
    n = net.layers[i].out_elems
    assert lk.grad_sums_bwd[i] == 2  # three readers: k - 1 = 2 adds
    assert lk.grad_sum_elems_bwd[i] == pytest.approx(2 * passes * n)
    assert lk.grad_sums_bwd.sum() == 2  # no other tensor forks


@pytest.mark.parametrize(("model", "gpus", "spec"), [
    ("resnet50", 4, "pp=4,mb=4"), ("resnet50", 4, "pp=4,mb=4,balance=4:4:5:5"), ("resnet152", 8, "pp=8,mb=8"),
    ("resnet50", 8, "sp=2x1,pp=2,dp=2,mb=2"),
])
def test_predict_states_how_the_stage_split_was_chosen(model: str, gpus: int, spec: str) -> None:
    p = predict(model, gpus, spec, batch_per_gpu=8)
    text = p.assumptions["stage_split"]
    assert f"balance={':'.join(map(str, p.details['balance']))}" in text
    links = len(get_model(model).links)
    pp = parse_strategy(spec, gpus).pp
    every = math.comb(links - 1, pp - 1)  # contiguous splits, counted here
    if "balance=" in spec:
        assert text.endswith("as given")
    elif every <= EXHAUSTIVE_SPLITS:
        assert f"among all {every:,} contiguous splits" in text
    else:
        assert f"of the {every:,} contiguous splits" in text and "not of every split" in text
    assert "stage_split" not in predict(model, gpus, f"dp={gpus}", batch_per_gpu=8).assumptions


def test_plan_states_the_stage_split_search(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(["plan", "resnet50", "-n", "4", "--format", "json"], capsys)
    assert code == 0
    assert f"at most {EXHAUSTIVE_SPLITS:,}" in json.loads(out)["assumptions"]["search"]


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from([("resnet18", 64), ("alexnet", None), ("vgg11", 32), ("squeezenet1_1", 64)]),
       pp=st.integers(2, 3), profile=st.sampled_from(["a100-80gb-dgx", "v100-16gb-dgx1"]),
       run=st.sampled_from([("fp32", "pytorch-autocast"), ("amp", "pytorch-autocast"), ("amp", "pytorch-half")]),
       mb=st.sampled_from([1, 2, 5]), dp=st.sampled_from([1, 2]), schedule=st.sampled_from(["gpipe", "1f1b"]))
def test_split_search_bound_is_below_every_splits_price(model: tuple[str, int | None], pp: int, profile: str,
                                                        run: tuple[str, str], mb: int, dp: int,
                                                        schedule: str) -> None:
    """The branch and bound is exact only if its lower bound (fill-drain plus the optimizer's
    update) is at most each split's full price: checked against ``predict``'s price of each split
    pinned with ``balance=``."""
    net = get_model(*model)
    ctx = context(net, load_hardware(profile), run[0], "adam", amp_runtime=run[1])
    gpus, batch = pp * dp, 4 * pp * dp
    spec = f"pp={pp},dp={dp},mb={mb}" + (",schedule=1f1b" if schedule == "1f1b" else "")
    s = parse_strategy(spec, gpus)
    pool = split_pool(len(net.links), pp, [])
    rows = np.random.default_rng(len(pool)).choice(len(pool), size=min(len(pool), 12), replace=False)
    layers = sample_layers(ctx, batch / dp / mb)
    lower = fill_drain_s(ctx, s, layers, pool) + tail_s(ctx, s, pool)[0]
    for j in rows.tolist():
        bal = ":".join(str(int(x)) for x in np.diff(pool[j]))
        full = price(ctx, parse_strategy(f"{spec},balance={bal}", gpus), batch).time_s
        assert lower[j] <= full * (1 + 1e-12), (bal, lower[j], full)


@pytest.mark.parametrize(("profile", "major", "said"), [("v100-16gb-dgx1", 7, True), ("titan-v", 7, True),
                                                        ("v100-16gb-dgx1", 9, False), ("gtx-1080-ti", 7, False)])
def test_a_volta_cudnn7_prediction_says_which_release_it_prices(profile: str, major: int, said: bool) -> None:
    """predict prices cuDNN 7 on Volta at the 7.6 kernels the profile was fitted on; it says so, with
    the factor validate applies to a row stating 7.0 (its ratio of the convolution efficiencies)."""
    hw = load_hardware(profile)
    text = predict("resnet18", 1, "dp=1", hardware=profile, precision="fp32", batch_per_gpu=8,
                   cudnn_major=major).assumptions["cudnn"]
    assert ("cuDNN 7.6's" in text) == said
    if said:
        factor = float(re.search(r"took ([\d.]+)x", text).group(1))  # type: ignore[union-attr]
        slow = release_hardware(hw, "fp32", (7, 0))
        assert factor == pytest.approx(hw.compute["fp32"].conv / slow.compute["fp32"].conv, abs=5e-4)


@pytest.mark.parametrize(("model", "gpus", "spec", "kept"), [
    ("resnet50", 2, "dp=2", []), ("resnet50", 2, "pp=2", ["the stage split"]),
    ("resnet50", 4, "mp=4,mb=4", ["the model-parallel partition"]),
    ("resnet50", 4, "sp=2x2,decomp=auto", ["each link's decomposition"]),
    ("resnext50_32x4d", 2, "dp=2", ["grouped convolutions"]),
])
def test_explain_what_if_says_which_choices_it_keeps(model: str, gpus: int, spec: str, kept: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``--set`` re-evaluates the plan priced at the profile's values: its stage split, each link's
    spatial/sample decomposition and each grouped convolution's one-kernel-or-loop choice stay; the
    output says which (the grouped count from the network's layers, counted here)."""
    code, out, err = run_main(["explain", model, "-n", str(gpus), "-s", spec, "--set", "R=1e13"], capsys)
    assert code == 0, err
    line = next((x for x in out.splitlines() if "kept as chosen at the profile's values" in x), "")
    assert bool(line) == bool(kept)
    for words in kept:
        assert words in line
    if "grouped convolutions" in line:
        net = get_model(model)
        grouped = sum(1 for ly in net.layers if ly.kind == "conv" and 1 < ly.groups < ly.in_shapes[0][0])
        assert f"the {grouped} grouped convolutions" in line
    code, out, _ = run_main(["explain", model, "-n", str(gpus), "-s", spec, "--set", "R=1e13", "--format", "json"],
                            capsys)
    assert code == 0 and (json.loads(out)["what_if"]["kept"] == line.strip()[1:-1] if kept else True)


def test_measure_states_the_kernels_of_its_predictions(capsys: pytest.CaptureFixture[str]) -> None:
    """measure --hardware prints predicted per-layer times beside the measured ones; a forked
    tensor's gradient sums sit in its producer's predicted backward, and the assumptions say so."""
    pytest.importorskip("torch")
    code, out, err = run_main(["measure", "tiny_cnn", "--device", "cpu", "--steps", "1", "-H", "a100-80gb-dgx",
                               "--format", "json"], capsys)
    assert code == 0, err
    assert "autograd adds the gradients of every tensor" in json.loads(out)["assumptions"]["kernels"]

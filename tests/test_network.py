"""The layer IR, the builder's shape inference, the chain of cut points and the symbolic counts."""

from __future__ import annotations

import pytest
import sympy as sp

from perfmodel.errors import NetworkError
from perfmodel.network import NetBuilder, compile_counts, get_model, network_counts
from perfmodel.network.counts import S_H, S_W, B


def _net():
    b = NetBuilder("t", (3, 16, 16))
    with b.block("a"):
        x = b.act(b.bn(b.conv("input", 4, 3, padding=1, bias=False)), "relu", inplace=True)
    with b.block("b"):
        y = b.conv(x, 4, 3, padding=1, bias=False)
        x = b.add(y, x)
    with b.block("c"):
        b.linear(b.flatten(b.adaptive_avgpool(x, 1)), 2)
    return b.build()


def test_shapes_and_params_by_hand() -> None:
    net = _net()
    conv = net.layers[0]
    assert conv.out_shape == (4, 16, 16)
    assert conv.params == 4 * 3 * 9
    assert net.layers[1].params == 8  # batch norm: weight and bias
    assert net.layers[-1].params == 4 * 2 + 2
    s2 = NetBuilder("s", (3, 224, 224))
    x = s2.conv("input", 64, 7, stride=2, padding=3)
    x = s2.maxpool(x, 3, 2, padding=1)
    assert s2.shape(x) == (64, 56, 56)


def test_ceil_mode_pooling_matches_pytorch_rule() -> None:
    b = NetBuilder("p", (8, 55, 55))
    assert b.shape(b.maxpool("input", 3, 2, ceil_mode=True)) == (8, 27, 27)
    b2 = NetBuilder("p", (8, 112, 112))
    assert b2.shape(b2.maxpool("input", 3, 2, ceil_mode=True)) == (8, 56, 56)


def test_chain_links_follow_blocks_and_count_crossing_tensors() -> None:
    net = _net()
    assert [lk.name for lk in net.links] == ["a", "b", "c"]
    assert net.links[0].cut_elems_per_sample == 4 * 16 * 16
    assert net.links[-1].cut_elems_per_sample == 2


def test_skip_connections_add_to_the_cut() -> None:
    b = NetBuilder("skip", (2, 8, 8))
    x = b.conv("input", 2, 3, padding=1, name="c1")
    y = b.conv(x, 2, 3, padding=1, name="c2")
    b.add(y, x, name="sum")
    net = b.build()
    # cutting after c2 carries c2's output and the skipped c1 output
    assert net.links[1].cut_elems_per_sample == 2 * 2 * 8 * 8


def test_bad_networks_raise() -> None:
    b = NetBuilder("bad", (3, 8, 8))
    with pytest.raises(NetworkError):
        b.conv("nope", 4, 3)
    with pytest.raises(NetworkError):
        b.add(b.conv("input", 4, 3), b.conv("input", 8, 3))
    with pytest.raises(NetworkError, match="too small"):
        NetBuilder("small", (3, 2, 2)).conv("input", 4, 5)


def test_counts_are_symbolic_in_batch_and_split() -> None:
    net = _net()
    c = network_counts(net)[0]
    f = 2 * 4 * 16 * 16 * 3 * 9
    assert sp.simplify(c.fwd_matmul_flops - B * f / (S_H * S_W)) == 0
    assert c.bwd_input_flops == 0  # the first layer has no input gradient
    assert network_counts(net)[3].bwd_input_flops != 0


def test_compiled_counts_equal_the_expressions() -> None:
    net = get_model("resnet18", 64)
    cc = compile_counts(net)
    ev = cc.evaluate(4.0, 1.0, 2.0, 2.0)
    for i in (0, 5, 20):
        expr = cc.counts[i].fwd_flops.subs({B: 4, S_H: 2, S_W: 2, sp.Symbol("s_d", positive=True): 1})
        assert float(expr) == pytest.approx(ev["fwd_flops"][i])
    assert cc.total("fwd_matmul_flops", 2) == pytest.approx(2 * cc.total("fwd_matmul_flops", 1))


@pytest.mark.parametrize(("name", "size"), [("resnet18", 64), ("inception_v3", 96), ("cosmoflow", 128)])
def test_numeric_evaluation_equals_every_sympy_count(name: str, size: int) -> None:
    # compile_counts evaluates coefficient arrays without sympy; every field of every layer must
    # equal its sympy expression at an arbitrary batch and 3-D split
    net = get_model(name, size)
    cc = compile_counts(net)
    point = {B: 3, sp.Symbol("s_d", positive=True): 2, S_H: 4, S_W: 8}
    ev = cc.evaluate(3.0, 2.0, 4.0, 8.0)
    fields = [f for f in ev]
    exprs = [getattr(c, f) for c in cc.counts for f in fields]
    values = sp.lambdify(list(point), exprs)(*point.values())
    for k, (i, f) in enumerate((i, f) for i in range(len(cc.counts)) for f in fields):
        assert values[k] == pytest.approx(ev[f][i], rel=1e-12, abs=1e-9), (net.layers[i].name, f)


def test_inplace_relu_shares_storage_with_its_input() -> None:
    # conv saves its input; bn saves the conv output; in-place relu's output is bn's output storage,
    # which the next conv saves too: counted once.
    b = NetBuilder("r", (1, 4, 4))
    x = b.act(b.bn(b.conv("input", 2, 1, bias=False)), "relu", inplace=True)
    b.conv(x, 2, 1, bias=False)
    cc = compile_counts(b.build())
    assert cc.total("saved_elems") == 2 * (2 * 16)  # conv output (bn) + relu output (shared)

"""Batch-norm/add/ReLU fusion by the run's framework (perfmodel.cost.fusion), and which rows get it."""

from __future__ import annotations

import dataclasses
from importlib import resources

import numpy as np
import pytest
import sympy as sp
from cli_helpers import run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import predict
from perfmodel.cost.compute import ComputeValues, ShapeRules, layer_seconds, layer_times
from perfmodel.cost.fusion import DEFAULT_FUSION, FUSIONS, check_fusion, fused_chains, with_fusion
from perfmodel.cost.kernels import network_kernels
from perfmodel.errors import UsageError
from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.network.counts import compile_counts
from perfmodel.strategies.context import context
from perfmodel.validation import load_measurements
from perfmodel.validation.compare import resolve_hardware
from perfmodel.validation.pricing import price_row
from perfmodel.validation.software_era import fusion_of

_FILES = ("published_runs.csv", "holdout_runs.csv", "families_runs.csv", "families_holdout_runs.csv")


def _rows() -> list:  # type: ignore[type-arg]
    return [m for f in _FILES for m in load_measurements([resources.files("perfmodel.data") / f]).rows]


def test_resnet50_chains_follow_its_blocks() -> None:
    # ResNet-50 (He et al. 2016, table 1: 3+4+6+3 bottleneck blocks): the stem's bn-relu, two
    # bn-relu per block, and each block's last batch norm + residual add + ReLU
    net = get_model("resnet50", 224)
    chains = fused_chains(net, "mxnet-bn-add-relu")
    assert fused_chains(net, "xla") == chains and fused_chains(net, DEFAULT_FUSION) == ()
    with_add = [c for c in chains if c.add >= 0]
    assert len(chains) - len(with_add) == 1 + 2 * 16 and len(with_add) == 16
    assert all(net.layers[c.bn].name.endswith("bn3") for c in with_add)  # the body's, not the shortcut's
    assert fused_chains(get_model("vgg16", 224), "xla") == ()  # no batch norm: nothing to fuse


def test_eager_is_todays_kernels_exactly() -> None:
    net = get_model("resnet50", 224)
    lk = network_kernels(net)
    assert with_fusion(lk, net, DEFAULT_FUSION) is lk
    cc, hw = compile_counts(net), load_hardware("v100-16gb-dgx1")
    a, b = layer_times(cc, hw, "amp", 64), layer_times(cc, hw, "amp", 64, fusion=DEFAULT_FUSION)
    assert np.array_equal(a.fwd, b.fwd) and np.array_equal(a.bwd, b.bwd)


# per chain, elements moved over output elements n (fusion module docstring tables): eager, then
# fused; autograd's sum of a block input's gradients is its producer's, under every fusion
_LEDGER = {
    "mxnet-bn-add-relu": {False: ((5, 3), (8, 5)), True: ((8, 4), (8, 6))},
    "xla": {False: ((5, 3), (8, 7)), True: ((8, 4), (8, 8))},
}


@pytest.mark.parametrize("fusion", ["mxnet-bn-add-relu", "xla"])
def test_chain_bytes_and_other_layers(fusion: str) -> None:
    net = get_model("resnet50", 224)
    lk = network_kernels(net)
    fused = with_fusion(lk, net, fusion)
    touched = set()
    for c in fused_chains(net, fusion):
        idx = [i for i in (c.bn, c.add, c.act) if i >= 0]
        touched.update(idx)
        n = net.layers[c.act].out_elems
        (e_f, f_f), (e_b, f_b) = _LEDGER[fusion][c.add >= 0]
        assert lk.mem_elems_fwd[idx].sum() == e_f * n and fused.mem_elems_fwd[idx].sum() == f_f * n
        assert lk.mem_elems_bwd[idx].sum() == e_b * n and fused.mem_elems_bwd[idx].sum() == f_b * n
        assert fused.launches_fwd[idx].sum() < lk.launches_fwd[idx].sum()
    rest = np.array([i not in touched for i in range(len(net.layers))])
    for name in ("mem_elems_fwd", "mem_elems_bwd", "launches_fwd", "launches_bwd", "host_ops_fwd"):
        assert np.array_equal(getattr(fused, name)[rest], getattr(lk, name)[rest])
    assert np.array_equal(fused.grad_sum_elems_bwd, lk.grad_sum_elems_bwd) and lk.grad_sums_bwd.sum() == 16


@settings(max_examples=12, deadline=None)
@given(batch=st.integers(1, 256), fusion=st.sampled_from(["mxnet-bn-add-relu", "xla"]),
       model=st.sampled_from(["resnet50", "resnext101_32x4d", "se_resnext101_32x4d"]),
       gpu=st.sampled_from(["v100-16gb-dgx1", "a100-40gb-dgx"]), precision=st.sampled_from(["amp", "fp32"]))
def test_fusing_never_slows_a_chain(batch: int, fusion: str, model: str, gpu: str, precision: str) -> None:
    # work moves between a chain's layers (the add books the residual's gradient), so each chain,
    # not each layer, must be no slower; layers outside the chains are priced as before
    net = get_model(model, 224)
    cc, hw = compile_counts(net), load_hardware(gpu)
    eager, fused = layer_times(cc, hw, precision, batch), layer_times(cc, hw, precision, batch, fusion=fusion)
    touched = np.zeros(len(net.layers), dtype=bool)
    for c in fused_chains(net, fusion):
        idx = [i for i in (c.bn, c.add, c.act) if i >= 0]
        touched[idx] = True
        assert fused.fwd[idx].sum() <= eager.fwd[idx].sum() * (1 + 1e-12)
        assert fused.bwd[idx].sum() <= eager.bwd[idx].sum() * (1 + 1e-12)
    assert np.array_equal(fused.fwd[~touched], eager.fwd[~touched])
    assert 0 < fused.total < eager.total


def test_unknown_fusion_names_the_choices() -> None:
    with pytest.raises(UsageError, match="valid: eager, mxnet-bn-add-relu, xla"):
        check_fusion("mxnet")
    with pytest.raises(UsageError, match="unknown fusion"):
        context(get_model("resnet50", 224), load_hardware("v100-16gb-dgx1"), "amp", "sgd", fusion="tvm")
    assert set(FUSIONS) >= {DEFAULT_FUSION}


def test_shipped_rows_get_their_frameworks_fusion() -> None:
    seen: dict[tuple[str, str], set[str]] = {}
    for m in _rows():
        seen.setdefault((m.framework, m.precision), set()).add(fusion_of(m))
    assert seen[("TensorFlow 1 (NGC 20.06-tf1-py3, XLA)", "amp")] == {"xla"}
    assert seen[("TensorFlow 1 (NGC 20.06-tf1-py3)", "amp")] == {"eager"}  # the ResNeXt V100 rows without XLA
    assert seen[("MXNet (NGC mxnet-20.12-py3)", "amp")] == {"mxnet-bn-add-relu"}
    assert seen[("MXNet (NGC mxnet-20.12-py3)", "fp32")] == {"eager"}  # runner fuses for float16 only
    eager = {k: v for k, v in seen.items() if "PyTorch" in k[0] or "tf_cnn_benchmarks" in k[0]}
    assert eager and all(v == {"eager"} for v in eager.values())


def test_validate_prices_mxnet_amp_rows_fused() -> None:
    row = next(m for m in _rows() if fusion_of(m) == "mxnet-bn-add-relu" and m.gpus == 1)
    as_eager = dataclasses.replace(row, framework="PyTorch", source="")
    hw = resolve_hardware(row)
    assert fusion_of(as_eager) == "eager"
    assert price_row(row, hw).throughput_samples_per_s > price_row(as_eager, hw).throughput_samples_per_s


def test_predict_states_a_fusion_and_prices_it(capsys: pytest.CaptureFixture[str]) -> None:
    args = dict(hardware="v100-16gb-dgx1", precision="amp", batch_per_gpu=192, memory_format="nhwc")
    eager = predict("resnet50", 8, "dp=8", **args)  # type: ignore[arg-type]
    fused = predict("resnet50", 8, "dp=8", **args, fusion="mxnet-bn-add-relu")  # type: ignore[arg-type]
    assert "fusion" not in eager.assumptions and "mxnet-bn-add-relu" in fused.assumptions["fusion"]
    assert fused.throughput_samples_per_s > eager.throughput_samples_per_s
    assert fused.memory_per_gpu_bytes == eager.memory_per_gpu_bytes  # only compute time is re-priced
    code, out, err = run_main(["predict", "resnet50", "-n", "8", "-s", "dp=8", "-H", "v100-16gb-dgx1",
                               "-b", "192", "--memory-format", "nhwc", "--fusion", "xla"], capsys)
    assert code == 0, err
    assert "fusion xla:" in out


@pytest.mark.parametrize("fusion", ["mxnet-bn-add-relu", "xla"])
def test_symbolic_formula_prices_the_fusion_as_numbers_do(fusion: str) -> None:
    # explain's symbolic path and the numeric pricing share layer_seconds: the same fused kernels
    cc, prof = compile_counts(get_model("resnet18")), load_hardware("v100-16gb-dgx1")
    lt = layer_times(cc, prof, "amp", 24, fusion=fusion)
    sym, b = ComputeValues.symbols(), sp.Symbol("b", positive=True)
    rules = ShapeRules.of(prof, "amp", 24.0, fusion=fusion)
    fwd, bwd = layer_seconds(cc, cc.evaluate(1.0), cc.params, sym, b, rules)
    values = dict(zip(sym.as_tuple(), ComputeValues.of(prof, "amp").as_tuple(), strict=True))
    values[b] = 24.0
    np.testing.assert_allclose([float(x.xreplace(values)) for x in fwd], lt.fwd, rtol=1e-12)
    np.testing.assert_allclose([float(x.xreplace(values)) for x in bwd], lt.bwd, rtol=1e-12)
    assert lt.total < layer_times(cc, prof, "amp", 24).total

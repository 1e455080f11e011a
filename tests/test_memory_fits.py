"""Issue 15 item 7: every measured run of the shipped data is predicted to fit where it ran."""

from __future__ import annotations

from pathlib import Path

import pytest

import perfmodel
from perfmodel.hardware import load_hardware
from perfmodel.network.zoo.unet import unet
from perfmodel.strategies import predict
from perfmodel.validation import load_measurements
from perfmodel.validation.pricing import global_batch_of, price_row

DATA = sorted((Path(perfmodel.__file__).parent / "data").glob("*.csv"))
ROWS = [(f.name, m) for f in DATA for m in load_measurements([f]).rows if global_batch_of(m) is not None]


@pytest.mark.parametrize("where,m", ROWS, ids=[f"{w}:{m.row}:{m.model}:{m.strategy.spec()}" for w, m in ROWS])
def test_every_shipped_run_fits_where_it_ran(where, m):
    r = price_row(m, load_hardware(m.hardware))
    assert r.memory_per_gpu_bytes <= r.memory_capacity_bytes, (
        f"{where} row {m.row}: predicted {r.memory_per_gpu_bytes / 2**30:.1f} GiB > "
        f"{r.memory_capacity_bytes / 2**30:.1f} GiB, but it ran"
    )


def test_the_two_runs_of_the_issue_are_in_the_set():
    specs = {(m.model, m.strategy.spec(), global_batch_of(m)) for _, m in ROWS}
    assert ("unet", "dp=1", 40) in specs
    assert ("resnet101", "pp=2,dp=1,mb=1667,recompute=true", 25000) in specs


def test_a_pipelines_busiest_gpu_is_one_stage_not_each_parts_maximum():
    p = predict("resnet101", 2, "pp=2,mb=1667,recompute=true", "p40-24gb-pcie", "fp32", global_batch=25000,
                optimizer="sgd-plain")
    # the input batch (25,000 x 3x224x224 fp32 = 14 GiB) sits on the first stage only: the busiest
    # GPU holds either it or the second stage's 1,667 micro-batch inputs, not both
    assert p.memory["input_batch"] == 0.0 or p.memory["activations"] < 2 * 2**30


def test_dropout2d_keeps_a_scale_per_channel_not_a_mask_per_element():
    net = unet(5, 5, 64)
    from perfmodel.network import compile_counts

    ev = compile_counts(net).evaluate(1)
    drop = [i for i, layer in enumerate(net.layers) if layer.kind == "dropout"]
    assert drop and all(ev["saved_extra_bytes"][i] == 4 * net.layers[i].out_shape[0] for i in drop)


def test_unet_memory_against_torchgpipes_published_baseline():
    """torchgpipe benchmarks/unet-memory: U-Net(6, 72), batch 32, one P40, plain SGD: 20.3 GiB
    (torch.cuda.max_memory_cached, without the CUDA context); 362.2M parameters."""
    net = unet(5, 6, 72)
    assert sum(layer.params for layer in net.layers) == pytest.approx(362.2e6, rel=1e-3)
    p = predict(net, 1, "dp=1", "p40-24gb-pcie", "fp32", global_batch=32, optimizer="sgd-plain")
    allocator = p.memory_per_gpu_bytes - load_hardware("p40-24gb-pcie").framework_reserve_bytes
    assert allocator / 2**30 == pytest.approx(20.3, rel=0.15)

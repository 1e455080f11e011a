"""Plan search: never worse than data parallelism, ranking, JSON contract, no-fit and bad-input errors."""

from __future__ import annotations

import json

import pytest

from perfmodel.errors import NoFeasiblePlanError, UsageError
from perfmodel.network import get_model
from perfmodel.search import factorisations, plan
from perfmodel.search.enumerate import spatial_grids
from perfmodel.search.plan import default_batches
from perfmodel.strategies import predict

BASE = ("dp", "ps", "sp", "pp", "hybrid")


def test_factorisations_cover_any_gpu_count() -> None:
    f = list(factorisations(12, 3))
    assert (2, 3, 2) in f and (12, 1, 1) in f
    assert all(a * b * c == 12 for a, b, c in f)
    assert len(f) == len(set(f))
    assert list(factorisations(7, 2)) == [(1, 7), (7, 1)]


def test_spatial_grids_fit_the_input() -> None:
    net = get_model("resnet18", 64)
    assert (1, 2, 4) in spatial_grids(8, net)
    assert all(h <= 64 and w <= 64 for _, h, w in spatial_grids(128, net))


@pytest.mark.parametrize("model, gpus", [("resnet50", 8), ("vgg16", 8), ("resnet18", 24)])
def test_never_worse_than_data_parallel(model: str, gpus: int) -> None:
    r = plan(model, gpus, kinds=BASE)
    best = r.plans[0]
    for comm in ("ring", "tree"):
        dp = predict(model, gpus, f"dp={gpus},comm={comm}", global_batch=r.global_batch)
        assert best.throughput_samples_per_s >= dp.throughput_samples_per_s * (1 - 1e-12)
    tps = [p.throughput_samples_per_s for p in r.plans]
    assert tps == sorted(tps, reverse=True)
    assert all(p.fits_in_memory for p in r.plans)


def test_plan_specs_reproduce_in_predict() -> None:
    r = plan("resnet50", 8, kinds=BASE, top=4)
    for p in r.plans:
        again = predict("resnet50", 8, p.strategy.spec(), global_batch=r.global_batch)
        assert again.iteration_time_s == pytest.approx(p.iteration_time_s, rel=1e-12)


def test_json_contract() -> None:
    d = plan("resnet18", 4, kinds=BASE).to_dict()
    json.dumps(d, allow_nan=False)
    assert {"plans", "search", "assumptions"} <= set(d)
    assert {"candidates", "seconds"} <= set(d["search"])
    assert d["plans"][0]["strategy"] and "why" in d["plans"][0]


def test_no_plan_fits_says_how_much_is_needed() -> None:
    # gradient accumulation makes any batch fit when one sample does (vgg16 B=4096 on one V100);
    # one 512^3 CosmoFlow sample does not fit one 16 GB V100 whatever the batch
    assert plan("vgg16", 1, "v100-16gb-dgx1", global_batch=4096, kinds=BASE).plans[0].strategy.mb > 1
    with pytest.raises(NoFeasiblePlanError, match="smallest needs") as e:
        plan("cosmoflow", 1, "abci-v100-16gb", global_batch=4, kinds=BASE)
    assert e.value.min_memory_bytes > 16 * 2**30


def test_default_batch_is_halved_until_a_plan_fits() -> None:
    # CosmoFlow's 512^3 samples: 32 per GPU fits 8 x 80 GB by accumulating gradients (it was
    # halved to 128 before gradient accumulation was searched for every plan kind)
    r = plan("cosmoflow", 8, kinds=BASE)
    assert r.global_batch == default_batches(8)[0] and r.plans[0].strategy.mb > 1
    # a model that fits keeps 32 per GPU, said as the default
    assert plan("resnet18", 8, kinds=BASE).assumptions["global_batch"] == "256 samples per step (default: 32 per GPU)"
    # nothing fits even at 1 sample: the error says the defaults were tried
    with pytest.raises(NoFeasiblePlanError, match="no default batch fits either") as e:
        plan("cosmoflow", 1, "abci-v100-16gb", kinds=BASE)
    assert e.value.min_memory_bytes > 16 * 2**30
    assert default_batches(4) == [128, 64, 32, 16, 8, 4, 2, 1]


def test_large_images_choose_spatial_or_pipeline_over_replication() -> None:
    r = plan("resnet50", 8, global_batch=1, image_size=2048, kinds=BASE)
    assert r.plans[0].strategy.kind != "data"


def test_bad_inputs() -> None:
    with pytest.raises(UsageError):
        plan("resnet18", 0)
    with pytest.raises(UsageError, match="unknown strategy kinds? "):
        plan("resnet18", 8, kinds=("bogus",))
    with pytest.raises(UsageError, match="global batch must be >= 1"):
        plan("resnet18", 8, global_batch=0, kinds=BASE)
    # 3 samples on 8 GPUs cannot be data parallel, but a pipeline can take them
    assert plan("resnet18", 8, global_batch=3, kinds=BASE).plans[0].strategy.dp == 1

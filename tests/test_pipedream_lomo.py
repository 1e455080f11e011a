"""Leave-one-model-out scoring of PipeDream's rows (perfmodel.validation.pipedream_lomo)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from perfmodel.hardware import load_hardware
from perfmodel.validation import kernel_rows, pipedream_lomo
from perfmodel.validation.kernel_rows import (
    PIPEDREAM_FWD_PROLOGUE_S,
    KernelRow,
    load_rows,
    module_host_s,
)
from perfmodel.validation.kernels import price_rows
from perfmodel.validation.pipedream_lomo import PipeDreamNumbers, derive, held_out_prices, prologue_rule, with_numbers
from perfmodel.validation.robust_line import robust_line
from tests.cli_helpers import run_main_once

HW = load_hardware("v100-16gb-dgx1")
#: small models with pooling, dropout, residual adds and concatenations: quick to refit
SMALL = ("alexnet", "resnet18", "squeezenet1_0", "vgg16")


def _shipped() -> PipeDreamNumbers:
    return PipeDreamNumbers.of(HW, 0.0, tuple(sorted(module_host_s().items())))


@pytest.fixture(scope="module")
def rows() -> list[KernelRow]:
    return load_rows(("pipedream",))


def test_shipped_prologue_is_the_rules_value(rows: list[KernelRow]) -> None:
    # the constant is the rule's output on all models at the shipped profile, kept to 0.01 ms
    # (after a refit: set it to the value `python scripts/pipedream_residuals.py` prints)
    rule_s = prologue_rule(rows, HW, _shipped())
    assert rule_s == pytest.approx(PIPEDREAM_FWD_PROLOGUE_S, abs=0.01e-3), f"rule gives {rule_s * 1e3:.3f} ms"


@pytest.mark.parametrize("planted_s", [0.05e-3, 0.2e-3])
def test_prologue_rule_recovers_a_planted_plateau(rows: list[KernelRow], planted_s: float) -> None:
    # measured times built as the serial price less min(untimed work, P): the rule finds P
    fwd = [dataclasses.replace(r, extra_hidden_s=0.0) for r in rows if r.what == "layer_fwd" and r.extra]
    n = _shipped()
    serial, h = with_numbers(fwd, HW, n)
    p, _ = price_rows(serial, {HW.name: h}, before=False)
    p0, _ = price_rows([dataclasses.replace(r, extra=()) for r in serial], {HW.name: h}, before=False)
    planted = [dataclasses.replace(r, measured_s=float(a - min(a - b, planted_s)))
               for r, a, b in zip(fwd, p, p0, strict=True)]
    assert prologue_rule(planted, HW, n) == pytest.approx(planted_s, rel=0.02)


def test_held_out_prices_do_not_see_the_scored_model(rows: list[KernelRow]) -> None:
    small = [r for r in rows if r.model in SMALL]
    base, used = held_out_prices(small)
    assert set(used) == set(SMALL) and np.all(np.isfinite(base))
    # doubling one model's measured times moves the numbers fitted with it, never its own prices
    bent = [dataclasses.replace(r, measured_s=2 * r.measured_s) if r.model == "resnet18" else r for r in small]
    out, used2 = held_out_prices(bent)
    own = np.array([r.model == "resnet18" for r in small])
    np.testing.assert_allclose(out[own], base[own], rtol=1e-12)
    assert used2["resnet18"] == used["resnet18"] and used2["vgg16"] != used["vgg16"]
    assert derive(bent, HW).memory != derive(small, HW).memory


def test_held_out_prices_ignore_the_shipped_prologue(rows: list[KernelRow], monkeypatch: pytest.MonkeyPatch) -> None:
    # the shipped prologue was derived on every model, the scored one included: the held-out
    # prices must not depend on it, neither the constant (as the modules see it) nor the value
    # the rows carry from loading (both moved by 1 ms)
    small = [r for r in rows if r.model in SMALL]
    base, _ = held_out_prices(small)
    for mod in (kernel_rows, pipedream_lomo):
        monkeypatch.setattr(mod, "PIPEDREAM_FWD_PROLOGUE_S", PIPEDREAM_FWD_PROLOGUE_S + 1e-3, raising=False)
    shifted = [dataclasses.replace(r, extra_hidden_s=r.extra_hidden_s + 1e-3) if r.what == "layer_fwd" else r
               for r in small]
    out, _ = held_out_prices(shifted)
    np.testing.assert_allclose(out, base, rtol=1e-12)


def test_other_sources_have_no_held_out_price() -> None:
    rows = [r for r in load_rows(("deepbench",))][:5]
    out, used = held_out_prices(rows)
    assert np.all(np.isnan(out)) and used == {}


def test_validate_kernels_reports_the_held_out_score(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main_once(["validate", "--kernels", "--format", "json"], capsys)
    assert code == 0
    d = json.loads(out)
    pipe = {r["op"]: r for r in d["kernels"] if r["source"] == "pipedream"}
    assert all(r["mape_held_out_pct"] is not None and r["mape_held_out_pct"] > 0 for r in pipe.values())
    assert all(r["mape_held_out_pct"] is None for r in d["kernels"] if r["source"] != "pipedream")
    assert "leave-one-model-out" in d["assumptions"]


def test_robust_line_ignores_outliers() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 50, 400)
    y = 0.3 + 0.02 * x + rng.normal(0, 0.002, 400)
    y[::10] += rng.uniform(0.5, 3.0, 40)  # a tenth of the rows far above the line
    a, b = robust_line(x, y)
    assert a == pytest.approx(0.3, abs=0.005) and b == pytest.approx(0.02, abs=5e-4)


def test_module_host_work_from_empty_module_times(rows: list[KernelRow]) -> None:
    host = module_host_s()
    # a one-op module (ReLU) is what the removed overhead stands for: no extra host work; modules
    # with more host work before their launch (F.linear, batch norm) show 0.03-0.08 ms more
    assert host["relu"] < 0.01e-3 and host["avgpool"] < 0.01e-3
    assert 0.03e-3 < host["linear"] < 0.08e-3 and 0.03e-3 < host["batchnorm"] < 0.08e-3
    assert all(r.host_s == (host[r.op.split(" ")[0]] if r.what == "layer_fwd" else 0.0) for r in rows)
    # leaving models out changes what is derived from them only
    assert module_host_s({"resnet50", "vgg16"}) != host

"""The shipped A100 tensor-core GEMMs (kernels_ampere_gemm.csv): provenance, transcription, scoring."""

from __future__ import annotations

import csv
import dataclasses
from importlib import resources

import numpy as np
import pytest

from perfmodel.commands.validate_kernels import KERNEL_ASSUMPTIONS
from perfmodel.validation.kernel_rows import HOST_TIMED_MIN_S, LLMCOMPASS_HOST_S, SOURCES, load_rows
from perfmodel.validation.kernels import price_rows, score_kernels


def _file() -> list[dict[str, str]]:
    text = resources.files("perfmodel.data").joinpath("kernels_ampere_gemm.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def _kernels_md() -> str:
    return resources.files("perfmodel.data").joinpath("KERNELS.md").read_text(encoding="utf-8")


def test_file_matches_its_provenance() -> None:
    rows = _file()
    by = {s: [d for d in rows if d["source"] == s] for s in ("azure_nd_a100_v4", "llmcompass")}
    assert len(rows) == 28 and len(by["azure_nd_a100_v4"]) == 8 and len(by["llmcompass"]) == 20
    md = _kernels_md()
    assert "`kernels_ampere_gemm.csv` (28 rows; 23 scored)" in md
    for commit in ("8fd0c6e1bd0f853ef8f0500a3640a7d80a2a92ef", "b95c6c95a80071414d31da8ba8d2e62334753f3d"):
        assert commit in md
    assert {d["precision"] for d in by["azure_nd_a100_v4"]} == {"fp16"}
    assert {d["precision"] for d in by["llmcompass"]} == {"bf16"}


def test_derived_and_published_columns_agree() -> None:
    """Independent check of the transcription: Azure's times come from its TFLOPS by SuperBench's
    formula M N (2K - 1) / time; LLMCompass published both columns, related by 2 M N K / time
    (their script's formula), each to its printed precision."""
    for d in _file():
        m, n, k = int(d["M"]), int(d["N"]), int(d["K"])
        t_s, tf = float(d["time_ms"]) * 1e-3, float(d["tflops"]) * 1e12
        if d["source"] == "azure_nd_a100_v4":
            assert d["derived"] == "time_ms"
            assert m * n * (2 * k - 1) / t_s == pytest.approx(tf, rel=1e-4)
        else:
            assert d["derived"] == ""
            # 4 decimals of a millisecond: the smallest time (0.0296 ms) holds 0.2% rounding
            assert 2 * m * n * k / t_s == pytest.approx(tf, rel=2e-3)
        assert tf < 312e12  # below the A100's dense fp16/bf16 tensor peak (datasheet)


def test_rows_scored_and_their_window() -> None:
    rows = load_rows(("ampere_gemm",))
    assert "ampere_gemm" in SOURCES and len(rows) == 23
    assert {r.profile for r in rows} == {"a100-80gb-dgx"} and {r.precision for r in rows} == {"amp", "bf16"}
    host = [r for r in rows if r.host_s > 0]
    assert len(host) == 15 and all(r.host_s == LLMCOMPASS_HOST_S and r.precision == "bf16" for r in host)
    assert min(r.measured_s for r in host) >= HOST_TIMED_MIN_S
    # the layer is C(MxN) = A(MxK) B(KxN): K inputs, N outputs, M rows, the file's FLOPs
    flops = {2 * r.batch * r.layer.in_shape[0] * r.layer.out_shape[0] for r in rows}
    assert flops == {2 * int(d["M"]) * int(d["N"]) * int(d["K"]) for d in _file()
                     if d["source"] == "azure_nd_a100_v4" or float(d["time_ms"]) * 1e-3 >= HOST_TIMED_MIN_S}


def test_host_time_is_priced_into_the_host_timed_rows() -> None:
    rows = [r for r in load_rows(("ampere_gemm",)) if r.host_s > 0][:3]
    with_host, _ = price_rows(rows, before=False)
    without, _ = price_rows([dataclasses.replace(r, host_s=0.0) for r in rows], before=False)
    np.testing.assert_allclose(with_host - without, LLMCOMPASS_HOST_S, rtol=1e-9)


def test_scores_per_source_and_precision() -> None:
    rows = load_rows(("ampere_gemm",))
    scores = {(s.gpu, s.op): s for s in score_kernels(rows)}
    azure = scores[("NVIDIA A100-SXM4-80GB (Azure ND A100 v4) amp", "gemm")]
    llm = scores[("NVIDIA A100 80GB (SXM) (LLMCompass) bf16", "gemm")]
    assert (azure.rows, llm.rows, scores[("all", "all")].rows) == (8, 15, 23)
    for s in scores.values():
        assert np.isfinite(s.mape_pct) and np.isfinite(s.mape_before_pct) and s.median_ratio > 0
    # Recorded finding (KERNELS.md): large tensor-core GEMMs are not priced too fast on the A100.
    # Every row with M, N, K >= 6144 is predicted at >= 0.95 of its measured time.
    new, _ = price_rows(rows, before=False)
    big = [i for i, r in enumerate(rows) if min(r.batch, r.layer.in_shape[0], r.layer.out_shape[0]) >= 6144]
    assert len(big) == 9
    ratio = new[big] / np.array([rows[i].measured_s for i in big])
    assert ratio.min() >= 0.95, ratio


def test_validate_kernels_lists_the_source() -> None:
    assert "ampere_gemm: A100 fp16" in KERNEL_ASSUMPTIONS and "rows under 0.1 ms not scored" in KERNEL_ASSUMPTIONS

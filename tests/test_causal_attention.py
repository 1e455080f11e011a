"""Causal attention (``is_causal=True``): the blocks FlashAttention-2 skips, and how the readers find it.

Oracles: the block count of a top-left causal mask (brute force over the score matrix's blocks),
FlashAttention-2's reported causal speedup band (section 3.1.1: about half the blocks, 1.7-1.8x at
long sequences), and torch's own module arguments."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost.batched_matmul import FLASH_BLOCK, causal_fraction
from perfmodel.cost.compute import layer_times
from perfmodel.errors import DataError
from perfmodel.hardware import load_hardware
from perfmodel.network import compile_counts
from perfmodel.network.builder import NetBuilder


def _brute(queries: int, keys: int, block: int) -> float:
    """Blocks holding at least one kept (query i, key j <= i) pair, counted pair by pair."""
    keep = np.tril(np.ones((queries, keys), dtype=bool))
    rows, cols = -(-queries // block), -(-keys // block)
    kept = sum(keep[i * block:(i + 1) * block, j * block:(j + 1) * block].any()
               for i in range(rows) for j in range(cols))
    return kept / (rows * cols)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 700), st.integers(1, 700), st.sampled_from([16, 64, 128]))
def test_kept_blocks_are_those_a_causal_mask_touches(queries: int, keys: int, block: int) -> None:
    assert causal_fraction(queries, keys, block) == pytest.approx(_brute(queries, keys, block))


def _attention(length: int, causal: bool) -> Any:
    b = NetBuilder("attention", (length, 768))
    q, k, v = (b.view(b.linear("input", 768, name=t), (12, length, 64), name=f"{t}h") for t in "qkv")
    b.attention(q, k, v, name="attn", causal=causal)
    return b.build()


def _attention_s(length: int, causal: bool, precision: str = "amp") -> float:
    net = _attention(length, causal)
    t = layer_times(compile_counts(net), load_hardware("a100-80gb-dgx"), precision, 8)
    i = [la.name for la in net.layers].index("attn")
    return float(t.fwd[i] + t.bwd[i])


@pytest.mark.parametrize("precision", ["amp", "fp32"])
def test_causal_attention_costs_what_its_kept_blocks_do(precision: str) -> None:
    """One block: no saving; long sequences: the 1.7-1.8x FlashAttention-2 reports, about."""
    assert _attention_s(FLASH_BLOCK, True, precision) == pytest.approx(_attention_s(FLASH_BLOCK, False, precision))
    speedup = _attention_s(4096, False, precision) / _attention_s(4096, True, precision)
    assert 1.6 < speedup <= 2.0


def test_flop_counts_keep_the_full_products() -> None:
    """As torch.utils.flop_counter counts sdpa: the mask changes the time, not the counted FLOPs."""
    full, causal = (compile_counts(_attention(512, c)).total("fwd_matmul_flops") for c in (False, True))
    assert full == causal


torch = pytest.importorskip("torch")

from perfmodel.network.importers import import_module  # noqa: E402

nn, F = torch.nn, torch.nn.functional


class Sdpa(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self, causal: bool = False, masked: bool = False) -> None:
        super().__init__()
        self.causal, self.masked, self.qkv = causal, masked, nn.Linear(32, 96)

    def forward(self, x: Any) -> Any:
        q, k, v = self.qkv(x).view(x.shape[0], 12, 3, 4, 8).permute(2, 0, 3, 1, 4).unbind(0)
        mask = torch.ones(12, 12, dtype=torch.bool) if self.masked else None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal).sum(1)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_reads_is_causal(causal: bool) -> None:
    net = import_module(lambda: Sdpa(causal), "sdpa", (12, 32))
    assert [la.attr("causal") for la in net.layers if la.kind == "attention"] == [float(causal)]


def test_sdpa_with_a_mask_is_refused() -> None:
    """It was priced as unmasked attention, silently."""
    with pytest.raises(DataError, match="attn_mask is not read"):
        import_module(lambda: Sdpa(masked=True), "sdpa", (12, 32))


class MhaCausal(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self, need_weights: bool) -> None:
        super().__init__()
        self.need_weights, self.att = need_weights, nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x: Any) -> Any:
        mask = nn.Transformer.generate_square_subsequent_mask(12)
        return self.att(x, x, x, attn_mask=mask, is_causal=True, need_weights=self.need_weights)[0]


def test_multihead_attention_with_a_flagged_causal_mask() -> None:
    """Without weights torch drops the mask and runs causal sdpa; with weights it applies the mask
    to materialised scores, which is not read (one line)."""
    net = import_module(lambda: MhaCausal(False), "mha", (12, 32))
    assert [la.attr("causal") for la in net.layers if la.kind == "attention"] == [1.0]
    with pytest.raises(DataError, match="a causal attn_mask with is_causal=True and need_weights=False"):
        import_module(lambda: MhaCausal(True), "mha", (12, 32))

"""What the outputs say about a 16-bit model's bytes and about a GPU without the precision's
tensor cores matches what the model prices (review of b4cca98)."""

from __future__ import annotations

import re

import pytest

from perfmodel.hardware import load_hardware
from perfmodel.network import get_model
from perfmodel.strategies import context, parse_strategy
from perfmodel.strategies.explain import explain_plan
from perfmodel.strategies.wording import precision_assumption
from perfmodel.units import BYTES_PER_ELEMENT


@pytest.mark.parametrize(("spec", "gpus"), [("dp=4", 4), ("filter=2,dp=2", 4), ("pp=2,dp=2", 4)])
@pytest.mark.parametrize("runtime", ["pytorch-autocast", "pytorch-half"])
def test_bucket_copy_words_state_the_bytes_the_formula_moves(spec: str, gpus: int, runtime: str) -> None:
    """The legend of ``gradient_bucket_copies`` says N bytes per parameter each way; the formula's
    traffic (over ``beta_mem*eta_mem``) is two copies of N bytes per parameter it copies (the
    legend said 8 for a 16-bit model's 2-byte gradients, whose copies the formula prices at 4)."""
    ctx = context(get_model("resnet18", 64), load_hardware("a100-80gb-dgx"), "amp", "sgd", amp_runtime=runtime)
    f = explain_plan(ctx, parse_strategy(spec, gpus), 8 * gpus)
    words = f.legend["gradient_bucket_copies"]
    stated = int(re.search(r"(\d+) bytes per parameter", words).group(1))  # type: ignore[union-attr]
    term, values = f.terms["gradient_bucket_copies"], dict(f.values)
    beta = next(k for k in values if str(k) == "beta_mem")
    at = {str(k): v for k, v in values.items()}
    once = float(term.subs(values))
    values[beta] = 2 * at["beta_mem"]
    bytes_total = 2 * (once - float(term.subs(values))) * at["beta_mem"] * at["eta_mem"]  # traffic over the bandwidth
    assert stated == 2 * ctx.param_bytes
    # every parameter tensor the plan's busiest GPU holds is copied in and back: 2 x stated per parameter
    params = bytes_total / (2 * stated)
    assert 0 < params <= float(ctx.cc.params.sum()) * (1 + 1e-12)
    if spec == "dp=4":  # every GPU holds every parameter
        assert params == pytest.approx(float(ctx.cc.params.sum()), rel=1e-9)
    assert ("16-bit" in words) == (runtime == "pytorch-half")


@pytest.mark.parametrize("profile", ["gtx-1080-ti", "p100-16gb-nvlink", "v100-16gb-dgx1", "a100-80gb-dgx"])
@pytest.mark.parametrize("precision", ["fp32", "tf32", "amp", "bf16"])
@pytest.mark.parametrize("half", [False, True])
def test_precision_words_name_the_stored_dtype(profile: str, precision: str, half: bool) -> None:
    """Where the GPU lacks the precision's tensor-core format the words name the dtype activations
    are stored in, of the size the model prices (``BYTES_PER_ELEMENT``): fp16 at amp (they said
    bf16), bf16 at bf16, fp32 at tf32; a 16-bit model says so."""
    hw = load_hardware(profile)
    text = precision_assumption(hw, precision, half and precision in ("amp", "bf16"))
    if "has no" not in text:
        return
    dtype = re.search(r"\), (\w+) (?:weights, gradients and )?activations", text).group(1)  # type: ignore[union-attr]
    assert dtype == {"amp": "fp16", "bf16": "bf16"}.get(precision, "fp32")
    assert BYTES_PER_ELEMENT[precision] == (4 if dtype == "fp32" else 2)
    assert ("16-bit model" in text) == (half and precision in ("amp", "bf16"))

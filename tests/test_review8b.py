"""Review 8b: what the outputs say about the autocast rule they price every 16-bit runtime with."""

from __future__ import annotations

import pytest

from perfmodel.cli import main
from perfmodel.cost.compute import ShapeRules
from perfmodel.hardware import load_hardware


def test_a_16_bit_model_is_priced_with_autocast_and_the_output_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """``--amp-runtime pytorch-half`` (model.half(): no autocast) still prices norms in fp32 with
    casts (ShapeRules has no runtime); the kernels assumption must say so, not only 'no casts'."""
    rules = ShapeRules.of(load_hardware("a100-80gb-dgx"), "amp")
    assert rules.autocast == "float16"
    with pytest.raises(SystemExit) as info:
        main(["predict", "unet3d", "--gpus", "2", "--strategy", "dp=2", "-B", "4", "--amp-runtime", "pytorch-half"])
    out = capsys.readouterr().out
    assert info.value.code in (0, None), out
    assert "a 16-bit model's too: its norms and softmax are not priced at 16 bits" in out

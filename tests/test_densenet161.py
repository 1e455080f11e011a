"""DenseNet-161 in the zoo against torchvision's own counts (the pattern of tests/test_zoo.py)."""

from __future__ import annotations

import pytest

from perfmodel.network import compile_counts, get_model, model_names
from perfmodel.network.zoo.registry import MODELS

# Printed by ``python tools/reference_counts.py --saved --shapes densenet161`` with torch 2.13.0 (CPU)
# and torchvision 0.28.0, ``torchvision.models.densenet161()`` (weights=None) at 224x224, batch 1:
# ``sum(p.numel())`` (torchvision's model docs: 28,681,000 parameters), the forward FLOPs of
# torch.utils.flop_counter.FlopCounterMode (2 FLOPs per multiply-add, convolutions and matrix
# products only), and the float32 elements autograd saves for backward (distinct storages,
# parameters and the input excluded). The same run reprints densenet121's recorded figures
# (7,978,856 / 5,668,323,328 / 32,122,048) exactly. All 486 named modules' output shapes match.
TORCH_PARAMS = 28_681_000
TORCH_FWD_FLOPS = 15_455_814_144
TORCH_SAVED_ELEMS = 60_160_512


def test_densenet161_is_registered_at_224() -> None:
    assert "densenet161" in model_names()
    net = get_model("densenet161")
    assert net.image_size == 224 == MODELS["densenet161"].default_image_size
    assert net.source == MODELS["densenet161"].source and "densenet161" in net.source


def test_densenet161_parameters_equal_torchvision() -> None:
    assert get_model("densenet161").params == TORCH_PARAMS


def test_densenet161_forward_flops_match_flop_counter() -> None:
    flops = compile_counts(get_model("densenet161")).total("fwd_matmul_flops")
    assert flops == pytest.approx(TORCH_FWD_FLOPS, rel=0.005)


def test_densenet161_saved_activations_match_autograd() -> None:
    saved = compile_counts(get_model("densenet161")).total("saved_elems")
    assert saved == pytest.approx(TORCH_SAVED_ELEMS, rel=0.15)


def test_densenet161_is_wider_than_121() -> None:
    """Growth 48 against 32, 96 initial features against 64: the last block ends at 2208 channels
    (torchvision: ``classifier = Linear(2208, 1000)``), DenseNet-121's at 1024."""
    for name, width in (("densenet161", 2208), ("densenet121", 1024)):
        head = get_model(name).layers[-1]
        assert head.in_shapes[0][0] == width

"""What autograd really saves for backward: the oracle of perfmodel's saved-activation counts.

Needs torch (the ``torch`` extra); nothing in the pricing imports this module, which keeps
it independent of what it checks. It runs a real CPU forward in training mode with
``torch.autograd.graph.saved_tensors_hooks`` (PyTorch docs, "Hooks for saved tensors") and
sums the distinct storages packed, leaving out the parameters and the input batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["SavedStorages", "saved_storages"]


@dataclass(frozen=True)
class SavedStorages:
    """Per sample: elements of the floating-point storages saved, and bytes of the others
    (max-pooling indices, dropout masks)."""

    float_elements: float
    other_bytes: float


def saved_storages(model: nn.Module, shape: tuple[int, ...], batch: int = 2) -> SavedStorages:
    """What ``model`` saves for backward on a ``batch`` x ``shape`` input, per sample.

    ``batch`` is at least 2: batch norm in training mode needs more than one value per channel.
    """
    if batch < 2:
        raise ValueError(f"batch must be at least 2 for batch norm in training mode, got {batch}")
    model.train()
    x = torch.randn(batch, *shape)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, tuple[int, int, bool]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in params and ptr != x.untyped_storage().data_ptr():
            seen[ptr] = (st.nbytes(), t.element_size(), t.is_floating_point())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)  # held, so that no saved storage is freed and its address reused
    del out
    floats = sum(n // size for n, size, is_float in seen.values() if is_float)
    other = sum(n for n, _, is_float in seen.values() if not is_float)
    return SavedStorages(float_elements=floats / batch, other_bytes=other / batch)

"""Trial kernel numbers on a profile: the profile they give, a neutral start, and a TOML line.

Shared by ``scripts/fit_kernel_params.py`` (which fits the numbers per GPU generation and writes
them into the profiles) and its held-out checks.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np

from ..errors import DataError
from ..hardware import Hardware, load_profile
from ..hardware.loader import profiles_dir
from .fit_bounds import UNIT

__all__ = ["COMPUTE", "with_values", "neutral_start", "set_in_table"]

#: the fitted numbers that live in a precision's ``[efficiency.compute.<precision>]`` table
COMPUTE = ("conv", "linear", "memory")


def with_values(hw0: Hardware, precision: str, v: dict[str, float]) -> Hardware:
    """``hw0`` with the fitted numbers ``v`` (compute efficiencies at ``precision``, kernel params)."""
    comp = dict(hw0.compute)
    comp[precision] = dataclasses.replace(hw0.compute[precision], **{k: v[k] for k in COMPUTE if k in v})
    kern = dataclasses.replace(hw0.kernels, **{k: v[k] for k in v if k not in COMPUTE})  # type: ignore[arg-type]
    return dataclasses.replace(hw0, compute=comp, kernels=kern)


def neutral_start(precision: str, free: Sequence[tuple[str, float, float]]) -> list[float]:
    """A starting point owing nothing to a fit on the scored rows: the template profile's
    analytical compute efficiencies at ``precision`` (hardware_profiles/template.toml: fp32 CUDA
    cores, or the tensor-core defaults for the other precisions) and every other number at the
    middle of its bounds (the geometric middle where the bounds span more than a decade: a
    latency, a slot count, a split cap), in the optimiser's units (:data:`UNIT`). The template's
    ``[efficiency.kernels]`` values are not used: they are the Volta fit (KernelParams defaults)."""
    tmpl = load_profile(profiles_dir() / "template.toml").compute["fp32" if precision == "fp32" else "amp"]
    x0 = []
    for name, lo, hi in free:
        if name in COMPUTE:
            v = float(getattr(tmpl, name))
        else:
            v = float(np.sqrt(lo * hi)) if lo > 0 and hi > 10 * lo else (lo + hi) / 2
        x0.append(v / UNIT.get(name, 1.0))
    return x0


def set_in_table(text: str, table: str, key: str, value: float, note: str) -> str:
    """``text`` (a profile) with ``key = value  # note`` in ``[table]`` (replaced, or added at its end)."""
    head = re.search(rf"^\[{re.escape(table)}\][^\n]*\n", text, re.M)
    if head is None:
        raise DataError(f"no [{table}] table to write {key} into")
    nxt = re.search(r"^\[", text[head.end():], re.M)
    end = head.end() + (nxt.start() if nxt else len(text[head.end():]))
    body = text[head.end():end]
    line = f"{key} = {value:.3g}".ljust(39) + f" # {note}"
    pat = re.compile(rf"^{re.escape(key)}\s*=.*$", re.M)
    if pat.search(body):
        body = pat.sub(line, body, count=1)
    else:
        src = re.search(r"^source\s*=", body, re.M)
        cut = src.start() if src else len(body.rstrip("\n")) + 1
        body = body[:cut] + line + "\n" + body[cut:]
    return text[:head.end()] + body + text[end:]

"""Out-of-memory verdict: how much of a GPU a plan uses, by how much it is over, and the largest batch that fits."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import PerfmodelError
from ..limits import MAX_BATCH
from ..units import GIB, MIB
from .predict import Context, Prediction, price
from .spec import Strategy

__all__ = ["MemoryVerdict", "memory_verdict", "largest_batch_per_gpu"]


@dataclass(frozen=True)
class MemoryVerdict:
    """Memory per GPU against capacity, with the memory model's error margin on it (bytes)."""

    needed_bytes: float
    capacity_bytes: float
    margin_bytes: float
    margin_note: str
    largest_batch_per_gpu: int | None

    @property
    def headroom_bytes(self) -> float:
        """Capacity minus need: negative when the plan does not fit."""
        return self.capacity_bytes - self.needed_bytes

    @property
    def fits(self) -> bool:
        return self.headroom_bytes >= 0

    @property
    def headroom_fraction(self) -> float:
        return self.headroom_bytes / self.capacity_bytes

    @property
    def within_margin(self) -> bool:
        """The verdict could flip within the memory model's measured error."""
        return abs(self.headroom_bytes) <= self.margin_bytes

    def text(self) -> str:
        """One line: 'fits: 10.5 of 16.0 GiB (34% headroom)' or 'does not fit: needs ..., ... over'."""
        m = self.margin_bytes
        margin = f"; model error +/-{m / GIB:.2f} GiB" if m >= 0.1 * GIB else f"; model error +/-{m / MIB:.0f} MiB"
        if self.fits:
            out = (
                f"fits: {self.needed_bytes / GIB:.1f} of {self.capacity_bytes / GIB:.1f} GiB "
                f"({100 * self.headroom_fraction:.0f}% headroom{margin})"
            )
        else:
            over = -self.headroom_bytes  # under 0.1 GiB in MiB: never '0.0 GiB over'
            said = f"{over / GIB:.1f} GiB" if over >= 0.1 * GIB else f"{max(1.0, over / MIB):.0f} MiB"
            out = (
                f"does not fit: needs {self.needed_bytes / GIB:.1f} GiB, "
                f"{said} over the {self.capacity_bytes / GIB:.1f} GiB{margin}"
            )
        if self.within_margin:
            out += " (within the model's error: the verdict could go either way)"
        if self.largest_batch_per_gpu is not None:
            b = self.largest_batch_per_gpu
            out += f"; largest batch per GPU that fits: {b}" if b else "; not even 1 sample per GPU fits"
        return out


def memory_verdict(
    p: Prediction, activation_error: float, note: str, largest: int | None = None
) -> MemoryVerdict:
    """The verdict of ``p``: margin = |``activation_error``| x its activation bytes (the measured part)."""
    acts = float(p.memory.get("activations", 0.0))
    return MemoryVerdict(p.memory_per_gpu_bytes, p.memory_capacity_bytes, abs(activation_error) * acts, note, largest)


def largest_batch_per_gpu(
    ctx: Context, s: Strategy, limit: int | None = None, known: tuple[int, float] | None = None
) -> int:
    """The largest samples per GPU (global batch / GPUs) at which plan ``s`` fits (0 if none does).

    Memory is close to affine in the batch, so the search guesses the crossing from the two
    bracketing batches (regula falsi on integers) and checks it by pricing; it falls back to
    halving the bracket when a guess does not shrink it. A few ``price`` calls per plan;
    ``known`` = (batch per GPU, bytes) already priced saves one.
    """
    gpus = s.gpus
    cap = ctx.hw.device.memory_bytes
    top = max(1, min(limit or MAX_BATCH // gpus, MAX_BATCH // gpus))
    first = max(1, math.ceil(s.mb * s.dp / gpus))  # mb micro-batches need mb samples per replica

    def need(b: int) -> float:
        try:
            return float(sum(price(ctx, s, b * gpus).memory.values()))
        except PerfmodelError:
            return math.inf

    lo, m_lo = first, need(first)
    if m_lo > cap:
        return 0
    if known is not None and first < known[0] <= top:  # a second point for free
        hi, m_hi = known
    else:
        hi = min(top, 2 * lo)
        m_hi = need(hi) if hi > lo else m_lo
    while m_hi <= cap:  # grow the bracket until it crosses the capacity
        if hi >= top:
            return top
        slope = (m_hi - m_lo) / (hi - lo)
        guess = hi + int((cap - m_hi) / slope) + 1 if slope > 0 else 2 * hi
        lo, m_lo = hi, m_hi
        hi = min(top, max(guess, hi + 1))
        m_hi = need(hi)
    bisect = False
    while hi - lo > 1:
        width = hi - lo
        if bisect or not math.isfinite(m_hi) or m_hi <= m_lo:
            mid = (lo + hi) // 2
        else:
            mid = min(hi - 1, max(lo + 1, lo + int((cap - m_lo) / (m_hi - m_lo) * width)))
        m_mid = need(mid)
        if m_mid <= cap:
            lo, m_lo = mid, m_mid
        else:
            hi, m_hi = mid, m_mid
        bisect = hi - lo > width // 2  # the guess did not halve the bracket: bisect next
    return lo

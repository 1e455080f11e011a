"""Strategy specs: ``dp=2,pp=4,mb=8`` parsed into a validated :class:`Strategy` and printed back."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..errors import StrategyError, did_you_mean
from ..limits import MAX_BATCH, MAX_GPUS, check_count, is_integer, shown

__all__ = ["Strategy", "parse_strategy", "COMM_CHOICES", "SCHEDULES", "DECOMPOSITIONS", "OVERLAPS"]

#: Gradient exchanges: NCCL-style allreduce algorithms, parameter servers, and single-process
#: ``torch.nn.DataParallel`` (``dataparallel``: scatter, replicate, gather, reduce onto GPU 0).
COMM_CHOICES = ("ring", "tree", "hierarchical", "ps-central", "ps-sharded", "dataparallel")
#: When the gradient exchange starts: ``bucketed`` as PyTorch DDP (buckets reduced while the
#: backward pass goes on), ``none`` after the backward pass ends (ChainerMN's default
#: optimizer, Horovod without overlap, TensorFlow's replicated parameter servers).
OVERLAPS = ("bucketed", "none")
SCHEDULES = ("gpipe", "1f1b")
#: How a spatial group splits each link: ``spatial`` tiles every link whose layers can be
#: tiled (ParaDL's and Dryden et al.'s spatial parallelism); ``auto`` chooses spatial or
#: sample decomposition per link by dynamic programming (Dryden et al., IPDPS 2019, section IV).
DECOMPOSITIONS = ("spatial", "auto")
_KEYS = (
    "dp", "sp", "pp", "mp", "filter", "channel", "mb", "schedule", "comm", "recompute", "balance", "decomp",
    "overlap",
)


@dataclass(frozen=True)
class Strategy:
    """A parallel plan's degrees and options. The degrees multiply to the GPU count.

    ``sp`` is the spatial grid (depth, height, width); ``mp`` a hypergraph-partitioned
    model-parallel split; ``filter``/``channel`` split convolution and linear layers by
    output / input channels; ``balance`` fixes the number of chain links per pipeline stage;
    ``decomp`` says how a spatial group splits each link (:data:`DECOMPOSITIONS`).
    """

    dp: int = 1
    sp: tuple[int, int, int] = (1, 1, 1)
    pp: int = 1
    mp: int = 1
    filter: int = 1
    channel: int = 1
    mb: int = 1
    schedule: str = "gpipe"
    comm: str = "ring"
    recompute: bool = False
    balance: tuple[int, ...] = ()
    decomp: str = "spatial"
    overlap: str = "bucketed"

    def __post_init__(self) -> None:
        for k in ("dp", "pp", "mp", "filter", "channel", "mb"):
            v = getattr(self, k)
            if type(v) is not int:  # a NumPy integer is taken as the Python one; a bool or float is not
                if not is_integer(v):
                    raise StrategyError(f"strategy: {k} must be a positive integer, got {v!r}")
                v = int(v)
                object.__setattr__(self, k, v)
            if v < 1:
                raise StrategyError(f"strategy: {k} must be a positive integer, got {v!r}")
        if not all(type(v) is int and v >= 1 for v in self.sp):  # the common case checked fast
            if any(not is_integer(v) or v < 1 for v in self.sp):
                raise StrategyError(f"strategy: sp extents must be positive integers, got {self.sp}")
            object.__setattr__(self, "sp", tuple(int(v) for v in self.sp))
        if self.schedule not in SCHEDULES:
            raise StrategyError(f"strategy: schedule '{self.schedule}' is not one of {', '.join(SCHEDULES)}"
                                f"{did_you_mean(str(self.schedule), SCHEDULES)}")
        if self.comm not in COMM_CHOICES:
            raise StrategyError(f"strategy: comm '{self.comm}' is not one of {', '.join(COMM_CHOICES)}"
                                f"{did_you_mean(str(self.comm), COMM_CHOICES)}")
        if self.overlap not in OVERLAPS:
            raise StrategyError(f"strategy: overlap '{self.overlap}' is not one of {', '.join(OVERLAPS)}"
                                f"{did_you_mean(str(self.overlap), OVERLAPS)}")
        if self.schedule != "gpipe" and self.pp == 1 and self.mp == 1:
            raise StrategyError(f"strategy: schedule={self.schedule} needs a pipeline (pp > 1)")
        if self.decomp not in DECOMPOSITIONS:
            raise StrategyError(f"strategy: decomp '{self.decomp}' is not one of {', '.join(DECOMPOSITIONS)}"
                                f"{did_you_mean(str(self.decomp), DECOMPOSITIONS)}")
        if self.decomp != "spatial" and self.sp_degree == 1:
            raise StrategyError(f"strategy: decomp={self.decomp} needs a spatial group (sp=N, HxW or DxHxW)")
        if self.balance and len(self.balance) != self.pp:
            raise StrategyError(
                f"strategy: balance has {len(self.balance)} stages but pp={self.pp} "
                f"(balance={':'.join(map(str, self.balance))}; give {self.pp} link counts, one per stage)"
            )
        if self.mb > 1 and self.pp == 1 and self.mp == 1:
            # micro-batches without a pipeline are gradient accumulation: allowed
            pass
        if sum(x > 1 for x in (self.mp, self.filter, self.channel)) > 1:
            raise StrategyError("strategy: combine at most one of mp, filter and channel")
        if self.mp > 1 and (self.pp > 1 or self.sp_degree > 1):
            raise StrategyError("strategy: mp (hypergraph model parallel) combines only with dp")

    @property
    def sp_degree(self) -> int:
        return math.prod(self.sp)

    @property
    def gpus(self) -> int:
        return self.dp * self.sp_degree * self.pp * self.mp * self.filter * self.channel

    @property
    def kind(self) -> str:
        """``data``, ``spatial``, ``pipeline``, ``model``, ``filter``, ``channel`` or ``hybrid``."""
        parts = [n for n, d in (("spatial", self.sp_degree), ("pipeline", self.pp), ("model", self.mp),
                                ("filter", self.filter), ("channel", self.channel)) if d > 1]
        if not parts:
            return "data"
        if len(parts) == 1 and self.dp == 1:
            return parts[0]
        return "hybrid"

    @property
    def is_ps(self) -> bool:
        return self.comm.startswith("ps-")

    def spec(self) -> str:
        """The canonical spec string (``parse_strategy(s.spec()) == s``)."""
        out = []
        if self.sp_degree > 1:
            d, h, w = self.sp
            out.append(f"sp={h}x{w}" if d == 1 else f"sp={d}x{h}x{w}")
        if self.filter > 1:
            out.append(f"filter={self.filter}")
        if self.channel > 1:
            out.append(f"channel={self.channel}")
        if self.mp > 1:
            out.append(f"mp={self.mp}")
        if self.pp > 1:
            out.append(f"pp={self.pp}")
        out.append(f"dp={self.dp}")
        if self.mb > 1:
            out.append(f"mb={self.mb}")
        if self.pp > 1 and self.schedule != "gpipe":
            out.append(f"schedule={self.schedule}")
        if self.comm != "ring":
            out.append(f"comm={self.comm}")
        if self.recompute:
            out.append("recompute=true")
        if self.balance:
            out.append("balance=" + ":".join(map(str, self.balance)))
        if self.decomp != "spatial":
            out.append(f"decomp={self.decomp}")
        if self.overlap != "bucketed":
            out.append(f"overlap={self.overlap}")
        return ",".join(out)

    def with_(self, **changes: object) -> Strategy:
        return replace(self, **changes)  # type: ignore[arg-type]


def _int(key: str, value: str) -> int:
    if not (value.isascii() and value.strip().lstrip("+-").isdigit()):
        raise StrategyError(f"strategy: {key}={shown(value)} is not an integer (ASCII digits 0-9)")
    try:
        v = int(value)
    except ValueError:
        raise StrategyError(f"strategy: {key}={shown(value)} is not an integer") from None
    if v < 1:
        raise StrategyError(f"strategy: {key}={shown(v)} must be >= 1")
    top = MAX_BATCH if key in ("mb", "balance") else MAX_GPUS
    if v > top:
        raise StrategyError(f"strategy: {key}={shown(v)} is too large (valid: 1 to {top:,})")
    return v


def parse_strategy(text: str, gpus: int | None = None) -> Strategy:
    """Parse a spec like ``pp=4,dp=2,mb=8``; with ``gpus`` (a Python or NumPy integer), check the
    degrees multiply to it."""
    if gpus is not None:
        gpus = check_count("gpus", gpus, MAX_GPUS)
    if not isinstance(text, str):
        raise StrategyError(f"strategy: a spec must be a string such as 'dp=8', got {type(text).__name__} "
                            f"{shown(text, 40)}")
    if not text or not text.replace(",", "").strip():
        raise StrategyError("strategy: empty spec (example: dp=8 or pp=4,dp=2,mb=8)")
    fields: dict[str, object] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise StrategyError(f"strategy: '{item}' is not key=value (keys: {', '.join(_KEYS)})")
        key, value = (s.strip() for s in item.split("=", 1))
        key = key.lower()
        if key not in _KEYS:
            raise StrategyError(f"strategy: unknown key '{key}' (keys: {', '.join(_KEYS)}){did_you_mean(key, _KEYS)}")
        if key in fields:
            raise StrategyError(f"strategy: '{key}' given twice")
        if key == "sp":
            parts = value.lower().split("x")
            ext = [_int("sp", p) for p in parts]
            if len(ext) == 1:
                fields["sp"] = (1, ext[0], 1)
            elif len(ext) == 2:
                fields["sp"] = (1, ext[0], ext[1])
            elif len(ext) == 3:
                fields["sp"] = (ext[0], ext[1], ext[2])
            else:
                raise StrategyError(f"strategy: sp={value} must be N, HxW or DxHxW")
        elif key in ("schedule", "comm", "decomp", "overlap"):
            fields[key] = value.lower()
        elif key == "recompute":
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise StrategyError(f"strategy: recompute={value} must be true or false")
            fields[key] = value.lower() in ("true", "1", "yes")
        elif key == "balance":
            fields[key] = tuple(_int("balance", p) for p in value.replace("/", ":").split(":"))
        else:
            fields[key] = _int(key, value)
    if "dp" not in fields and gpus is not None:
        others = Strategy(**{k: v for k, v in fields.items()})  # type: ignore[arg-type]
        if gpus % others.gpus:
            raise StrategyError(
                f"strategy: degrees of '{text}' multiply to {others.gpus}, which does not divide "
                f"{gpus} GPUs (valid: degrees other than dp multiplying to {_divisors_text(gpus)}; dp takes the rest)"
            )
        fields["dp"] = gpus // others.gpus
    if "schedule" in fields and fields.get("pp", 1) == 1 and fields.get("mp", 1) == 1:
        raise StrategyError(f"strategy: schedule={fields['schedule']} needs a pipeline (pp > 1) in '{text}'")
    s = Strategy(**fields)  # type: ignore[arg-type]
    if gpus is not None and s.gpus != gpus:
        raise StrategyError(
            f"strategy: degrees of '{text}' multiply to {s.gpus}, not {gpus} GPUs "
            f"(e.g. dp={gpus}, or choose degrees whose product is {gpus})"
        )
    return s


def _divisors_text(n: int, most: int = 12) -> str:
    """The divisors of ``n`` as 'a, b or c' (the first ``most`` and the largest when there are more)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    divs = sorted(set(small + [n // d for d in small]))
    if len(divs) > most:
        divs = divs[: most - 1] + [n]
        return ", ".join(map(str, divs[:-1])) + f", ... or {n}"
    return ", ".join(map(str, divs[:-1])) + f" or {n}" if len(divs) > 1 else str(n)

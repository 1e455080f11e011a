"""What an exported program needs of a priced plan, and which plans can be exported."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..cost.compute import HALF_PRECISIONS
from ..cost.fusion import DEFAULT_FUSION
from ..cost.layout import DEFAULT_MEMORY_FORMAT
from ..errors import BatchSplitError, StrategyError
from ..network.importers import absolute_spec, is_import_spec
from ..strategies import Prediction
from ..strategies.amp_runtime import DEFAULT_AMP_RUNTIME
from ..strategies.data import BUCKET_BYTES
from ..strategies.spec import Strategy

__all__ = [
    "ExportPlan",
    "NotExportableError",
    "export_plan",
    "check_exportable",
    "refusal",
    "user_module",
    "check_model_exportable",
    "EXPORTABLE",
]

#: What the exporter turns into torch.distributed code.
EXPORTABLE = "dp, pp, mb, schedule=gpipe|1f1b, recompute, balance, comm=ring|tree"


class NotExportableError(StrategyError):
    """A plan that prices fine but has no torch.distributed program yet (exit code 1)."""

    exit_code = 1


def refusal(s: Strategy) -> str:
    """What is missing to export plan ``s`` ("" when it can be exported)."""
    missing = [
        (s.sp_degree > 1, "spatial parallelism (sp=) needs halo exchange between tiles of every "
                          "convolution, which torch.distributed does not provide"),
        (s.filter > 1 or s.channel > 1, "filter/channel splits need per-layer allgather/reduce-scatter "
                                        "of activations (tensor parallelism of convolutions)"),
        (s.mp > 1, "hypergraph model parallelism (mp=) needs a non-contiguous layer placement "
                   "that torch.distributed.pipelining cannot schedule"),
        (s.is_ps, f"parameter servers (comm={s.comm}) need a push/pull server process; "
                  "DDP only all-reduces"),
        (s.comm == "hierarchical", "a hierarchical allreduce has no DDP/NCCL switch (use comm=ring or tree)"),
    ]
    return next((why for bad, why in missing if bad), "")


def check_exportable(s: Strategy) -> None:
    """Raise :class:`NotExportableError` naming what is missing for plan ``s``."""
    why = refusal(s)
    if why:
        raise NotExportableError(f"export: plan {s.spec()} cannot be exported yet: {why} (exportable: {EXPORTABLE})")


@dataclass(frozen=True)
class ExportPlan:
    """A priced plan as the program runs it, with the prediction it is scored against.

    ``balance`` is the number of chain links per pipeline stage exactly as priced
    (``Prediction.details['balance']``); ``hardware`` is the profile the plan was priced on
    (name or TOML path), written as the measured row's hardware label. ``module`` is empty for
    networks built from perfmodel's IR, or ``/abs/path/file.py:Name`` for a user's own
    ``torch.nn.Module`` class (built with no arguments), which the program trains instead.
    ``memory_format`` is the activations' layout the plan was priced with: under ``nhwc`` the
    program runs the model and its inputs channels-last (:mod:`perfmodel.cost.layout`).
    """

    model: str
    image_size: int
    gpus: int
    dp: int
    pp: int
    mb: int
    schedule: str
    recompute: bool
    balance: tuple[int, ...]
    comm: str
    precision: str
    optimizer: str
    global_batch: int
    hardware: str
    strategy: str
    kind: str
    bucket_bytes: int = BUCKET_BYTES
    predicted_step_time_s: float = 0.0
    predicted_throughput: float = 0.0
    predicted_memory_per_gpu_bytes: float = 0.0
    memory_capacity_bytes: float = 0.0
    module: str = ""
    lr: float = 0.01
    seed: int = 0
    notes: tuple[str, ...] = field(default=())
    memory_format: str = DEFAULT_MEMORY_FORMAT

    @property
    def samples_per_replica(self) -> int:
        return self.global_batch // self.dp

    @property
    def micro_batch(self) -> int:
        return self.samples_per_replica // self.mb

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["balance"] = list(self.balance)
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExportPlan:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known["balance"] = tuple(known.get("balance", ()))
        known["notes"] = tuple(known.get("notes", ()))
        return cls(**known)


def user_module(model: str) -> str:
    """``/abs/path/file.py:Name`` for a model given as ``file.py:Name``, else ""."""
    path, sep, name = model.rpartition(":")
    if not sep or not path.endswith(".py") or not name.isidentifier():
        return ""
    return absolute_spec(model)


def check_model_exportable(model: str, input_shape: tuple[int, ...] = ()) -> None:
    """Raise :class:`NotExportableError` for a model the program cannot build: it trains zoo networks
    (rebuilt by name) and ``file.py:Name`` modules; an ONNX graph or a ``torchvision:``/``timm:`` model
    would be looked up by its short name, which names another network or none. A module's priced
    ``input_shape`` (when known) must be ``3 x S x S``: the program and its measured row rebuild the
    module from the image size ``S`` alone, so another input would be trained and priced apart."""
    if is_import_spec(model) and not user_module(model):
        raise NotExportableError(
            f"export: {model} cannot be exported yet: the program trains zoo models and file.py:Name "
            "modules only (for a PyTorch model, give its class as file.py:Name)"
        )
    s = input_shape
    if s and (len(s) != 3 or s[0] != 3 or s[1] != s[2]):
        raise NotExportableError(
            f"export: input {'x'.join(map(str, s))} of {model} cannot be exported yet: the program and its "
            "measured row state the input as one image size, 3 x S x S (use --image-size S)"
        )


def _check_software(p: Prediction) -> None:
    """Refuse a prediction priced for software the program does not run: it trains eager PyTorch
    under ``torch.autocast`` at amp/bf16, so another mixed-precision runtime or a fused framework
    (whose prices differ: a 16-bit model's, XLA's) would be measured against the wrong prediction."""
    runtime = p.precision in HALF_PRECISIONS and p.amp_runtime != DEFAULT_AMP_RUNTIME
    if p.fusion == DEFAULT_FUSION and not runtime:
        return
    what = f"--fusion {p.fusion}" if p.fusion != DEFAULT_FUSION else f"--amp-runtime {p.amp_runtime}"
    raise NotExportableError(
        f"export: plan {p.strategy.spec()} was priced with {what}, but the exported program runs eager PyTorch, "
        f"torch.autocast at amp/bf16 (--fusion {DEFAULT_FUSION}, --amp-runtime {DEFAULT_AMP_RUNTIME}); price it "
        "with those to export it"
    )


def export_plan(p: Prediction, hardware: str, module: str = "") -> ExportPlan:
    """The exportable form of prediction ``p`` priced on profile ``hardware`` (its name or path);
    ``module`` names the user's own module class for a ``file.py:Name`` model."""
    s = p.strategy
    check_exportable(s)
    _check_software(p)
    if module and (s.pp > 1 or s.recompute):
        raise NotExportableError(
            f"export: plan {s.spec()} of {module} cannot be exported yet: pipeline stages and per-link "
            "checkpointing need the user's module cut at the priced links (export data-parallel plans "
            "of file models, or pipelines of zoo models)"
        )
    balance: tuple[int, ...] = ()
    if s.pp > 1:
        balance = tuple(int(x) for x in p.details["balance"])
        s = s.with_(balance=balance)
    per_replica = p.global_batch // s.dp
    if per_replica % s.mb:
        raise BatchSplitError(
            f"export: {per_replica} samples per replica do not split into mb={s.mb} equal micro-batches "
            f"(the program averages equal micro-batches; use a global batch that is a multiple of "
            f"{s.dp * s.mb})"
        )
    notes = []
    if not p.fits_in_memory:
        notes.append(
            f"predicted not to fit: {p.memory_per_gpu_bytes / 2**30:.2f} GiB per GPU > "
            f"{p.memory_capacity_bytes / 2**30:.2f} GiB"
        )
    return ExportPlan(
        model=module or p.model,  # a file model is named by its (absolute) file.py:Name
        image_size=p.image_size,
        gpus=p.gpus,
        dp=s.dp,
        pp=s.pp,
        mb=s.mb,
        schedule=s.schedule,
        recompute=s.recompute,
        balance=balance,
        comm=s.comm,
        precision=p.precision,
        optimizer=p.optimizer,
        global_batch=p.global_batch,
        hardware=hardware,
        strategy=s.spec(),
        kind=s.kind,
        predicted_step_time_s=p.iteration_time_s,
        predicted_throughput=p.throughput_samples_per_s,
        predicted_memory_per_gpu_bytes=p.memory_per_gpu_bytes,
        memory_capacity_bytes=p.memory_capacity_bytes,
        notes=tuple(notes),
        module=module,
        memory_format=p.memory_format,
    )

"""What an exported program runs: the IR's layers as pipeline stages, DDP, precision, synthetic data.

Imported by the generated ``train_plan.py`` (never by the CLI), so it needs torch. The
network is built by :func:`perfmodel.validation.measure.build_module` (the modules
``perfmodel measure`` times) with a fixed seed, then cut into the stages the plan was priced
with; every rank builds the same initial weights, so a split run starts where the unsplit
model starts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..network import Network, get_model
from ..validation.measure import build_module, module_to_memory_format, require_torch, to_memory_format
from .plan import ExportPlan
from .stages import cut_tensors, stage_layer_ranges

torch: Any = require_torch()

__all__ = [
    "Topology",
    "Segment",
    "build_network",
    "build_pieces",
    "synthetic_batch",
    "loss_function",
    "autocast_context",
    "init_distributed",
    "flat_state",
    "load_user_module",
]


@dataclass(frozen=True)
class Topology:
    """Where this process sits: global rank, its data-parallel replica and pipeline stage."""

    rank: int
    world: int
    local_rank: int
    dp_rank: int
    pp_rank: int
    device: Any
    dp_group: Any
    pp_group: Any
    mesh: Any


def init_distributed(plan: ExportPlan, device: str, backend: str) -> Topology:
    """Join the torchrun job; ranks are laid out pipeline-inner (``rank = dp_rank * pp + pp_rank``),
    as perfmodel places inner degrees inside a node first. A 2-D DeviceMesh ``(dp, pp)`` for hybrids."""
    dist = torch.distributed
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world != plan.gpus:
        raise SystemExit(
            f"this plan runs on {plan.gpus} processes, torchrun started {world}: "
            f"use torchrun --nproc-per-node {plan.gpus} (or --nnodes/--nproc-per-node multiplying to it)"
        )
    if device == "cuda":
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
    else:
        dev = torch.device("cpu")
    if "MASTER_ADDR" not in os.environ:  # started without torchrun: a one-process group
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group(backend=backend, rank=rank, world_size=world, device_id=dev if device == "cuda" else None)
    dp, pp = plan.dp, plan.pp
    mesh: Any = None
    dp_group: Any
    pp_group: Any
    if dp > 1 and pp > 1:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(device, (dp, pp), mesh_dim_names=("dp", "pp"))
        dp_group, pp_group = mesh.get_group("dp"), mesh.get_group("pp")
    else:
        world_group = dist.group.WORLD
        dp_group = world_group if dp > 1 else None
        pp_group = world_group if pp > 1 else None
    return Topology(rank, world, local_rank, rank // pp, rank % pp, dev, dp_group, pp_group, mesh)


def build_network(plan: ExportPlan) -> Network:
    """The plan's network from perfmodel's IR (the zoo model at the plan's image size)."""
    return get_model(plan.model, plan.image_size)


class _ContiguousGrad(torch.autograd.Function):  # type: ignore[misc]
    """Identity whose gradient is made contiguous: a stage's input gradients are sent back as flat
    buffers, and autograd gives a tensor read by ``cat`` (a U-Net skip) a strided gradient."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return grad.contiguous()


def _contiguous_grad(x: Any) -> Any:
    return _ContiguousGrad.apply(x)


class Segment(torch.nn.Module):  # type: ignore[misc]
    """Layers ``[start, stop)`` of the IR network: takes the tensors crossing the cut before it,
    returns the tensors crossing the cut after it (one tensor is returned bare). Its inputs are
    laid out in ``memory_format`` first (channels-last under ``nhwc``: a pipeline stage receives
    the tensors crossing its cut as contiguous NCHW buffers, so each stage lays them out again,
    one copy per crossing tensor and micro-batch; a no-op for a tensor already laid out so)."""

    def __init__(self, full: Any, net: Network, start: int, stop: int, memory_format: str = "nchw") -> None:
        super().__init__()
        keys = [layer.name.replace(".", "__") for layer in net.layers[start:stop]]
        # the same module objects as the full network: same initial weights, same state_dict keys
        self.params = torch.nn.ModuleDict({k: full.params[k] for k in keys if k in full.params})
        self.fns = full.fns[start:stop]
        self.in_names = ("input",) if start == 0 else cut_tensors(net, start)
        self.out_names = cut_tensors(net, stop)
        self.memory_format = memory_format

    def forward(self, *xs: Any) -> Any:
        if self.in_names != ("input",):
            xs = tuple(_contiguous_grad(x) for x in xs)
        xs = tuple(to_memory_format(torch, x, self.memory_format) for x in xs)
        env = dict(zip(self.in_names, xs, strict=True))
        for name, inputs, fn in self.fns:
            env[name] = fn(*(env[i] for i in inputs))
        # contiguous: a pipeline sends these (and receives their gradients) as flat buffers
        out = tuple(env[n].contiguous() for n in self.out_names)
        return out[0] if len(out) == 1 else out


class Pieces(torch.nn.Module):  # type: ignore[misc]
    """Segments run one after another, inside the precision's autocast region, each under
    activation checkpointing when ``recompute``: in a pipeline every micro-batch of a step but
    the last (torchgpipe's ``except_last``, as priced), else every one. ``forwards`` counts the
    step's micro-batches; the pipeline step resets it."""

    def __init__(self, pieces: Sequence[Any], recompute: bool, autocast: Callable[[], Any],
                 micro_batches: int | None = None) -> None:
        super().__init__()
        self.pieces = torch.nn.ModuleList(pieces)
        self.recompute = recompute
        self.autocast = autocast
        self.except_last = micro_batches
        self.forwards = 0

    def forward(self, *xs: Any) -> Any:
        out: Any = xs
        self.forwards += 1
        checkpoint = self.recompute and (self.except_last is None or self.forwards < self.except_last)
        with self.autocast():
            for seg in self.pieces:
                args = out if isinstance(out, tuple) else (out,)
                out = torch.utils.checkpoint.checkpoint(seg, *args, use_reentrant=False) if checkpoint else seg(*args)
        return out


def load_user_module(spec: str) -> Any:
    """An instance of ``/path/file.py:Name``, a ``torch.nn.Module`` class built with no arguments."""
    path, _, name = spec.rpartition(":")
    loader = importlib.util.spec_from_file_location(f"perfmodel_user_{Path(path).stem}", path)
    if loader is None or loader.loader is None:
        raise SystemExit(f"cannot load the model's module file {path}")
    mod = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(mod)
    return getattr(mod, name)()


def build_pieces(plan: ExportPlan, net: Network, stage: int, device_type: str) -> Any:
    """This stage's layers (the whole network without a pipeline) as one module.

    ``recompute=true`` checkpoints each chain link when there is no pipeline (the cost model
    keeps one link's activations at a time) and the whole stage in a pipeline, all micro-batches
    but the last (it keeps the stage's input per micro-batch in flight, torchgpipe's
    ``except_last``). Its filters are laid out in the plan's memory format (channels-last under
    ``nhwc``, :func:`~perfmodel.validation.measure.module_to_memory_format`), as are its inputs
    (:class:`Segment`).
    """
    torch.manual_seed(plan.seed)
    autocast = lambda: autocast_context(plan.precision, device_type)  # noqa: E731
    fmt = plan.memory_format
    if plan.module:  # the user's own module (data-parallel plans only: see export_plan)
        return module_to_memory_format(torch, Pieces([load_user_module(plan.module)], False, autocast), fmt)
    full = build_module(net, torch)
    if plan.pp > 1:
        a, b = stage_layer_ranges(net, plan.balance)[stage]
        segs = [Segment(full, net, a, b, fmt)]
    elif plan.recompute:
        segs = [Segment(full, net, lk.start, lk.stop, fmt) for lk in net.links]
    else:
        segs = [Segment(full, net, 0, len(net.layers), fmt)]
    pieces = Pieces(segs, plan.recompute, autocast, plan.mb if plan.pp > 1 else None)
    return module_to_memory_format(torch, pieces, fmt)


def autocast_context(precision: str, device_type: str) -> Any:
    """fp16 autocast for ``amp``, bf16 autocast for ``bf16``, none for fp32 and tf32."""
    if precision == "amp":
        return torch.autocast(device_type=device_type, dtype=torch.float16)
    if precision == "bf16":
        return torch.autocast(device_type=device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def set_math_mode(precision: str) -> None:
    """TF32 tensor-core math on for ``tf32``, off otherwise (fp32 means IEEE fp32 matmuls)."""
    allow = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = allow
    torch.backends.cudnn.allow_tf32 = allow


def synthetic_batch(net: Network, samples: int, seed: int, device: Any,
                    memory_format: str = "nchw") -> tuple[Any, Any]:
    """``samples`` random inputs and targets, the same for the same seed on every machine:
    class labels for a network ending in a vector, a random tensor of the output's shape else;
    the inputs laid out in ``memory_format`` (channels-last under ``nhwc``)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, *net.input_shape, generator=g)
    out_shape = net.layers[-1].out_shape
    if len(out_shape) == 1:
        y = torch.randint(0, out_shape[0], (samples,), generator=g)
    else:
        y = torch.randn(samples, *out_shape, generator=g)
    return to_memory_format(torch, x.to(device), memory_format), y.to(device)


def loss_function(net: Network) -> Callable[[Any, Any], Any]:
    """Mean cross-entropy for classifiers, mean squared error for dense outputs (computed in fp32)."""
    nnf = torch.nn.functional
    if len(net.layers[-1].out_shape) == 1:
        return lambda out, y: nnf.cross_entropy(out.float(), y)
    return lambda out, y: nnf.mse_loss(out.float(), y)


def make_optimizer(plan: ExportPlan, params: Any) -> Any:
    """SGD with momentum 0.9 or Adam, as the plan was priced (``optimizer``), at ``plan.lr``."""
    if plan.optimizer == "adam":
        return torch.optim.Adam(params, lr=plan.lr)
    return torch.optim.SGD(params, lr=plan.lr, momentum=0.9)


def flat_state(module: Any) -> dict[str, Any]:
    """Parameters and buffers of a built stage under the keys ``build_module``'s network uses."""
    segments = [m for m in module.modules() if isinstance(m, Segment)]
    if not segments:  # a user's own module: its own keys
        return {k: t.detach().cpu().clone() for k, t in module.pieces[0].state_dict().items()}
    out: dict[str, Any] = {}
    for mod in segments:
        for k, sub in mod.params.items():
            for name, t in sub.state_dict().items():
                out[f"params.{k}.{name}"] = t.detach().cpu().clone()
    return out

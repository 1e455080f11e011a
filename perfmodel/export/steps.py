"""One training step of an exported plan: DDP with gradient accumulation, or a pipeline schedule.

Every step trains on the same synthetic batch (the cost model excludes data loading); it
returns the step's mean loss over this replica's samples as a 0-d tensor (zero on pipeline
stages that do not compute the loss), so nothing waits for the device inside the step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ..network import Network
from .plan import ExportPlan
from .runtime import Topology, loss_function, make_optimizer, synthetic_batch, torch

__all__ = ["make_step", "grad_scaler", "bucket_cap_mb"]


def bucket_cap_mb(plan: ExportPlan) -> float:
    """DDP's ``bucket_cap_mb`` (MiB) for the bucket size the cost model assumed."""
    return plan.bucket_bytes / 2**20


def grad_scaler(plan: ExportPlan, device_type: str) -> Any:
    """A dynamic loss scaler for ``amp`` (fp16 autocast), else None."""
    return torch.amp.GradScaler(device_type) if plan.precision == "amp" else None


def _ddp(plan: ExportPlan, topo: Topology, module: Any) -> Any:
    """``module`` under DDP over the data-parallel group (unchanged without one).

    A pipeline stage's DDP gets ``find_unused_parameters=True``: pipelining runs every forward
    under ``no_sync`` and arms DDP itself before the last micro-batch's backward, and in that
    pattern DDP's default bucket rebuild fails an internal assertion and ``static_graph=True``
    leaves gradients unaveraged (torch 2.13; the pipeline x data test catches both). The
    flag only disables the rebuild and walks the stage's autograd graph once per step.
    """
    if plan.dp == 1:
        return module
    ids = [topo.device.index] if topo.device.type == "cuda" else None
    return torch.nn.parallel.DistributedDataParallel(
        module,
        device_ids=ids,
        process_group=topo.dp_group,
        bucket_cap_mb=bucket_cap_mb(plan),
        find_unused_parameters=plan.pp > 1,
    )


def _optimizer_step(opt: Any, scaler: Any, sync_group: Any) -> None:
    """Step (and with a scaler, skip on overflow). In a pipeline each stage holds other weights,
    so an overflow found on one stage must skip the step on every stage: the finite check is
    all-reduced over ``sync_group`` and all stages back off the scale together."""
    if scaler is None:
        opt.step()
    elif sync_group is None:
        scaler.step(opt)
        scaler.update()
    else:
        scaler.unscale_(opt)
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        finite = torch.stack([torch.isfinite(t).all() for t in grads]).all().float()
        torch.distributed.all_reduce(finite, op=torch.distributed.ReduceOp.MIN, group=sync_group)
        if bool(finite.item()):
            scaler.step(opt)
            scaler.update()
        else:
            scaler.update(new_scale=scaler.get_scale() * scaler.get_backoff_factor())
    opt.zero_grad(set_to_none=True)


def make_step(plan: ExportPlan, net: Network, topo: Topology, module: Any) -> Callable[[], Any]:
    """The step function of ``plan`` for this rank's ``module`` (already on ``topo.device``)."""
    x, y = synthetic_batch(net, plan.samples_per_replica, plan.seed + topo.dp_rank, topo.device, plan.memory_format)
    scaler = grad_scaler(plan, topo.device.type)
    wrapped = _ddp(plan, topo, module)
    opt = make_optimizer(plan, module.parameters())
    if plan.pp == 1:
        return _accumulating_step(plan, wrapped, opt, scaler, x, y, loss_function(net))
    return _pipeline_step(plan, topo, wrapped, opt, scaler, x, y, loss_function(net), module)


def _accumulating_step(
    plan: ExportPlan, model: Any, opt: Any, scaler: Any, x: Any, y: Any, loss_fn: Callable[[Any, Any], Any]
) -> Callable[[], Any]:
    """Forward and backward of ``mb`` equal micro-batches, gradients all-reduced once (DDP's
    ``no_sync`` on all but the last), then the optimizer step."""
    xs, ys = x.chunk(plan.mb), y.chunk(plan.mb)
    sync = getattr(model, "no_sync", None)

    def step() -> Any:
        total = torch.zeros((), device=x.device)
        for i in range(plan.mb):
            ctx = sync() if (sync is not None and i < plan.mb - 1) else contextlib.nullcontext()
            with ctx:
                loss = loss_fn(model(xs[i]), ys[i]) / plan.mb
                (scaler.scale(loss) if scaler is not None else loss).backward()
            total += loss.detach()
        _optimizer_step(opt, scaler, None)
        return total

    return step


def _pipeline_step(
    plan: ExportPlan,
    topo: Topology,
    model: Any,
    opt: Any,
    scaler: Any,
    x: Any,
    y: Any,
    loss_fn: Callable[[Any, Any], Any],
    pieces: Any,
) -> Callable[[], Any]:
    """``torch.distributed.pipelining`` with the plan's schedule over the pipeline group; the
    schedule splits the replica's batch into ``mb`` micro-batches and averages their gradients."""
    # imported here: pipelining pulls in torch._dynamo (about 2 s per process), which
    # data-parallel programs do not need
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    if scaler is not None:  # every stage unscales gradients of the last stage's scaled loss
        scaler.scale(torch.ones((), device=x.device))  # creates the scale on stages without a loss
    stage = PipelineStage(model, topo.pp_rank, plan.pp, topo.device, group=topo.pp_group)

    def scaled_loss(out: Any, target: Any) -> Any:
        loss = loss_fn(out, target)
        return scaler.scale(loss) if scaler is not None else loss

    cls: Any = Schedule1F1B if plan.schedule == "1f1b" else ScheduleGPipe
    schedule = cls(stage, n_microbatches=plan.mb, loss_fn=scaled_loss)
    first, last = topo.pp_rank == 0, topo.pp_rank == plan.pp - 1

    def step() -> Any:
        losses: list[Any] = []
        factor = scaler.get_scale() if scaler is not None else 1.0
        pieces.forwards = 0  # the last micro-batch of this step is not checkpointed
        if first:
            schedule.step(x, return_outputs=False)
        elif last:
            schedule.step(target=y, losses=losses, return_outputs=False)
        else:
            schedule.step(return_outputs=False)
        _optimizer_step(opt, scaler, topo.pp_group if scaler is not None else None)
        if not losses:
            return torch.zeros((), device=x.device)
        return torch.stack([t.detach().float() for t in losses]).mean() / factor

    return step

"""A torch.nn.Module traced with torch.fx, its tensors' shapes propagated, read into the network IR."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ...errors import DataError
from ..builder import NetBuilder
from ..graph import Network
from ..layers import Shape
from .emit import TRACE_BATCH, Const, Emitter, UnsupportedOp, per_sample
from .fx_ctx import Ctx
from .fx_ops import creates_constant, function_layer, function_name, module_layer, runs_for_real
from .fx_transformer import tracer_class
from .strides import attention_out_strides, view_strides

__all__ = ["import_module", "TORCH_MISSING"]

TORCH_MISSING = "needs torch to trace a PyTorch model: pip install 'perfmodel[torch]'"


def _torch() -> Any:
    try:
        import torch
        import torch.fx
    except ImportError:
        raise DataError(TORCH_MISSING) from None
    return torch


def import_module(make: Callable[[], Any], name: str, input_shape: Shape, source: str = "") -> Network:
    """The network of the module ``make()`` returns, traced at per-sample ``input_shape``.

    The module is built on torch's meta device where it can be (no memory, no initialisation)
    and traced in training mode, so dropout and batch norm are what training runs. Warnings raised
    while it is built and traced are not shown (:func:`_quiet_construction`).
    """
    torch = _torch()
    try:
        with _quiet_construction():
            return _import_module(torch, make, name, input_shape, source)
    except RecursionError:
        raise DataError(f"{name}: Python's recursion limit was reached while building or tracing it "
                        "(a module that holds itself, or a forward that calls itself without end?)") from None


def _import_module(torch: Any, make: Callable[[], Any], name: str, input_shape: Shape, source: str) -> Network:
    try:
        with torch.device("meta"), _quiet_construction():
            model = make()
        device = "meta"
    except Exception:  # some constructors need real tensors: build it for real
        model, device = _call(make, name), "cpu"
    if not isinstance(model, torch.nn.Module):
        raise DataError(f"{name}: expected a torch.nn.Module, got {type(model).__name__}")
    try:
        em = _import(torch, model, name, input_shape, source, device)
    except _TorchFailed as e:
        if device == "cpu":
            raise _run_error(name, input_shape, e.error) from None
        model = _call(make, name)  # the forward makes tensors of its own: run it for real
        try:
            em = _import(torch, model, name, input_shape, source, "cpu")
        except _TorchFailed as e2:
            raise _run_error(name, input_shape, e2.error) from None
    net = em.network()
    torch_params = sum(p.numel() for p in model.parameters())
    if net.params > torch_params:
        raise DataError(f"{name}: the IR counts {net.params:,} parameters, torch {torch_params:,} (a shared module?)")
    return net


class _TorchFailed(Exception):
    """torch raised while the traced graph ran on the trace's tensors."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _import(torch: Any, model: Any, name: str, input_shape: Shape, source: str, device: str) -> Emitter:
    model.train()
    graph = _trace(torch, model, name)
    em = Emitter(NetBuilder(name, input_shape, source), atomic=_atomic(torch, model))
    x = torch.zeros((TRACE_BATCH, *input_shape), device=device)
    try:
        with torch.no_grad():
            _walk(torch, model, graph, x, em)
    except UnsupportedOp as e:
        raise UnsupportedOp(f"{name}: {e}{_line_of(torch, model, e)}") from None
    except DataError as e:  # the builder's errors already start with the network's name
        raise DataError(str(e) if str(e).startswith(f"{name}:") else f"{name}: {e}") from None
    except Exception as e:
        raise _TorchFailed(e) from None
    return em


def _atomic(torch: Any, model: Any) -> Callable[[str], bool]:
    """Which submodules run a forward of their own (a chain link is never cut inside one)."""
    nn = torch.nn
    mods = dict(model.named_modules())

    def atomic(path: str) -> bool:
        m = mods.get(path)
        return m is not None and type(m).forward is not nn.Sequential.forward

    return atomic


def _run_error(name: str, shape: Shape, e: Exception) -> DataError:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return DataError(f"{name}: running it on a {'x'.join(map(str, shape))} input failed: {type(e).__name__}: {first}"
                     " (see --input-shape / --image-size)")


@contextmanager
def _quiet_construction() -> Iterator[None]:
    """Silence warnings while a model is built and traced: perfmodel only reads its graph, and torch's
    hints then are about running it (a transformer stack's inference fast path being off, a
    zero-element parameter's initialisation being a no-op); the one-line error stays the output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _call(make: Callable[[], Any], name: str) -> Any:
    try:
        with _quiet_construction():
            return make()
    except DataError:
        raise  # already says what went wrong (a model file that called sys.exit)
    except Exception as e:
        raise DataError(f"{name}: building the model failed: {type(e).__name__}: {e}") from None


def _trace(torch: Any, model: Any, name: str) -> Any:
    """The module's graph, torch's transformer modules traced through (:mod:`.fx_transformer`)."""
    try:
        return tracer_class(torch)().trace(model)
    except UnsupportedOp as e:
        raise UnsupportedOp(f"{name}: {e}") from None
    except Exception as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise DataError(f"{name}: torch.fx cannot trace it: {type(e).__name__}: {msg}") from None


def _path(node: Any) -> tuple[str, ...]:
    stack = node.meta.get("nn_module_stack") or {}
    return tuple(v[0] for v in stack.values())


def _where(node: Any) -> str:
    path = _path(node)
    return f"module '{path[-1]}' (node {node.name})" if path else f"node {node.name}"


def _line_of(torch: Any, model: Any, err: Exception) -> str:
    """`` (file.py:LINE)`` of the node an error names, found by tracing again with stack traces."""
    m = re.search(r"\(node (\w+)\)|node (\w+)", str(err))
    if not m:
        return ""
    node_name = m.group(1) or m.group(2)
    try:
        tracer = tracer_class(torch)()
        tracer.record_stack_traces = True
        graph = tracer.trace(model)
    except Exception:
        return ""
    for n in graph.nodes:
        if n.name == node_name and n.stack_trace:
            frames = re.findall(r'File "([^"]+)", line (\d+)', n.stack_trace)
            user = [f for f in frames if "/torch/" not in f[0] and "/perfmodel/" not in f[0]]
            if user:
                return f" ({user[-1][0]}:{user[-1][1]})"
    return ""


def _walk(torch: Any, model: Any, graph: Any, x: Any, em: Emitter) -> None:
    """Read the graph node by node into ``em``. Views (and ops the IR does not know) run on the
    trace's tensors; every other op is given an empty tensor of the shape the IR infers for it,
    so that no arithmetic runs (on meta tensors it would pull in torch's decompositions)."""
    refs: dict[str, Any] = {}
    values: dict[str, Any] = {}
    interp = torch.fx.Interpreter(torch.fx.GraphModule(model, graph))

    def run(node: Any) -> Any:
        args = torch.fx.node.map_arg(node.args, lambda n: values[n.name])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: values[n.name])
        return getattr(interp, node.op)(node.target, args, kwargs)

    params = {id(p): p for p in model.parameters()}
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    if len(placeholders) != 1:
        raise DataError(f"forward takes {len(placeholders)} inputs; perfmodel prices networks with one input tensor")
    taken: set[str] = set()

    def ps(v: Any) -> Shape:
        return per_sample(tuple(v.shape), TRACE_BATCH, "")

    def ref(a: Any) -> Any:
        """A node argument as a ref: an activation's name, a Const, or a plain value (a string
        literal is wrapped, so that only activations are ``str``)."""
        if isinstance(a, torch.fx.Node):
            return refs[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(ref(x) for x in a)
        return Const(a) if isinstance(a, str) else a

    for node in graph.nodes:
        if node.op == "placeholder":
            refs[node.name], values[node.name] = "input", x
            continue
        if node.op == "output":
            continue
        if node.op == "get_attr":
            obj = values[node.name] = _attr(model, node.target)
            pid = ((id(obj), obj.numel()),) if id(obj) in params and obj.requires_grad else ()
            refs[node.name] = Const(obj, tuple(obj.shape) if hasattr(obj, "shape") else None, pid)
            continue
        args, kwargs = ref(list(node.args)), {k: ref(v) for k, v in node.kwargs.items()}
        flat = _flatten([*args, *kwargs.values()])
        fname = node.target if node.op == "call_module" else function_name(node.target)
        if not any(isinstance(a, str) for a in flat) or (node.op != "call_module" and creates_constant(fname)):
            val = values[node.name] = run(node)
            const = _const(torch, val, flat)
            if node.op == "call_module":  # a module applied to constants (Swin v2's position-bias MLP)
                own = tuple((id(p), p.numel()) for p in model.get_submodule(node.target).parameters())
                const = Const(const.value, const.shape, const.params + own)
            refs[node.name] = const
            continue
        if fname == "getitem" and isinstance(args[0], tuple):
            values[node.name] = run(node)
            refs[node.name] = args[0][args[1]]
            continue
        traced = {refs[a.name]: values[a.name] for a in node.all_input_nodes if isinstance(refs[a.name], str)}
        first = next(iter(traced.values()))
        kind = type(model.get_submodule(node.target)).__name__ if node.op == "call_module" else fname
        real = runs_for_real(node.op, kind) or first.shape[0] != TRACE_BATCH
        val = run(node) if real else None
        path = _path(node)
        lname = node.target if node.op == "call_module" else (f"{path[-1]}.{node.name}" if path else node.name)
        lname = _unique(lname, taken)
        c = Ctx(em, lname, path, _where(node), args, kwargs, val, ps, first.dim())
        c.copies, c.first, c.traced = _copies(torch, node, values, fname, val), first, traced
        if node.op == "call_module":
            out = module_layer(c, model.get_submodule(node.target), args[0] if args else kwargs.get("input"))
        elif isinstance(val, (tuple, list)) and fname in ("chunk", "split", "unbind", "tensor_split"):
            out = _split(c, val)
        else:
            out = function_layer(c, fname)
        values[node.name] = _checked_value(torch, c, out, val, fname, x.device)
        if fname == "scaled_dot_product_attention" and val is None:  # the fused kernels' output layout
            o, q = values[node.name], first
            values[node.name] = torch.empty_strided(o.shape, attention_out_strides(q.shape, q.stride(), o.shape),
                                                    device=o.device)
        refs[node.name] = out


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name:k`` when a module is called again; remembered in ``taken``."""
    base, k = name, 1
    while name in taken:
        name, k = f"{base}:{k}", k + 1
    taken.add(name)
    return name


def _checked_value(torch: Any, c: Ctx, out: Any, val: Any, fname: str, device: Any) -> Any:
    """The node's value for the nodes after it: the one it ran to (its shape checked against
    the IR's), or an empty tensor of the IR's shape when it did not run."""
    if isinstance(out, str) and isinstance(val, torch.Tensor):
        c.em.check(out, c.ps(val), c.where)
    elif val is None:
        if not isinstance(out, str):
            raise UnsupportedOp(f"{c.where}: {fname} gives several tensors")
        val = torch.empty((TRACE_BATCH, *c.em.builder.shape(out)), device=device)
    return val


def _copies(torch: Any, node: Any, values: dict[str, Any], fname: str, val: Any) -> bool | None:
    """Whether a reshape-like node copied its input (``reshape``/``flatten`` whose strides cannot be
    regrouped into the new shape, :func:`.strides.view_strides`; ``contiguous`` of a non-contiguous
    tensor; ``clone``); None for other nodes."""
    if fname not in ("reshape", "flatten", "contiguous", "clone", "reshape_as"):
        return None
    src = values.get(node.args[0].name) if node.args and isinstance(node.args[0], torch.fx.Node) else None
    if not isinstance(src, torch.Tensor) or not isinstance(val, torch.Tensor):
        return None
    if fname in ("reshape", "flatten", "reshape_as"):  # a copy where ATen's computeStride finds no view
        return view_strides(tuple(src.shape), tuple(src.stride()), tuple(val.shape)) is None
    return fname == "clone" or not src.is_contiguous()


def _split(c: Ctx, val: Any) -> tuple[str, ...]:
    """chunk / split / unbind: one view of the input per piece."""
    x = next(a for a in c.args if isinstance(a, str))
    return tuple(c.em.emit(c.path, "view", x, c.ps(v), name=f"{c.name}.{i}", piece=i) for i, v in enumerate(val))


def _flatten(xs: Any) -> list[Any]:
    out: list[Any] = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_flatten(x))
        else:
            out.append(x)
    return out


def _const(torch: Any, val: Any, inputs: list[Any]) -> Const:
    pids = tuple(p for a in inputs if isinstance(a, Const) for p in a.params)
    shape = tuple(val.shape) if isinstance(val, torch.Tensor) else None
    return Const(val, shape, pids)


def _attr(model: Any, target: str) -> Any:
    obj = model
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj

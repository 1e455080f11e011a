"""The shipped per-kernel and per-layer measurements as layers of the IR, with their measured times.

Files (``perfmodel/data/kernels_*.csv``; provenance in ``perfmodel/data/KERNELS.md``):
DeepBench convolution (forward, backward-data, backward-filter) and GEMM kernels on P100 and
V100; PipeDream's per-layer forward and backward times of 11 CNNs in PyTorch training (V100,
fp32); NeuSight forward convolution and linear kernels on P100, V100, A100 and H100, and
element-wise kernels (relu, add, mul) on A100 (fp32, TF32 off); A100 fp16/bf16 tensor-core GEMMs
(Azure's cuBLASLt and LLMCompass's ``torch.matmul`` tables); A100 and V100 fp16 forward
convolutions of ResNet layers (Ladder's cuDNN baseline, ``torch.nn.functional.conv2d``). Each measured time becomes a
:class:`KernelRow`: a one-layer problem, which kernel (or phase) was timed, the profile and
precision that price it, and the seconds measured.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import re
from collections.abc import Collection, Iterator
from importlib import resources

import numpy as np

from ..errors import DataError
from ..network.layers import Layer
from .kernel_row import KernelRow
from .neusight_window import window_floor
from .robust_line import robust_line

__all__ = [
    "KernelRow",
    "load_rows",
    "PIPEDREAM_FWD_OVERHEAD_S",
    "PIPEDREAM_BWD_OVERHEAD_S",
    "PIPEDREAM_MIN_S",
    "NEUSIGHT_ELEMENTWISE_MIN_S",
    "PIPEDREAM_FWD_PROLOGUE_S",
    "SOURCES",
    "module_host_s",
]

#: PipeDream's profiler wraps every module in hooks and a ``torch.cuda.synchronize()``; issue 14
#: estimates that cost at 0.26 ms per layer forward and 0.02 ms backward (the smallest layers'
#: times in the profiles sit at about these values), removed before comparing.
PIPEDREAM_FWD_OVERHEAD_S = 0.26e-3
PIPEDREAM_BWD_OVERHEAD_S = 0.02e-3
#: Of that forward cost, the host work inside the window before the module's first kernel
#: launch (the wrapper and the module's Python), during which untimed ops launched before the
#: window (see :func:`_untimed_work`) keep the GPU busy: such work shows only beyond this. The
#: value of the rule :func:`perfmodel.validation.pipedream_lomo.prologue_rule` (the forward rows
#: with untimed work exceed the serial price's model by ``min(untimed work, P + the module's host
#: work)``: a least absolute deviations fit) on all models at the shipped V100 profile, kept to
#: 0.01 ms. The untimed work is memory-bound, so a refit of the memory efficiency moves it:
#: ``python scripts/pipedream_residuals.py`` prints the rule's value to set here, and
#: ``tests/test_pipedream_lomo.py`` fails while the two differ by more than 0.01 ms.
PIPEDREAM_FWD_PROLOGUE_S = 0.103e-3
#: PipeDream rows whose time after removing that overhead is below this are not scored: the
#: overhead estimate's own uncertainty (tens of microseconds) would dominate their error.
PIPEDREAM_MIN_S = 0.1e-3

#: NeuSight's element-wise rows below this are not scored: their CUDA-event window holds the
#: op's host dispatch, a floor of 25-32 us (the A100-PCIE-40GB relu/add/mul rows up to ~2.4M
#: elements all take 26-33 us, kernels_neusight_elementwise.csv), which would dominate them.
NEUSIGHT_ELEMENTWISE_MIN_S = 0.1e-3

#: GPU name in each file -> the shipped profile of that card (NeuSight's P100 and V100 are the
#: PCIe cards: ``p100-16gb-pcie``, ``v100-32gb-pcie``, whose datasheet peaks are 9.3 and 14
#: TFLOPS against the SXM2 cards' 10.6 and 15.7; the kernel-model numbers are the generation's).
#: DeepBench's P100 (form factor not stated) and PipeDream's GPU (not recorded) keep the SXM2
#: profiles their generations' numbers were fitted on.
_PROFILE = {
    "V100-SXM2 (DGX-1)": "v100-16gb-dgx1",
    "P100": "p100-16gb-nvlink",
    "pipedream": "v100-16gb-dgx1",
    "Tesla P100-PCIE-16GB": "p100-16gb-pcie",
    "Tesla V100-PCIE-32GB": "v100-32gb-pcie",
    "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA A100-PCIE-40GB": "a100-40gb-pcie",
    "NVIDIA H100 80GB HBM3": "h100-80gb-dgx",
    "NVIDIA A100-SXM4-80GB": "a100-80gb-dgx",
    "NVIDIA A100 80GB (SXM)": "a100-80gb-dgx",
    # Ladder's V100-16GB-PCIe: the 32GB card's SMs, clocks, peaks and bandwidth (V100 datasheet, PCIe column)
    "Tesla V100-PCIE-16GB": "v100-32gb-pcie",
}
#: cuDNN major version each source measured with (:mod:`perfmodel.cost.grouped`): DeepBench's
#: Specs sheets (its ``specs.csv``: P100 cuDNN 6.0.21, V100-SXM2 7.6.2.24); PipeDream's stated
#: environment, the NGC ``pytorch:19.05-py3`` container (NGC PyTorch release notes 19.05: cuDNN
#: 7.6.0); NeuSight's collection script (PyTorch 2.1.0, cuDNN 8.9.2).
CUDNN_MAJOR = {"P100": 6, "V100-SXM2 (DGX-1)": 7, "pipedream": 7, "neusight": 8, "ladder_conv": 8}
#: DeepBench precision sheet -> perfmodel precision.
_PRECISION = {"fp32": "fp32", "fp16_tensorcore": "amp"}
SOURCES = ("deepbench", "pipedream", "neusight", "ampere_gemm", "ladder_conv")
#: LLMCompass times each ``torch.matmul`` on the host around one call and a synchronize
#: (``software_model/matmul.py``, median of its runs); its own A100 comparison adds 21 us of
#: "GPU launch kernel overhead and PyTorch overhead" to a kernel time (``ae/figure5/ab/
#: test_matmul.py``: ``+ 2.1e-5``): added to those rows' prices, and rows under 0.1 ms not scored.
LLMCOMPASS_HOST_S = 21e-6
HOST_TIMED_MIN_S = 0.1e-3
#: kernels_ampere_gemm.csv source -> (label, host seconds in the measured window)
_GEMM_ORIGIN = {"azure_nd_a100_v4": ("Azure ND A100 v4", 0.0), "llmcompass": ("LLMCompass", LLMCOMPASS_HOST_S)}


def _open(name: str) -> Iterator[dict[str, str]]:
    try:
        text = resources.files("perfmodel.data").joinpath(name).read_text(encoding="utf-8")
    except OSError as e:  # pragma: no cover - a broken installation
        raise DataError(f"cannot read shipped kernel data {name}: {e}") from None
    yield from csv.DictReader(text.splitlines())


def conv_layer(c: int, h: int, w: int, k: int, r: int, s: int, stride: tuple[int, int], pad: tuple[int, int],
               groups: int = 1, bias: bool = False) -> Layer:
    """A 2-D convolution layer of the IR from its shape (output size from the usual formula)."""
    p = (h + 2 * pad[0] - r) // stride[0] + 1
    q = (w + 2 * pad[1] - s) // stride[1] + 1
    params = k * (c // groups) * r * s + (k if bias else 0)
    return Layer(name="conv", kind="conv", inputs=("x",), in_shapes=((c, h, w),), out_shape=(k, p, q),
                 kernel=(r, s), stride=stride, padding=pad, dilation=(1, 1), groups=groups, bias=bias,
                 params=params)


def linear_layer(fi: int, fo: int, bias: bool = False) -> Layer:
    return Layer(name="linear", kind="linear", inputs=("x",), in_shapes=((fi,),), out_shape=(fo,), bias=bias,
                 params=fi * fo + (fo if bias else 0))


def _conv_op(r: int, s: int, stride: int, c: int) -> str:
    if c <= 4:
        return "conv first (C<=4)"
    if (r, s) == (1, 1):
        return "conv 1x1"
    return f"conv {r}x{s}" + ("" if stride == 1 else " strided")


def _deepbench() -> Iterator[KernelRow]:
    for d in _open("kernels_deepbench_conv.csv"):
        prec = _PRECISION.get(d["precision"])
        if prec is None:
            continue
        v = {k: int(d[k]) for k in ("N", "C", "H", "W", "K", "R", "S", "pad_h", "pad_w", "stride_h", "stride_w")}
        layer = conv_layer(v["C"], v["H"], v["W"], v["K"], v["R"], v["S"], (v["stride_h"], v["stride_w"]),
                           (v["pad_h"], v["pad_w"]))
        first = not d["bwd_data_ms"]
        op = _conv_op(v["R"], v["S"], v["stride_h"], v["C"])
        for what, col in (("fwd", "fwd_ms"), ("dgrad", "bwd_data_ms"), ("wgrad", "bwd_filter_ms")):
            if d[col] and float(d[col]) > 0:
                yield KernelRow("deepbench", d["gpu"], _PROFILE[d["gpu"]], prec, f"{op} {what}", what, layer,
                                first, v["N"], float(d[col]) * 1e-3, cudnn_major=CUDNN_MAJOR[d["gpu"]])
    for d in _open("kernels_deepbench_gemm.csv"):
        prec = _PRECISION.get(d["precision"])
        if prec is None:
            continue
        m, n, k = int(d["M"]), int(d["N"]), int(d["K"])
        # C(MxN) = A(MxK) B(KxN): a linear layer of K inputs and N outputs over M rows
        yield KernelRow("deepbench", d["gpu"], _PROFILE[d["gpu"]], prec, "gemm", "fwd", linear_layer(k, n),
                        True, m, float(d["time_ms"]) * 1e-3, cudnn_major=CUDNN_MAJOR[d["gpu"]])


_INT = re.compile(r"(\w+)=\(?(\d+)")


def _desc_ints(desc: str) -> dict[str, int]:
    return {k: int(v) for k, v in _INT.findall(desc)}


def _pipedream_layer(d: dict[str, str], batch: int) -> tuple[Layer, str] | None:
    t = d["layer_type"]
    n_out = int(d["output_activation_bytes"]) // 4 // batch
    n_in = int(float(d["input_activation_bytes"] or 0)) // 4 // batch
    if n_out < 1:
        return None  # an output the profile recorded without a size
    if t == "Conv2d":
        g = int(float(d["groups"]))
        c, k = int(float(d["conv_in_channels"])), int(float(d["conv_out_channels"]))
        kh, kw = int(float(d["kernel_h"])), int(float(d["kernel_w"]))
        st = (int(float(d["stride_h"])), int(float(d["stride_w"])))
        pad = (int(float(d["pad_h"])), int(float(d["pad_w"])))
        hw = int(float(d["in_hw"]))
        layer = conv_layer(c, hw, hw, k, kh, kw, st, pad, g, bias="bias=False" not in d["layer_desc"])
        op = "conv depthwise" if g > 1 and c // g == 1 else "conv grouped" if g > 1 else _conv_op(kh, kw, st[0], c)
        return layer, op
    if t == "Linear":
        a = _desc_ints(d["layer_desc"])
        return linear_layer(a["in_features"], a["out_features"], bias=True), "linear"
    kind = {"BatchNorm2d": "batchnorm", "ReLU": "act", "MaxPool2d": "maxpool", "AvgPool2d": "avgpool"}[t]
    kernel: tuple[int, ...] = ()
    if kind in ("maxpool", "avgpool"):
        ks = _desc_ints(d["layer_desc"]).get("kernel_size", 2)
        kernel = (ks, ks)
    layer = Layer(name=kind, kind=kind, inputs=("x",), in_shapes=((max(n_in, 1),),), out_shape=(n_out,),
                  kernel=kernel, fn="relu" if kind == "act" else "", inplace=kind == "act")
    return layer, {"batchnorm": "batchnorm", "act": "relu", "maxpool": "maxpool", "avgpool": "avgpool"}[kind]


def _elems_layer(kind: str, n: int, inputs: int = 1) -> Layer:
    """A layer of ``kind`` with ``n`` output elements per sample (flat shapes: only sizes matter)."""
    names = tuple(f"x{i}" for i in range(inputs))
    return Layer(name=kind, kind=kind, inputs=names, in_shapes=((n,),) * inputs, out_shape=(n,))


#: PipeDream's untimed node types -> the layer kind whose kernels they launch ("" = views: none)
_UNTIMED = {"Add": "add", "Concat": "concat", "Dropout": "dropout", "View": "", "Size": "", "__getitem__": ""}
Extra = tuple[tuple[str, Layer], ...]


def _untimed_work(graph: dict[str, dict[str, str]], batch: int) -> dict[tuple[str, str], Extra]:
    """GPU work of a profile's untimed ops inside its timed windows: {(node, phase): work}.

    PipeDream's profiler (``profiler/torchmodules/torchprofiler/profiling.py``) times only leaf
    modules: forward from entering the module to a ``torch.cuda.synchronize()`` after it,
    backward from a pre-hook to a post-hook that synchronizes. Functional ops between modules
    (the residual ``out += identity``, ``torch.cat``: their rows carry 0) and dropout, which is
    not timed either, are launched asynchronously, so the next timed window's synchronize waits
    for them. Nodes are numbered in forward execution order, so an untimed op's forward (an add,
    a concatenation's copy, dropout's mask kernel) runs in the window of the first timed node
    after it, and its backward (dropout's masked multiply), like autograd's sum of the gradients
    of any output that several ops read, in the backward window of the last timed node at or
    before it, which the backward runs next. Autograd adds each reader's gradient as it arrives:
    only the last add is launched right before that window (the earlier ones fall in the windows
    of the other readers' backward, which run in between, and are not priced: Inception's and
    NASNet's multi-branch outputs come out 1.4-1.6x slow with all of them). The ReLUs after ResNet's
    residual adds show it: 2.2x slower per byte forward and 1.7x backward than the ReLUs after
    batch norm in the same profiles.
    """
    def elems(node: dict[str, str]) -> int:
        return max(int(float(node["output_activation_bytes"] or 0)) // 4 // batch, 1)

    def number(name: str) -> int:
        return int(name[4:]) if name[4:].isdigit() else -1

    timed = sorted(number(n) for n, d in graph.items() if d["layer_type"] not in _UNTIMED and number(n) > 0)
    readers: dict[str, int] = {}
    for d in graph.values():
        if d["layer_type"] != "Size":  # reads the shape only: no gradient flows back
            for n in d["input_nodes"].split():
                readers[n] = readers.get(n, 0) + 1
    work: dict[tuple[str, str], list[tuple[str, Layer]]] = {}
    for name, d in graph.items():
        k = number(name)
        after = next((t for t in timed if t > k), None)
        before = next((t for t in reversed(timed) if t <= k), None)
        kind = _UNTIMED.get(d["layer_type"])
        if kind and after is not None:
            layer = _elems_layer(kind, elems(d), 2 if kind == "add" else 1)
            work.setdefault((f"node{after}", "fwd"), []).append(("fwd", layer))
            if kind == "dropout" and before is not None:
                work.setdefault((f"node{before}", "bwd"), []).append(("bwd", layer))
        if readers.get(name, 0) > 1 and before is not None:
            work.setdefault((f"node{before}", "bwd"), []).append(("fwd", _elems_layer("add", elems(d), 2)))
    return {key: tuple(v) for key, v in work.items()}


#: PipeDream layer type -> the op name of its rows (first word of :attr:`KernelRow.op`)
_OP_OF_TYPE = {"Conv2d": "conv", "Linear": "linear", "BatchNorm2d": "batchnorm", "ReLU": "relu",
               "MaxPool2d": "maxpool", "AvgPool2d": "avgpool"}


def module_host_s(models: Collection[str] | None = None) -> dict[str, float]:
    """Host seconds a module's forward spends before its first kernel launch beyond
    :data:`PIPEDREAM_FWD_OVERHEAD_S`, per op name (``conv``, ``linear``, ``batchnorm``, ...), from
    the PipeDream profiles of ``models`` (all when None).

    A forward window starts right after the previous window's ``torch.cuda.synchronize()``, so
    the GPU idles while the module's Python and op dispatch run (``F.linear``: ``weight.t()`` and
    ``addmm``; ``BatchNorm2d``: its checks, ``num_batches_tracked += 1`` and the batch-norm call:
    torch.nn docs). The time of an empty module of a type is the intercept of the least absolute
    deviations line ``raw forward seconds = a + b x output bytes`` over every profiled row of the
    type (scored or not); ``PIPEDREAM_FWD_OVERHEAD_S`` is that of a one-op module (ReLU's
    intercept: 0.262 ms). A backward window opens in the autograd engine, with no module code
    before its launches: no such cost."""
    data: dict[str, list[tuple[float, float]]] = {}
    for d in _open("kernels_pipedream_layers.csv"):
        op = _OP_OF_TYPE.get(d["layer_type"])
        if op and float(d["fwd_ms"]) > 0 and (models is None or d["model"] in models):
            data.setdefault(op, []).append((float(d["output_activation_bytes"]) / 1e6, float(d["fwd_ms"])))
    out = {}
    for op, vals in data.items():
        v = np.array(vals)  # MB and ms: the line's weights floor residuals at 1e-4 ms
        a_s = robust_line(v[:, 0], v[:, 1])[0] * 1e-3 if len(v) >= 3 else 0.0
        out[op] = max(a_s - PIPEDREAM_FWD_OVERHEAD_S, 0.0)
    return out


def _pipedream() -> Iterator[KernelRow]:
    rows = list(_open("kernels_pipedream_layers.csv"))
    graphs: dict[str, dict[str, dict[str, str]]] = {}
    for d in [*rows, *_open("kernels_pipedream_untimed.csv")]:
        graphs.setdefault(d["model"], {})[d["node"]] = d
    extra = {m: _untimed_work(g, int(next(iter(g.values()))["batch_size"])) for m, g in graphs.items()}
    host = module_host_s()
    for d in rows:
        batch = int(d["batch_size"])
        built = _pipedream_layer(d, batch)
        if built is None:
            continue
        layer, op = built
        first = d["input_nodes"] == "node1"
        for what, col, over in (("layer_fwd", "fwd_ms", PIPEDREAM_FWD_OVERHEAD_S),
                                ("layer_bwd", "bwd_ms", PIPEDREAM_BWD_OVERHEAD_S)):
            t = float(d[col]) * 1e-3 - over
            if t >= PIPEDREAM_MIN_S:
                h = host.get(op.split(" ")[0], 0.0) if what == "layer_fwd" else 0.0
                yield KernelRow("pipedream", "V100 (PipeDream)", _PROFILE["pipedream"], "fp32",
                                f"{op} {what[6:]}", what, layer, first, batch, t, d["model"],
                                extra[d["model"]].get((d["node"], what[6:]), ()),
                                PIPEDREAM_FWD_PROLOGUE_S + h if what == "layer_fwd" else 0.0, h,
                                CUDNN_MAJOR["pipedream"])


@functools.cache  # one floor row per GPU and op, which all its rows share (priced once)
def _neusight_row(gpu: str, op: str, dims: tuple[int, ...], t: float) -> KernelRow:
    """NeuSight's ``op`` (conv, linear, relu, add, mul) on ``gpu`` over the problem ``dims``
    (:data:`~.neusight_window.WINDOW_FLOOR`'s order), measured ``t`` seconds, with its window floor."""
    floor = window_floor(gpu, op)
    low = None if floor is None or dims == floor[1] else _neusight_row(gpu, op, floor[1], floor[0])
    if op == "conv":
        layer, what, first, batch, name = conv_layer(dims[1], dims[3], dims[3], dims[2], 3, 3, (1, 1), (1, 1)), \
            "fwd", True, dims[0], "conv 3x3 fwd"
    elif op == "linear":
        layer, what, first, batch, name = linear_layer(dims[1], dims[2]), "fwd", True, dims[0], "linear fwd"
    else:  # one PyTorch element-wise kernel on a (B, H) fp32 tensor: relu, or add/mul of two tensors
        n = dims[0]
        layer = (Layer(name="relu", kind="act", inputs=("x",), in_shapes=((n,),), out_shape=(n,), fn="relu")
                 if op == "relu" else _elems_layer(op, n, 2))
        what, first, batch, name = "layer_fwd", False, 1, f"{op} fwd"
    return KernelRow("neusight", gpu, _PROFILE[gpu], "fp32", name, what, layer, first, batch, t,
                     cudnn_major=CUDNN_MAJOR["neusight"], window_floor=low)


def _neusight() -> Iterator[KernelRow]:
    for d in _open("kernels_neusight_conv.csv"):
        conv = (int(d["batch"]), int(d["in_channels"]), int(d["out_channels"]), int(d["input_hw"]))
        yield _neusight_row(d["gpu"], "conv", conv, float(d["latency_ms"]) * 1e-3)
    for d in _open("kernels_neusight_linear.csv"):
        gemm = (int(d["B"]) * int(d["M"]), int(d["N"]), int(d["K"]))
        yield _neusight_row(d["gpu"], "linear", gemm, float(d["latency_ms"]) * 1e-3)
    for d in _open("kernels_neusight_elementwise.csv"):
        if float(d["latency_ms"]) * 1e-3 >= NEUSIGHT_ELEMENTWISE_MIN_S:
            yield _neusight_row(d["gpu"], d["op"], (int(d["B"]) * int(d["H"]),), float(d["latency_ms"]) * 1e-3)


def _ampere_gemm() -> Iterator[KernelRow]:
    """A100 tensor-core GEMMs (fp16 cuBLASLt, bf16 ``torch.matmul``): C(MxN) = A(MxK) B(KxN), a
    linear layer of K inputs and N outputs over M rows, as DeepBench's GEMMs."""
    for d in _open("kernels_ampere_gemm.csv"):
        label, host_s = _GEMM_ORIGIN[d["source"]]
        t = float(d["time_ms"]) * 1e-3
        if host_s and t < HOST_TIMED_MIN_S:
            continue
        m, n, k = int(d["M"]), int(d["N"]), int(d["K"])
        yield KernelRow("ampere_gemm", f"{d['gpu']} ({label})", _PROFILE[d["gpu"]],
                        {"fp16": "amp", "bf16": "bf16"}[d["precision"]], "gemm", "fwd", linear_layer(k, n), True,
                        m, t, host_s=host_s)


def _ladder_conv() -> Iterator[KernelRow]:
    """Ladder's cuDNN baseline (kernels_ladder_conv.csv): fp16 NCHW forward convolutions, one
    ``F.conv2d`` call between two CUDA events. Its window holds the call's host dispatch, as
    NeuSight's: each GPU's fastest row is the floor every other row of that GPU is priced with
    (:mod:`.neusight_window`'s rule), and is not scored itself (its price would be its measure)."""
    rows = []
    for d in _open("kernels_ladder_conv.csv"):
        v = {k: int(d[k]) for k in ("N", "C", "H", "W", "K", "R", "S", "stride", "pad")}
        layer = conv_layer(v["C"], v["H"], v["W"], v["K"], v["R"], v["S"], (v["stride"],) * 2, (v["pad"],) * 2)
        rows.append(KernelRow("ladder_conv", d["gpu"], _PROFILE[d["gpu"]], "amp",
                              f"{_conv_op(v['R'], v['S'], v['stride'], v['C'])} fwd", "fwd", layer, True, v["N"],
                              float(d["latency_ms"]) * 1e-3, cudnn_major=CUDNN_MAJOR["ladder_conv"]))
    floor = {r.gpu: r for r in sorted(rows, key=lambda r: r.measured_s, reverse=True)}  # fastest last wins
    for r in rows:
        if r is not floor[r.gpu]:
            yield dataclasses.replace(r, window_floor=floor[r.gpu])


def load_rows(sources: tuple[str, ...] = SOURCES) -> list[KernelRow]:
    """Every shipped measured kernel/layer time of ``sources`` as :class:`KernelRow`."""
    out: list[KernelRow] = []
    gens = {"deepbench": _deepbench, "pipedream": _pipedream, "neusight": _neusight, "ampere_gemm": _ampere_gemm,
            "ladder_conv": _ladder_conv}
    for s in sources:
        out.extend(gens[s]())
    return out

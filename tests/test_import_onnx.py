"""ONNX graphs read with the onnx package: training-mode exports give their torch originals' numbers."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

import torch_nets as T  # noqa: E402
from cli_helpers import run_main  # noqa: E402

from perfmodel.errors import DataError, UsageError  # noqa: E402
from perfmodel.network import compile_counts, get_model  # noqa: E402
from perfmodel.network.importers import import_module, import_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from export_onnx import export  # noqa: E402
from mynet import MyNet  # noqa: E402


def _export(model: torch.nn.Module, shape: tuple[int, ...], path: Path, opset: int = 20) -> Path:
    """Training mode, no constant folding: what training runs, every parameter an initializer."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.train(), (torch.randn(2, *shape),), str(path), dynamo=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          opset_version=opset)
    return path


CASES = {
    "mynet": (MyNet, (3, 64, 64), 0.10),
    "resnet50": (T.resnet50, (3, 64, 64), 0.10),
    "convnext": (T.ConvNeXtTiny, (3, 64, 64), 0.10),
    "unet": (T.UNet, (3, 32, 32), 0.10),
    "odds": (T.Odds, (2, 4, 4, 4), 0.15),
    # sdpa folded back into one attention layer, the head merge after it a view (no copy)
    "vit_sdpa": (lambda: T.ViT(sdpa=True), (3, 64, 64), 0.02),
    "vit_mha": (T.ViT, (3, 64, 64), 0.02),
}


pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("onnx")
    return {name: _export(make(), shape, d / f"{name}.onnx") for name, (make, shape, _) in CASES.items()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_export_gives_the_torch_originals_numbers(name: str, exported: dict[str, Path]) -> None:
    make, shape, saved_rel = CASES[name]
    net = import_onnx(exported[name])
    ref = import_module(make, name, shape)
    cc, cr = compile_counts(net), compile_counts(ref)
    assert net.input_shape == shape
    assert net.params == ref.params == T.torch_params(make())  # BN running statistics are not parameters
    assert cc.total("fwd_matmul_flops") == pytest.approx(cr.total("fwd_matmul_flops"), rel=0.01)
    assert cc.total("fwd_matmul_flops") == pytest.approx(T.torch_flops(make(), shape), rel=0.01)
    if saved_rel is not None:
        assert cc.total("saved_elems") == pytest.approx(T.torch_saved(make(), shape), rel=saved_rel)
    assert net.links[-1].stop == len(net.layers)


def test_fused_silu_and_blocks(exported: dict[str, Path]) -> None:
    net = import_onnx(exported["mynet"])
    assert {la.fn for la in net.layers if la.kind == "act"} == {"silu", "sigmoid", "relu"}
    assert any(la.kind == "concat" for la in net.layers)
    # a residual block is never cut: what crosses a cut inside it would include its input
    names = [link.name for link in net.links]
    assert "blocks/blocks.1" in names and "blocks/blocks.6" in names


def test_reading_onnx_needs_no_torch(exported: dict[str, Path]) -> None:
    code = ("import sys; sys.modules['torch'] = None\n"
            "from perfmodel.network import get_model\n"
            f"print(get_model({str(exported['resnet50'])!r}).params)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == 25_557_032


def test_input_extents_and_errors(exported: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="fixed at 64"):
        get_model(str(exported["resnet50"]), 128)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a protobuf")
    with pytest.raises(DataError, match="cannot read ONNX file"):
        get_model(str(bad))
    old = _export(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()), (4,), tmp_path / "gelu.onnx", 17)
    with pytest.raises(DataError, match=r"operator Erf at node '/1/Erf'.*opset_version >= 20"):
        get_model(str(old))


def test_graphs_without_one_sane_input_are_refused_in_words(tmp_path: Path) -> None:
    """An empty graph, an all-constant one, and a fixed extent past the input bound (1e9 x 1e9 images)."""
    h, f32 = onnx.helper, onnx.TensorProto.FLOAT

    def save(name: str, nodes: list, inputs: list, outputs: list) -> str:
        path = tmp_path / f"{name}.onnx"
        onnx.save(h.make_model(h.make_graph(nodes, name, inputs, outputs)), str(path))
        return str(path)

    with pytest.raises(DataError, match=r"the graph is empty \(no operators, no inputs\)"):
        get_model(save("empty", [], [], []))
    const = h.make_node("Constant", [], ["y"], value=h.make_tensor("v", f32, [1], [1.0]))
    with pytest.raises(DataError, match=r"the graph has no input \(every tensor is a constant\)"):
        get_model(save("const", [const], [], [h.make_tensor_value_info("y", f32, [1])]))
    for batch in (1, "N"):
        huge = [batch, 3, 10**9, 10**9]
        relu = h.make_node("Relu", ["x"], ["y"])
        x, y = (h.make_tensor_value_info(n, f32, huge) for n in "xy")
        path = save("huge", [relu], [x], [y])
        with pytest.raises(DataError, match=r"dimension 2 is 1,000,000,000 in the file \(valid: 1 to 1,000,000\)"):
            get_model(path)


def test_plan_on_the_example_file_and_its_onnx(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mynet.onnx"
    export(str(out), size=64)  # the example's own export script
    for spec in (f"{ROOT / 'examples' / 'mynet.py'}:MyNet", str(out)):
        code, stdout, err = run_main(["plan", spec, "--gpus", "8", "--format", "json"], capsys)
        assert code == 0, err
        assert '"speedup' in stdout
    code, _, err = run_main(["show", f"{ROOT / 'examples' / 'mynet.py'}:MyNet", "--input-shape", "3,96,96"],
                            capsys)
    assert code == 0, err
    code, _, err = run_main(["predict", str(out), "--gpus", "8", "-s", "dp=8", "--image-size", "128"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "fixed at 64" in err

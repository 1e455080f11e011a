"""PyTorch modules traced with torch.fx: zoo architectures give the zoo's numbers, others torch's own."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import torch_nets as T  # noqa: E402
from cli_helpers import load_file, run_main  # noqa: E402

from perfmodel.errors import DataError, UnknownNameError, UsageError  # noqa: E402
from perfmodel.network import compile_counts, get_model  # noqa: E402
from perfmodel.network.importers import UnsupportedOp, import_module, input_options  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("make", "zoo"), [(T.resnet50, "resnet50"), (T.vgg16, "vgg16"),
                                           (T.mobilenet_v2, "mobilenet_v2")])
def test_torch_definitions_of_zoo_models_give_the_zoos_numbers(make, zoo: str) -> None:
    net = import_module(make, zoo, (3, 224, 224))
    ref = get_model(zoo)
    cc, cz = compile_counts(net), compile_counts(ref)
    assert net.params == ref.params == T.torch_params(make())
    assert cc.total("fwd_matmul_flops") == pytest.approx(cz.total("fwd_matmul_flops"), rel=0.01)
    assert cc.total("saved_elems") == pytest.approx(cz.total("saved_elems"), rel=0.10)
    assert len(net.links) >= 5


@pytest.mark.parametrize(("name", "make", "shape", "saved_rel"), [
    ("convnext", T.ConvNeXtTiny, (3, 64, 64), 0.10),
    ("vit_mha", T.ViT, (3, 64, 64), 0.02),
    ("vit_sdpa", lambda: T.ViT(sdpa=True), (3, 64, 64), 0.02),
    ("unet", T.UNet, (3, 32, 32), 0.10),
    ("odds", T.Odds, (2, 4, 4, 4), 0.10),
    ("swin", T.Swin, (3, 32, 32), 0.10),
])
def test_counts_equal_torchs(name: str, make, shape, saved_rel: float) -> None:
    """Parameters exactly, forward matmul FLOPs within 1% of FlopCounterMode, saved activations
    within 10% of autograd's saved tensors (15% for the packed-qkv attention: torch's storages)."""
    net = import_module(make, name, shape)
    model = make()
    cc = compile_counts(net)
    assert net.params == T.torch_params(model)
    assert cc.total("fwd_matmul_flops") == pytest.approx(T.torch_flops(model, shape), rel=0.01)
    assert cc.total("saved_elems") == pytest.approx(T.torch_saved(model, shape), rel=saved_rel)


def test_chain_keeps_blocks_whole_and_carries_skips() -> None:
    net = import_module(T.resnet50, "r50", (3, 224, 224))
    names = [link.name for link in net.links]
    blocks = [f"layer{s + 1}.{i}" for s, n in enumerate((3, 4, 6, 3)) for i in range(n)]
    assert [n for n in names if n.startswith("layer")] == blocks
    for link in net.links:
        if link.name in blocks:
            assert link.cut_elems_per_sample == net.layers[link.stop - 1].out_elems
    unet = import_module(T.UNet, "unet", (3, 32, 32))
    cut = {link.name: link.cut_elems_per_sample for link in unet.links}
    # after the middle level both encoder outputs are in flight beside the current tensor
    assert cut["mid.1"] == 32 * 8 * 8 + 16 * 32 * 32 + 32 * 16 * 16
    vit = import_module(T.ViT, "vit", (3, 64, 64))
    assert {"layers.0", "layers.1"} <= {link.name for link in vit.links}


def test_unsupported_operator_is_named_with_its_place() -> None:
    class Rnn(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3), torch.nn.Flatten(1))
            self.rnn = torch.nn.GRU(56, 4)

        def forward(self, x):
            return self.rnn(self.body(x))

    with pytest.raises(UnsupportedOp, match=r"nn\.GRU at module 'rnn'"):
        import_module(Rnn, "rnn", (3, 16))

    class Fft(torch.nn.Module):
        def forward(self, x):
            return torch.fft.fft2(x).real

    with pytest.raises(DataError, match=r"operator fft_fft2 at node fft_fft2 .*test_import_fx\.py:\d+"):
        import_module(Fft, "fft", (3, 8, 8))
    class BadView(torch.nn.Module):
        def forward(self, x):
            return x.view(x.shape[0], 7)

    with pytest.raises(DataError, match="running it on a 3x9 input failed: RuntimeError"):
        import_module(BadView, "bad", (3, 9))
    with pytest.raises(DataError, match=r"nn\.Conv1d holds 40 parameters, but on its input of shape \(5, 16\)"):
        import_module(Rnn, "rnn", (5, 16))


def test_file_specs_and_input_options(tmp_path: Path) -> None:
    spec = f"{ROOT / 'examples' / 'mynet.py'}:MyNet"
    net = get_model(spec)
    assert net.input_shape == (3, 224, 224) and net.params == T.torch_params(_mynet())
    assert get_model(spec, 128).input_shape == (3, 128, 128)
    f = tmp_path / "gray.py"
    f.write_text("import torch\n\n\ndef make():\n"
                 "    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Flatten(1))\n")
    with input_options(input_shape=(1, 20, 30)):
        assert get_model(f"{f}:make").layers[-1].out_shape == (4 * 18 * 28,)
    with pytest.raises(UnknownNameError, match="make"):
        get_model(f"{f}:mak")
    with pytest.raises(UnknownNameError, match=r"did you mean make\?"):  # letters swapped, case ignored
        get_model(f"{f}:MAek")
    with pytest.raises(DataError, match="does not exist"):
        get_model(f"{tmp_path / 'none.py'}:X")
    (tmp_path / "bad.py").write_text("def broken(:\n")
    with pytest.raises(DataError, match="SyntaxError") as syntax:
        get_model(f"{tmp_path / 'bad.py'}:X")
    assert str(syntax.value).count("line 1") == 1  # the message's own line number, not twice
    with input_options(in_channels=2, input_shape=(1, 8, 8)), pytest.raises(UsageError, match="contradicts"):
        get_model(f"{f}:make")


def test_torchvision_and_timm_missing_or_present_are_clean() -> None:
    try:
        net = get_model("torchvision:resnet18")
    except DataError as e:
        assert "torchvision" in str(e) and "\n" not in str(e)
    else:
        assert net.params == 11_689_512
    try:
        net = get_model("timm:resnet18")
    except DataError as e:
        assert "timm" in str(e) and "\n" not in str(e)
    else:
        assert net.params == 11_689_512


def test_a_file_with_a_dataclass_loads(tmp_path: Path) -> None:
    f = tmp_path / "cfg.py"
    f.write_text("import dataclasses\nimport torch\n\n\n@dataclasses.dataclass\nclass Cfg:\n    width: int = 8\n\n\n"
                 "def net():\n    return torch.nn.Sequential(torch.nn.Conv2d(3, Cfg().width, 3), torch.nn.ReLU())\n")
    assert get_model(f"{f}:net", 32).params == 8 * 27 + 8


def _mynet():
    return load_file("examples/mynet.py", "mynet_example").MyNet()


def test_cli_bad_imports_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cli_helpers import run_main

    f = tmp_path / "net.py"
    f.write_text("import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
                 "        return torch.fft.fft2(x).real\n")
    for argv, code, phrase in [
        (["plan", f"{f}:Net", "--gpus", "8"], 1, "operator fft_fft2 at node fft_fft2"),
        (["show", f"{f}:Nett"], 1, "did you mean Net"),
        (["show", f"{f}:Net", "--input-shape", "3,x,4"], 2, "is not C,H,W"),
        (["predict", "examples/mynet.py:MyNet", "--gpus", "8", "-s", "dp=8", "--input-shape", "3,8"], 1,
         "nn.Conv2d needs a per-sample input of 3 dimensions, gets shape (3, 8)"),
    ]:
        got, out, err = run_main(argv, capsys)
        assert got == code, err
        assert phrase in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 or code == 2


@pytest.mark.parametrize(("body", "said"), [
    ("import sys\nsys.exit(3)\n", "called sys.exit(3) while loading"),
    ("import torch\n\n\ndef make():\n    raise SystemExit('bye')\n", "called sys.exit('bye') while building make"),
])
def test_a_model_file_that_exits_is_an_error_not_an_exit(tmp_path: Path, body: str, said: str) -> None:
    """New-user walk: a file calling sys.exit(3) ended perfmodel with exit 3 and no message."""
    f = tmp_path / "quits.py"
    f.write_text(body)
    with pytest.raises(DataError, match=re.escape(said)):
        get_model(f"{f}:make")


def test_reading_a_model_file_writes_nothing_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing the user's file left a __pycache__ folder in theirs (where Python writes bytecode)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    f = tmp_path / "tidy.py"
    f.write_text("import torch\n\n\ndef make():\n    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))\n")
    get_model(f"{f}:make")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tidy.py"] and sys.dont_write_bytecode is False


def test_a_model_files_prints_go_to_stderr_not_into_the_json(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A user's model that prints while loading, building and in its forward leaves stdout to the result."""
    f = tmp_path / "noisy.py"
    f.write_text("import torch\nprint('loading')\n\n\nclass Net(torch.nn.Module):\n"
                 "    def __init__(self):\n        super().__init__()\n        print('building')\n"
                 "        self.conv = torch.nn.Conv2d(3, 4, 3)\n\n"
                 "    def forward(self, x):\n        print('forward')\n        return self.conv(x)\n")
    code, out, err = run_main(["predict", f"{f}:Net", "--gpus", "1", "-s", "dp=1", "--image-size", "32",
                               "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["strategy"] == "dp=1"
    assert "loading" in err and "building" in err

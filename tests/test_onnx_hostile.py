"""ONNX files that are malformed or hostile are refused in one line naming what is wrong (exit 1):
cycles, tensors nothing defines, fixed input extents out of range, weights that disagree with
their inputs or with their own data, string and integer operands, files over protobuf's 2 GiB,
external data outside the model's folder or past its file's end, and opsets onnx does not know."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from cli_helpers import run_main  # noqa: E402
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

from perfmodel.errors import DataError  # noqa: E402
from perfmodel.network.importers import import_onnx  # noqa: E402


def _save(tmp: Path, name: str, nodes: list[Any], shape: list[Any], inits: Sequence[Any] = (),
          elem: int = T.FLOAT, opset: int = 20) -> Path:
    x = h.make_tensor_value_info("x", elem, shape)
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    model = h.make_model(h.make_graph(nodes, name, [x], [y], list(inits)), opset_imports=[h.make_opsetid("", opset)])
    path = tmp / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _w(name: str, shape: tuple[int, ...]) -> Any:
    return nh.from_array(np.zeros(shape, np.float32), name)


def _conv(w: str = "W", *extra: str, **attrs: Any) -> Any:
    return h.make_node("Conv", ["x", w, *extra], ["y"], name="conv", pads=[1, 1, 1, 1], **attrs)


def _one_line_error(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = run_main(["show", str(path)], capsys)
    assert code == 1 and not out and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_cycle_is_refused_naming_its_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """r1 reads x2, which add writes from x and r1's output (was: r1 dropped, "2 layers")."""
    nodes = [h.make_node("Relu", ["x2"], ["a"], name="r1"), h.make_node("Add", ["x", "a"], ["x2"], name="add"),
             h.make_node("Relu", ["x2"], ["y"], name="r3")]
    err = _one_line_error(_save(tmp_path, "cycle", nodes, [1, 3, 8, 8]), capsys)
    assert "the graph has a cycle through nodes 'r1' (Relu) -> 'add' (Add) -> 'r1' (Relu)" in err
    loop = [h.make_node("Relu", ["x"], ["a"], name="r0"), h.make_node("Add", ["a", "b"], ["y"], name="self"),
            h.make_node("Relu", ["y"], ["b"], name="back")]
    with pytest.raises(DataError, match=r"cycle through nodes 'self' \(Add\) -> 'back' \(Relu\) -> 'self'"):
        import_onnx(_save(tmp_path, "loop", loop, [1, 3, 8, 8]))


def test_nodes_out_of_order_are_read_in_topological_order(tmp_path: Path) -> None:
    """ONNX lists nodes in topological order; a file that does not is read as if it did (was: the
    Relu listed first read an unknown tensor and was dropped as a constant)."""
    nodes = [h.make_node("Relu", ["c"], ["y"], name="relu"), _conv()]
    nodes[1].output[0] = "c"
    net = import_onnx(_save(tmp_path, "unsorted", nodes, ["N", 3, 8, 8], [_w("W", (4, 3, 3, 3))]))
    assert [la.name for la in net.layers] == ["conv", "relu"]
    assert net.params == 108


def test_a_tensor_nothing_defines_or_two_nodes_write_is_named(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    dangling = [h.make_node("Relu", ["x"], ["a"], name="r0"), h.make_node("Add", ["a", "nowhere"], ["y"], name="add")]
    err = _one_line_error(_save(tmp_path, "dangling", dangling, [1, 3, 8, 8]), capsys)
    assert "node 'add' (Add) reads tensor 'nowhere', which no node, initializer or graph input defines" in err
    twice = [h.make_node("Relu", ["x"], ["y"], name="a"), h.make_node("Sigmoid", ["x"], ["y"], name="b")]
    with pytest.raises(DataError, match=r"tensor 'y' is written by node 'a' \(Relu\) and by node 'b' \(Sigmoid\)"):
        import_onnx(_save(tmp_path, "twice", twice, [1, 3, 8, 8]))


@pytest.mark.parametrize(("shape", "axis", "valid"), [
    ([1, 3, 0, 32], 2, "1 to 1,000,000"), ([1, 3, -5, 32], 2, "1 to 1,000,000"), ([1, 0, 8, 8], 1, "1 to 1,000,000"),
    ([-2, 3, 8, 8], 0, "1 or more, or a symbolic batch"), ([0, 3, 8, 8], 0, "1 or more, or a symbolic batch"),
])
def test_fixed_input_extents_below_one_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   shape: list[int], axis: int, valid: str) -> None:
    """Was: a 0 or negative extent silently became 224 (or the batch became -2)."""
    cin = shape[1] if shape[1] > 0 else 3
    path = _save(tmp_path, "bad_dim", [_conv()], shape, [_w("W", (4, cin, 3, 3))])
    err = _one_line_error(path, capsys)
    assert f"input 'x' dimension {axis} is {shape[axis]} in the file (valid: {valid})" in err


def test_dynamic_input_extents_are_stated_in_the_source(tmp_path: Path) -> None:
    path = _save(tmp_path, "dyn", [_conv()], ["N", 3, "H", "W"], [_w("W", (4, 3, 3, 3))])
    net = import_onnx(path)
    assert net.input_shape == (3, 224, 224)
    assert net.source == (f"imported from {path}; dynamic input dimensions H=224, W=224 (perfmodel's default: "
                          "--image-size, --in-channels or --input-shape set them)")
    assert import_onnx(path, image_size=64).source.endswith("dynamic input dimensions H=64, W=64 (from --image-size)")
    unnamed = _save(tmp_path, "unnamed", [_conv()], [None, 3, None, 16], [_w("W", (4, 3, 3, 3))])
    assert import_onnx(unnamed, input_shape=(3, 40, 16)).source.endswith(
        "dynamic input dimensions dimension 2=40 (from --input-shape)")
    fixed = _save(tmp_path, "fixed", [_conv()], ["N", 3, 8, 8], [_w("W", (4, 3, 3, 3))])
    assert import_onnx(fixed).source == f"imported from {fixed}"


def test_an_input_without_per_sample_dimensions_is_data_not_usage(tmp_path: Path) -> None:
    """Was: a usage error blaming --input-shape, which nobody gave."""
    with pytest.raises(DataError, match=r"input 'x' has rank 0; perfmodel needs a batch dimension"):
        import_onnx(_save(tmp_path, "scalar", [h.make_node("Relu", ["x"], ["y"])], []))


@pytest.mark.parametrize(("nodes", "inits", "words"), [
    ([_conv(group=3)], [_w("W", (6, 3, 3, 3))], r"needs 9 input channels \(3 per group x 3 groups\)"),
    ([_conv()], [_w("W", (4, 3, 3))], r"weight 'W' has shape \(4, 3, 3\), which is for a 1-D convolution"),
    ([_conv("W", "B")], [_w("W", (4, 3, 3, 3)), _w("B", (5,))],
     r"bias 'B' has shape \(5,\), which should be \(4,\), one per output channel"),
    ([h.make_node("ConvTranspose", ["x", "W"], ["y"], name="up")], [_w("W", (5, 4, 2, 2))],
     r"node 'up' \(ConvTranspose\): weight 'W' has shape \(5, 4, 2, 2\), which needs 5 input channels"),
    ([h.make_node("Flatten", ["x"], ["f"]), h.make_node("Gemm", ["f", "W"], ["y"], name="fc", transB=1)],
     [_w("W", (10, 190))], r"node 'fc' \(Gemm\): weight 'W' has shape \(10, 190\), which multiplies vectors "
                           r"of 190 features \(transB=1\); its input 'f' has per-sample shape \(192,\)"),
    ([h.make_node("MatMul", ["x", "W"], ["y"], name="mm")], [_w("W", (7, 4))],
     r"node 'mm' \(MatMul\): weight 'W' has shape \(7, 4\), which multiplies vectors of 7 features"),
])
def test_weights_that_disagree_with_their_input_are_refused(tmp_path: Path, nodes: list[Any], inits: list[Any],
                                                            words: str) -> None:
    """Was: accepted, with the parameters recomputed from the input."""
    with pytest.raises(DataError, match=words):
        import_onnx(_save(tmp_path, "mismatch", nodes, [1, 3, 8, 8], inits))


def test_a_conv_or_gemm_has_the_weights_the_file_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Weights that agree with their input are read as held; the reviewer's (4, 7, 3, 3) weight on
    3 channels is refused (was: 108 parameters recomputed from the input, not the file's 252)."""
    grouped = import_onnx(_save(tmp_path, "grouped", [_conv(group=3)], [1, 3, 8, 8], [_w("W", (6, 1, 3, 3))]))
    assert grouped.params == 54
    nodes = [h.make_node("Flatten", ["x"], ["f"]), h.make_node("Gemm", ["f", "W", "B"], ["y"], name="fc", transB=1)]
    fc = import_onnx(_save(tmp_path, "fc", nodes, [1, 3, 8, 8], [_w("W", (10, 192)), _w("B", (10,))]))
    assert fc.params == 1930
    err = _one_line_error(_save(tmp_path, "mismatch", [_conv()], [1, 3, 8, 8], [_w("W", (4, 7, 3, 3))]), capsys)
    assert ("node 'conv' (Conv): weight 'W' has shape (4, 7, 3, 3), which needs 7 input channels (7 per group x "
            "1 group); its input 'x' has per-sample shape (3, 8, 8)") in err


def test_a_string_weight_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    strings = h.make_tensor("W", T.STRING, [4, 3, 3, 3], [b"a"] * 108)
    err = _one_line_error(_save(tmp_path, "strw", [_conv()], [1, 3, 8, 8], [strings]), capsys)
    assert "node 'conv' (Conv) reads weight 'W' of type STRING: text, not numbers" in err


def test_integer_inputs_are_indices_or_cast_never_images(tmp_path: Path) -> None:
    """Token ids into a Gather and a uint8 image through a Cast are read; an integer tensor into
    a convolution or an activation is refused (was: priced as if it were floats)."""
    emb = [h.make_node("Gather", ["E", "x"], ["e"], name="emb"), h.make_node("MatMul", ["e", "W"], ["y"], name="fc")]
    net = import_onnx(_save(tmp_path, "tokens", emb, ["N", 16], [_w("E", (100, 32)), _w("W", (32, 8))], T.INT64))
    assert net.input_shape == (16,) and [la.kind for la in net.layers] == ["view", "linear"]
    cast = [h.make_node("Cast", ["x"], ["f"], to=T.FLOAT), h.make_node("Conv", ["f", "W"], ["y"], name="conv")]
    net = import_onnx(_save(tmp_path, "uint8", cast, ["N", 3, 8, 8], [_w("W", (4, 3, 3, 3))], T.UINT8))
    assert net.params == 108
    path = _save(tmp_path, "int_image", [_conv()], [1, 3, 8, 8], [_w("W", (4, 3, 3, 3))], elem=T.UINT8)
    with pytest.raises(DataError, match=r"node 'conv' \(Conv\) reads input 'x' of type UINT8: not floating point"):
        import_onnx(path)
    relu = _save(tmp_path, "int_relu", [h.make_node("Relu", ["x"], ["y"], name="r")], [1, 3, 8, 8], elem=T.INT64)
    with pytest.raises(DataError, match=r"node 'r' \(Relu\) reads input 'x' of type INT64"):
        import_onnx(relu)


def test_a_tensor_whose_data_disagrees_with_its_shape_is_refused(tmp_path: Path) -> None:
    """Was: a traceback from numpy (a shape folded from too few bytes)."""
    shape = nh.from_array(np.array([0, -1], np.int64), "S")
    shape.raw_data = shape.raw_data[:12]
    nodes = [h.make_node("Reshape", ["x", "S"], ["f"]), h.make_node("Relu", ["f"], ["y"])]
    with pytest.raises(DataError, match=r"tensor 'S' of shape \(2,\) and type INT64: 12 bytes of data, its values "
                                        r"take 16"):
        import_onnx(_save(tmp_path, "short", nodes, ["N", 3, 8, 8], [shape]))


def test_a_file_over_two_gib_is_refused_before_it_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: 16 s and 3.2 GB of memory to fail on a 3 GB file."""
    path = tmp_path / "huge.onnx"
    with open(path, "wb") as f:
        f.truncate((1 << 31) + 1)  # sparse: nothing is written
    err = _one_line_error(path, capsys)
    assert "2,147,483,649 bytes, over protobuf's limit of 2,147,483,648 (2 GiB) for one model" in err
    assert "external data" in err


def _external(tmp: Path, name: str, weight: tuple[int, int], location: str) -> Path:
    """A MatMul by a weight stored in ``location`` (written as zeros, sparse), its Reshape shape too."""
    x = h.make_tensor_value_info("x", T.FLOAT, ["N", weight[0]])
    y = h.make_tensor_value_info("y", T.FLOAT, None)
    w, s = T(name="W", data_type=T.FLOAT, dims=weight), T(name="S", data_type=T.INT64, dims=[2])
    size = 4 * weight[0] * weight[1]
    for t, offset, length in ((w, 0, size), (s, size, 16)):
        t.data_location = T.EXTERNAL
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = k, v
    nodes = [h.make_node("Reshape", ["x", "S"], ["f"], name="flat"),
             h.make_node("MatMul", ["f", "W"], ["y"], name="fc")]
    model = h.make_model(h.make_graph(nodes, name, [x], [y], [w, s]), opset_imports=[h.make_opsetid("", 20)])
    path = tmp / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _data_file(path: Path, size: int, tail: bytes = b"") -> None:
    with open(path, "wb") as f:
        f.truncate(size)
        f.seek(size)
        f.write(tail)


def test_external_weights_are_checked_not_read(tmp_path: Path) -> None:
    """A 512 MiB weight in external data: its file must hold it, but only its shape is read
    (was: onnx.load read every external byte into memory)."""
    rows, cols = 1 << 13, 1 << 14
    path = _external(tmp_path, "ext", (rows, cols), "w.bin")
    _data_file(tmp_path / "w.bin", 4 * rows * cols, np.array([0, rows], np.int64).tobytes())
    tracemalloc.start()
    try:
        net = import_onnx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert net.params == rows * cols
    assert peak < 64 << 20
    os.truncate(tmp_path / "w.bin", 1000)
    with pytest.raises(DataError, match=r"w.bin: cannot read the external data of tensor 'W' \(ext.onnx\): "
                                        r"bytes 0 to 536,870,912, the file has 1,000"):
        import_onnx(path)


def test_external_data_outside_the_model_folder_is_refused(tmp_path: Path) -> None:
    inner = tmp_path / "model"
    inner.mkdir()
    _data_file(tmp_path / "w.bin", 4 * 4 * 4 + 16)
    path = _external(inner, "escape", (4, 4), "../w.bin")
    with pytest.raises(DataError, match=r"tensor 'W' of shape \(4, 4\) and type FLOAT: its external data file "
                                        r"'../w.bin' is not under the model's folder"):
        import_onnx(path)


def test_an_opset_newer_than_onnx_knows_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line_error(_save(tmp_path, "opset99", [_conv()], [1, 3, 8, 8], [_w("W", (4, 3, 3, 3))], opset=99),
                          capsys)
    newest = onnx.defs.onnx_opset_version()
    assert f"the model imports ONNX opset 99, but the installed onnx {onnx.__version__} knows opsets 1 to {newest}" \
        in err

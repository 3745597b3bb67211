"""tools/learn/fp16_pack.py: a teacher's ONNX file packed with float16 weights for the trip to a GPU machine, and
unpacked there into a float32 file with the same graph and metadata that runs as the original within fp16's
rounding."""
from __future__ import annotations

import lzma

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tabula.tools.learn import fp16_pack  # noqa: E402


def small_network(path) -> tuple[np.ndarray, np.ndarray]:
    """A float32 ONNX file y = relu(x @ w + b) reshaped by an int64 initializer, with metadata; returns (w, b)."""
    rng = np.random.default_rng(7)
    w = rng.normal(0, 1, (16, 8)).astype(np.float32)
    b = rng.normal(0, 1, 8).astype(np.float32)
    shape = np.array([-1, 2, 4], np.int64)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["y"])],
        "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(shape, "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    entry = model.metadata_props.add()
    entry.key, entry.value = "katago_structure", '{"name": "small"}'
    onnx.save(model, str(path))
    return w, b


def run(path, x: np.ndarray) -> np.ndarray:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_a_packed_network_unpacks_to_float32_rounded_through_float16(tmp_path):
    w, b = small_network(tmp_path / "net.onnx")
    packed = fp16_pack.pack(str(tmp_path / "net.onnx"), str(tmp_path / "carried") + "/")
    assert packed == str(tmp_path / "carried" / "net.onnx16")
    with open(packed, "rb") as handle:
        assert handle.read(6) == fp16_pack.XZ_MAGIC  # compressed for the trip
    model = onnx.load_from_string(lzma.decompress(open(packed, "rb").read()))
    types = {t.name: t.data_type for t in model.graph.initializer}
    assert types == {"w": TensorProto.FLOAT16, "b": TensorProto.FLOAT16, "shape": TensorProto.INT64}
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta[fp16_pack.PACKED_KEY] == "w,b" and meta["katago_structure"] == '{"name": "small"}'

    restored = fp16_pack.unpack(packed, str(tmp_path / "there") + "/")
    assert restored == str(tmp_path / "there" / "net.onnx")
    model = onnx.load(restored)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert arrays["w"].dtype == np.float32 and np.array_equal(arrays["w"], w.astype(np.float16).astype(np.float32))
    assert np.array_equal(arrays["b"], b.astype(np.float16).astype(np.float32))
    assert np.array_equal(arrays["shape"], [-1, 2, 4])
    assert {p.key: p.value for p in model.metadata_props} == {"katago_structure": '{"name": "small"}'}
    x = np.random.default_rng(1).normal(0, 1, (5, 16)).astype(np.float32)
    original, unpacked = run(tmp_path / "net.onnx", x), run(restored, x)
    assert unpacked.shape == (5, 2, 4) and np.allclose(original, unpacked, atol=2e-2)
    assert not np.array_equal(original, unpacked)  # rounded: the weights are float16's


def test_a_packed_file_from_before_the_compression_unpacks_the_same(tmp_path):
    w, _ = small_network(tmp_path / "net.onnx")
    packed = fp16_pack.pack(str(tmp_path / "net.onnx"), str(tmp_path / "net.onnx16"))
    (tmp_path / "plain.onnx16").write_bytes(lzma.decompress((tmp_path / "net.onnx16").read_bytes()))
    restored = fp16_pack.unpack(str(tmp_path / "plain.onnx16"), str(tmp_path / "plain.onnx"))
    again = fp16_pack.unpack(packed, str(tmp_path / "again.onnx"))
    assert open(restored, "rb").read() == open(again, "rb").read()
    arrays = {t.name: numpy_helper.to_array(t) for t in onnx.load(restored).graph.initializer}
    assert np.array_equal(arrays["w"], w.astype(np.float16).astype(np.float32))


def test_packing_refuses_what_it_cannot_pack_with_a_reason(tmp_path):
    small_network(tmp_path / "net.onnx")
    packed = fp16_pack.pack(str(tmp_path / "net.onnx"), str(tmp_path / "net.onnx16"))
    with pytest.raises(fp16_pack.PackError, match="packed already"):
        fp16_pack.pack(packed, str(tmp_path / "again.onnx16"))
    with pytest.raises(fp16_pack.PackError, match="not a packed file"):
        fp16_pack.unpack(str(tmp_path / "net.onnx"), str(tmp_path / "x.onnx"))
    (tmp_path / "junk.onnx").write_bytes(b"\x00not onnx at all\xff" * 10)
    with pytest.raises(fp16_pack.PackError, match="not an ONNX file"):
        fp16_pack.pack(str(tmp_path / "junk.onnx"), str(tmp_path / "junk.onnx16"))


def test_the_command_line_says_what_it_wrote_or_why_not(tmp_path, capsys):
    small_network(tmp_path / "net.onnx")
    assert fp16_pack.main(["pack", str(tmp_path / "net.onnx"), str(tmp_path / "net.onnx16")]) == 0
    assert "packed" in capsys.readouterr().out
    assert fp16_pack.main(["unpack", str(tmp_path / "net.onnx"), str(tmp_path / "x.onnx")]) == 1
    assert "not a packed file" in capsys.readouterr().err
    assert fp16_pack.main(["unpack", str(tmp_path / "missing.onnx16"), str(tmp_path / "x.onnx")]) == 2
    assert "no such file" in capsys.readouterr().err

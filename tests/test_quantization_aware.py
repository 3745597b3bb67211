"""Quantization-aware int8 (``tabula export --quantize int8 --aware-steps N``): the rounding the trunk trains under
is the int8 file's own (its weights and its activations' ranges), training brings the rounded outputs closer to the
fp32 file's, and the file written is an int8 file of the original network, checked against it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tabula.engine.net.network import NetSpec, ResidualBlock, export_onnx, load_onnx, random_network
from tabula.tools.learn.export import calibration_planes, main, quantize_int8
from tabula.tools.learn.quantization_aware import AwareConfig, simulated_int8, train_rounded


@pytest.fixture(scope="module")
def two_blocks(tmp_path_factory):
    """A random 2-block pooled network (8 channels, score and ownership heads) for 9x9 and 7x7 as ONNX, its
    policy and value sharpened (a random network's are nearly flat: nothing for the rounding to change)."""
    path = tmp_path_factory.mktemp("aware") / "net.onnx"
    model = random_network(NetSpec(blocks=2, filters=8, head="pooled", aux=True), seed=5)
    with torch.no_grad():
        model.head.policy_points.weight.mul_(40.0)
        model.head.value_fc2.weight.mul_(20.0)
    export_onnx(model, path, provenance="tests", board_sizes=[7, 9])
    return path


def _file_rounding(path) -> tuple[list[float], list[np.ndarray]]:
    """An int8 file's activation ranges (their widths, in graph order) and its trunk's weights as it computes
    with them (dequantized, batch norms folded in)."""
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(path))
    constants = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    widths, weights = [], []
    for node in proto.graph.node:
        if node.op_type == "QuantizeLinear" and node.input[1] in constants:
            widths.append(float(constants[node.input[1]]) * 255)
        if node.op_type == "DequantizeLinear" and constants.get(node.input[0], np.zeros(1)).ndim == 4:
            scale = constants[node.input[1]].reshape(-1, 1, 1, 1)
            weights.append(constants[node.input[0]].astype(np.float64) * scale)
    return widths, weights


def _folded(conv_bn) -> np.ndarray:
    """A convolution's weight with its batch norm folded in, as onnxruntime's graph holds it."""
    bn = conv_bn.bn
    factor = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().double().numpy()
    return conv_bn.conv.weight.detach().double().numpy() * factor.reshape(-1, 1, 1, 1)


def test_the_simulated_rounding_is_the_int8_files(two_blocks, tmp_path):
    model = load_onnx(two_blocks).eval()
    planes = calibration_planes(9, 64, 1, "random", "", model.spec.encoding.name)
    quantize_int8(str(two_blocks), str(tmp_path / "net-int8.onnx"), {9: planes})
    widths, file_weights = _file_rounding(tmp_path / "net-int8.onnx")
    convolutions = [conv_bn for block in model.tower for conv_bn in (block.first, block.second)]
    plain_weights = [_folded(c) for c in convolutions]
    with simulated_int8(model, torch.from_numpy(planes)) as rounded:
        rounded(True)
        blocks = list(model.tower)
        ranges = blocks[0].rounding.ranges
        simulated = [_folded(c) for c in convolutions]  # the parametrized weight: rounded
    # one range a rounding point: the first block's input, then each block's middle, second convolution and sum
    assert len(widths) == len(ranges) == 1 + 3 * len(blocks)
    assert np.allclose([high - low for low, high in ranges.values()], widths, rtol=0.01)
    assert len(file_weights) == len(simulated) == 4
    for ours, theirs, plain in zip(simulated, file_weights, plain_weights):
        assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-7)
        assert not np.allclose(plain, theirs, rtol=1e-5, atol=1e-7)  # the rounding is there to be matched
    # leaving the block gives back plain blocks holding plain weights
    assert all(type(block) is ResidualBlock for block in model.tower)
    assert all(np.array_equal(_folded(c), p) for c, p in zip(convolutions, plain_weights))
    assert not any("parametrizations" in name for name, _ in model.named_parameters())


@pytest.fixture
def one_thread():
    """torch on one thread: the tiny batches here run no faster on two, and far slower beside other work."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_training_brings_the_rounded_outputs_closer_to_the_fp32_files(one_thread):
    # the shipped network: a random one's rounding error is noise that no training removes
    from tabula.engine.play.search_player import default_weights
    from tabula.engine.rules.interface import batch_legal_masks
    from tabula.tools.learn.export import positions

    int8 = default_weights()[0]
    fp32 = int8.with_name(int8.name.replace("-int8", ""))
    if not fp32.exists():
        pytest.skip(f"no fp32 file beside the default {int8.name}")
    model = load_onnx(fp32)
    states = positions(9, 64, 2, "", "random")
    planes = model.spec.encoding.encode_batch(states, None)
    losses = train_rounded(model, planes, batch_legal_masks(states), AwareConfig(steps=30, batch=16))
    assert losses["after"] < 0.8 * losses["before"]


@pytest.mark.slow
def test_export_aware_steps_writes_an_int8_file_of_the_original(two_blocks, tmp_path, capsys, one_thread):
    import onnx
    from onnx import numpy_helper

    target = tmp_path / "net-int8.onnx"
    assert main(["--quantize", "int8", "--aware-steps", "20", "--aware-positions", "48", "--calibration", "32",
                 "--calibration-source", "random", str(two_blocks), str(target)]) == 0
    source = {p.key: p.value for p in onnx.load(str(two_blocks)).metadata_props}
    written = {p.key: p.value for p in onnx.load(str(target)).metadata_props}
    assert written["precision"] == "int8" and written["int8_kernels"] == "any"
    assert written["architecture"] == source["architecture"]
    assert written["board_sizes"] == source["board_sizes"] == "7,9"
    assert written["provenance"].startswith("tests; int8 of its trunk after a quantization-aware fine-tune (20 steps")
    assert "7-bit weights" in written["provenance"]
    integers = [numpy_helper.to_array(t) for t in onnx.load(str(target)).graph.initializer
                if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 4]
    assert len(integers) == 4 and max(int(np.abs(w.astype(np.int32)).max()) for w in integers) == 64
    assert "before" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["--quantize", "int8-vnni"], ["--quantize", "int8", "--fp32-blocks", "1"]])
def test_aware_steps_needs_the_every_cpu_format_with_every_block_int8(two_blocks, tmp_path, extra):
    with pytest.raises(SystemExit, match="--aware-steps"):
        main([*extra, "--aware-steps", "5", "--aware-positions", "8", "--calibration", "32", "--calibration-source",
              "random", str(two_blocks), str(tmp_path / "x-int8.onnx")])

"""The torch network: shapes, ONNX export (checked against torch), metadata, checkpoints that never unpickle code."""
from __future__ import annotations

import json
import pickle

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from tabula.engine.net.evaluator import NetworkFileError
from tabula.engine.net.features import encode_batch
from tabula.engine.net.network import (
    BLACK_VIEW,
    POOLED,
    NetSpec,
    TabulaNet,
    compare_with_onnx,
    export_onnx,
    from_leelaz,
    load_checkpoint,
    load_onnx,
    random_network,
    save_checkpoint,
    to_leelaz,
)
from tests.conftest_network import as_the_file_computes, random_game


def run_torch(model: TabulaNet, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        policy, value = model(torch.from_numpy(planes))
    return policy.numpy(), value.numpy()


def test_shapes_and_value_range(tiny_model, tiny_pooled_model):
    planes = encode_batch(random_game(19, 20, seed=1))
    policy, value = run_torch(tiny_model, planes)
    assert policy.shape == (len(planes), 362) and value.shape == (len(planes),)
    assert np.all(np.abs(value) <= 1)
    for size in (9, 13):
        planes = encode_batch(random_game(size, 10, seed=size))
        policy, value = run_torch(tiny_pooled_model, planes)
        assert policy.shape == (len(planes), size * size + 1) and value.shape == (len(planes),)


def test_random_network_is_not_degenerate(tiny_model):
    planes = encode_batch(random_game(19, 20, seed=2))
    policy, value = run_torch(tiny_model, planes)
    probabilities = torch.softmax(torch.from_numpy(policy), dim=1).numpy()
    assert probabilities.max(axis=1).min() > 3 / 362  # peaked, not uniform
    assert value.std() > 0.01


def test_onnx_matches_torch_and_passes_the_checker(tiny_model, tiny_onnx):
    onnx.checker.check_model(str(tiny_onnx))
    planes = encode_batch(random_game(19, 40, seed=3))
    session = ort.InferenceSession(str(tiny_onnx), providers=["CPUExecutionProvider"])
    for batch in (planes[:1], planes):  # dynamic batch
        onnx_policy, onnx_value = session.run(["policy", "value"], {"planes": batch})
        policy, value = run_torch(tiny_model, batch)
        assert np.allclose(onnx_policy, policy, atol=1e-5) and np.allclose(onnx_value, value, atol=1e-5)


def test_pooled_onnx_takes_any_size(tiny_pooled_model, tiny_pooled_onnx):
    session = ort.InferenceSession(str(tiny_pooled_onnx), providers=["CPUExecutionProvider"])
    for size in (9, 13, 19):
        planes = encode_batch(random_game(size, 12, seed=size))
        onnx_policy, onnx_value = session.run(["policy", "value"], {"planes": planes})
        policy, value = run_torch(tiny_pooled_model, planes)
        assert onnx_policy.shape == (len(planes), size * size + 1)
        assert np.allclose(onnx_policy, policy, atol=1e-5) and np.allclose(onnx_value, value, atol=1e-5)


def test_metadata(tiny_onnx, tiny_pooled_onnx):
    meta = {p.key: p.value for p in onnx.load(str(tiny_onnx)).metadata_props}
    assert json.loads(meta["architecture"])["blocks"] == 1
    assert json.loads(meta["architecture"])["filters"] == 8
    assert meta["board_sizes"] == "19"
    assert meta["input_encoding"] == "leelaz-18"
    assert "side to move" in meta["value"]
    assert meta["precision"] == "fp32"
    assert "seed 1" in meta["provenance"]
    pooled = {p.key: p.value for p in onnx.load(str(tiny_pooled_onnx)).metadata_props}
    assert pooled["board_sizes"] == "9,13,19"
    assert json.loads(pooled["architecture"])["head"] == POOLED


def test_onnx_back_to_torch(tiny_model, tiny_onnx):
    model = load_onnx(tiny_onnx)
    planes = encode_batch(random_game(19, 10, seed=4))
    for a, b in zip(run_torch(model, planes), run_torch(tiny_model, planes)):
        assert np.array_equal(a, b)


def test_checkpoint_round_trip(tiny_model, tmp_path):
    path = tmp_path / "net.pt"
    save_checkpoint(tiny_model, path, step=7)
    model = load_checkpoint(path)
    assert model.spec == tiny_model.spec
    planes = encode_batch(random_game(19, 5, seed=5))
    assert np.array_equal(run_torch(model, planes)[0], run_torch(tiny_model, planes)[0])


class Payload:
    """Unpickling this would run code: it must never happen."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_checkpoint_with_pickled_objects_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    torch.save({"spec": NetSpec().to_dict(), "state_dict": {}, "payload": Payload(str(marker))}, path)
    with pytest.raises(NetworkFileError, match="evil.pt"):
        load_checkpoint(path)
    assert not marker.exists()
    raw = tmp_path / "raw.pt"
    raw.write_bytes(pickle.dumps(Payload(str(marker))))
    with pytest.raises(NetworkFileError):
        load_checkpoint(raw)
    assert not marker.exists()


def test_garbage_checkpoint(tmp_path):
    path = tmp_path / "junk.pt"
    path.write_bytes(b"\x00not a checkpoint")
    with pytest.raises(NetworkFileError, match="junk.pt"):
        load_checkpoint(path)


def test_leelaz_conversion_keeps_outputs(tiny_model):
    """General batch norms (scale != 1) are folded into the weights; the outputs stay the same."""
    model = from_leelaz(to_leelaz(tiny_model))
    planes = encode_batch(random_game(19, 30, seed=6))
    for a, b in zip(run_torch(model, planes), run_torch(tiny_model, planes)):
        assert np.allclose(a, b, atol=1e-4)


def test_black_view_value_flips_for_white():
    spec = NetSpec(blocks=1, filters=4, board_size=9)
    stm = random_network(spec, seed=3)
    black = TabulaNet(NetSpec(blocks=1, filters=4, board_size=9, value_perspective=BLACK_VIEW))
    black.load_state_dict(stm.state_dict())
    black.eval()
    states = random_game(9, 3, seed=7)  # black, white, black, white to move
    planes = encode_batch(states)
    _, value_stm = run_torch(stm, planes)
    _, value_black = run_torch(black, planes)
    assert np.allclose(value_black, value_stm * np.array([1, -1, 1, -1]))


def test_export_refuses_wrong_sizes_for_agz(tiny_model, tmp_path):
    with pytest.raises(ValueError):
        export_onnx(tiny_model, tmp_path / "x.onnx", "test", board_sizes=[9])


def test_compare_with_onnx_detects_a_different_net(tiny_onnx):
    other = random_network(NetSpec(blocks=1, filters=8, board_size=19), seed=99)
    with pytest.raises(RuntimeError, match="differ"):
        compare_with_onnx(other, str(tiny_onnx), 19)


def test_export_command_round_trips(tmp_path):
    """tabula export: random -> ONNX + LZ text; LZ text -> ONNX; ONNX -> LZ text."""
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.net.leelaz import read_leelaz
    from tabula.tools.learn.export import main

    net, lz = tmp_path / "r.onnx", tmp_path / "r.txt"
    common = ["--calibration", "16", "--calibration-source", "random"]
    assert main(["--random", "--blocks", "1", "--filters", "4", "--size", "9", str(net), "--leelaz-out", str(lz)]
                + common) == 0
    assert main(["--from-leelaz", str(lz), str(tmp_path / "lz.onnx")]) == 0
    assert main(["--to-leelaz", str(net), str(tmp_path / "back.txt")]) == 0
    assert (tmp_path / "back.txt").read_text() == lz.read_text()
    assert read_leelaz(lz).board_size == 9
    states = random_game(9, 20, seed=8)
    a = OnnxEvaluator(net, symmetry="identity", log=None).evaluate(states)
    b = OnnxEvaluator(tmp_path / "lz.onnx", symmetry="identity", log=None).evaluate(states)
    assert np.allclose(a.policy, b.policy, atol=1e-5) and np.allclose(a.value, b.value, atol=1e-5)


@pytest.mark.slow
def test_int8_quantization(tiny_onnx, tmp_path):
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.tools.learn.export import main

    target = tmp_path / "q.onnx"
    assert main(["--quantize", "int8", str(tiny_onnx), str(target), "--calibration", "32"]) == 0
    quantized = OnnxEvaluator(target, symmetry="identity", log=None)
    assert quantized.metadata["precision"] == "int8" and "int8" in quantized.metadata["provenance"]
    states = random_game(19, 40, seed=8)
    a = OnnxEvaluator(tiny_onnx, symmetry="identity", log=None).evaluate(states)
    c = quantized.evaluate(states)
    assert np.allclose(c.policy.sum(axis=1), 1, atol=1e-5) and np.abs(c.value - a.value).mean() < 0.1


def test_int8_keeps_the_heads_and_what_follows_them_in_fp32(tiny_aux_onnx, tmp_path):
    """The score's scaling after its head was once quantized, which clipped every score to the range the
    calibration positions reached (-17.4 to +11.2 points for the default network)."""
    import onnx

    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.tools.learn.export import main

    target = tmp_path / "q.onnx"
    assert main(["--quantize", "int8", str(tiny_aux_onnx), str(target), "--calibration", "32"]) == 0
    graph = onnx.load(str(target)).graph
    made_by = {t: n for n in graph.node for t in n.output}
    assert {o.name: made_by[o.name].op_type for o in graph.output} == {
        "policy": "Concat", "value": "Tanh", "score": "Mul", "ownership": "Tanh"}
    states = random_game(19, 30, seed=3)
    a = OnnxEvaluator(tiny_aux_onnx, symmetry="identity", log=None).evaluate(states)
    c = as_the_file_computes(target, symmetry="identity").evaluate(states)
    assert np.abs(c.score - a.score).mean() < 0.1 * max(1.0, float(np.abs(a.score).mean()))


@pytest.mark.slow
def test_int8_quantization_of_a_network_for_every_size(tiny_pooled_onnx, tmp_path):
    """A size-independent network (9, 13 and 19 here) is calibrated on 19x19 alone, since onnxruntime's percentile
    calibrator needs batches of one shape ("inhomogeneous shape" otherwise), and plays every size after."""
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.tools.learn.export import calibration_size, main

    assert calibration_size([9, 13, 19]) == 19 and calibration_size(list(range(2, 26))) == 19
    assert calibration_size([7, 9]) == 9 and calibration_size([21, 25]) == 21
    target = tmp_path / "q.onnx"
    assert main(["--quantize", "int8", str(tiny_pooled_onnx), str(target), "--calibration", "32"]) == 0
    quantized = OnnxEvaluator(target, symmetry="identity", log=None)
    reference = OnnxEvaluator(tiny_pooled_onnx, symmetry="identity", log=None)
    assert quantized.metadata["precision"] == "int8" and quantized.board_sizes == reference.board_sizes
    for size in (9, 13, 19):
        states = random_game(size, 20, seed=size)
        c, a = quantized.evaluate(states), reference.evaluate(states)
        assert np.allclose(c.policy.sum(axis=1), 1, atol=1e-5) and np.abs(c.value - a.value).mean() < 0.1


def test_the_small_board_value_term_starts_at_zero_and_never_touches_19x19(tiny_pooled_model, tmp_path):
    """The term that learns the small boards' komi: added zero, the network is the same on every board; trained
    (random weights here), it moves the values of 9×9 and 13×13 positions, for each colour, and not one bit of
    19×19 or larger boards', in torch and in the exported ONNX file, which loads back with it."""
    from tabula.engine.net.network import with_small_board_value

    grown = with_small_board_value(tiny_pooled_model)
    assert grown.spec.small_board_value and not tiny_pooled_model.spec.small_board_value
    boards = {size: encode_batch(random_game(size, 16, seed=size)) for size in (9, 13, 19, 21)}
    for planes in boards.values():
        assert all(np.array_equal(a, b) for a, b in zip(run_torch(grown, planes), run_torch(tiny_pooled_model, planes)))
    with torch.no_grad():
        grown.head.value_small_boards.weight.normal_(0.0, 1.0)
    for size, planes in boards.items():
        policy, value = run_torch(grown, planes)
        start_policy, start_value = run_torch(tiny_pooled_model, planes)
        assert np.array_equal(policy, start_policy)
        if size >= 19:
            assert np.array_equal(value, start_value)
        else:
            moved = np.abs(value - start_value) > 1e-4
            to_move = planes[:, 16, 0, 0] == 1
            assert moved[to_move].any() and moved[~to_move].any()
    path = tmp_path / "grown.onnx"
    export_onnx(grown, path, provenance="tests", board_sizes=[9, 13, 19, 21])  # checks onnxruntime against torch
    back = load_onnx(path)
    assert back.spec == grown.spec
    assert torch.equal(back.head.value_small_boards.weight, grown.head.value_small_boards.weight)


def test_the_small_board_value_term_needs_the_pooled_head(tiny_model):
    from tabula.engine.net.network import with_small_board_value

    with pytest.raises(ValueError, match="pooled head"):
        NetSpec(small_board_value=True)
    with pytest.raises(ValueError, match="pooled head"):
        with_small_board_value(tiny_model)


def test_export_adds_the_small_board_value_term(tiny_pooled_onnx, tiny_onnx, tmp_path, capsys):
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.tools.learn.export import main

    grown = tmp_path / "grown.onnx"
    assert main(["--add-small-board-value", str(tiny_pooled_onnx), str(grown)]) == 0
    net = OnnxEvaluator(grown, symmetry="identity", log=None)
    assert json.loads(net.metadata["architecture"])["small_board_value"] is True
    assert "small-board" in net.metadata["provenance"]
    start = OnnxEvaluator(tiny_pooled_onnx, symmetry="identity", log=None)
    assert net.board_sizes == start.board_sizes
    states = random_game(9, 12, seed=5)
    a, b = net.evaluate(states), start.evaluate(states)
    assert np.allclose(a.value, b.value, atol=1e-6) and np.allclose(a.policy, b.policy, atol=1e-6)
    with pytest.raises(SystemExit, match="pooled head"):
        main(["--add-small-board-value", str(tiny_onnx), str(tmp_path / "agz.onnx")])
    with pytest.raises(SystemExit, match="already has"):  # a trained term is never taken for a zero one
        main(["--add-small-board-value", str(grown), str(tmp_path / "again.onnx")])
    with pytest.raises(SystemExit, match="not Leela Zero"):
        main(["--add-small-board-value", "--to-leelaz", str(tiny_pooled_onnx), str(tmp_path / "lz.txt")])


@pytest.mark.slow
def test_int8_keeps_the_small_board_value_term_off_19x19(tiny_pooled_model, tmp_path):
    """An int8 file quantizes the input planes, so a 1 comes back as 0.99999994 and the board size computed from
    them fell just short of 19: the small-board term leaked into 19×19 values (by 3e-4 in the shipped network) until
    the size was rounded. Quantized, the network with a trained term plays 19×19 as the one without it."""
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.net.network import with_small_board_value
    from tabula.tools.learn.export import main

    grown = with_small_board_value(tiny_pooled_model)
    with torch.no_grad():
        grown.head.value_small_boards.weight.normal_(0.0, 1.0)
    paths = {}
    for name, model in (("start", tiny_pooled_model), ("grown", grown)):
        export_onnx(model, tmp_path / f"{name}.onnx", provenance="tests", board_sizes=[9, 19])
        paths[name] = tmp_path / f"{name}-int8.onnx"
        assert main(["--quantize", "int8", str(tmp_path / f"{name}.onnx"), str(paths[name]),
                     "--calibration", "32", "--calibration-source", "random"]) == 0
    start, quantized = (OnnxEvaluator(paths[n], symmetry="identity", log=None) for n in ("start", "grown"))
    states = random_game(19, 20, seed=6)
    assert np.array_equal(quantized.evaluate(states).value, start.evaluate(states).value)
    states = random_game(9, 20, seed=6)
    assert not np.allclose(quantized.evaluate(states).value, start.evaluate(states).value, atol=1e-3)

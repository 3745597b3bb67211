"""OnnxEvaluator: masking, normalisation, symmetries, metadata checks, clear errors on bad files."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tabula.engine.net.evaluator import (
    NetworkFileError,
    NetworkSet,
    OnnxEvaluator,
    UniformEvaluator,
    UnsupportedBoardSizeError,
    choose_providers,
    evaluate_async,
    legal_mask,
    masked_softmax,
    session_options,
)
from tabula.engine.net.features import encode_batch, inverse_transform_policy, transform_planes
from tabula.engine.net.network import set_metadata
from tabula.engine.rules.coords import parse_vertex
from tabula.engine.rules.game import GameState
from tests.conftest_network import random_game


@pytest.fixture(scope="module")
def evaluator(tiny_onnx):
    return OnnxEvaluator(tiny_onnx, symmetry="identity", log=None)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def ko_position() -> GameState:
    state = GameState(19)
    for vertex in ("D4", "E4", "C5", "F5", "D6", "E6", "Q16", "D5", "E5"):  # black E5 takes D5: ko
        state.play(parse_vertex(vertex, 19))
    return state


def test_policy_is_masked_and_normalised(evaluator):
    states = random_game(19, 30, seed=1)[-5:] + [ko_position()]
    result = evaluator.evaluate(states)
    assert result.policy.shape == (6, 362) and result.policy.dtype == np.float32
    assert result.value.shape == (6,) and result.value.dtype == np.float32
    assert np.allclose(result.policy.sum(axis=1), 1, atol=1e-5)
    assert np.all(np.abs(result.value) <= 1)
    for state, policy in zip(states, result.policy):
        mask = legal_mask(state)
        assert np.all(policy[~mask] == 0) and np.all(policy[mask] > 0)
    assert result.policy[-1, parse_vertex("D5", 19)] == 0  # the ko point


def test_identity_is_masked_softmax_of_the_raw_network(evaluator):
    states = random_game(19, 12, seed=2)
    logits, value = evaluator.run(encode_batch(states))
    masks = np.stack([legal_mask(s) for s in states])
    expected = softmax(np.where(masks, logits, -np.inf))
    result = evaluator.evaluate(states)
    assert np.allclose(result.policy, expected, atol=1e-6) and np.allclose(result.value, value)


def test_random_symmetry_is_inverse_transformed(tiny_onnx, evaluator):
    states = random_game(19, 20, seed=3)
    random_eval = OnnxEvaluator(tiny_onnx, symmetry="random", rng=np.random.default_rng(7), log=None)
    symmetries = np.random.default_rng(7).integers(0, 8, len(states))
    logits, value = evaluator.run(transform_planes(encode_batch(states), symmetries))
    masks = np.stack([legal_mask(s) for s in states])
    expected = masked_softmax(inverse_transform_policy(logits, symmetries), masks)
    result = random_eval.evaluate(states)
    assert np.allclose(result.policy, expected, atol=1e-6) and np.allclose(result.value, value)
    assert len(set(symmetries.tolist())) > 1


def transformed_game(vertices: list[str], symmetry: int, size: int) -> GameState:
    from tabula.engine.net.features import symmetric_point

    state = GameState(size)
    for vertex in vertices:
        move = parse_vertex(vertex, size)
        x, y = symmetric_point(move % size, move // size, symmetry, size)
        state.play(y * size + x)
    return state


def test_average_is_equivariant(tiny_onnx):
    """Averaged over the 8 symmetries, a transformed game gets the transformed policy and the same value."""
    averaging = OnnxEvaluator(tiny_onnx, symmetry="average", log=None)
    moves = ["D4", "Q17", "C16", "R4", "K10"]
    base = averaging.evaluate([transformed_game(moves, 0, 19)])
    for symmetry in (1, 4, 5, 6):  # 5 and 6 are the quarter turns
        other = averaging.evaluate([transformed_game(moves, symmetry, 19)])
        assert np.isclose(other.value[0], base.value[0], atol=1e-5)
        # The stone at p in the base game is at symmetric_point(p) in the other: the inverse table's direction.
        assert np.allclose(inverse_transform_policy(base.policy, symmetry), other.policy, atol=1e-6)


def test_symmetric_position_gets_a_symmetric_policy(tiny_onnx):
    averaging = OnnxEvaluator(tiny_onnx, symmetry="average", log=None)
    result = averaging.evaluate([GameState(19)])
    for symmetry in range(8):
        assert np.allclose(inverse_transform_policy(result.policy, symmetry), result.policy, atol=1e-6)


def test_pooled_network_plays_several_sizes(tiny_pooled_onnx):
    evaluator = OnnxEvaluator(tiny_pooled_onnx, symmetry="random", rng=np.random.default_rng(0), log=None)
    assert evaluator.board_sizes == (9, 13, 19)
    for size in (9, 13, 19):
        result = evaluator.evaluate(random_game(size, 6, seed=size))
        assert result.policy.shape[1] == size * size + 1
        assert np.allclose(result.policy.sum(axis=1), 1, atol=1e-5)
    with pytest.raises(UnsupportedBoardSizeError):
        evaluator.evaluate([GameState(7)])


def test_evaluate_async_gives_what_evaluate_gives(tiny_onnx, tiny_onnx_9):
    states = random_game(19, 12, seed=4)
    for mode in ("identity", "average"):
        network = OnnxEvaluator(tiny_onnx, symmetry=mode, log=None)
        pending = [network.evaluate_async(states[:5]), network.evaluate_async(states[5:])]  # two at the network
        direct = network.evaluate(states)
        for got, rows in zip((p.result() for p in pending), (slice(0, 5), slice(5, None))):
            assert np.allclose(got.policy, direct.policy[rows], atol=1e-6)
            assert np.allclose(got.value, direct.value[rows], atol=1e-6)
    networks = NetworkSet([OnnxEvaluator(tiny_onnx, symmetry="identity", log=None),
                           OnnxEvaluator(tiny_onnx_9, symmetry="identity", log=None)])
    small = random_game(9, 4, seed=9)
    assert np.allclose(networks.evaluate_async(small).result().policy, networks.evaluate(small).policy)
    assert networks.evaluate_async([]).result().value.shape == (0,)
    # a position the network cannot take is refused at once, before anything is queued
    with pytest.raises(UnsupportedBoardSizeError):
        networks.evaluate_async([GameState(7)])


def test_an_evaluator_without_evaluate_async_is_evaluated_at_once():
    states = random_game(5, 4, seed=1)
    pending = evaluate_async(UniformEvaluator(), states)
    assert np.allclose(pending.result().policy, UniformEvaluator().evaluate(states).policy)


def test_agz_network_refuses_other_sizes(evaluator):
    with pytest.raises(UnsupportedBoardSizeError, match="9x9"):
        evaluator.evaluate([GameState(9)])


def test_one_log_line_names_the_provider(tiny_onnx):
    lines: list[str] = []
    evaluator = OnnxEvaluator(tiny_onnx, threads=1, provider="cpu", log=lines.append)
    assert len(lines) == 1 and "CPUExecutionProvider" in lines[0] and evaluator.provider in lines[0]


def test_provider_choice():
    available = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    assert choose_providers("auto", available) == available
    assert choose_providers("auto", ["CPUExecutionProvider"]) == ["CPUExecutionProvider"]
    assert choose_providers("cuda", available) == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    with pytest.raises(ValueError, match="not available"):
        choose_providers("cuda", ["CPUExecutionProvider"])
    with pytest.raises(ValueError, match="unknown provider"):
        choose_providers("tpu", available)


def test_the_backends_netconfig_names_are_the_evaluators(tiny_onnx):
    """NetConfig checks the names (engine/config.py, beside rules, cannot import the net layer); they must be what
    the evaluator runs, and the evaluator's arguments go through that one check."""
    from tabula.engine.config import BACKENDS, ConfigError
    from tabula.engine.net.evaluator import PROVIDERS, TORCH, OnnxEvaluator

    assert BACKENDS == ("auto", *PROVIDERS, TORCH)
    for bad in [dict(provider="tpu"), dict(precision="fp8"), dict(max_batch=0)]:
        with pytest.raises(ConfigError, match="must be"):
            OnnxEvaluator(tiny_onnx, log=None, **bad)


def test_no_torch_on_the_evaluation_path(tiny_onnx):
    code = ("import sys; from tabula.engine.net.evaluator import OnnxEvaluator; "
            "from tabula.engine.rules.game import GameState; "
            f"OnnxEvaluator({str(tiny_onnx)!r}, log=None).evaluate([GameState(19)]); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# -- bad files ------------------------------------------------------------------------------------------------------


def write_model(path, planes: int = 18, size: int = 19, policy_len: int | None = None, metadata=None) -> str:
    """A small valid ONNX graph with the given input shape: policy = a constant, value = 0."""
    policy_len = policy_len or size * size + 1
    planes_in = helper.make_tensor_value_info("planes", TensorProto.FLOAT, ["batch", planes, size, size])
    policy_out = helper.make_tensor_value_info("policy", TensorProto.FLOAT, ["batch", policy_len])
    value_out = helper.make_tensor_value_info("value", TensorProto.FLOAT, ["batch"])
    nodes = [
        helper.make_node("ReduceSum", ["planes", "axes_all"], ["total"], keepdims=0),  # [batch]
        helper.make_node("Mul", ["total", "zero"], ["value"]),
        helper.make_node("Unsqueeze", ["value", "axes_one"], ["column"]),  # [batch, 1]
        helper.make_node("Add", ["column", "row"], ["policy"]),  # [batch, policy_len]
    ]
    inits = [helper.make_tensor("axes_all", TensorProto.INT64, [3], [1, 2, 3]),
             helper.make_tensor("axes_one", TensorProto.INT64, [1], [1]),
             helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
             helper.make_tensor("row", TensorProto.FLOAT, [1, policy_len], [0.0] * policy_len)]
    graph = helper.make_graph(nodes, "fake", [planes_in], [policy_out, value_out], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if metadata:
        set_metadata(model, metadata)
    onnx.save(model, str(path))
    return str(path)


def test_a_minimal_foreign_network_loads(tmp_path):
    path = write_model(tmp_path / "fake.onnx")
    evaluator = OnnxEvaluator(path, log=None)
    assert evaluator.board_sizes == (19,)
    assert np.allclose(evaluator.evaluate([GameState(19)]).policy.sum(), 1)


@pytest.mark.parametrize("build, message", [
    (lambda p: write_model(p, planes=17), "input shape"),
    (lambda p: write_model(p, policy_len=100), "outputs have shapes"),
    (lambda p: write_model(p, metadata={"board_sizes": "9"}), "metadata says board sizes"),
    (lambda p: write_model(p, metadata={"input_encoding": "katago-22"}), "input encoding"),
    (lambda p: write_model(p, metadata={"tabula_format": "99"}), "metadata format"),
])
def test_wrong_shapes_and_metadata(tmp_path, build, message):
    path = build(tmp_path / "wrong.onnx")
    with pytest.raises(NetworkFileError, match=message) as info:
        OnnxEvaluator(path, log=None)
    assert "wrong.onnx" in str(info.value)


def test_corrupt_truncated_and_missing_files(tiny_onnx, tmp_path):
    data = tiny_onnx.read_bytes()
    cases = {
        "truncated.onnx": data[: len(data) // 2],
        "header.onnx": data[:100],
        "garbage.onnx": bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8)),
        "text.onnx": b"1\n0.5 0.25\n",
        "empty.onnx": b"",
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(NetworkFileError) as info:
            OnnxEvaluator(path, log=None)
        assert name in str(info.value)
    with pytest.raises(NetworkFileError, match="no such file"):
        OnnxEvaluator(tmp_path / "absent.onnx", log=None)


def test_bad_arguments(tiny_onnx):
    with pytest.raises(ValueError, match="symmetry"):
        OnnxEvaluator(tiny_onnx, symmetry="sometimes", log=None)


def test_uniform_evaluator_unchanged():
    result = UniformEvaluator().evaluate([GameState(9)])
    assert np.allclose(result.policy, 1 / 82) and result.value.tolist() == [0.0]


@pytest.fixture(scope="module")
def tiny_onnx_9(tmp_path_factory):
    from tabula.engine.net.network import NetSpec, export_onnx, random_network

    path = tmp_path_factory.mktemp("net9") / "tiny9.onnx"
    export_onnx(random_network(NetSpec(blocks=1, filters=8, board_size=9), seed=2), path, provenance="tests")
    return path


def test_network_set_routes_each_size_to_its_network(tiny_onnx, tiny_onnx_9, tiny_pooled_onnx):
    big = OnnxEvaluator(tiny_onnx, symmetry="identity", log=None)
    small = OnnxEvaluator(tiny_onnx_9, symmetry="identity", log=None)
    pooled = OnnxEvaluator(tiny_pooled_onnx, symmetry="identity", log=None)
    networks = NetworkSet([big, small, pooled])
    assert networks.board_sizes == (9, 13, 19)
    assert networks.network_for(19) is big and networks.network_for(9) is small  # the first named wins a size
    assert networks.network_for(13) is pooled
    for size, network in ((9, small), (19, big), (13, pooled)):
        states = random_game(size, 5, seed=size)
        assert np.array_equal(networks.evaluate(states).policy, network.evaluate(states).policy)
    with pytest.raises(UnsupportedBoardSizeError, match="7x7.*9x9, 13x13, 19x19"):
        networks.evaluate([GameState(7)])
    assert networks.evaluate([]).value.shape == (0,)


def test_score_and_ownership_come_back_in_the_boards_frame(tiny_aux_onnx):
    """A position evaluated under symmetry s gives the ownership the network computed on the turned planes,
    turned back; the average mode averages the eight."""
    import onnxruntime as ort

    from tabula.engine.net.features import encode, inverse_transform_planes

    state = random_game(9, 30, seed=4)[-1]
    session = ort.InferenceSession(str(tiny_aux_onnx), providers=["CPUExecutionProvider"])
    raw = {}
    for s in range(8):
        planes = transform_planes(encode(state)[None], s)
        _, _, score, owned = session.run(None, {"planes": planes})
        raw[s] = (float(score[0]), inverse_transform_planes(owned.reshape(1, 1, 9, 9), s).reshape(81))
    drawn = int(np.random.default_rng(11).integers(0, 8, 1)[0])
    evaluator = OnnxEvaluator(tiny_aux_onnx, symmetry="random", rng=np.random.default_rng(11), log=None)
    assert evaluator.has_score_and_ownership
    result = evaluator.evaluate([state])
    assert result.score[0] == pytest.approx(raw[drawn][0], abs=1e-4)
    np.testing.assert_allclose(result.ownership[0], raw[drawn][1], atol=1e-5)
    averaged = evaluator.evaluate_averaged([state])
    np.testing.assert_allclose(averaged.ownership[0], np.mean([raw[s][1] for s in range(8)], axis=0), atol=1e-5)
    assert averaged.score[0] == pytest.approx(np.mean([raw[s][0] for s in range(8)]), abs=1e-4)


def test_networks_without_score_heads_give_none(tiny_onnx):
    evaluator = OnnxEvaluator(tiny_onnx, log=None)
    assert not evaluator.has_score_and_ownership
    result = evaluator.evaluate([GameState(19)])
    assert result.score is None and result.ownership is None


# -- an int8 file checked against its fp32 file on this CPU ------------------------------------------------------


def _as_int8(source, target, **extra) -> None:
    """``source`` (an fp32 file) written to ``target`` as if it were an int8 file: the check reads the metadata, and
    the weights decide whether the two agree."""
    import onnx

    from tabula.engine.net.network import set_metadata

    proto = onnx.load(str(source))
    metadata = {p.key: p.value for p in proto.metadata_props}
    set_metadata(proto, {**metadata, "precision": "int8", **extra})
    onnx.save(proto, str(target))


@pytest.fixture()
def int8_pair(tmp_path, tiny_onnx):
    """net.onnx (tiny_onnx) and, beside it, net-int8.onnx that computes what it computes."""
    import shutil

    shutil.copy(tiny_onnx, tmp_path / "net.onnx")
    _as_int8(tiny_onnx, tmp_path / "net-int8.onnx", resign_winrate="19:0.05")
    return tmp_path


def test_an_int8_file_that_agrees_with_its_fp32_file_runs_as_it_is(int8_pair):
    lines = []
    evaluator = OnnxEvaluator(int8_pair / "net-int8.onnx", log=lines.append)
    assert evaluator.metadata["precision"] == "int8" and len(lines) == 1 and "disagree" not in lines[0]


def test_an_int8_file_that_disagrees_with_its_fp32_file_hands_over_to_it(int8_pair):
    """As onnxruntime's int8 kernels do on a CPU without VNNI: here the 'int8' file holds other weights."""
    from tabula.engine.net.network import NetSpec, export_onnx, random_network

    other = random_network(NetSpec(blocks=1, filters=8, board_size=19), seed=9)
    export_onnx(other, int8_pair / "other.onnx", provenance="tests: another network")
    _as_int8(int8_pair / "other.onnx", int8_pair / "net-int8.onnx", resign_winrate="19:0.05")
    lines = []
    evaluator = OnnxEvaluator(int8_pair / "net-int8.onnx", symmetry="identity", log=lines.append)
    assert len(lines) == 1 and "so the network runs from its fp32 file net.onnx" in lines[0], lines
    assert "(1x8 agz, 19, fp32)" in lines[0] and "error" not in lines[0].lower()
    fp32 = OnnxEvaluator(int8_pair / "net.onnx", symmetry="identity", log=None)
    state = [GameState(19)]
    assert np.array_equal(evaluator.evaluate(state).policy, fp32.evaluate(state).policy)
    assert evaluator.resign_thresholds is not None and evaluator.resign_thresholds.even == ((19, 0.05),)
    unchecked = OnnxEvaluator(int8_pair / "net-int8.onnx", symmetry="identity", log=None, check_int8=False)
    assert unchecked.metadata["precision"] == "int8"
    assert not np.array_equal(unchecked.evaluate(state).policy, fp32.evaluate(state).policy)


def test_an_int8_file_without_an_fp32_file_runs_unchecked(int8_pair):
    (int8_pair / "net.onnx").unlink()
    lines = []
    assert OnnxEvaluator(int8_pair / "net-int8.onnx", log=lines.append).metadata["precision"] == "int8"
    assert "disagree" not in lines[0]


@pytest.mark.slow
def test_the_shipped_int8_default_plays_what_its_fp32_file_plays_on_this_cpu():
    """Whichever runs (the int8 file where onnxruntime's kernels compute it faithfully, else its fp32 file), the
    network that plays agrees with the fp32 file as the int8 file should."""
    from tabula.engine.net.evaluator import comparison_planes

    default = "weights/" + open("weights/DEFAULT").read().split()[0]
    played = OnnxEvaluator(default, symmetry="identity", log=None)
    fp32 = OnnxEvaluator(default.replace("-int8.onnx", ".onnx"), symmetry="identity", log=None)
    planes = comparison_planes(19, count=64, seed=5, encoding=fp32.encoding)
    (a, va), (b, vb) = played.run(planes), fp32.run(planes)
    assert np.mean(a.argmax(axis=1) == b.argmax(axis=1)) >= 0.7 and np.abs(va - vb).mean() < 0.1


def test_an_int8_file_that_agreed_is_not_checked_again_in_the_same_process(int8_pair, monkeypatch):
    from tabula.engine.net import int8_check

    OnnxEvaluator(int8_pair / "net-int8.onnx", log=None)

    def not_again(*_):
        raise AssertionError("checked a second time")

    monkeypatch.setattr(int8_check, "fp32_sibling", not_again)
    assert OnnxEvaluator(int8_pair / "net-int8.onnx", log=None).metadata["precision"] == "int8"


def test_sessions_read_denormals_as_zero(evaluator):
    """Every CPU session flushes denormal floats: without it a transformer runs many times slower on Intel CPUs."""
    options = evaluator._session.get_session_options()
    assert options.get_session_config_entry("session.set_denormal_as_zero") == "1"
    assert options.log_severity_level == 3
    assert session_options(3).intra_op_num_threads == 3

"""KataGo's model files: the reader and writer (engine/net/katago_model.py), the torch network and its ONNX export
(engine/net/katago_network.py), checked against KataGo's own outputs.

The fixtures in tests/katago/ are small random networks of every block kind that our writer made
(``random_model``), and KataGo 1.17.2's ``kata-raw-nn 0`` on them (its Eigen backend loaded the files as they are):
so the writer writes what KataGo reads, and the network computes what KataGo computes, without KataGo's own
networks in the repository. The slow test checks the real networks where they are on this machine.
"""
from __future__ import annotations

import gzip
import json
import os
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net import katago_model as km  # noqa: E402
from tabula.engine.net import katago_network as kn  # noqa: E402
from tests.katago_reference import (  # noqa: E402
    MODELS_DIR,
    empty_board_planes,
    read_reference,
    reference_path,
)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "katago")
VERSIONS = (8, 15, 17)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[dict, str]:
    """(a small random model of version 15, its ONNX file for 7x7, 9x9 and 19x19), shared by the tests that only
    read the file: an export costs a second."""
    model = km.random_model(15, seed=3, channels=8, mid=4, gpool=2, head=4)
    path = str(tmp_path_factory.mktemp("katago") / "net.onnx")
    kn.export_onnx(kn.KataGoNet(model), model, path, "random.bin.gz", board_sizes=(7, 9, 19), check=False)
    return model, path


def outputs(net, planes: np.ndarray) -> list[np.ndarray]:
    with torch.no_grad():
        return [t.numpy() for t in net(torch.from_numpy(planes))]


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def check_against_reference(net, case, policy_tolerance: float, win_tolerance: float, lead_tolerance: float):
    """Compare the network on an empty board with KataGo's reply (white's view there; black is to move)."""
    policy, value, lead, ownership, wdl, score_mean, *_ = (o[0] for o in outputs(
        net, empty_board_planes(case.size, case.komi, case.rules)))
    expected = np.append(case.policy.reshape(-1), case.policy_pass)
    assert np.abs(softmax(policy) - expected).max() <= policy_tolerance
    assert abs(wdl[1] - case.scalars["whiteWin"]) <= win_tolerance
    assert abs(wdl[0] - case.scalars["whiteLoss"]) <= win_tolerance
    assert abs(wdl[2] - case.scalars["noResult"]) <= win_tolerance
    assert abs(value - (wdl[0] - wdl[1])) <= 1e-6
    assert abs(-lead - case.scalars["whiteLead"]) <= lead_tolerance
    assert abs(-score_mean - case.scalars["whiteScoreSelfplay"]) <= lead_tolerance
    assert np.abs(-ownership.reshape(case.size, case.size) - case.ownership).max() <= 1e-5


@pytest.mark.parametrize("version", VERSIONS)
def test_random_networks_compute_what_katago_computes(version):
    net, model = kn.load(os.path.join(FIXTURES, f"random-v{version}.bin.gz"), tabula_rows=False)
    assert model["version"] == version
    cases = read_reference(os.path.join(FIXTURES, f"reference-raw-nn-random-v{version}.txt"))
    assert [case.size for case in cases] == [9, 7, 19, 2]
    for case in cases:
        # KataGo prints 6 decimals of the probabilities and 3 of the points
        check_against_reference(net, case, 2e-6, 2e-6, 1e-3)
    assert cases[2].scalars["noResult"] == 0.0  # Tromp-Taylor: positional superko, area scoring


@pytest.mark.parametrize("version", range(8, 18))
def test_written_files_read_back_the_same(version, tmp_path):
    model = km.random_model(version, seed=version, channels=8, mid=4, gpool=2, head=4)
    data = km.model_bytes(model)
    again = km.parse_model(data, "x.bin")
    assert km.model_bytes(again) == data
    assert json.dumps(km.structure(again), sort_keys=True) == json.dumps(km.structure(model), sort_keys=True)
    text = km.model_bytes(model, binary=False)
    assert km.model_bytes(km.parse_model(text, "x.txt")) == data  # text floats keep every bit of float32
    for name in ("m.bin.gz", "m.bin", "m.txt.gz", "m.txt"):
        km.write_model(model, tmp_path / name)
        assert km.model_bytes(km.read_model(tmp_path / name)) == data
    assert (tmp_path / "m.bin.gz").read_bytes()[:2] == b"\x1f\x8b"


@pytest.mark.slow
def test_the_onnx_file_agrees_with_torch_and_rebuilds(exported):
    import onnxruntime as ort

    model, path = exported
    net = kn.KataGoNet(model).eval()
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    assert meta["input_encoding"] == "katago-v7" and meta["source"] == "random.bin.gz"
    assert json.loads(meta["architecture"])["katago_version"] == 15
    assert [o.name for o in session.get_outputs()] == list(kn.OUTPUTS)
    for size in (2, 5, 13, 19):
        planes = kn.random_planes(size, 3, seed=size)
        actual = session.run(list(kn.OUTPUTS), {"planes": planes})
        assert kn.output_difference(outputs(net, planes), actual) < 1e-4
        assert actual[0].shape == (3, size * size + 1) and actual[3].shape == (3, size * size)
        assert actual[4].shape == (3, 3) and np.allclose(actual[4].sum(axis=1), 1.0, atol=1e-5)
    rebuilt = kn.load_onnx(path)
    planes = kn.random_planes(9, 2, seed=5)
    assert kn.output_difference(outputs(net, planes), outputs(rebuilt, planes)) == 0.0


def test_masks_make_a_small_board_in_a_large_input_the_board_itself():
    """KataGo's way (an on-board mask in plane 0) and Tabula's (the input is the board) give the same outputs."""
    model = km.random_model(17, seed=7, channels=8, mid=4, gpool=2, head=4)
    plain = kn.KataGoNet(model, tabula_rows=False).eval()
    masked = kn.KataGoNet(model, use_mask=True, tabula_rows=False).eval()
    small = kn.random_planes(7, 2, seed=11)
    large = np.zeros((2, kn.NUM_PLANES, 9, 9), dtype=np.float32)
    large[:, :, :7, :7] = small
    large[:, 22:] = small[:, 22:, :1, :1]  # the global features fill the input
    expected, actual = outputs(plain, small), outputs(masked, large)
    policy = actual[0][:, :81].reshape(2, 9, 9)[:, :7, :7].reshape(2, 49)
    assert np.abs(np.concatenate([policy, actual[0][:, 81:]], axis=1) - expected[0]).max() < 1e-4
    for index in (1, 2, 4, 5, 6):
        assert np.abs(actual[index] - expected[index]).max() < 1e-4
    ownership = actual[3].reshape(2, 9, 9)[:, :7, :7].reshape(2, 49)
    assert np.abs(ownership - expected[3]).max() < 1e-4


def test_tabula_rows_are_katagos_flipped():
    """In Tabula's order the network computes KataGo's symmetry 0 on the planes turned upside down, and its points
    come back in Tabula's order."""
    model = km.random_model(16, seed=9, channels=8, mid=4, gpool=2, head=4)
    tabula, katago = kn.KataGoNet(model, tabula_rows=True).eval(), kn.KataGoNet(model).eval()
    planes = kn.random_planes(6, 2, seed=3)
    expected = outputs(katago, np.ascontiguousarray(planes[:, :, ::-1]))
    actual = outputs(tabula, planes)
    flip = np.concatenate([np.arange(36).reshape(6, 6)[::-1].reshape(-1), [36]])
    assert np.abs(actual[0] - expected[0][:, flip]).max() < 1e-5
    assert np.abs(actual[3] - expected[3][:, flip[:-1]]).max() < 1e-5
    for index in (1, 2, 4, 5, 6):
        assert np.abs(actual[index] - expected[index]).max() < 1e-5


def _version_replaced(data: bytes, version: int) -> bytes:
    first, rest = data.split(b"\n", 1)
    return first + b"\n" + str(version).encode() + b"\n" + rest.split(b"\n", 1)[1]


@pytest.mark.parametrize("version", [0, 3, 5, 7, 18, 99])
def test_other_model_versions_are_refused_by_name(version):
    data = _version_replaced(km.model_bytes(km.random_model(15, channels=8, mid=4, gpool=2, head=4)), version)
    with pytest.raises(km.KataGoModelError, match=f"model version {version} is not supported"):
        km.parse_model(data, "net.bin")


def test_truncated_or_corrupt_files_raise_a_clear_error(tmp_path):
    data = km.model_bytes(km.random_model(15, channels=8, mid=4, gpool=2, head=4))
    for cut in range(0, len(data), max(1, len(data) // 97)):
        with pytest.raises(km.KataGoModelError):
            km.parse_model(data[:cut], "net.bin")
    packed = gzip.compress(data)
    for cut in (10, len(packed) // 2, len(packed) - 4):
        with pytest.raises(km.KataGoModelError, match="gzip"):
            km.parse_model(packed[:cut], "net.bin.gz")
    with pytest.raises(km.KataGoModelError, match="not a usable KataGo model"):
        km.parse_model(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, "net.bin")
    nan = data.replace(b"@BIN@", b"@BIN@\x00\x00\xc0\x7f", 1)
    with pytest.raises(km.KataGoModelError):
        km.parse_model(nan, "net.bin")
    with pytest.raises(km.KataGoModelError, match="text model read as binary|@BIN@"):
        km.parse_model(km.model_bytes(km.random_model(15, channels=8, mid=4, gpool=2, head=4), binary=False),
                       "net.bin")
    with pytest.raises(km.KataGoModelError, match="no such file|No such file"):
        km.read_model(tmp_path / "missing.bin.gz")
    (tmp_path / "empty.bin.gz").write_bytes(b"")
    with pytest.raises(km.KataGoModelError, match="empty"):
        km.read_model(tmp_path / "empty.bin.gz")


NETWORKS = {"b10c384": "b10c384h6nbttflrs.bin.gz", "g170e-b15c192": "g170e-b15c192-s1672170752-d466197061.bin.gz"}


@pytest.mark.slow
@pytest.mark.parametrize("network", sorted(NETWORKS))
def test_katagos_networks_on_the_reference_empty_boards(network):
    path = os.path.join(MODELS_DIR, NETWORKS[network])
    if not os.path.exists(path) or not os.path.exists(reference_path(network)):
        pytest.skip(f"{NETWORKS[network]} or its reference file is not on this machine")
    net, _ = kn.load(path, tabula_rows=False)
    cases = [case for case in read_reference(reference_path(network)) if case.empty]
    assert len(cases) == 4
    for case in cases:
        check_against_reference(net, case, 1e-5, 1e-5, 1e-3)


def test_the_optimistic_policy_output_is_the_policy_at_optimism_one():
    """``policy_optimistic`` is KataGo's second policy channel alone: the policy a network mixed at optimism 1 gives;
    a network of one channel (before model version 12) gives its one policy there."""
    planes = kn.random_planes(9, 3, seed=4)
    for version in (15, 8):
        model = km.random_model(version, seed=version, channels=8, mid=4, gpool=2, head=4)
        mixed, full = outputs(kn.KataGoNet(model).eval(), planes), outputs(kn.KataGoNet(model, policy_optimism=1.0)
                                                                           .eval(), planes)
        assert np.abs(mixed[7] - full[0]).max() < 1e-5
        assert np.abs(full[7] - full[0]).max() < 1e-5
        if version == 8:
            assert np.abs(mixed[7] - mixed[0]).max() < 1e-6
        else:
            assert np.abs(softmax(mixed[7]) - softmax(mixed[0])).max() > 1e-3


@pytest.mark.slow
def test_a_file_rebuilt_for_torch_mixes_its_policy_at_the_files_optimism(tmp_path):
    model = km.random_model(15, seed=6, channels=8, mid=4, gpool=2, head=4)
    net = kn.KataGoNet(model, policy_optimism=1.0).eval()
    path = str(tmp_path / "optimism1.onnx")
    kn.export_onnx(net, model, path, "random.bin.gz", board_sizes=(9,), check=False)
    rebuilt = kn.load_onnx(path)
    assert rebuilt.head.policy_optimism == 1.0
    planes = kn.random_planes(9, 2, seed=7)
    assert kn.output_difference(outputs(net, planes), outputs(rebuilt, planes)) == 0.0


def test_a_file_without_the_optimistic_policy_still_runs(exported, tmp_path):
    """A file converted before the optimistic policy was an output: the evaluator and the torch backend give what
    it has, and no optimistic policy."""
    import onnx

    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.net.torch_backend import TorchRunner
    from tabula.engine.rules.game import GameState

    _, path = exported
    proto = onnx.load(path)
    kept = [output for output in proto.graph.output if output.name != "policy_optimistic"]
    del proto.graph.output[:]
    proto.graph.output.extend(kept)
    older = str(tmp_path / "older.onnx")
    onnx.save(proto, older)
    evaluator = OnnxEvaluator(older, symmetry="identity", log=None)
    assert evaluator.extra_outputs == ("wdl", "score_mean", "score_stdev")
    evaluation = evaluator.evaluate([GameState(9)])
    assert evaluation.policy_optimistic is None and evaluation.wdl.shape == (1, 3)
    assert len(TorchRunner(older, device="cpu", precision="fp32").run(kn.random_planes(9, 2))) == 7


def test_the_torch_backend_runs_a_converted_katago_network(exported):
    from tabula.engine.net.torch_backend import TorchRunner

    model, path = exported
    planes = kn.random_planes(7, 3, seed=2)
    expected = outputs(kn.KataGoNet(model).eval(), planes)
    for precision, tolerance in (("fp32", 1e-5), ("fp16", 0.02), ("bf16", 0.05)):
        actual = TorchRunner(path, device="cpu", precision=precision).run(planes)
        assert [a.shape for a in actual] == [e.shape for e in expected]
        assert kn.output_difference(expected, actual) < tolerance, precision


@pytest.mark.slow
def test_a_katago_file_converts_once_into_the_cache(tmp_path, monkeypatch):
    import sys

    from tabula.engine.net.evaluator import katago_onnx
    from tabula.engine.net.netfile import NetworkFileError

    source = os.path.join(FIXTURES, "random-v15.bin.gz")
    assert km.looks_like_katago(source)
    assert not km.looks_like_katago(os.path.join(FIXTURES, "reference-raw-nn-random-v15.txt"))
    lines: list[str] = []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    first = katago_onnx(source, lines.append)
    assert os.path.isfile(first) and first.startswith(km.conversion_cache_dir())
    assert km.conversion_cache_dir().startswith(str(tmp_path / "xdg")) and "converted KataGo network" in lines[-1]
    assert km.converted_onnx(source, lines.append) == first
    assert "converted before" in lines[-1] and len(lines) == 2
    assert katago_onnx(first, None) == first  # an ONNX file is itself
    broken = tmp_path / "broken.bin.gz"
    broken.write_bytes(gzip.compress(gzip.decompress(open(source, "rb").read())[:5000]))
    with pytest.raises(NetworkFileError, match="broken.bin.gz.*truncated"):
        km.converted_onnx(str(broken), None, cache_dir=str(tmp_path))
    import tabula.engine.net as net_package

    monkeypatch.setitem(sys.modules, "tabula.engine.net.katago_network", None)  # as where torch is missing
    monkeypatch.delattr(net_package, "katago_network", raising=False)
    with pytest.raises(NetworkFileError, match="needs torch: pip install"):
        km.converted_onnx(source, None, cache_dir=str(tmp_path / "empty"))


def test_an_unwritable_cache_converts_into_a_folder_removed_at_exit(tmp_path, monkeypatch):
    import atexit

    from tabula.engine.net import katago_network

    def export_onnx(net, model, out, source):
        with open(out, "wb") as handle:
            handle.write(b"onnx")

    monkeypatch.setattr(katago_network, "export_onnx", export_onnx)  # the conversion itself is tested above
    at_exit = []
    monkeypatch.setattr(atexit, "register", lambda *call, **options: at_exit.append((call, options)))
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # the cache folder cannot be made under a file
    lines: list[str] = []
    target = km.converted_onnx(os.path.join(FIXTURES, "random-v15.bin.gz"), lines.append, cache_dir=str(blocked))
    assert os.path.isfile(target) and "cannot keep converted networks" in lines[0]
    [(call, options)] = at_exit
    call[0](*call[1:], **options)
    assert not os.path.exists(os.path.dirname(target))


def test_a_new_conversion_removes_other_versions_and_abandoned_scratch_files(tmp_path, monkeypatch):
    from tabula.engine.net import katago_network

    monkeypatch.setattr(katago_network, "export_onnx", lambda net, model, out, source: open(out, "wb").close())
    source = os.path.join(FIXTURES, "random-v15.bin.gz")
    target = km.converted_onnx(source, None, cache_dir=str(tmp_path))
    stem = os.path.basename(target)[: -len(f"{km.CONVERTER_VERSION}.onnx")]
    older, other_file = tmp_path / f"{stem}{km.CONVERTER_VERSION + 7}.onnx", tmp_path / "other-0123-c0.onnx"
    abandoned, running = tmp_path / "abandoned.onnx.tmp", tmp_path / "running.onnx.tmp"
    for path in (older, other_file, abandoned, running):
        path.write_bytes(b"")
    long_ago = os.path.getmtime(abandoned) - km.SCRATCH_ABANDONED_S - 60
    os.utime(abandoned, (long_ago, long_ago))
    os.remove(target)
    assert km.converted_onnx(source, None, cache_dir=str(tmp_path)) == target
    assert os.path.isfile(target) and not older.exists() and other_file.exists()
    assert not abandoned.exists() and running.exists()  # a scratch file of a conversion still running stays


def test_the_evaluator_carries_katagos_outputs_through_every_symmetry_mode(exported):
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.rules.coords import PASS
    from tabula.engine.rules.game import GameState, Rules

    model, path = exported
    states = []
    for komi, moves in ((7.5, 0), (6.5, 5), (0.5, 11)):
        state = GameState(7, Rules(komi=komi))
        for index in range(moves):
            state.play([m for m in state.legal_moves() if m != PASS][(index * 7) % 13])
        states.append(state)
    results = {}
    for mode in ("identity", "random", "average"):
        evaluator = OnnxEvaluator(path, symmetry=mode, rng=np.random.default_rng(1), log=None)
        assert evaluator.extra_outputs == ("wdl", "score_mean", "score_stdev", "policy_optimistic")
        results[mode] = evaluation = evaluator.evaluate(states)
        assert evaluation.wdl.shape == (3, 3) and evaluation.score_mean.shape == (3,)
        # the optimistic policy as the main one: masked to the legal moves and summing to 1
        legal = np.stack([state.legal_mask() for state in states])
        assert evaluation.policy_optimistic.shape == evaluation.policy.shape
        assert np.all(evaluation.policy_optimistic[~legal] == 0.0)
        assert np.allclose(evaluation.policy_optimistic.sum(axis=1), 1.0, atol=1e-5)
        assert not np.allclose(evaluation.policy_optimistic, evaluation.policy, atol=1e-4)
        assert evaluation.score_stdev.shape == (3,) and evaluation.ownership.shape == (3, 49)
        assert np.allclose(evaluation.wdl.sum(axis=1), 1.0, atol=1e-5)
        assert np.allclose(evaluation.value, evaluation.wdl[:, 0] - evaluation.wdl[:, 1], atol=1e-5)
    identity, average = results["identity"], results["average"]
    # the raw network on the identity's planes gives the identity's outputs
    raw = outputs(kn.KataGoNet(model).eval(), evaluator.encoding.encode_batch(states, None))
    assert np.abs(identity.wdl - raw[4]).max() < 1e-5 and np.abs(identity.score_mean - raw[5]).max() < 1e-4
    assert np.abs(identity.score_stdev - raw[6]).max() < 1e-4
    legal = np.stack([state.legal_mask() for state in states])
    expected = softmax(np.where(legal, raw[7], -np.inf))
    assert np.abs(identity.policy_optimistic - expected).max() < 1e-5
    # the average of the 8 symmetries: per-position outputs averaged, not taken from one of them
    assert not np.allclose(average.wdl, identity.wdl, atol=1e-7)


@pytest.mark.slow
def test_int8_preparation_of_a_katago_network(exported, tmp_path):
    """int8 of a converted KataGo network: the one convolution that reads the input planes is the first (the
    mask-multiplied trunk is no input), and each transformer's value and SwiGLU products are rescaled per channel
    so that the network computes the same in fp32 while its weights change."""
    import onnx
    import onnxruntime as ort

    from tabula.engine.net.comparison import comparison_planes
    from tabula.engine.net.encodings import encoding_named
    from tabula.tools.learn.export import input_convolutions, katago_fp32_nodes, smooth_for_int8, smoothing_pairs

    _, path = exported
    graph = onnx.load(path).graph
    assert input_convolutions(graph) == ["/initial_conv/conv/Conv"]
    kept = set(katago_fp32_nodes(6)(graph))  # 6 blocks: the last 2 fp32
    assert {"/initial_conv/conv/Conv", "/blocks.2/pre_conv/conv/Conv", "/blocks.2/blocks.1/MatMul",
            "/blocks.4/gate/MatMul", "/blocks.5/post_conv/conv/Conv"} <= kept
    assert not kept & {"/blocks.0/regular/conv/Conv", "/blocks.2/post_conv/conv/Conv", "/blocks.3/q_proj/MatMul"}
    pairs = smoothing_pairs(graph)
    # 3 SwiGLU blocks (gate, linear2) and 2 of the 3 attention blocks (value, output): block 3 shares each value
    # head between two heads (grouped key/value heads), its output projection reading more channels than the values
    assert len(pairs) == 5 and "blocks.3.v_proj.weight" not in {down for down, _, _ in pairs}
    encoding = encoding_named("katago-v7")
    calibration = {9: comparison_planes(9, count=8, encoding=encoding)}
    out = str(tmp_path / "smoothed.onnx")
    assert smooth_for_int8(path, out, calibration) == 5
    before = {t.name: onnx.numpy_helper.to_array(t) for t in graph.initializer}
    after = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
    assert all(not np.allclose(before[down], after[down]) and not np.allclose(before[up], after[up])
               for down, up, _ in pairs)
    planes = comparison_planes(9, count=4, seed=5, encoding=encoding)
    runs = [ort.InferenceSession(file, providers=["CPUExecutionProvider"]).run(["policy", "value"], {"planes": planes})
            for file in (path, out)]
    assert np.abs(runs[0][0] - runs[1][0]).max() < 1e-4 and np.abs(runs[0][1] - runs[1][1]).max() < 1e-5


def test_int8_calibration_draws_the_komi_for_every_encoding_that_reads_it():
    """int8 layers calibrated at the games' one komi clip every other komi to that one's value (a teacher's labels
    beyond it were all alike): the calibration positions draw the komi from -20 to 20 for katago-v7's and
    tabula-v2's komi among the globals as for the komi plane of leelaz-18+komi."""
    from tabula.engine.net.encodings import encoding_named
    from tabula.tools.learn.export import calibration_planes

    for name in ("katago-v7", "tabula-v2", "leelaz-18+komi"):
        komi = calibration_planes(9, 16, seed=1, source="random", encoding=name)[
            :, encoding_named(name).plane_names.index("komi"), 0, 0]
        assert komi.max() == -komi.min() > 0 and len(np.unique(komi)) > 6, name


@pytest.mark.slow
def test_tabula_export_from_katago(tmp_path, capsys):
    from tabula.tools.learn import export

    out = tmp_path / "net.onnx"
    assert export.main(["--from-katago", os.path.join(FIXTURES, "random-v8.bin.gz"), str(out), "--no-int8"]) == 0
    assert "KataGo model version 8" in capsys.readouterr().err
    assert kn.load_onnx(str(out)).version == 8 and not (tmp_path / "net-int8.onnx").exists()
    broken = tmp_path / "broken.bin"
    broken.write_bytes(km.model_bytes(km.random_model(15, channels=8, mid=4, gpool=2, head=4))[:3000])
    with pytest.raises(SystemExit, match="broken.bin: not a usable KataGo model.*truncated"):
        export.main(["--from-katago", str(broken), str(tmp_path / "x.onnx")])


@pytest.mark.slow
def test_tabula_export_from_katago_writes_int8_only_where_it_agrees(tmp_path, capsys):
    from tabula.tools.learn import export

    out = tmp_path / "net.onnx"
    assert export.main(["--from-katago", os.path.join(FIXTURES, "random-v17.bin.gz"), str(out),
                        "--calibration", "16", "--agreement-positions", "10", "--calibration-source", "random"]) == 0
    message = capsys.readouterr().err
    assert ("wrote " + str(tmp_path / "net-int8.onnx")) in message or "no int8 file" in message
    assert (tmp_path / "net-int8.onnx").exists() == ("no int8 file" not in message)
    assert "top move the same on" in message


@pytest.mark.slow
def test_damaged_files_raise_the_models_error_or_parse():
    """Bytes changed anywhere in a file: KataGoModelError, or a model that still checks out; nothing else."""
    model = km.random_model(17, channels=4, mid=2, gpool=2, head=2)
    rng = np.random.default_rng(0)
    for binary, name in ((True, "net.bin"), (False, "net.txt")):
        data = km.model_bytes(model, binary=binary)
        # where the headers are: before each @BIN@ block, or each line that is not a row of floats
        starts = [m.start() for m in re.finditer(rb"[a-zA-Z_]", data)] if binary else list(range(len(data)))
        for _ in range(150):
            damaged = bytearray(data)
            for position in rng.choice(starts, int(rng.integers(1, 4))):
                damaged[position] = int(rng.integers(0, 256))
            try:
                km.parse_model(bytes(damaged), name)
            except km.KataGoModelError:
                pass

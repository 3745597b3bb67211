"""The distilled student's input encodings: label files store the student's planes of leelaz-18+komi, katago-v7 or
tabula-v2 exactly as the encoders give them; a run keeps one encoding and refuses labels of another; a tabula-v2
student taught by a KataGo-format network trains, resumes, exports and plays through the GTP engine; and a Tabula
network reading katago-v7 is not taken for KataGo's."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net import features  # noqa: E402
from tabula.engine.net.encodings import TABULA_V2, encoding_named, plane_indices  # noqa: E402
from tabula.engine.rules.coords import PASS  # noqa: E402
from tabula.engine.rules.game import GameState, handicap_points, parse_rules  # noqa: E402
from tabula.tools.learn import distill, teacher  # noqa: E402
from tests.conftest_network import random_game  # noqa: E402

ENCODINGS = teacher.STUDENT_ENCODINGS
QUIET = dict(log=lambda *_: None)


def varied_states(size: int = 9) -> list[GameState]:
    """Positions under several rules and komis, both colours to move, a handicap, a pass and a capture or two."""
    states = random_game(size, 70, seed=7)[4::11]
    for rules, komi, moves in (("japanese", 6.5, 12), ("chinese", 0.5, 7), ("tromp-taylor", -3.0, 9),
                               ("aga", 7.5, 0)):
        state = GameState(size, parse_rules(rules, komi))
        if rules == "chinese":
            state.place_handicap(handicap_points(size, 3))
        for move in random_game(size, moves, seed=len(rules))[-1].moves:
            state.play(move[1] if move[1] == PASS or state.legal(move[1]) else PASS)
        states.append(state)
    states[-2].play(PASS)
    return states


def fake_labels(states: list[GameState], encoding: str) -> dict[str, np.ndarray]:
    """A label file's arrays for ``states`` without a teacher: the planes real, the rest uniform."""
    count = len(states)
    points = states[0].size ** 2
    return {**teacher.encode_positions(states, encoding),
            **teacher.sparse_policy(np.full((count, points + 1), 1.0 / (points + 1), np.float32)),
            "value": np.zeros(count, np.float16), "wdl": np.zeros((count, 3), np.uint8),
            "score": np.zeros(count, np.float16), "score_mean": np.zeros(count, np.float16),
            "score_stdev": np.zeros(count, np.float16), "ownership": np.zeros((count, points), np.int8),
            "outcome": np.zeros(count, np.int8), "outcome_weight": np.zeros(count, np.uint8),
            "margin": np.full(count, np.nan, np.float16), "source": np.zeros(count, np.uint8),
            "visits": np.zeros(count, np.uint16)}


@pytest.fixture(scope="module")
def katago_teacher(tmp_path_factory) -> str:
    """A small random KataGo network (model version 15) as the ONNX file Tabula converts KataGo's files to."""
    from tabula.engine.net import katago_model, katago_network

    model = katago_model.random_model(15, seed=3, channels=8, mid=4, gpool=2, head=4)
    path = str(tmp_path_factory.mktemp("katago") / "teacher.onnx")
    katago_network.export_onnx(katago_network.KataGoNet(model), model, path, "random.bin.gz", board_sizes=(9,),
                               check=False)
    return path


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_stored_planes_are_the_encoders_exactly(encoding, tmp_path):
    states = varied_states()
    expected = encoding_named(encoding).encode_batch(states, None)
    path = str(tmp_path / "chunk-000000-9x9.npz")
    written = teacher.write_labels(path, 9, fake_labels(states, encoding), "none", encoding)
    size, back = teacher.read_labels(path, encoding)
    assert size == 9 and np.array_equal(teacher.decode_planes(back, 9, encoding=encoding), expected)
    rows = np.array([3, 0, 3])
    assert np.array_equal(teacher.decode_planes(back, 9, rows, encoding), expected[rows])
    assert written / len(states) < 2000
    other = next(e for e in ENCODINGS if e != encoding)
    with pytest.raises(teacher.LabelEncodingError, match=f"labels of the {re.escape(encoding)} encoding"):
        teacher.read_labels(path, other)


def test_tabula_v2_is_katago_v7_then_the_reading_features():
    states = varied_states(13)
    v2 = encoding_named(TABULA_V2)
    planes = v2.encode_batch(states, np.arange(len(states)) % 8)
    assert v2.planes == len(v2.plane_names) == len(set(v2.plane_names)) > 41
    assert np.array_equal(planes[:, :41], encoding_named("katago-v7").encode_batch(states, np.arange(len(states)) % 8))
    assert v2.extends == "katago-v7" and v2.size_planes == (0, 1) and v2.komi_plane is None
    assert v2.board_sizes == tuple(range(2, 26))
    wide = random_game(25, 30, seed=1)[-1]  # past KataGo's 19x19: the features are computed for any board
    assert v2.encode_batch([wide], None).shape == (1, v2.planes, 25, 25)
    assert plane_indices(v2, "komi, 0,ladder_escape") == [27, 0, v2.plane_names.index("ladder_escape")]
    with pytest.raises(ValueError, match="has no plane 'nonsense'"):
        plane_indices(v2, "nonsense")


def test_first_format_files_read_as_leelaz_komi_and_changed_layouts_are_refused(tmp_path):
    states = varied_states()
    planes = features.encode_batch(states, None)
    labels = fake_labels(states, features.KOMI_INPUT_ENCODING)
    old = {name: array for name, array in labels.items() if not name.startswith("planes_")}
    old["stones"] = np.packbits(planes[:, :16].astype(np.uint8).reshape(len(states), 16, -1), axis=-1)
    old["black_to_move"] = planes[:, 16, 0, 0].astype(np.uint8)
    np.savez_compressed(tmp_path / "old.npz", size=np.array(9), format=np.array(1), **old)
    _, back = teacher.read_labels(str(tmp_path / "old.npz"), features.KOMI_INPUT_ENCODING)
    assert np.array_equal(teacher.decode_planes(back, 9, encoding=features.KOMI_INPUT_ENCODING),
                          features.encode_batch_with_komi(states))
    with pytest.raises(teacher.LabelEncodingError):
        teacher.read_labels(str(tmp_path / "old.npz"), "katago-v7")
    path = str(tmp_path / "new.npz")
    teacher.write_labels(path, 9, fake_labels(states, "katago-v7"), "none", "katago-v7")
    with np.load(path) as data:
        entries = {name: data[name] for name in data.files}
    layout = json.loads(str(entries["layout"]))
    for key, changed in (("constant", layout["constant"][:-1]), ("names", layout["names"][::-1])):
        entries["layout"] = np.array(json.dumps({**layout, key: changed}))  # an encoding whose planes changed since
        np.savez_compressed(path, **entries)
        with pytest.raises(teacher.LabelError, match="label it again"):
            teacher.read_labels(path, "katago-v7")


def test_a_katago_teacher_encodes_once_for_itself_and_a_tabula_v2_student(katago_teacher):
    labeller = teacher.Teacher(katago_teacher, threads=1, batch=3, student_encoding=TABULA_V2)
    assert labeller.shares_planes and labeller.evaluator.katago_network
    chosen = [teacher.Position(s) for s in varied_states()]
    shared = labeller.label(chosen)
    labeller.shares_planes = False
    apart = labeller.label(chosen)
    for name, array in apart.items():
        assert np.array_equal(shared[name], array, equal_nan=True), name
    planes = teacher.decode_planes(shared, 9, encoding=TABULA_V2)
    assert np.array_equal(planes, encoding_named(TABULA_V2).encode_batch([p.state for p in chosen], None))
    with pytest.raises(teacher.LabelError, match="unknown student encoding"):
        teacher.Teacher(katago_teacher, student_encoding="leelaz-18")


def run_config(teacher_path, run, **changes) -> distill.DistillConfig:
    settings = dict(teacher=str(teacher_path), run=str(run), student_arch="1x8", sizes="9", selfplay_games=2,
                    keep=0.5, steps_per_chunk=2, batch=8, threads=1, teacher_threads=1, export=False, chunks=1,
                    student_encoding=TABULA_V2)
    settings.update(changes)
    return distill.DistillConfig(**settings)


def test_a_tabula_v2_student_trains_resumes_exports_and_plays(katago_teacher, tmp_path):
    from tabula.engine.config import EngineConfig, NetConfig, SearchConfig
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.play.player import Player
    from tabula.gtp.__main__ import load_extensions
    from tabula.gtp.commands import Session

    run = tmp_path / "run"
    assert distill.distill(run_config(katago_teacher, run), **QUIET)["step"] == 2
    last = distill.distill(run_config(katago_teacher, run, chunks=2, export=True), **QUIET)
    assert last["step"] == 4 and last["chunk"] == 2 and math.isfinite(last["fresh_policy_kl"])
    for path in (run / "labels").iterdir():  # the student's planes, as its encoder gives them
        teacher.read_labels(str(path), TABULA_V2)
    with pytest.raises(SystemExit, match="student_encoding"):  # a run keeps its encoding
        distill.distill(run_config(katago_teacher, run, chunks=3, student_encoding="katago-v7"), **QUIET)
    student = OnnxEvaluator(run / "model.onnx", provider="cpu", log=None)
    spec = json.loads(student.metadata["architecture"])
    assert student.encoding.name == TABULA_V2 and not student.katago_network and student.has_score_and_ownership
    assert spec["aux"] and not any(spec.get(flag) for flag in ("small_board_value", "small_board_komi"))
    assert "komi_reference" not in spec  # no grafted komi terms: the komi is among the globals
    load_extensions()
    config = EngineConfig(board_size=9, player="search", seed=5, search=SearchConfig(threads=1, visits=16),
                          net=NetConfig(weights=(str(run / "model.onnx"),), threads=1))
    session = Session(player=Player.from_config(config), config=config)
    assert session.dispatch("komi 6.5").startswith("=")
    assert session.dispatch("genmove b").startswith("= ")
    lines = session.dispatch("kata-genmove_analyze w 1 ownership true").split("\n")
    assert lines[-3].startswith("play ") and "scoreLead" in lines[-4]
    raw = session.dispatch("kata-raw-nn 0")
    assert raw.startswith("= ") and "whiteLead" in raw and "whiteOwnership" in raw


def test_a_window_of_another_encoding_is_refused(tiny_aux_onnx, tmp_path):
    labels = tmp_path / "run" / "labels"
    labels.mkdir(parents=True)
    states = varied_states()
    teacher.write_labels(str(labels / "chunk-000000-9x9.npz"), 9, fake_labels(states, "katago-v7"), "t", "katago-v7")
    teacher.write_labels(str(labels / "chunk-000001-9x9.npz"), 9, fake_labels(states, TABULA_V2), "t", TABULA_V2)
    with pytest.raises(teacher.LabelEncodingError, match="chunk-000000-9x9.npz: labels of the katago-v7 encoding"):
        distill.LabelWindow(str(labels), 1000, TABULA_V2)
    with pytest.raises(SystemExit, match="labels of the katago-v7 encoding, and this student reads tabula-v2"):
        distill.distill(run_config(tiny_aux_onnx, tmp_path / "run"), **QUIET)
    (labels / "chunk-000000-9x9.npz").unlink()
    window = distill.LabelWindow(str(labels), 1000, TABULA_V2, [27, 51])
    batch = window.batch(1, 0, 6)
    planes = batch["planes"].numpy()
    assert planes.shape == (6, 52, 9, 9) and not planes[:, [27, 51]].any() and planes[:, 0].all()


def test_zeroed_planes_are_named_or_numbered_and_never_the_boards_size(tiny_aux_onnx, tmp_path):
    config = run_config(tiny_aux_onnx, tmp_path / "r", zero_planes="own_eye, 27,ladder_escape")
    assert distill.zeroed_planes(config) == [51, 27, 50]
    for chosen, message in (("on_board", "board's size"), ("sideways", "no plane 'sideways'"), ("52", "no plane")):
        with pytest.raises(ValueError, match=message):
            distill.zeroed_planes(run_config(tiny_aux_onnx, tmp_path / "r", zero_planes=chosen))
    with pytest.raises(ValueError, match="board's size"):  # leelaz-18's side to move tells it the size
        distill.zeroed_planes(run_config(tiny_aux_onnx, tmp_path / "r", student_encoding="leelaz-18+komi",
                                         zero_planes="black_to_move"))
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--zero-planes", "x"])
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--student-encoding",
                            "leelaz-18"])
    parsed = distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r")])
    assert parsed.student_encoding == TABULA_V2 and distill.student_spec(parsed).encoding.komi_plane is None


def test_a_tabula_network_of_katago_v7_is_not_taken_for_katagos(katago_teacher, tmp_path):
    """Its outputs are Tabula's and its rows Tabula's: kata-raw-nn's symmetry 0 is its identity (a KataGo network's
    is the rows flipped), and the torch backend runs it as a Tabula network."""
    from tabula.engine.config import EngineConfig, NetConfig
    from tabula.engine.net.evaluator import OnnxEvaluator
    from tabula.engine.net.network import POOLED, NetSpec, export_onnx, random_network
    from tabula.engine.net.torch_backend import TorchRunner
    from tabula.engine.play.player import Player
    from tabula.gtp.__main__ import load_extensions
    from tabula.gtp.commands import Session
    from tabula.tools.check.raw_nn_compare import parse_reply

    encoding = encoding_named("katago-v7")
    spec = NetSpec(blocks=1, filters=8, head=POOLED, head_channels=8, aux=True, input_encoding=encoding.name)
    model = random_network(spec, seed=4, calibration=[encoding.encode_batch(random_game(9, 50, seed=3), None)])
    path = tmp_path / "student.onnx"
    export_onnx(model, path, "tests: random seed 4", board_sizes=[9])
    student = OnnxEvaluator(path, provider="cpu", log=None)
    assert not student.katago_network and OnnxEvaluator(katago_teacher, provider="cpu", log=None).katago_network
    import onnx

    from tabula.engine.net.netfile import NetworkFileError
    from tabula.engine.net.network import set_metadata

    proto = onnx.load(str(path))
    metadata = {p.key: p.value for p in proto.metadata_props}
    assert metadata["input_planes"].split(",") == list(encoding.plane_names)
    set_metadata(proto, {**metadata, "input_planes": metadata["input_planes"].replace("ko_ban", "ko")})
    onnx.save(proto, str(tmp_path / "other.onnx"))
    with pytest.raises(NetworkFileError, match="another version of the encoding"):  # planes renamed since
        OnnxEvaluator(tmp_path / "other.onnx", provider="cpu", log=None)
    load_extensions()
    config = EngineConfig(board_size=9, player="search", seed=5, net=NetConfig(weights=(str(path),), threads=1))
    session = Session(player=Player.from_config(config), config=config)
    for move in ("b C3", "w G7", "b D7", "w C6"):  # no symmetry of the board maps it to itself
        assert session.dispatch(f"play {move}").startswith("=")
    reply = parse_reply(session.dispatch("kata-raw-nn 0")[2:].rstrip("\n").split("\n"), 9)
    state = session.player.state
    ours = np.flipud(reply.policy).reshape(-1)  # KataGo prints the top row first
    legal = ~np.isnan(ours)
    identity = student.evaluate_symmetry([state], 0).policy[0, :81]
    flipped = student.evaluate_symmetry([state], 1).policy[0, :81]
    assert np.allclose(ours[legal], identity[legal], atol=2e-6)
    assert not np.allclose(ours[legal], flipped[legal], atol=1e-3)
    planes = encoding.encode_batch([state], None)
    runner = TorchRunner(str(path), device="cpu", precision="fp32")
    assert not runner.katago and runner.aux
    for ours_out, theirs in zip(runner.run(planes), student._run_session(planes)):
        assert np.allclose(ours_out, theirs, atol=1e-4)


def test_a_run_begun_before_student_encodings_is_told_its_encoding(tiny_aux_onnx, tmp_path):
    run = tmp_path / "old"
    distill.distill(run_config(tiny_aux_onnx, run, student_encoding="leelaz-18+komi", selfplay_games=1), **QUIET)
    saved = json.loads((run / "config.json").read_text())
    for name in ("student_encoding", "zero_planes"):  # what such a run's settings lack
        del saved[name]
    (run / "config.json").write_text(json.dumps(saved))
    with pytest.raises(SystemExit, match=r"reads leelaz-18\+komi: go on with --student-encoding leelaz-18\+komi"):
        distill.distill(run_config(tiny_aux_onnx, run, chunks=2, selfplay_games=1), **QUIET)
    assert distill.distill(run_config(tiny_aux_onnx, run, chunks=2, selfplay_games=1,
                                      student_encoding="leelaz-18+komi"), **QUIET)["step"] == 4


def test_labels_from_another_run_repeat_its_training_and_serve_an_ablation(tiny_aux_onnx, tmp_path):
    source = tmp_path / "a" / "labels"
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "a", chunks=2), **QUIET)
    # as if run a had labelled 7 games of records: a run that took all its chunks labels on from the 8th
    first = torch.load(tmp_path / "a" / "checkpoint.pt", weights_only=True)
    torch.save({**first, "records_cursor": 7}, tmp_path / "a" / "checkpoint.pt")
    again = distill.distill(run_config(tiny_aux_onnx, tmp_path / "b", chunks=3, labels_from=str(source)), **QUIET)
    assert again["step"] == 4 and again["chunk"] == 2 and again["reason"] == "no positions left"
    assert torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)["records_cursor"] == 7
    assert sorted(p.name for p in (tmp_path / "b" / "labels").iterdir()) == sorted(p.name for p in source.iterdir())
    states = [torch.load(tmp_path / run / "checkpoint.pt", weights_only=True)["state_dict"] for run in "ab"]
    assert all(torch.equal(states[0][name], states[1][name]) for name in states[0])  # the same training, bit for bit
    ablated = distill.distill(run_config(tiny_aux_onnx, tmp_path / "c", chunks=2, labels_from=str(source),
                                         zero_planes="own_eye,ladder_escape"), **QUIET)
    assert ablated["step"] == 4 and math.isfinite(ablated["fresh_policy_kl"])
    zeroed = torch.load(tmp_path / "c" / "checkpoint.pt", weights_only=True)["state_dict"]
    assert not torch.equal(zeroed["input.conv.weight"], states[0]["input.conv.weight"])
    with pytest.raises(SystemExit, match="labels of the tabula-v2 encoding, and this student reads katago-v7"):
        distill.distill(run_config(tiny_aux_onnx, tmp_path / "d", labels_from=str(source),
                                   student_encoding="katago-v7"), **QUIET)
    assert not list((tmp_path / "d" / "labels").iterdir())  # refused before anything was copied
    with pytest.raises(ValueError, match="no such directory"):
        distill.check(run_config(tiny_aux_onnx, tmp_path / "e", labels_from=str(tmp_path / "missing")))
    with pytest.raises(ValueError, match="another run's"):
        distill.check(run_config(tiny_aux_onnx, tmp_path / "a", labels_from=str(source)))

"""Teacher labels and `tabula distill`: a tiny teacher labels positions (with and without a search), the stored
labels read back as written, a chunk trains and a resumed run is the uninterrupted one bit for bit, and the
distillation loss falls on a batch it sees again and again."""
from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tabula.engine.net import features  # noqa: E402
from tabula.engine.net.encodings import encoding_named  # noqa: E402
from tabula.engine.rules.coords import BLACK  # noqa: E402
from tabula.engine.rules.game import GameState, Rules  # noqa: E402
from tabula.tools.compete.results import read_jsonl_text  # noqa: E402
from tabula.tools.learn import distill, teacher  # noqa: E402
from tests.conftest_network import random_game  # noqa: E402
from tests.records_helpers import game_sgf, play_game  # noqa: E402


def positions(size: int = 9, count: int = 6) -> list[teacher.Position]:
    states = random_game(size, 40, seed=5)[::max(1, 40 // count)][:count]
    return [teacher.Position(s) for s in states]


def test_a_tiny_teacher_labels_positions(tiny_aux_onnx):
    labeller = teacher.Teacher(str(tiny_aux_onnx), threads=1, batch=4)
    chosen = positions()
    labels = labeller.label(chosen)
    count = len(chosen)
    assert set(teacher.LABEL_FIELDS) <= set(labels) and all(len(a) == count for a in labels.values())
    policy = teacher.dense_policy(labels, 82)
    assert policy.shape == (count, 82) and np.allclose(policy.sum(axis=1), 1.0, atol=1e-5)
    raw = labeller.evaluate([p.state for p in chosen])  # two network calls of at most 4, joined
    assert raw.policy.shape == (count, 82)
    assert np.allclose(labels["value"].astype(np.float32), raw.value, atol=1e-3)
    wdl = labels["wdl"].astype(np.float32) / 255
    assert np.allclose(wdl[:, 0] - wdl[:, 1], raw.value, atol=0.01) and np.all(labels["wdl"][:, 2] == 0)
    assert np.allclose(labels["ownership"] / teacher.OWNERSHIP_LEVELS, raw.ownership, atol=0.5 / 16 + 1e-6)
    assert np.allclose(labels["score"].astype(np.float32), raw.score, atol=0.05)
    # the likeliest move keeps its place, its share within the quantization of the top moves kept
    assert np.array_equal(policy.argmax(axis=1), raw.policy.argmax(axis=1))


def test_a_searching_teacher_labels_with_the_root_visits(tiny_aux_onnx):
    labeller = teacher.Teacher(str(tiny_aux_onnx), visits=12, threads=1)
    labels = labeller.label(positions(count=2))
    assert np.all(labels["visits"] == 12)
    moves, probs = labels["policy_moves"], labels["policy_probs"]
    assert np.all(probs.astype(int).sum(axis=1) >= 250)  # the visit shares, in 255ths of those kept
    assert np.all((moves != teacher.NO_MOVE).sum(axis=1) <= 12)  # no more moves than visits
    assert np.all(np.abs(labels["value"].astype(np.float32)) <= 1.0)
    together = teacher.Teacher(str(tiny_aux_onnx), visits=12, threads=1, search_parallel=2).label(positions(count=2))
    for name in ("policy_moves", "policy_probs", "value"):  # the same searches, their network calls batched
        assert np.array_equal(together[name], labels[name]), name


def test_stored_labels_read_back_as_written(tiny_aux_onnx, tmp_path):
    chosen = positions(size=13, count=5)
    labels = teacher.Teacher(str(tiny_aux_onnx), threads=1).label(chosen)
    path = str(tmp_path / "chunk-000000-13x13.npz")
    written = teacher.write_labels(path, 13, labels, "tiny")
    size, back = teacher.read_labels(path)
    assert size == 13 and set(back) == set(labels)
    for name, array in labels.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array, equal_nan=True), name
    planes = teacher.decode_planes(back, 13)  # the default student's: tabula-v2
    assert np.array_equal(planes, encoding_named("tabula-v2").encode_batch([p.state for p in chosen], None))
    assert np.allclose(back["komi"].astype(np.float32), [features.komi_points(p.state) for p in chosen])
    one = teacher.write_labels(str(tmp_path / "one.npz"), 13, {k: v[:1] for k, v in labels.items()}, "tiny")
    assert (written - one) / (len(chosen) - 1) < 600  # compact: the planes packed, all compressed (headers aside)
    (tmp_path / "one.npz").unlink()
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(teacher.LabelError):
        teacher.read_labels(str(tmp_path / "bad.npz"))
    np.savez_compressed(tmp_path / "old.npz", size=np.array(13), **labels)  # a file of no format: an older one
    with pytest.raises(teacher.LabelError, match="label format 0"):
        teacher.read_labels(str(tmp_path / "old.npz"))
    window = distill.LabelWindow(str(tmp_path), 1000)  # the readable file, and the others named
    assert window.size == len(chosen) and len(window.skipped) == 2


def test_the_sparse_policy_keeps_the_likeliest_moves():
    policy = np.zeros((2, 82), np.float32)
    policy[0, [3, 10, 81]] = [0.5, 0.3, 0.2]
    policy[1] = 1.0 / 82
    stored = teacher.sparse_policy(policy)
    dense = teacher.dense_policy(stored, 82)
    assert np.allclose(dense[0], policy[0], atol=0.003)
    assert (dense[1] > 0).sum() == teacher.POLICY_TOP and np.isclose(dense[1].sum(), 1.0)


def test_record_positions_carry_the_result_from_the_side_to_moves_view(tmp_path):
    for game in range(3):
        (tmp_path / f"g{game}.sgf").write_bytes(game_sgf(play_game(game, moves=40), result="B+3.5", komi=6.5))
    source = teacher.RecordPositions([str(tmp_path)], per_game=2, seed=1)
    taken = source.take(4)
    assert len(taken) == 4 and source.cursor == 2
    for position in taken:
        sign = 1.0 if position.state.to_move == BLACK else -1.0
        assert position.outcome == sign and position.outcome_weight == 1.0 and position.margin == 3.5 * sign
    resumed = teacher.RecordPositions([str(tmp_path)], per_game=2, seed=1, cursor=2)
    (last,) = [p for p in resumed.take(1)][:1]
    again = source.take(1)[0]
    assert last.state.moves == again.state.moves  # the same game, the same position drawn


def test_repeated_records_go_round_again_with_new_positions(tmp_path):
    for game in range(2):
        (tmp_path / f"g{game}.sgf").write_bytes(game_sgf(play_game(game, moves=40), result="B+3.5"))
    source = teacher.RecordPositions([str(tmp_path)], per_game=3, seed=1, repeat=True)
    first, second = source.take(6), source.take(6)  # both games, then both again
    assert len(first) == len(second) == 6 and source.cursor == 4 and not source.exhausted
    assert [len(p.state.moves) for p in first] != [len(p.state.moves) for p in second]  # other draws
    resumed = teacher.RecordPositions([str(tmp_path)], per_game=3, seed=1, cursor=4, repeat=True)
    assert [p.state.moves for p in resumed.take(3)] == [p.state.moves for p in source.take(3)]
    late = teacher.RecordPositions([str(tmp_path)], per_game=3, seed=1, cursor=1001, repeat=True)
    assert late._reader.report.read <= 4  # whole passes skipped unread: game 1001 is the second game again
    second_game = play_game(1, moves=40)
    assert all([m for _, m in p.state.moves] == second_game[:len(p.state.moves)] for p in late.take(3))
    empty = tmp_path / "none"
    empty.mkdir()
    nothing = teacher.RecordPositions([str(empty)], repeat=True)
    assert nothing.take(4) == [] and nothing.exhausted  # a set with no game ends rather than looping


def test_handicap_records_are_read_at_the_bonuses_given_and_lose_their_count(tmp_path):
    from tests.records_helpers import handicap_sgf

    for game in range(6):
        (tmp_path / f"h{game}.sgf").write_bytes(handicap_sgf(game).replace(b"RE[W+R]", b"RE[W+4.5]"))
    plain = teacher.RecordPositions([str(tmp_path)], per_game=2).take(12)
    assert {p.state.rules.white_handicap_bonus for p in plain} == {"0"} and all(p.margin == p.margin for p in plain)
    read = teacher.RecordPositions([str(tmp_path)], per_game=2, bonuses=("N", "N-1")).take(12)
    assert {p.state.rules.white_handicap_bonus for p in read} == {"N", "N-1"}
    assert all(p.state.handicap == 2 and p.state.rules.komi == 0.5 for p in read)
    assert all(math.isnan(p.margin) and p.outcome_weight == 1.0 for p in read)  # who won stays; the count goes


def test_labelling_stops_before_the_chunk_needs_the_rest_of_the_time():
    assert distill.labelling_deadline(100.0, 0, 30.0) == math.inf  # no time limit
    assert distill.labelling_deadline(100.0, 10, 0.0) == 100.0 + 480  # no chunk trained yet: at 80%
    # then twice the last chunk's training before the end, late in a run of small chunks as early in a big one's
    assert distill.labelling_deadline(100.0, 125, 20.0) == 100.0 + 7500 - 40
    assert distill.labelling_deadline(100.0, 10, 200.0) == 100.0 + 600 - 400


def test_self_play_positions_vary_size_komi_and_handicap(tiny_aux_onnx):
    labeller = teacher.Teacher(str(tiny_aux_onnx), threads=1)
    settings = teacher.SelfPlaySettings(sizes=(9, 13), handicap_fraction=0.5, max_handicap=4, keep=0.5,
                                        max_moves_factor=0.5)
    source = teacher.SelfPlayPositions(labeller, settings, seed=3, board_sizes=labeller.board_sizes)
    games = [source.new_game(np.random.default_rng([3, 0, g])) for g in range(24)]
    assert {g.size for g in games} == {9, 13}
    assert any(g.handicap for g in games) and len({g.rules.komi for g in games}) > 2
    # handicap games under each white handicap bonus, so the komi the network reads varies with the rules too
    handicapped = [g for g in games if g.handicap]
    assert {g.rules.white_handicap_bonus for g in handicapped} == {"0", "N", "N-1"}
    for g in handicapped:
        assert g.counted_komi == 0.5 + {"0": 0, "N": g.handicap, "N-1": g.handicap - 1}[g.rules.white_handicap_bonus]
    assert all(g.rules.white_handicap_bonus == "0" for g in games if not g.handicap)
    taken = source.take(0, 4)
    again = source.take(0, 4)
    assert source.take(0, 4, deadline=0.0) == {}  # past its deadline, a chunk plays nothing
    for size, (chosen, evaluations) in taken.items():
        assert len(chosen) == len(evaluations) and all(p.state.size == size for p in chosen)
        assert [p.state.moves for p in chosen] == [p.state.moves for p in again[size][0]]  # fixed by seed, chunk
        labels = labeller.label(chosen, teacher.join_evaluations(evaluations))
        assert len(labels["value"]) == len(chosen)


def run_config(teacher_path, run, **changes) -> distill.DistillConfig:
    settings = dict(teacher=str(teacher_path), run=str(run), student_arch="1x8", sizes="9", selfplay_games=3,
                    keep=0.5, steps_per_chunk=2, batch=8, threads=1, teacher_threads=1, export=False, chunks=1)
    settings.update(changes)
    return distill.DistillConfig(**settings)


@pytest.mark.slow
def test_a_distill_chunk_trains_and_resumes_exactly(tiny_aux_onnx, tmp_path):
    quiet = dict(log=lambda *_: None)
    whole = distill.distill(run_config(tiny_aux_onnx, tmp_path / "whole", chunks=2), **quiet)
    first = distill.distill(run_config(tiny_aux_onnx, tmp_path / "parts", chunks=1), **quiet)
    assert first["chunk"] == 1 and first["step"] == 2
    resumed = distill.distill(run_config(tiny_aux_onnx, tmp_path / "parts", chunks=2), **quiet)
    assert whole["step"] == resumed["step"] == 4 and whole["chunk"] == resumed["chunk"] == 2
    a = torch.load(tmp_path / "whole" / "checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "parts" / "checkpoint.pt", weights_only=True)
    for name, tensor in a["state_dict"].items():
        assert torch.equal(tensor, b["state_dict"][name]), name
    for key, state in a["optimizer"]["state"].items():
        for name, tensor in state.items():
            assert torch.equal(tensor, b["optimizer"]["state"][key][name])
    assert torch.equal(a["torch_rng"], b["torch_rng"])
    rows = [json.loads(line) for line in (tmp_path / "parts" / "metrics.jsonl").read_text().splitlines()]
    assert [r["chunk"] for r in rows] == [1, 2] and all(r["labelled"] > 0 and math.isfinite(r["loss"]) for r in rows)
    assert all(math.isfinite(r["fresh_policy_kl"]) and r["fresh_policy_kl"] >= -1e-4 for r in rows)  # held out
    from tabula.engine.net.network import load_checkpoint
    assert load_checkpoint(tmp_path / "parts" / "checkpoint.pt").spec.aux  # a Tabula checkpoint, heads and all
    import shutil
    shutil.rmtree(tmp_path / "parts" / "labels")  # a new machine: the checkpoint alone goes on
    assert distill.distill(run_config(tiny_aux_onnx, tmp_path / "parts", chunks=3), **quiet)["step"] == 6
    state = torch.load(tmp_path / "parts" / "checkpoint.pt", weights_only=True)
    state["step"] = 5  # stopped inside chunk 3, whose labels are then lost
    torch.save(state, tmp_path / "parts" / "checkpoint.pt")
    shutil.rmtree(tmp_path / "parts" / "labels")
    assert distill.distill(run_config(tiny_aux_onnx, tmp_path / "parts", chunks=3), **quiet)["step"] == 6
    assert [p.name for p in (tmp_path / "parts" / "labels").iterdir()] == ["chunk-000002-9x9.npz"]


def test_records_that_run_out_are_said_and_counted_in_the_metrics(tiny_aux_onnx, tmp_path):
    for game in range(2):
        (tmp_path / f"g{game}.sgf").write_bytes(game_sgf(play_game(game, moves=30), result="B+R"))
    said: list[str] = []
    config = run_config(tiny_aux_onnx, tmp_path / "run", records=str(tmp_path), per_game=2, chunk_positions=8,
                        records_share=0.5, chunks=2)
    distill.distill(config, log=said.append)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["from_records"] for r in rows] == [4, 0]  # both games' positions, then none left
    assert sum("the records ran out after 2 games" in line for line in said) == 1


def test_focus_records_add_their_positions_to_every_chunk_and_resume_where_they_were(tiny_aux_onnx, tmp_path):
    focus = tmp_path / "focus"
    focus.mkdir()
    for game in range(2):
        (focus / f"g{game}.sgf").write_bytes(game_sgf(play_game(game, moves=30), result="W+R"))
    config = run_config(tiny_aux_onnx, tmp_path / "run", focus_records=str(focus), focus_positions=4,
                        focus_per_game=2, chunks=1)
    distill.distill(config, log=lambda *_: None)
    distill.distill(replace(config, chunks=3), log=lambda *_: None)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["from_focus"] for r in rows] == [4, 4, 4]  # the two games again and again
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert state["focus_cursor"] == 6
    labels = np.load(tmp_path / "run" / "labels" / "chunk-000002-19x19.npz")
    focused = labels["source"] == teacher.SOURCES.index("focus")
    assert focused.sum() == 4  # their results (W+R here) do not train
    assert not labels["outcome_weight"][focused].any() and np.isnan(labels["margin"][focused]).all()
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "x"),
                            "--focus-records", str(tmp_path / "missing")])


def test_frozen_batch_norms_train_with_their_running_statistics_and_keep_them(tiny_aux_onnx, tmp_path):
    quiet = dict(log=lambda *_: None)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "free", chunks=1), **quiet)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "frozen", chunks=1, freeze_batchnorm=True,
                               ema_decay=0.9), **quiet)
    free = torch.load(tmp_path / "free" / "checkpoint.pt", weights_only=True)
    frozen = torch.load(tmp_path / "frozen" / "checkpoint.pt", weights_only=True)
    stats = [name for name in frozen["state_dict"] if name.endswith(("running_mean", "running_var"))]
    assert stats and any(not torch.equal(free["state_dict"][n], frozen["state_dict"][n]) for n in stats)
    for name in stats:  # a fresh network's statistics, as they started
        assert torch.equal(frozen["state_dict"][name], torch.full_like(frozen["state_dict"][name],
                                                                       0.0 if name.endswith("mean") else 1.0))
        assert torch.equal(frozen["ema_state_dict"][name], frozen["state_dict"][name])
    torch.manual_seed(1)  # the run's seed: its starting weights
    start = distill.TabulaNet(distill.student_spec(run_config(tiny_aux_onnx, tmp_path / "x"))).state_dict()
    assert frozen["step"] == 2 and not torch.equal(frozen["state_dict"]["input.conv.weight"],
                                                   start["input.conv.weight"])  # the weights trained


def test_a_moved_komi_is_the_position_encoded_at_that_komi():
    enc = encoding_named("tabula-v2")
    for size, moves, shift in ((9, 7, 3.5), (9, 8, -11.0), (13, 5, 30.0)):  # 30: held at the calibrated 20
        state = random_game(size, moves, seed=size + moves)[-1]
        sign = 1.0 if state.to_move == BLACK else -1.0  # the side to move's komi is -komi for black
        state.rules = Rules(komi=6.5, superko=state.rules.superko)
        planes = enc.encode_batch([state], None)
        made = distill.move_komi(planes, np.array([-sign * 6.5], np.float32), np.array([shift]), size, enc.name)
        state.rules = Rules(komi=6.5 - sign * float(made[0]), superko=state.rules.superko)
        assert made[0] == (shift if shift < 20 else 20.0 + sign * 6.5)
        assert np.array_equal(planes, enc.encode_batch([state], None)), (size, shift)


def test_a_batch_at_moved_komis_trains_their_score_alone(tiny_aux_onnx, tmp_path):
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", student_encoding="tabula-v2"), log=lambda *_: None)
    window = distill.LabelWindow(str(tmp_path / "run" / "labels"), 1000, encoding="tabula-v2")
    plain, moved = window.batch(1, 3, 64), window.batch(1, 3, 64, komi_spread=5.0, komi_share=0.5)
    full = moved["full"].numpy() == 1
    assert 10 < (~full).sum() < 54 and plain["full"].numpy().all()
    komi = encoding_named("tabula-v2").plane_names.index("komi")
    shift = 20.0 * (moved["planes"][:, komi, 0, 0] - plain["planes"][:, komi, 0, 0]).numpy()
    assert np.allclose(shift[full], 0.0) and (shift[~full] != 0).mean() > 0.7  # a draw rounds to 0 now and then
    assert np.allclose((moved["score"] - plain["score"]).numpy(), shift, atol=1e-3)
    assert torch.equal(moved["policy"], plain["policy"]) and not moved["ownership_weight"][~full].any()
    config = run_config(tiny_aux_onnx, tmp_path / "x", student_encoding="tabula-v2")
    model = distill.TabulaNet(distill.student_spec(config)).eval()
    with torch.no_grad():
        out = model.train_outputs(moved["planes"])
        _, parts = distill.distill_losses(out, moved, config)
        kept = {k: v[full] for k, v in moved.items()}
        _, alone = distill.distill_losses({k: v[full] for k, v in out.items()}, kept, config)
    for name in ("policy_kl", "value_mse", "top1", "ownership_loss"):  # the moved positions count for none of these
        assert float(parts[name]) == pytest.approx(float(alone[name]), rel=1e-4, abs=1e-6), name
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--student-encoding",
                            "leelaz-18+komi", "--train-komi-spread", "4"])


def test_another_player_plays_and_a_teacher_without_ownership_labels(tiny_pooled_onnx, tiny_aux_onnx, tiny_onnx,
                                                                      tmp_path):
    config = run_config(tiny_pooled_onnx, tmp_path / "run", player=str(tiny_aux_onnx))
    assert distill.distill(config, log=lambda *_: None)["labelled"] > 0
    window = distill.LabelWindow(str(tmp_path / "run" / "labels"), 1000)
    assert not window.by_size[9]["ownership_known"].any() and np.isnan(window.by_size[9]["score"]).all()
    batch = window.batch(1, 0, 4)
    assert not batch["ownership_weight"].any() and not batch["score_weight"].any()
    with pytest.raises(SystemExit, match="the player plays 19, not"):  # a 19x19-only player asked for 9x9
        distill.distill(run_config(tiny_aux_onnx, tmp_path / "other", player=str(tiny_onnx)), log=lambda *_: None)


@pytest.mark.slow
def test_this_process_labels_the_focus_records_while_the_workers_play(tiny_aux_onnx, tmp_path):
    focus = tmp_path / "focus"
    focus.mkdir()
    for game in range(2):
        (focus / f"g{game}.sgf").write_bytes(game_sgf(play_game(game, moves=30), result="W+R"))
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", steps_per_chunk=1, label_workers=2,
                               focus_records=str(focus), focus_positions=4, focus_per_game=2, chunks=1),
                    log=lambda *_: None)
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert row["from_focus"] == 4 and row["labelled"] > 4
    sources = np.concatenate([np.load(path)["source"] for path in (tmp_path / "run" / "labels").iterdir()])
    assert (sources == teacher.SOURCES.index("focus")).sum() == 4
    assert (sources == teacher.SOURCES.index("selfplay")).sum() == row["labelled"] - 4


@pytest.mark.slow
def test_worker_processes_play_and_label_the_same_games(tiny_aux_onnx, tmp_path):
    quiet = dict(log=lambda *_: None)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "here", steps_per_chunk=1), **quiet)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "workers", steps_per_chunk=1, label_workers=2), **quiet)
    (here,) = (tmp_path / "here" / "labels").iterdir()
    there = tmp_path / "workers" / "labels" / here.name
    _, a = teacher.read_labels(str(here))
    _, b = teacher.read_labels(str(there))
    bits_a, bits_b = a["planes_bits"], b["planes_bits"]
    order_a = np.lexsort(bits_a.reshape(len(bits_a), -1).T)  # the workers' games come in another order
    order_b = np.lexsort(bits_b.reshape(len(bits_b), -1).T)
    assert np.array_equal(bits_a[order_a], bits_b[order_b])
    assert np.allclose(a["value"][order_a].astype(np.float32), b["value"][order_b].astype(np.float32), atol=1e-3)


@pytest.mark.slow
def test_snapshots_are_the_student_after_their_chunk_and_leave_its_training_alone(tiny_aux_onnx, tmp_path):
    from tabula.engine.net.evaluator import OnnxEvaluator

    quiet = dict(log=lambda *_: None)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "plain", chunks=2), **quiet)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "snap", chunks=2, snapshot_chunks=1, export=True), **quiet)
    a = torch.load(tmp_path / "plain" / "checkpoint.pt", weights_only=True)
    b = torch.load(tmp_path / "snap" / "checkpoint.pt", weights_only=True)
    for name, tensor in a["state_dict"].items():
        assert torch.equal(tensor, b["state_dict"][name]), name
    snapshots = sorted(p.name for p in (tmp_path / "snap" / "snapshots").iterdir())
    assert snapshots == ["chunk-000001.onnx", "chunk-000002.onnx"]
    state = GameState(9, Rules(komi=6.5))
    state.play(state.size * 4 + 4)
    outputs = [OnnxEvaluator(path, symmetry="identity", provider="cpu", log=None).evaluate([state]).policy
               for path in (tmp_path / "snap" / "snapshots" / "chunk-000001.onnx",
                            tmp_path / "snap" / "snapshots" / "chunk-000002.onnx", tmp_path / "snap" / "model.onnx")]
    assert np.array_equal(outputs[1], outputs[2]) and not np.array_equal(outputs[0], outputs[1])
    rows = [json.loads(line) for line in (tmp_path / "snap" / "metrics.jsonl").read_text().splitlines()]
    assert 0 <= rows[0]["cpu_s"] <= rows[1]["cpu_s"] == pytest.approx(b["cpu_s"], abs=5)
    # stopped inside chunk 2 after its checkpoint: the resumed run trains the rest of it (no new labels) and then
    # writes its snapshot; a checkpoint from before cpu_s was counted goes on without a total
    b["step"] = 3
    del b["cpu_s"]
    torch.save(b, tmp_path / "snap" / "checkpoint.pt")
    (tmp_path / "snap" / "snapshots" / "chunk-000002.onnx").unlink()
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "snap", chunks=2, snapshot_chunks=1), **quiet)
    assert (tmp_path / "snap" / "snapshots" / "chunk-000002.onnx").exists()
    last = json.loads((tmp_path / "snap" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["chunk"] == 2 and last["step"] == 4 and "cpu_s" not in last
    assert torch.load(tmp_path / "snap" / "checkpoint.pt", weights_only=True)["cpu_s"] is None
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--snapshot-chunks", "-1"])


def test_distill_stops_by_its_time_limit_and_writes_the_student(tiny_aux_onnx, tmp_path):
    from tabula.engine.net.evaluator import OnnxEvaluator

    result = distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=0, max_minutes=1e-6, export=True),
                             log=lambda *_: None)
    assert result["reason"] == "out of time" and result["step"] == 0
    student = OnnxEvaluator(tmp_path / "run" / "model.onnx", provider="cpu", log=None)
    state = GameState(9, Rules(komi=6.5))
    evaluation = student.evaluate([state])
    assert evaluation.score is not None and evaluation.policy.shape == (1, 82)


def test_the_distillation_loss_falls_on_a_batch_seen_again(tiny_aux_onnx, tmp_path):
    config = run_config(tiny_aux_onnx, tmp_path / "run", chunks=1)
    labeller = teacher.Teacher(str(tiny_aux_onnx), threads=1)
    chosen = positions(count=8)
    for position in chosen[:4]:
        position.outcome, position.outcome_weight, position.margin = 1.0, 1.0, 5.0
    (tmp_path / "labels").mkdir()
    teacher.write_labels(str(tmp_path / "labels" / "chunk-000000-9x9.npz"), 9, labeller.label(chosen))
    window = distill.LabelWindow(str(tmp_path / "labels"), 1000)
    batch = window.batch(1, 0, 8)
    torch.manual_seed(0)
    model = distill.TabulaNet(distill.student_spec(config))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    planes = batch["planes"]
    losses = []
    for _ in range(80):
        loss, parts = distill.distill_losses(model.train_outputs(planes), batch, config)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert parts["policy_kl"].item() >= -1e-5


def test_bad_settings_are_clear_errors(tiny_aux_onnx, tmp_path):
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tmp_path / "missing.onnx"), "--run", str(tmp_path / "r")])
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--student-arch", "6"])
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--selfplay-games", "0"])
    with pytest.raises(SystemExit):
        distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--records",
                            str(tmp_path / "missing.tar.xz")])
    for drops in ("12600", "12600:0", "-1:0.001", "5:0.1,5:0.2", "a:b"):
        with pytest.raises(SystemExit):
            distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--lr-drops", drops])
    for bonuses in ("", "N,2", "n"):
        with pytest.raises(SystemExit):
            distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r"), "--handicap-bonuses",
                                bonuses])
    assert distill.parse_args(["--teacher", str(tiny_aux_onnx), "--run", str(tmp_path / "r")]).student_arch == "6x64"


def test_the_learning_rate_warms_up_then_takes_each_drop_from_its_step():
    config = distill.DistillConfig(teacher="t", run="r", lr=0.001, warmup_steps=10, lr_drops="300:0.0001,200:0.0003")
    train_config = distill.trainer_config(config)
    lrs = {step: distill.learning_rate(config, train_config, step) for step in (0, 9, 10, 199, 200, 299, 300, 10**6)}
    assert lrs[0] == pytest.approx(0.0001) and lrs[9] == lrs[10] == lrs[199] == pytest.approx(0.001)
    assert lrs[200] == lrs[299] == pytest.approx(0.0003) and lrs[300] == lrs[10**6] == pytest.approx(0.0001)


def test_a_resumed_run_may_drop_the_learning_rate_only_where_it_has_not_trained(tiny_aux_onnx, tmp_path):
    quiet = dict(log=lambda *_: None)
    run = tmp_path / "run"
    distill.distill(run_config(tiny_aux_onnx, run, lr=0.01, warmup_steps=0), **quiet)  # steps 0 and 1
    config_before = (run / "config.json").read_text()
    with pytest.raises(SystemExit, match="lr-drops"):
        distill.distill(run_config(tiny_aux_onnx, run, lr=0.01, warmup_steps=0, chunks=2, lr_drops="1:0.001"),
                        **quiet)
    assert (run / "config.json").read_text() == config_before  # the refused settings are not written down
    distill.distill(run_config(tiny_aux_onnx, run, lr=0.01, warmup_steps=0, chunks=2, lr_drops="2:0.001"), **quiet)
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    assert state["step"] == 4 and state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.001)
    with pytest.raises(SystemExit, match="lr-drops"):  # the drop is now part of what the run trained
        distill.distill(run_config(tiny_aux_onnx, run, lr=0.01, warmup_steps=0, chunks=3), **quiet)
    distill.distill(run_config(tiny_aux_onnx, run, lr=0.01, warmup_steps=0, chunks=3, lr_drops="2:0.001,4:0.0002"),
                    **quiet)
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    assert state["step"] == 6 and state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.0002)


@pytest.mark.slow
def test_tabula_plot_draws_a_distill_run(tmp_path):
    from tabula.tools.learn import plot

    lines = [{"chunk": c, "step": 100 * c, "elapsed_s": 60.0 * c, "cpu_s": 110.0 * c, "policy_kl": 1.0 / c,
              "top1": 0.4, "value_mse": 0.2, "labelled": 1000, "fresh_policy_kl": 1.2 / c, "fresh_top1": 0.38,
              "fresh_value_mse": 0.3} for c in (1, 2, 3)]
    lines[1].pop("fresh_top1")  # a chunk taken without fresh losses is drawn without them
    lines.append({"chunk": 4, "step": 300, "elapsed_s": 250.0, "cpu_s": 450.0, "labelled": 900,
                  "fresh_policy_kl": 0.5, "fresh_top1": 0.4, "fresh_value_mse": 0.3})  # stopped before training
    (tmp_path / "metrics.jsonl").write_text(json.dumps(lines[-1]) + "\n")
    assert plot.is_distill_run(str(tmp_path))  # a run stopped before its first trained step is still one
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert plot.main([str(tmp_path), "--out", str(tmp_path / "curve.png")]) == 0
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def three_chunk_run(run: Path) -> Path:
    """A distill run directory with the metrics of chunks 1 to 3 (a minute each), for `tabula plot`."""
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(
        {"chunk": c, "step": 100 * c, "elapsed_s": 60.0 * c, "policy_kl": 1.0 / c, "top1": 0.4, "value_mse": 0.2})
        + "\n" for c in (1, 2, 3)))
    return run


def test_tabula_plot_draws_a_distill_runs_strength_curve_from_its_matches(tmp_path):
    from tabula.tools.learn import plot

    kept = Path(__file__).resolve().parent.parent / "docs" / "matches" / "distill-s10803-vs-default-byo2-9"
    match = tmp_path / "match"
    match.mkdir()
    for name in ("config.json", "results.jsonl.xz"):  # a kept match's results are xz-compressed
        shutil.copy(kept / name, match / name)
    assert plot.read_match(str(match)) == {"points": 18, "games": 30, "opponent": "default", "size": 9,
                                             "handicap": 0}
    given = kept.parent / "distill-g96c218-handicap7"  # the student gave GNU Go 7 stones: a line of its own
    assert plot.read_match(str(given), "g96") == {"points": 22, "games": 50, "opponent": "gnugo-10", "size": 19,
                                                  "handicap": 7}
    run = three_chunk_run(tmp_path / "run")
    assert plot.main([str(run), "--match", f"1:{match}", f"3:{match}", "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 10_000
    for bad in (f"4:{match}", f"x:{match}", "2", f"2:{tmp_path / 'none'}", f"2:{run}"):  # no chunk 4; run: no match
        with pytest.raises(SystemExit):
            plot.main([str(run), "--match", bad, "--out", str(tmp_path / "bad.png")])
    assert not (tmp_path / "bad.png").exists()


def test_one_gauntlet_of_every_snapshot_draws_the_strength_curve(tmp_path):
    """--match CHUNK:DIR:NAME scores the engine NAME of a `tabula match --gauntlet` directory against the anchor it
    played, so one gauntlet of every snapshot draws the curve; a name the match lacks, or an engine that played two
    opponents, is an error, not a curve."""
    from tabula.tools.learn import plot

    kept = Path(__file__).resolve().parent.parent / "docs" / "matches" / "distill-s10803-vs-default-byo2-9"
    gauntlet = tmp_path / "gauntlet"
    gauntlet.mkdir()
    config = json.loads((kept / "config.json").read_text())
    config.update(engines=["tabula gtp", "tabula gtp --weights a.onnx", "tabula gtp --weights b.onnx"],
                  names=["anchor", "c010", "c020"], gauntlet=True)
    (gauntlet / "config.json").write_text(json.dumps(config))
    # the kept match's games (student 0, default 1) as the anchor against c010, then again against c020
    games = [json.loads(line) for line in read_jsonl_text(kept / "results.jsonl").splitlines()]
    lines = []
    for snapshot in (1, 2):
        for game in games:
            moved = dict(game, black=snapshot if game["black"] == 0 else 0, white=snapshot if game["white"] == 0 else 0,
                         game=f"0-{snapshot}-{game['game'][-4:]}")  # a gauntlet's game names its pair
            lines.append(json.dumps(moved))
    (gauntlet / "results.jsonl").write_text("\n".join(lines) + "\n")
    assert plot.read_match(str(gauntlet), "c020") == {"points": 18, "games": 30, "opponent": "anchor", "size": 9,
                                                      "handicap": 0}
    assert plot.read_match(str(gauntlet)) == {"points": 12, "games": 30, "opponent": "c010", "size": 9, "handicap": 0}
    run = three_chunk_run(tmp_path / "run")
    assert plot.main([str(run), "--match", f"1:{gauntlet}:c010", f"3:{gauntlet}:c020",
                      "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="no engine named"):
        plot.read_match(str(gauntlet), "c030")
    with pytest.raises(ValueError, match="played 2 engines"):
        plot.read_match(str(gauntlet), "anchor")
    with pytest.raises(SystemExit):
        plot.main([str(run), "--match", f"1:{gauntlet}:c030", "--out", str(tmp_path / "bad.png")])
    assert not (tmp_path / "bad.png").exists()


def test_a_run_goes_on_with_its_teacher_from_another_file_but_not_with_another_network(tiny_aux_onnx, tiny_onnx,
                                                                                       tmp_path):
    quiet = dict(log=lambda *_: None)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=1), **quiet)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["teacher_network"] == teacher.teacher_identity(str(tiny_aux_onnx))
    moved = tmp_path / "elsewhere" / "teacher.onnx"  # the same network at another path: a new machine
    moved.parent.mkdir()
    shutil.copyfile(tiny_aux_onnx, moved)
    assert distill.distill(run_config(moved, tmp_path / "run", chunks=2), **quiet)["chunk"] == 2
    with pytest.raises(SystemExit, match="taught by another network"):
        distill.distill(run_config(tiny_onnx, tmp_path / "run", chunks=3), **quiet)


@pytest.mark.slow
def test_a_katago_teacher_is_the_same_network_in_its_model_file_and_its_onnx_files(tmp_path):
    from tabula.engine.net import katago_model as km
    from tabula.engine.net import katago_network as kn

    model = km.random_model(8, seed=5, channels=8, mid=4, gpool=2, head=4)
    km.write_model(model, tmp_path / "net.bin.gz")
    kn.export_onnx(kn.KataGoNet(model), model, str(tmp_path / "net.onnx"), "net.bin.gz", board_sizes=(9,),
                   check=False)
    named = teacher.teacher_identity(str(tmp_path / "net.bin.gz"))
    assert named == f"katago:{model['name']}" == teacher.teacher_identity(str(tmp_path / "net.onnx"))
    # another policy optimism mixes the policies otherwise: another teacher
    kn.export_onnx(kn.KataGoNet(model, policy_optimism=1.0), model, str(tmp_path / "optimist.onnx"), "net.bin.gz",
                   board_sizes=(9,), check=False)
    assert teacher.teacher_identity(str(tmp_path / "optimist.onnx")) == f"{named}, policy optimism 1"
    (tmp_path / "not.onnx").write_bytes(b"not a network")
    with pytest.raises(ValueError, match="not a readable ONNX file"):
        teacher.teacher_identity(str(tmp_path / "not.onnx"))


def test_a_run_from_before_teacher_network_is_checked_by_the_file_it_named(tiny_aux_onnx, tmp_path):
    quiet = dict(log=lambda *_: None)
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", chunks=1), **quiet)
    path = tmp_path / "run" / "config.json"

    def saved_as_before(teacher_path) -> None:  # a config.json written before teacher_network
        saved = json.loads(path.read_text())
        saved.pop("teacher_network", None)
        path.write_text(json.dumps({**saved, "teacher": str(teacher_path)}))

    moved = tmp_path / "moved.onnx"
    shutil.copyfile(tiny_aux_onnx, moved)
    saved_as_before(tiny_aux_onnx)
    assert distill.distill(run_config(moved, tmp_path / "run", chunks=2), **quiet)["chunk"] == 2
    saved_as_before(tmp_path / "gone.onnx")
    with pytest.raises(SystemExit, match="gone.onnx, not here"):
        distill.distill(run_config(moved, tmp_path / "run", chunks=3), **quiet)
    (tmp_path / "broken.onnx").write_bytes(b"not a network")
    saved_as_before(tmp_path / "broken.onnx")
    with pytest.raises(SystemExit, match="not a readable ONNX file"):
        distill.distill(run_config(moved, tmp_path / "run", chunks=3), **quiet)


def test_a_weight_average_turned_on_at_a_resume_starts_from_the_trained_weights(tiny_aux_onnx, tmp_path):
    quiet = dict(log=lambda *_: None)
    config = run_config(tiny_aux_onnx, tmp_path / "run", lr=0.05, warmup_steps=0, steps_per_chunk=4)
    distill.distill(config, **quiet)
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    trained = state["state_dict"]
    state["step"] = 100_000  # a long run's: the average's warm-up (its decay rising from 0.1) long over
    torch.save(state, tmp_path / "run" / "checkpoint.pt")
    torch.manual_seed(config.seed)
    initial = distill.TabulaNet(distill.student_spec(config)).state_dict()
    distill.distill(run_config(tiny_aux_onnx, tmp_path / "run", lr=0.05, warmup_steps=0, steps_per_chunk=4, chunks=2,
                               ema_decay=0.9), **quiet)
    average = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["ema_state_dict"]

    def distance(a, b) -> float:
        return sum(float((a[k].float() - b[k].float()).square().sum()) for k in b if b[k].is_floating_point())

    assert distance(average, trained) < distance(average, initial)  # not the untrained network's weights

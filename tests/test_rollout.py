"""The rollout policy: liberty states, pattern features and their symmetries, the fast weights against the reference
logits, the weights file, rollouts to a scored end, and training on a tiny synthetic set."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tabula.engine.rollout.patterns import (
    SYMMETRIES,
    candidate_codes,
    canonical_response_keys,
    code_tables,
    features,
    transform_codes,
    transform_response_keys,
)
from tabula.engine.rollout.policy import RolloutPolicy, RolloutPolicyError, RolloutWeights, logits
from tabula.engine.rollout.rollout import draw_moves, move_weights, ownership, play_out, rollout, rollouts
from tabula.engine.rules.board import EMPTY, NO_POINT, IllegalMoveError
from tabula.engine.rules.coords import BLACK, PASS, WHITE, parse_vertex
from tabula.engine.rules.game import SIMPLE_KO, GameState, Rules
from tabula.engine.rules.playout import LibertyStates, random_move
from tests.conftest import board_from_ascii


def random_position(size: int, moves: int, rng: random.Random) -> GameState:
    state = GameState(size, Rules(superko=SIMPLE_KO))
    for _ in range(moves):
        state.play(random_move(state, rng))
    return state


def last_moves(state: GameState) -> tuple[int, int]:
    moves = [m for _, m in state.moves[-2:]]
    moves = [-1] * (2 - len(moves)) + moves
    return (moves[1] if moves[1] != PASS else -1), (moves[0] if moves[0] != PASS else -1)


def random_weights(feats, seed: int = 0, self_atari: float = -1.5, save_atari: float = 1.0) -> RolloutWeights:
    """Weights for every second pattern and response key seen in ``feats`` (the rest stay unknown)."""
    rng = np.random.default_rng(seed)
    codes = np.unique(feats.pattern[feats.pattern >= 0])[::2].astype(np.int32)
    keys = np.unique(feats.response[feats.response >= 0])[::2]
    return RolloutWeights(codes, rng.normal(size=len(codes)).astype(np.float32), keys,
                          rng.normal(size=len(keys)).astype(np.float32), 0.3, -0.4, self_atari, save_atari,
                          rng.normal(size=4).astype(np.float32), rng.normal(size=4).astype(np.float32),
                          {"note": "test"})


def position_features(states: list[GameState]):
    boards = [LibertyStates(s.board.copy()) for s in states]
    moves = [last_moves(s) for s in states]
    return boards, features(boards, [s.to_move for s in states], [m[0] for m in moves], [m[1] for m in moves])


# -- liberty states and features --------------------------------------------------------------------------------


def test_liberty_states_follow_the_board_move_by_move(rng: random.Random) -> None:
    for size in (5, 9):
        state = GameState(size, Rules(superko=SIMPLE_KO))
        run = LibertyStates(state.board.copy())
        while not state.is_game_over() and len(state.moves) < 2 * size * size:
            color, move = state.to_move, random_move(state, rng)
            state.play(move)
            if move != PASS:
                run.play(state.board.geometry.padded[move], color)
            assert run.states == LibertyStates(state.board).states
            assert run.board.color == state.board.color


def test_candidates_are_the_legal_points_that_fill_no_own_eye(rng: random.Random) -> None:
    for seed in range(6):
        state = random_position(7, 30 + 8 * seed, rng)
        board = state.board
        _, candidate = candidate_codes([LibertyStates(board.copy())], [state.to_move])
        for flat, pad in enumerate(board.geometry.padded):
            try:
                board.try_play(pad, state.to_move)
                legal = True
            except IllegalMoveError:
                legal = False
            assert candidate[0, flat] == (legal and not board.is_own_eye(pad, state.to_move))


def test_self_atari_and_save_atari_match_a_trial_move(rng: random.Random) -> None:
    states = [random_position(9, 60 + 5 * i, rng) for i in range(8)]
    _, feats = position_features(states)
    checked = {"self-atari": 0, "saves": 0}
    for row, state in enumerate(states):
        board, color = state.board, state.to_move
        for flat in np.flatnonzero(feats.pattern[row] >= 0):
            pad = board.geometry.padded[flat]
            in_atari = any(board.color[n] == color and len(board.string_liberties(n)) == 1
                           for n in board.geometry.neighbors[pad])
            trial = board.copy()
            captured = trial.play(pad, color)
            liberties = len(trial.string_liberties(pad))
            self_atari = liberties == 1 and not captured
            saves = in_atari and (liberties >= 2 or bool(captured))
            assert bool(feats.tactics[row, flat] & 1) == self_atari
            assert bool(feats.tactics[row, flat] & 2) == saves
            checked["self-atari"] += self_atari
            checked["saves"] += saves
    assert min(checked.values()) > 0  # the positions did exercise both


def transformed(state: GameState, symmetry: int, swap: bool = False) -> tuple[GameState, callable]:
    """The position under a dihedral symmetry (and with the colours exchanged); and the map of flat points."""
    size = state.size
    transform = SYMMETRIES[symmetry]
    c = (size - 1) / 2

    def point(flat: int) -> int:
        if flat < 0:
            return flat
        x, y = transform(flat % size - c, flat // size - c)
        return int(round(y + c)) * size + int(round(x + c))

    other = GameState(size, Rules(superko=SIMPLE_KO))
    for flat in range(size * size):
        color = state.color_at(flat)
        if color != EMPTY:
            other.place_setup(point(flat), (3 - color) if swap else color)
    other.to_move = (3 - state.to_move) if swap else state.to_move
    if state.board.ko != NO_POINT:
        other.board.ko = other.board.geometry.padded[point(state.board.geometry.flat[state.board.ko])]
        other.board.ko_color = (3 - state.board.ko_color) if swap else state.board.ko_color
    return other, point


def test_pattern_ids_are_the_same_under_the_8_symmetries_and_a_colour_swap(rng: random.Random) -> None:
    for seed in range(4):
        state = random_position(9, 40 + 10 * seed, rng)
        previous, own = last_moves(state)
        base = features([LibertyStates(state.board.copy())], [state.to_move], [previous], [own])
        assert (base.pattern >= 0).sum() > 10
        for symmetry in range(8):
            for swap in (False, True):
                other, point = transformed(state, symmetry, swap)
                seen = features([LibertyStates(other.board)], [other.to_move], [point(previous)], [point(own)])
                image = np.array([point(f) for f in range(81)])
                assert np.array_equal(seen.pattern[0, image], base.pattern[0])
                assert np.array_equal(seen.tactics[0, image], base.tactics[0])
                # the response key of a candidate is canonical: the same set of keys, each at the image point
                assert sorted(seen.response[0].tolist()) == sorted(base.response[0].tolist())


def test_canonical_codes_are_least_of_their_images_and_fixed_by_every_symmetry() -> None:
    tables = code_tables()
    codes = np.random.default_rng(1).integers(0, 1 << 20, 5000)
    for symmetry in range(8):
        images = transform_codes(codes, symmetry)
        assert np.array_equal(tables.canonical[images], tables.canonical[codes])
        assert np.all(tables.canonical[codes] <= images)
    keys = (np.random.default_rng(2).integers(0, 1 << 36, 3000) << 4) | np.random.default_rng(3).integers(0, 12, 3000)
    canonical = canonical_response_keys(keys)
    for symmetry in range(8):
        assert np.array_equal(canonical_response_keys(transform_response_keys(keys, symmetry)), canonical)


# -- the policy ----------------------------------------------------------------------------------------------


def test_fast_move_weights_equal_exp_of_the_reference_logits(rng: random.Random) -> None:
    states = [random_position(9, 20 + 7 * i, rng) for i in range(10)]
    boards, feats = position_features(states)
    weights = random_weights(feats)
    reference = np.exp(logits(weights, feats))
    moves = [last_moves(s) for s in states]
    fast = move_weights(RolloutPolicy(weights), boards, [s.to_move for s in states],
                        np.array([m[0] for m in moves]), np.array([m[1] for m in moves]))
    assert np.allclose(fast, reference, rtol=1e-5, atol=0)


def test_drawn_moves_follow_the_move_weights(rng: random.Random) -> None:
    """The adaptive rejection that leaves ambiguous self-ataris unresolved until drawn samples the same law."""
    state = board_from_ascii("""
        . X X O .
        X . X O .
        X X O . O
        O O . O .
        . . O . .
    """, to_move=BLACK)
    boards, feats = position_features([state])
    weights = random_weights(feats, seed=3, self_atari=-2.0, save_atari=2.0)
    policy = RolloutPolicy(weights)
    expected = move_weights(policy, boards, [BLACK], np.array([-1]), np.array([-1]))[0]
    expected /= expected.sum()
    copies = 4000
    draws = draw_moves(policy, boards * copies, [BLACK] * copies, np.full(copies, NO_POINT), np.full(copies, NO_POINT),
                       np.random.default_rng(5))  # padded points
    observed = np.bincount(np.array(state.board.geometry.flat)[draws], minlength=25) / copies
    assert np.abs(observed - expected).sum() / 2 < 0.04  # total variation
    assert policy.ambiguous.any()


def test_the_weights_file_round_trips(tmp_path, rng: random.Random) -> None:
    _, feats = position_features([random_position(9, 50, rng)])
    weights = random_weights(feats)
    path = str(tmp_path / "rollout.npz")
    weights.save(path)
    loaded = RolloutWeights.load(path)
    assert np.array_equal(loaded.vector(), weights.vector())
    assert np.array_equal(loaded.pattern_codes, weights.pattern_codes)
    assert np.array_equal(loaded.response_keys, weights.response_keys)
    assert loaded.metadata["note"] == "test" and loaded.metadata["format"] == "tabula-rollout-patterns"


def test_a_malformed_weights_file_is_refused_with_a_clear_error(tmp_path, rng: random.Random) -> None:
    _, feats = position_features([random_position(9, 50, rng)])
    good = str(tmp_path / "good.npz")
    random_weights(feats).save(good)
    arrays = dict(np.load(good, allow_pickle=False))

    def write(name: str, **changes) -> str:
        path = str(tmp_path / name)
        np.savez(path, **{**arrays, **changes})
        return path

    not_npz = tmp_path / "text.npz"
    not_npz.write_text("hello")
    cases = [
        (str(not_npz), "not a rollout weights file"),
        (str(tmp_path / "missing.npz"), "no 'pattern_weights' array"),
        (write("pickled.npz", scalars=np.array([object()], dtype=object)), "not a rollout weights file"),
        (write("short.npz", pattern_weights=arrays["pattern_weights"][:-1]), "differ in length"),
        (write("unsorted.npz", pattern_codes=arrays["pattern_codes"][::-1].copy()), "sorted"),
        (write("nan.npz", distance_own=np.array([0, np.nan, 0, 0], np.float32)), "not finite"),
        (write("format.npz", metadata=np.array(json.dumps({"format": "other", "version": 1}))), "format"),
        (write("version.npz", metadata=np.array(json.dumps({"format": "tabula-rollout-patterns", "version": 9}))),
         "version"),
    ]
    arrays_missing = {k: v for k, v in arrays.items() if k != "pattern_weights"}
    np.savez(str(tmp_path / "missing.npz"), **arrays_missing)
    for path, message in cases:
        with pytest.raises(RolloutPolicyError, match=message):
            RolloutWeights.load(path)


# -- rollouts ------------------------------------------------------------------------------------------------


SETTLED = """
    X X X . O O O
    X . X . O . O
    X X X . O O O
    X . X . O . O
    X X X . O O O
    X . X . O . O
    X X X . O O O
"""


@pytest.mark.parametrize("to_move", [BLACK, WHITE])
def test_a_rollout_from_a_near_finished_position_ends_in_a_correctly_area_scored_position(to_move: int) -> None:
    """Both groups live with single-point eyes, seven dame between them: however the rollout fills the dame,
    black owns 21 to 28 points and wins with a komi of -7.5, and nothing is left empty but eyes."""
    state = board_from_ascii(SETTLED, to_move=to_move, komi=-7.5)
    _, feats = position_features([state])
    policy = RolloutPolicy(random_weights(feats, seed=1))
    for seed in range(5):
        boards, played = play_out([state], policy, np.random.default_rng(seed))
        final = boards[0]
        black, white = final.area_score()
        assert black + white == 49 and 21 <= black <= 28  # every dame filled, no group captured
        empties = [p for p in final.geometry.padded if final.color[p] == EMPTY]
        assert len(empties) == 6 and all(final.is_own_eye(p, BLACK) or final.is_own_eye(p, WHITE) for p in empties)
        assert played[0] == 7 + 2  # the dame, then two passes
        counted = GameState(7, Rules(komi=-7.5))
        counted.board = final
        assert counted.area_score() == black - white + 7.5
        z = rollout(state, policy, np.random.default_rng(seed))
        assert z == (1.0 if to_move == BLACK else -1.0)
    assert state.board.color.count(EMPTY) == 13  # the rollouts left the state alone


def test_rollouts_never_fill_own_eyes_and_end_with_no_candidate_for_either_side() -> None:
    states = [GameState(9) for _ in range(4)]
    _, feats = position_features([random_position(9, 60, random.Random(4))])
    policy = RolloutPolicy(random_weights(feats, seed=2))
    boards, played = play_out(states, policy, np.random.default_rng(7))
    for board in boards:
        for pad in board.geometry.padded:
            if board.color[pad] != EMPTY:
                continue
            for color in (BLACK, WHITE):
                try:
                    board.try_play(pad, color)
                    legal = True
                except IllegalMoveError:
                    legal = False
                assert not legal or board.is_own_eye(pad, color)
    assert np.all(played < 3 * 81)
    z = rollouts(states, policy, np.random.default_rng(8))
    assert z.dtype == np.float32 and set(z.tolist()) <= {-1.0, 1.0}


def test_a_batch_of_rollouts_cut_short_answers_nan_throughout() -> None:
    """``cancelled`` is asked before every move of the batch (here a fake clock that says yes after N questions). A
    batch whose longest game ends within N moves keeps its results; one cut a move before that is all NaN, the
    games that had ended too (the short ones alone would bias it)."""
    start = GameState(7, Rules(komi=0.5))
    for vertex in ("D4", "C3", "E5", "C5", "E3"):
        start.play(parse_vertex(vertex, 7))
    states = [start.copy() for _ in range(16)]
    _, feats = position_features([random_position(7, 20, random.Random(1))])
    policy = RolloutPolicy(random_weights(feats, seed=3))
    whole = rollouts(states, policy, np.random.default_rng(5))
    _, played = play_out(states, policy, np.random.default_rng(5))
    longest = int(played.max())

    def yes_after(questions: int):
        asked = []

        def cancelled() -> bool:
            asked.append(None)
            return len(asked) > questions
        return cancelled

    assert np.array_equal(rollouts(states, policy, np.random.default_rng(5), cancelled=yes_after(longest)), whole)
    cut = rollouts(states, policy, np.random.default_rng(5), cancelled=yes_after(longest - 1))
    assert cut.dtype == np.float32 and np.all(np.isnan(cut))
    assert not np.any(np.isnan(whole))


DEAD_WHITE_STONE = """
    X X X X . O O
    X . O X . O .
    X . . X . O O
    X X X X . O .
    X . X X . O O
    X X X X . O .
    X X X X . O O
"""


def test_ownership_plays_on_after_two_passes_and_captures_the_dead_stone() -> None:
    """A game ended by two passes with a lone white stone inside black's area: the rollouts behind
    final_status_list play on (a finished game would give no move at all) and black owns that point in most; the
    two living groups keep their own sides, and the state is left alone."""
    state = board_from_ascii(DEAD_WHITE_STONE, to_move=BLACK, komi=0.5)
    state.play(PASS)
    state.play(PASS)
    _, feats = position_features([state])
    owned = ownership(state, RolloutPolicy(random_weights(feats, seed=3)), np.random.default_rng(0), 64)
    assert owned.dtype == np.float32 and owned.shape == (49,)
    white_stone = 5 * 7 + 2
    assert state.color_at(white_stone) == WHITE and owned[white_stone] > 0.5
    assert np.all(owned[[y * 7 for y in range(7)]] == 1.0) and np.all(owned[[y * 7 + 5 for y in range(7)]] == -1.0)
    assert state.passes == 2 and state.color_at(white_stone) == WHITE
    with pytest.raises(ValueError):
        ownership(state, RolloutPolicy(random_weights(feats)), np.random.default_rng(0), 0)


@pytest.mark.parametrize("size", [2, 3, 25])
def test_ownership_on_the_smallest_and_largest_boards(size: int) -> None:
    """The engine judges dead stones with rollouts on every size it plays, 2x2 to 25x25."""
    state = random_position(size, size * size // 3, random.Random(size))
    _, feats = position_features([random_position(9, 60, random.Random(4))])
    owned = ownership(state, RolloutPolicy(random_weights(feats)), np.random.default_rng(size), 8)
    assert owned.shape == (size * size,) and np.all(np.abs(owned) <= 1.0)


def test_a_rollout_respects_its_move_cap() -> None:
    _, feats = position_features([random_position(9, 60, random.Random(4))])
    policy = RolloutPolicy(random_weights(feats))
    _, played = play_out([GameState(9)], policy, np.random.default_rng(1), max_moves=10)
    assert played[0] == 10


# -- training -----------------------------------------------------------------------------------------------


def local_game(seed: int, size: int = 9, moves: int = 60) -> tuple[int, list, list]:
    """A game whose moves are, four times in five, next to the previous move: something a policy can learn."""
    rng = random.Random(seed)
    state = GameState(size, Rules(superko=SIMPLE_KO))
    played = []
    for _ in range(moves):
        legal = [m for m in state.legal_moves() if not state.board.is_own_eye(state.board.geometry.padded[m],
                                                                               state.to_move)]
        last = state.last_move()
        near = [m for m in legal if last is not None and last >= 0 and abs(m % size - last % size)
                + abs(m // size - last // size) == 1]
        move = rng.choice(near) if near and rng.random() < 0.8 else rng.choice(legal) if legal else PASS
        played.append((state.to_move, move))
        state.play(move)
    return size, [], played


def test_training_reduces_the_loss_on_a_tiny_synthetic_set() -> None:
    from tabula.tools.learn.rollout_train import Layout, RolloutTrainConfig, evaluate, extract, fit, index, vocabulary

    examples = extract([local_game(seed) for seed in range(12)], lanes=8)
    codes, keys = vocabulary(examples, min_count=3)
    data = index(examples, codes, keys)
    layout = Layout(len(codes), len(keys))
    before = evaluate(np.zeros(layout.size), layout, data)
    config = RolloutTrainConfig(data="", out="", epochs=30, batch=64, lr=0.05)
    vector = fit(data, layout, config, log=lambda line: None)
    after = evaluate(vector, layout, data)
    assert after["loss"] < before["loss"] - 0.5
    assert after["top1"] > before["top1"] + 0.1
    assert vector[layout.distance_previous] > 1.0  # "next to the previous move" is what it learned


def test_tabula_train_model_rollout_writes_weights_that_a_rollout_loads(tmp_path) -> None:
    from tabula.engine.data.records import Record
    from tabula.engine.data.shards import write_shard
    from tabula.tools.learn import rollout_train

    data = tmp_path / "data"
    data.mkdir()
    for split, seeds in (("train", range(8)), ("val", range(8, 10))):
        records = [Record(name=f"g{seed}", size=9, komi=7.0, moves=local_game(seed)[2]) for seed in seeds]
        write_shard(str(data / f"{split}-0000.tshard"), records, size=9)
    out = tmp_path / "run"
    # what `tabula train --model rollout ...` runs (tools.learn.train hands it these arguments; it imports torch)
    assert rollout_train.main(["--data", str(data), "--out", str(out), "--epochs", "3", "--batch", "64",
                               "--min-count", "2", "--lanes", "4"]) == 0
    weights = RolloutWeights.load(str(out / "rollout.npz"))
    summary = weights.metadata["summary"]
    assert summary["train_positions"] == 8 * 60 and summary["heldout"]["positions"] == 2 * 60
    assert weights.metadata["command"].startswith("tabula train --model rollout --data")
    assert weights.metadata["summary"]["heldout"]["top1"] > 0.3  # "next to the last move" carries to new games
    assert rollout(GameState(9), RolloutPolicy(weights), np.random.default_rng(0)) in (-1.0, 1.0)
    assert len((out / "metrics.jsonl").read_text().splitlines()) >= 1


def test_tabula_eval_measures_rollout_weights_on_sgf_records(tmp_path, capsys) -> None:
    from tabula.tools.learn import evaluate
    from tests.records_helpers import game_sgf, play_game

    folder = tmp_path / "games"
    folder.mkdir()
    for seed in range(3):
        (folder / f"g{seed}.sgf").write_bytes(game_sgf(play_game(seed, moves=40)))
    _, feats = position_features([random_position(19, 80, random.Random(1))])
    path = str(tmp_path / "rollout.npz")
    random_weights(feats).save(path)
    assert evaluate.main([path, str(folder)]) == 0
    lines = dict(line.split(": ") for line in capsys.readouterr().out.splitlines())
    assert lines["games"] == "3" and lines["positions"] == str(3 * 40) and 0.0 <= float(lines["top1"]) <= 1.0


def test_the_shipped_rollout_weights_load_and_their_model_card_quotes_them() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    weights = RolloutWeights.load(str(root / "weights" / "rollout-patterns.npz"))
    card = (root / "weights" / "MODEL_CARD-rollout-patterns.md").read_text()
    heldout = weights.metadata["summary"]["heldout"]
    assert f"{100 * heldout['top1']:.2f}%" in card and f"{heldout['positions']:,}" in card
    assert weights.metadata["command"] in card.replace(" \\\n    ", " ")
    assert rollout(GameState(9), RolloutPolicy(weights), np.random.default_rng(0)) in (-1.0, 1.0)

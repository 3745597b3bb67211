"""The self-play replay store: round trips, kill-safety, window eviction, the sampler's targets, and the resignation
threshold's calibration maths."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabula.engine.data.replay import (
    AnchoredSampler,
    MixedSizeSampler,
    ReplaySampler,
    ReplayStore,
    SelfPlayGame,
    calibrate_resign_threshold,
    false_positive_rate,
    game_files,
    games_by_size,
    read_game,
    resign_trigger,
    winner_triggers,
)
from tabula.engine.data.shards import PositionSampler
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tabula.engine.rules.game import GameState

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_game(seed: int = 0, moves: int = 12, size: int = 5, recorded_every: int = 2) -> SelfPlayGame:
    """A legal little game on an empty board: ``moves - 2`` random legal moves (a pass where none is left), then two
    passes. Legal throughout, since the store counts a game's end by replaying it."""
    rng = np.random.default_rng(seed)
    state = GameState(size)
    for _ in range(moves - 2):
        legal = [m for m in state.legal_moves() if not state.board.is_own_eye(state.board.geometry.padded[m],
                                                                                   state.to_move)]
        state.play(int(rng.choice(legal)) if legal else PASS)
    state.play(PASS)
    state.play(PASS)
    played = list(state.moves)
    targets = []
    for i, (_, move) in enumerate(played):
        if i % recorded_every:
            targets.append(None)
            continue
        index = size * size if move == PASS else move
        other = (index + 1) % (size * size + 1)
        targets.append((np.array([index, other]), np.array([30, 10])))
    values = np.linspace(-0.5, 0.5, len(played)).tolist()
    return SelfPlayGame(size=size, komi=7.5, moves=played, targets=targets, values=values, winner=WHITE,
                        result="W+7.5", resign_enabled=bool(seed % 2), net="test")


def test_round_trip(tmp_path):
    game = make_game(3)
    with ReplayStore(str(tmp_path), window=10) as store:
        path = store.append(game)
    back = read_game(path)
    assert back.moves == game.moves
    assert back.winner == WHITE and back.result == "W+7.5" and back.resign_enabled == game.resign_enabled
    assert [t is None for t in back.targets] == [t is None for t in game.targets]
    for a, b in zip(back.targets, game.targets):
        if a is not None:
            assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()
    assert np.allclose(back.values, game.values, atol=1e-3)  # float16
    # The file is a plain shard too: the supervised sampler reads it as-is.
    assert PositionSampler([path]).num_positions == len(game.moves)


def test_window_evicts_oldest(tmp_path):
    with ReplayStore(str(tmp_path), window=3) as store:
        for seed in range(5):
            store.append(make_game(seed))
        assert store.total == 5
        assert [os.path.basename(p) for p in store.paths()] == [f"train-{i:09d}.tshard" for i in (2, 3, 4)]
    with ReplayStore(str(tmp_path), window=2) as store:  # a smaller window evicts on opening
        assert store.total == 5 and len(store.paths()) == 2
        store.append(make_game(9))
        assert [seq for seq, _ in game_files(str(tmp_path))] == [4, 5]


def test_partial_write_is_ignored_and_cleaned(tmp_path, monkeypatch):
    directory = str(tmp_path)
    with ReplayStore(directory, window=0) as store:
        store.append(make_game(0))
        store.append(make_game(1))
        # Die between the temporary file and the rename: nothing but a *.tmp* file may remain.
        monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
        with pytest.raises(KeyboardInterrupt):
            store.append(make_game(2))
        monkeypatch.undo()
    leftovers = [n for n in os.listdir(directory) if ".tmp" in n]
    assert leftovers, "the simulated crash should leave a temporary file"
    with open(os.path.join(directory, "train-000000007.tshard.tmp123"), "wb") as handle:
        handle.write(b"TABSHARD\x00\x01")  # a torn write from another crash
    assert len(ReplayStore(directory, window=0, writable=False).paths()) == 2  # readers ignore them
    with ReplayStore(directory, window=0) as store:  # the writer cleans them up and numbers on
        assert store.total == 2
        assert not [n for n in os.listdir(directory) if ".tmp" in n]
        store.append(make_game(2))
        assert [read_game(p).moves for p in store.paths()] == [make_game(s).moves for s in range(3)]


def test_one_writer_at_a_time(tmp_path):
    with ReplayStore(str(tmp_path), window=0):
        with pytest.raises(RuntimeError):
            ReplayStore(str(tmp_path), window=0)


def test_kill_at_any_moment_loses_no_finished_game(tmp_path):
    """A writer killed with SIGKILL mid-stream: every game it reported finished is there and readable."""
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {ROOT!r}); sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from test_replay import make_game
        from tabula.engine.data.replay import ReplayStore
        store = ReplayStore({str(tmp_path)!r}, window=0)
        i = 0
        while True:
            store.append(make_game(i, moves=30))
            print(i, flush=True)
            i += 1
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    reported = []
    deadline = time.time() + 20
    while len(reported) < 10 and time.time() < deadline:
        reported.append(int(child.stdout.readline()))
    child.kill()
    child.wait()
    assert reported, "the writer never finished a game"
    with ReplayStore(str(tmp_path), window=0) as store:
        paths = store.paths()
        assert len(paths) >= len(reported)
        for path in paths:
            read_game(path)  # whole and readable


def test_sampler_draws_recorded_positions_with_pi_targets(tmp_path):
    with ReplayStore(str(tmp_path), window=0) as store:
        games = [make_game(seed) for seed in range(3)]
        for game in games:
            store.append(game)
        sampler = ReplaySampler(store.paths())
    assert sampler.num_targets == sum(g.num_targets for g in games)
    rng = np.random.default_rng(0)
    batch = sampler.batch(rng, 400, symmetries=False)
    assert batch.planes.shape == (400, 18, 5, 5)
    # Each target is the played move (visits 30) or the next index (visits 10): about 3:1.
    batch = sampler.batch(rng, 2000, symmetries=False, positions=np.zeros(2000, dtype=np.int64))
    first = games[0].moves[0][1]
    share = float(np.mean(batch.policy == first))
    assert 0.68 < share < 0.82
    assert set(batch.policy.tolist()) == {first, first + 1}
    # The value target is the result from the mover's view: white won, black moved first.
    assert np.all(batch.value == -1.0)
    # Random symmetries move planes and targets together (the supervised sampler's convention).
    batch = sampler.batch(np.random.default_rng(1), 64)
    assert batch.planes.shape == (64, 18, 5, 5) and batch.policy.max() <= 25


def test_a_window_of_two_sizes_gives_batches_of_one_size_each_in_proportion_to_its_positions(tmp_path):
    """Each batch is one size (one tensor), the size drawn in proportion to its recorded positions, and every target
    (policy, reply, ownership) is of that size; one size alone gives ReplaySampler's own batches."""
    games = [make_game(0, size=5), make_game(1, moves=40, size=7), make_game(2, size=5), make_game(3, size=7)]
    with ReplayStore(str(tmp_path), window=0) as store:
        for game in games:
            store.append(game)
        paths = store.paths()
    sampler = MixedSizeSampler(paths)
    targets = {size: sum(g.num_targets for g in games if g.size == size) for size in (5, 7)}
    assert sampler.targets_by_size == targets and sampler.num_games == 4
    seen = {5: 0, 7: 0}
    for step in range(60):
        batch = sampler.batch_for_step(1, step, 6)
        size = batch.planes.shape[-1]
        assert batch.planes.shape == (6, 18, size, size) and batch.ownership.shape == (6, size * size)
        assert batch.policy.max() <= size * size and batch.reply.max() <= size * size
        assert np.all(batch.ownership_weight == 1)  # every game here was counted at its end
        seen[size] += 1
    share = seen[7] / 60
    expected = targets[7] / (targets[5] + targets[7])
    assert 0 < seen[5] and abs(share - expected) < 0.2
    one = [path for path, game in zip(paths, games) if game.size == 5]
    mixed, plain = MixedSizeSampler(one).batch_for_step(1, 0, 6), ReplaySampler(one).batch_for_step(1, 0, 6)
    assert np.array_equal(mixed.planes, plain.planes) and np.array_equal(mixed.policy, plain.policy)
    assert games_by_size(games) == {5: {"games": 2, "black_wins": 0.0}, 7: {"games": 2, "black_wins": 0.0}}


def test_an_anchored_window_draws_a_share_of_its_batches_from_the_records(tmp_path):
    """Fine-tuning on small-board self-play with 19×19 records beside it: about ``fraction`` of the batches are the
    records' (their board size, their move targets), the rest the window's, each batch a function of (seed, step)."""
    from tabula.engine.data.shards import write_shard
    from tests.records_helpers import learnable_records

    with ReplayStore(str(tmp_path / "window"), window=0) as store:
        for seed in range(3):
            store.append(make_game(seed, size=5))
        window = store.paths()
    records = str(tmp_path / "train-0000.tshard")
    write_shard(records, learnable_records(4, moves=30))
    sampler = AnchoredSampler(window, [records], fraction=0.3)
    sizes = [sampler.batch_for_step(1, step, 4).planes.shape[-1] for step in range(100)]
    assert set(sizes) == {5, 19} and 0.15 < sizes.count(19) / 100 < 0.45
    again = sampler.batch_for_step(1, 7, 4)
    assert np.array_equal(again.planes, sampler.batch_for_step(1, 7, 4).planes)
    assert sampler.targets_by_size == MixedSizeSampler(window).targets_by_size  # the window decides when to train
    with pytest.raises(ValueError):
        AnchoredSampler(window, [records], fraction=1.0)


def test_resign_trigger():
    game = make_game(0, moves=12)
    game.values = [0.0] * 12
    black = [-0.9, -0.8, 0.2, -0.7, -0.95, -0.9]  # black moves 0, 2, 4, ...: winrates .05 .1 .6 .15 .025 .05
    for i, v in enumerate(black):
        game.values[2 * i] = v
    # two in a row: pairs (.05,.1) (.1,.6) (.6,.15) (.15,.025) (.025,.05): max of each, min over pairs = .05
    assert resign_trigger(game, BLACK, consecutive=2, skip_moves=0) == pytest.approx(0.05, abs=1e-3)
    assert resign_trigger(game, BLACK, consecutive=1, skip_moves=0) == pytest.approx(0.025, abs=1e-3)
    assert resign_trigger(game, BLACK, consecutive=2, skip_moves=6) == pytest.approx(0.05, abs=1e-3)
    assert resign_trigger(game, BLACK, consecutive=9, skip_moves=0) == 1.0  # never enough moves to judge


def test_calibration_keeps_false_positives_under_the_target():
    triggers = [i / 100 for i in range(100)]
    threshold = calibrate_resign_threshold(triggers, 0.05, min_games=20)
    assert threshold == pytest.approx(0.04)
    assert false_positive_rate(triggers, threshold) == pytest.approx(0.04)
    assert false_positive_rate(triggers, threshold + 0.01) >= 0.05  # the next step up would be too many
    assert calibrate_resign_threshold(triggers[:19], 0.05, min_games=20) == 0.0  # too few games: never resign
    assert calibrate_resign_threshold([0.9] * 50, 0.05, ceiling=0.3) == 0.3


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=300), st.floats(0.01, 0.5))
def test_calibration_property(triggers, rate):
    threshold = calibrate_resign_threshold(triggers, rate, min_games=1, ceiling=1.0)
    assert false_positive_rate(triggers, threshold) < rate or threshold == 0.0


def test_winner_triggers_use_only_calibration_games():
    games = [make_game(seed) for seed in range(4)]  # odd seeds have resignation enabled
    assert len(winner_triggers(games, consecutive=2)) == 2

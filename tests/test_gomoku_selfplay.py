"""Self-play, the replay window, the trainer, export and the RL loop on gomoku (``--game gomoku``): the same code as
Go's, given the game at the entry point (engine/rules/games.py). Targets: the visit distribution as policy, the
result from the mover's view (0 for a draw) as value; no score or ownership."""
from __future__ import annotations

import os

import numpy as np
import pytest

from tabula.engine.data.replay import MixedSizeSampler, ReplayStore, read_game
from tabula.engine.net.evaluator import OnnxEvaluator, UniformEvaluator
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.games import GameSpec, result_of
from tabula.engine.rules.gomoku import GomokuState
from tabula.tools.learn.selfplay import NetBlob, SelfPlayConfig, SelfPlayTask, play_selfplay_game

SIZE = 7
GOMOKU = SelfPlayConfig(game="gomoku", n_in_row=4, sizes=(SIZE,), komi=0.0, visits=24, fast_visits=0,
                        temperature_moves=6, batch_size=4, c_puct=5.0)


def games(count: int) -> list:
    found = []
    for seed in range(count):
        task = SelfPlayTask(NetBlob("uniform", b""), GOMOKU, seed=seed, resign_threshold=0.0, resign_enabled=False,
                            size=SIZE)
        found.append(play_selfplay_game(task, evaluator=UniformEvaluator()))
    return found


@pytest.fixture(scope="module")
def played():
    return games(3)


def test_a_gomoku_selfplay_game_is_played_to_its_end_with_a_target_at_every_move(played):
    for game, sgf in played:
        assert game.game == GameSpec("gomoku", 4)
        state = GomokuState(SIZE, n_in_row=4)
        for (color, move), target in zip(game.moves, game.targets):
            assert target is not None and target[1].sum() > 0
            assert set(target[0].tolist()) <= set(state.legal_moves())  # no pass entry
            state.play(move, color)
        assert state.terminal_value() is not None  # a row, or a full board
        assert (game.winner, game.result) == result_of(state)
        assert game.result in ("B+", "W+", "0")
        assert sgf.startswith(b"(;GM[4]") and f"RE[{game.result}]".encode() in sgf


def test_result_of_a_gomoku_win_and_a_go_count():
    state = GomokuState(5, n_in_row=3)
    for move in (0, 5, 1, 6, 2):
        state.play(move)
    assert result_of(state) == (BLACK, "B+")
    go = GameSpec().new_state(5, komi=0.5)
    assert result_of(go) == (WHITE, "W+0.5")  # not over: counted now


def test_the_window_gives_visit_targets_and_results_from_the_movers_view(played, tmp_path):
    with ReplayStore(str(tmp_path / "replay"), 10) as store:
        for game, _ in played:
            store.append(game)
        paths = store.paths()
    back = read_game(paths[0])
    assert back.game == GameSpec("gomoku", 4) and back.moves == played[0][0].moves
    sampler = MixedSizeSampler(paths)
    assert sampler.game == GameSpec("gomoku", 4)
    batch = sampler.batch(np.random.default_rng(0), 64)
    assert batch.planes.shape == (64, 4, SIZE, SIZE)
    assert batch.policy.max() < SIZE * SIZE
    assert set(np.unique(batch.value).tolist()) <= {-1.0, 0.0, 1.0}
    assert not batch.score_weight.any() and not batch.ownership_weight.any()
    # the value target is the result from the side to move's view: plane 3 is ones where black is to move
    winners = {i: game.winner for i, (game, _) in enumerate(played)}
    black_to_move = batch.planes[:, 3, 0, 0] == 1.0
    plain = sampler.samplers[SIZE]
    for row in range(8):
        game_index, k = plain.locate(plain.target_positions[[row]])
        state, _, value, _ = plain.state(int(game_index[0]), int(k[0]))
        winner = winners[int(game_index[0])]
        assert value == (0.0 if winner == 0 else 1.0 if winner == state.to_move else -1.0)
    assert black_to_move.any() and (~black_to_move).any()


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_the_trainer_trains_and_exports_a_gomoku_network(played, tmp_path):
    pytest.importorskip("torch")
    from tabula.engine.net.network import load_checkpoint
    from tabula.tools.learn.train import TrainConfig, train

    with ReplayStore(str(tmp_path / "replay"), 10) as store:
        for game, _ in played:
            store.append(game)
    config = TrainConfig(data=str(tmp_path / "replay"), out=str(tmp_path / "train"), blocks=1, filters=8, steps=3,
                         batch=16, optimizer="adamw", lr=1e-3, warmup_steps=0, lr_drops="", device="cpu",
                         precision="fp32", threads=1, workers=0, val_every=1 << 30, val_positions=0,
                         input_encoding="gomoku-4")
    os.makedirs(config.data, exist_ok=True)
    for path in store.paths():  # the trainer reads train-*.tshard: the window's own names
        assert os.path.basename(path).startswith("train-")
    train(config, log=lambda line: None, make_sampler=MixedSizeSampler, fixed_data=False)
    model = load_checkpoint(os.path.join(config.out, "checkpoint.pt"))
    assert model.spec.input_encoding == "gomoku-4" and model.spec.board_size == SIZE
    onnx = os.path.join(config.out, "model.onnx")
    assert os.path.exists(onnx)
    evaluator = OnnxEvaluator(onnx, symmetry="identity", provider="cpu", log=None)
    assert evaluator.evaluate([GomokuState(SIZE, n_in_row=4)]).policy.shape == (1, SIZE * SIZE)
    with pytest.raises(SystemExit, match="gomoku"):  # the network's input must be the game's
        train(TrainConfig(**{**config.to_dict(), "out": str(tmp_path / "other"), "input_encoding": "leelaz-18"}),
              log=lambda line: None, make_sampler=MixedSizeSampler, fixed_data=False)


def test_gomoku_settings_are_checked():
    with pytest.raises(ValueError, match="unknown game"):
        SelfPlayConfig(game="chess")
    with pytest.raises(ValueError, match="outside"):
        SelfPlayConfig(game="gomoku", sizes=(4,))
    with pytest.raises(ValueError, match="n_in_row"):
        SelfPlayConfig(game="gomoku", n_in_row=7)
    from tabula.engine.net.network import POOLED, NetSpec

    with pytest.raises(ValueError, match="for Go"):
        NetSpec(head=POOLED, aux=True, input_encoding="gomoku-4")


@pytest.mark.slow
def test_the_rl_loop_plays_trains_gates_and_resumes_on_gomoku(tmp_path, capsys):
    from tabula.tools.learn.rl_loop import ELO, main, read_jsonl, trained_steps

    directory = str(tmp_path / "run")
    args = ["--dir", directory, "--game", "gomoku", "--size", str(SIZE), "--n-in-row", "4", "--komi", "0",
            "--blocks", "1", "--filters", "8", "--visits", "12", "--fast-visits", "0", "--games-per-generation", "3",
            "--min-positions", "5", "--train-steps", "2", "--batch", "8", "--warmup-steps", "0", "--gate-games", "2",
            "--gate-visits", "6", "--train-threads", "1", "--train-workers", "0", "--generations", "1",
            "--optimizer", "adamw", "--lr", "0.001", "--keep", str(tmp_path / "kept")]
    assert main(args) == 0
    assert trained_steps(directory) == 2
    assert len(read_jsonl(os.path.join(directory, ELO))) == 1
    with open(os.path.join(directory, "sgf", "000000000.sgf"), "rb") as handle:
        assert handle.read().startswith(b"(;GM[4]")
    assert main(args) == 0  # resumes: one more generation
    assert trained_steps(directory) == 4
    assert os.path.exists(tmp_path / "kept" / "train" / "checkpoint.pt")

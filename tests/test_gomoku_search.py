"""The search on gomoku, through the game interface: with the uniform stand-in and with a tiny random gomoku network
(exported to ONNX and read back through OnnxEvaluator), it takes an immediate win and blocks an immediate loss; the
tree stays consistent; a network of one game refuses the positions of the other."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tabula.engine.config import SearchConfig
from tabula.engine.net.evaluator import OnnxEvaluator, UniformEvaluator
from tabula.engine.play.search import Search
from tabula.engine.play.tree import EXPANDED, TERMINAL
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.game import GameState
from tabula.engine.rules.gomoku import GomokuState
from tests.test_search import check_tree

SIZE = 7
# A value that says nothing (uniform, or a random network) gives no first-play reduction a reason: every reply is
# tried, so that the move that wins or loses at once is found by its terminal value.
CONFIG = SearchConfig(threads=1, fpu_reduction=0.0, cpuct_utility_stdev_scale=0.0)  # gomocup's exploration


def position(black: list[int], white: list[int], to_move: int = BLACK) -> GomokuState:
    state = GomokuState(SIZE)
    for move in black:
        state.play(move, BLACK)
    for move in white:
        state.play(move, WHITE)
    state.to_move = to_move
    return state


def point(x: int, y: int) -> int:
    return y * SIZE + x


# Black has four in a row on row 3 (x 1..4), open at both ends; white has scattered stones.
WIN = ([point(x, 3) for x in range(1, 5)], [point(0, 0), point(1, 0), point(2, 0), point(6, 6)])
WINNING = {point(0, 3), point(5, 3)}
# White has four on row 5 (x 1..4), closed at x 0 by black: black must take x 5 or lose.
BLOCK = ([point(0, 5), point(0, 0), point(1, 1), point(2, 2)], [point(x, 5) for x in range(1, 5)])
BLOCKING = point(5, 5)


@pytest.fixture(scope="module")
def tiny_gomoku_onnx(tmp_path_factory) -> Path:
    """A pooled gomoku-4 network, 1 block x 8 channels, random weights (not calibrated: priors near uniform)."""
    from tabula.engine.net.network import POOLED, NetSpec, export_onnx, random_network

    spec = NetSpec(blocks=1, filters=8, head=POOLED, head_channels=8, value_hidden=16, input_encoding="gomoku-4")
    path = tmp_path_factory.mktemp("net") / "tiny_gomoku.onnx"
    export_onnx(random_network(spec, seed=4), path, provenance="tests: random seed 4", board_sizes=[SIZE, 9])
    return path


def evaluators(onnx: Path | None):
    if onnx is None:
        return UniformEvaluator()
    return OnnxEvaluator(onnx, symmetry="random", rng=np.random.default_rng(0), provider="cpu", log=None)


def evaluator_for(network: bool, request):
    """The uniform stand-in, or the tiny network (built only for the tests that use it)."""
    return evaluators(request.getfixturevalue("tiny_gomoku_onnx") if network else None)


@pytest.mark.parametrize("network", [False, True], ids=["uniform", "network"])
def test_the_search_takes_an_immediate_win(network, request):
    search = Search(evaluator_for(network, request), CONFIG, rng=np.random.default_rng(1))
    result = search.run(position(*WIN), visits=800)
    assert result.move in WINNING
    assert result.candidates[0].value == pytest.approx(1.0)
    check_tree(search)


@pytest.mark.slow
@pytest.mark.parametrize("network", [False, True], ids=["uniform", "network"])
def test_the_search_blocks_an_immediate_loss(network, request):
    search = Search(evaluator_for(network, request), CONFIG, rng=np.random.default_rng(1))
    result = search.run(position(*BLOCK), visits=3200)
    assert result.move == BLOCKING
    others = [c for c in result.candidates if c.move != BLOCKING and c.visits >= 20]
    assert others and all(c.value < result.candidates[0].value for c in others)


def test_finished_games_are_terminal_nodes_with_the_winners_value():
    search = Search(UniformEvaluator(), CONFIG, rng=np.random.default_rng(2))
    search.run(position(*WIN), visits=400)
    root = search.tree.root
    terminal = [root.children[i] for i in root.children if root.children[i].status == TERMINAL]
    assert terminal and all(node.value == -1.0 for node in terminal)  # the side to move there has lost
    assert {int(root.moves[i]) for i in root.children if root.children[i].status == TERMINAL} <= WINNING


def test_gomoku_children_are_the_legal_points_and_no_pass():
    state = position(*BLOCK)
    search = Search(UniformEvaluator(), CONFIG, rng=np.random.default_rng(3))
    search.run(state, visits=50)
    root = search.tree.root
    assert root.status == EXPANDED
    assert sorted(root.moves.tolist()) == state.legal_moves()


def test_a_gomoku_game_reuses_its_tree_and_plays_legal_moves_to_the_end():
    state = GomokuState(SIZE, n_in_row=4)
    search = Search(UniformEvaluator(), SearchConfig(threads=2, batch_size=4), rng=np.random.default_rng(4))
    while state.terminal_value() is None:
        result = search.run(state, visits=64)
        assert state.legal_mask()[result.move]
        state.play(result.move)
        check_tree(search)
        if len(state.moves) > 2:
            assert result.reused_visits > 0 or len(state.moves) < 3
    assert state.terminal_value() in (-1.0, 0.0)


def test_noise_and_root_symmetries_work_on_gomoku(tiny_gomoku_onnx):
    # no early stop: whether one move's lead is safe after some of the 100 visits depends on the random network's
    # outputs, which differ in their last bits between onnxruntime builds
    search = Search(evaluators(tiny_gomoku_onnx), SearchConfig(threads=1, noise=True, early_stop=False),
                    rng=np.random.default_rng(5))
    result = search.run(GomokuState(9), visits=100)
    assert search.tree.root.averaged and result.root_visits == 100


def test_a_network_refuses_positions_of_the_other_game(tiny_gomoku_onnx, tiny_pooled_onnx):
    gomoku = evaluators(tiny_gomoku_onnx)
    with pytest.raises(ValueError, match="another game"):
        gomoku.evaluate([GameState(SIZE)])
    go = OnnxEvaluator(tiny_pooled_onnx, provider="cpu", log=None)
    with pytest.raises(ValueError, match="another game"):
        go.evaluate([GomokuState(9)])
    evaluation = gomoku.evaluate([GomokuState(9)])
    assert evaluation.policy.shape == (1, 81) and evaluation.policy.sum() == pytest.approx(1.0)
    assert gomoku.encoding.name == "gomoku-4" and gomoku.board_sizes == (SIZE, 9)


def test_a_finished_game_is_not_searched():
    state = position(*WIN)
    state.play(point(5, 3))  # black's fifth stone
    assert state.terminal_value() == -1.0
    with pytest.raises(ValueError, match="game is over"):
        Search(UniformEvaluator(), CONFIG).run(state, visits=10)

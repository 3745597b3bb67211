"""Gomoku's rules (engine/rules/gomoku.py) and its input planes and symmetries (engine/net/gomoku_features.py)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from tabula.engine.net import gomoku_features
from tabula.engine.net.features import NUM_SYMMETRIES, transform_planes
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, RESIGN, WHITE
from tabula.engine.rules.gomoku import GomokuRules, GomokuState, IllegalMoveError
from tabula.engine.rules.interface import Game, game_key


def at(state: GomokuState, x: int, y: int) -> int:
    return y * state.width + x


def place(state: GomokuState, points: list[tuple[int, int]], color: int) -> None:
    for x, y in points:
        state.play(at(state, x, y), color)


def snapshot(state: GomokuState) -> tuple:
    return (bytes(state.grid), state.to_move, list(state.moves), sorted(state.empty), state.hash, state.winner)


LINES = {  # four stones of a five and the point that completes it, in each direction, some along the edges
    "horizontal": ([(0, 0), (1, 0), (2, 0), (3, 0)], (4, 0)),
    "vertical": ([(8, 4), (8, 5), (8, 6), (8, 8)], (8, 7)),
    "diagonal": ([(2, 2), (3, 3), (5, 5), (6, 6)], (4, 4)),
    "antidiagonal": ([(8, 0), (7, 1), (6, 2), (5, 3)], (4, 4)),
}


@pytest.mark.parametrize("direction", sorted(LINES))
def test_five_in_a_row_wins_in_every_direction(direction):
    stones, last = LINES[direction]
    state = GomokuState(9)
    place(state, stones, BLACK)
    assert state.terminal_value() is None and state.winner is None
    state.play(at(state, *last), BLACK)
    assert state.winner == BLACK
    assert state.to_move == WHITE
    assert state.terminal_value() == -1.0  # the side to move lost
    assert state.legal_moves() == [] and not state.legal_mask().any()


def test_lines_do_not_wrap_around_the_edges():
    state = GomokuState(9)
    # Five flat points in a row of steps 1, 10 and 8 (= one to the right, up-right, up-left on a 9-wide board
    # without a border): each crosses an edge, so none is a line.
    for start, step, color in ((7, 1, BLACK), (32, 10, WHITE), (19, 8, BLACK)):
        for i in range(5):
            state.play(start + i * step, color)
    assert state.winner is None and state.terminal_value() is None


def test_an_overline_wins_in_freestyle():
    state = GomokuState(9)
    place(state, [(0, 3), (1, 3), (2, 3), (4, 3), (5, 3)], WHITE)
    assert state.winner is None
    state.play(at(state, 3, 3), WHITE)  # six in a row
    assert state.winner == WHITE


@pytest.mark.parametrize("n_in_row", [3, 4, 5, 6])
def test_n_in_a_row_wins_and_n_minus_one_does_not(n_in_row):
    state = GomokuState(7, n_in_row=n_in_row)
    place(state, [(x, 2) for x in range(n_in_row - 1)], BLACK)
    place(state, [(x, 5) for x in range(n_in_row - 1)], WHITE)
    assert state.terminal_value() is None
    state.play(at(state, n_in_row - 1, 5), WHITE)
    assert state.winner == WHITE
    assert state.rules == GomokuRules(n_in_row)


def test_a_full_board_without_a_winner_is_a_draw():
    rows = ["XXOOX", "OOXXO", "XXOOX", "OOXXO", "XXOOX"]  # top row first; no line of five anywhere
    black = [(x, 4 - i) for i, row in enumerate(rows) for x, cell in enumerate(row) if cell == "X"]
    white = [(x, 4 - i) for i, row in enumerate(rows) for x, cell in enumerate(row) if cell == "O"]
    state = GomokuState(5)
    for i in range(len(black)):
        assert state.terminal_value() is None
        state.play(at(state, *black[i]))
        if i < len(white):
            state.play(at(state, *white[i]))
    assert state.winner is None
    assert state.terminal_value() == 0.0
    assert state.legal_moves() == []
    with pytest.raises(IllegalMoveError):
        state.play(0)


@pytest.mark.parametrize("args", [(4,), (21,), (5, 4), (20, 21), (9, 9, 2), (9, 9, 7), (5, 5, 6), (9.0,), (True,)])
def test_bad_sizes_are_refused_clearly(args):
    with pytest.raises(ValueError, match="gomoku|cannot fit"):
        GomokuState(*args)


def test_rectangular_boards_play_but_have_no_square_size():
    state = GomokuState(6, 9, n_in_row=4)
    assert (state.width, state.height, state.policy_size) == (6, 9, 54)
    with pytest.raises(ValueError, match="not square"):
        state.size
    place(state, [(5, 8), (5, 7), (5, 6), (5, 5)], BLACK)
    assert state.winner == BLACK


@pytest.mark.parametrize("move", [-1, PASS, RESIGN, 81, 1000, True, 3.0])
def test_illegal_moves_raise_and_leave_the_state_unchanged(move):
    state = GomokuState(9)
    state.play(40)
    before = snapshot(state)
    with pytest.raises(IllegalMoveError):
        state.play(move)
    assert snapshot(state) == before


def test_occupied_points_and_finished_games_refuse_moves_unchanged():
    state = GomokuState(9)
    state.play(40)
    before = snapshot(state)
    with pytest.raises(IllegalMoveError, match="occupied"):
        state.play(40)
    assert snapshot(state) == before
    place(state, [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)], WHITE)
    before = snapshot(state)
    with pytest.raises(IllegalMoveError, match="game over"):
        state.play(at(state, 8, 8))
    assert snapshot(state) == before
    assert isinstance(IllegalMoveError("x"), ValueError)


def test_hash_includes_the_side_to_move_and_forgets_the_order_of_moves():
    a, b = GomokuState(9), GomokuState(9)
    for move in (10, 20, 30, 40):
        a.play(move)
    for move in (30, 40, 10, 20):  # the same stones of the same colours, another order
        b.play(move)
    assert a.hash == b.hash
    c = a.copy()
    c.to_move = BLACK if c.to_move == WHITE else WHITE
    assert c.hash != a.hash
    empty = GomokuState(9)
    empty_white = GomokuState(9)
    empty_white.to_move = WHITE
    assert empty.hash != empty_white.hash


def test_undo_restores_the_position():
    state = GomokuState(9)
    state.play(40)
    before = snapshot(state)
    state.play(41)
    state.undo()
    assert snapshot(state) == before
    place(state, [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)], WHITE)
    state.undo()
    assert state.winner is None and state.terminal_value() is None


def test_copies_are_independent():
    state = GomokuState(9)
    state.play(40)
    other = state.copy()
    other.play(41)
    assert state.color_at(41) == EMPTY and other.color_at(41) == WHITE
    assert len(state.moves) == 1 and len(other.moves) == 2
    assert 41 in state.legal_moves() and 41 not in other.legal_moves()
    assert state.hash != other.hash


def test_legal_moves_mask_and_colors_agree():
    state = GomokuState(7, 5, n_in_row=4)
    rng = random.Random(3)
    for _ in range(12):
        state.play(rng.choice(state.legal_moves()))
    mask = state.legal_mask()
    assert mask.shape == (35,) and mask.dtype == bool
    assert sorted(np.flatnonzero(mask).tolist()) == state.legal_moves()
    colors = state.colors()
    for color, move in state.moves:
        assert colors[move] == color == state.color_at(move)
    assert (colors == EMPTY).sum() == len(state.legal_moves())


def test_the_state_satisfies_the_game_interface():
    state = GomokuState(9)
    assert isinstance(state, Game)
    assert state.INPUT_ENCODING == gomoku_features.INPUT_ENCODING == "gomoku-4"
    assert game_key(state) != game_key(GomokuState(9, n_in_row=4))


def test_random_playouts_leave_the_state_alone_and_are_seeded():
    state = GomokuState(9)
    state.play(40)
    before = snapshot(state)
    values = [state.random_playout_value(random.Random(seed)) for seed in range(20)]
    assert snapshot(state) == before
    assert set(values) <= {-1.0, 0.0, 1.0} and len(set(values)) > 1
    assert values == [state.random_playout_value(random.Random(seed)) for seed in range(20)]
    won = GomokuState(9)
    place(won, [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)], BLACK)
    assert won.random_playout_value(random.Random(0)) == -1.0


def test_a_playout_from_an_open_four_usually_wins():
    state = GomokuState(9)
    place(state, [(2, 4), (3, 4), (4, 4), (5, 4)], BLACK)  # open four: black to move wins at once half the time
    place(state, [(0, 0), (8, 8), (0, 8)], WHITE)
    state.to_move = BLACK
    rng = random.Random(1)
    wins = sum(state.random_playout_value(rng) == 1.0 for _ in range(200))
    assert wins > 140


# -- input planes and symmetries -----------------------------------------------------------------------------------

def test_the_four_planes():
    state = GomokuState(9)
    state.play(at(state, 4, 4))  # black
    state.play(at(state, 5, 4))  # white; black to move
    planes = gomoku_features.encode(state)
    assert planes.shape == (4, 9, 9) and planes.dtype == np.float32
    assert planes[0, 4, 4] == 1 and planes[0].sum() == 1  # black's own stones, row y from the bottom
    assert planes[1, 4, 5] == 1 and planes[1].sum() == 1
    assert planes[2, 4, 5] == 1 and planes[2].sum() == 1  # the last move
    assert (planes[3] == 1).all()  # black to move
    state.play(at(state, 0, 8))  # white to move now
    planes = gomoku_features.encode(state)
    assert planes[0, 4, 5] == 1 and planes[1, 4, 4] == 1 and planes[1, 8, 0] == 1
    assert planes[2, 8, 0] == 1 and (planes[3] == 0).all()
    assert not gomoku_features.encode(GomokuState(9))[:3].any()


def test_a_batch_needs_one_shape_and_rectangles_have_no_symmetries():
    with pytest.raises(ValueError):
        gomoku_features.encode_batch([])
    with pytest.raises(ValueError, match="one batch"):
        gomoku_features.encode_batch([GomokuState(9), GomokuState(7)])
    rect = GomokuState(6, 8)
    rect.play(at(rect, 5, 7))
    planes = gomoku_features.encode_batch([rect])
    assert planes.shape == (1, 4, 8, 6) and planes[0, 0 if rect.to_move == BLACK else 1, 7, 5] == 1
    with pytest.raises(ValueError, match="symmetries"):
        gomoku_features.encode_batch([rect], np.array([1]))


def random_states(count: int, size: int, seed: int) -> list[GomokuState]:
    rng = random.Random(seed)
    states = []
    for _ in range(count):
        state = GomokuState(size)
        for _ in range(rng.randrange(1, 12)):
            state.play(rng.choice(state.legal_moves()))
        states.append(state)
    return states


def test_encoding_under_a_symmetry_is_the_planes_transformed():
    states = random_states(NUM_SYMMETRIES, 7, seed=5)
    symmetries = np.arange(NUM_SYMMETRIES)
    direct = gomoku_features.encode_batch(states, symmetries)
    assert np.array_equal(direct, transform_planes(gomoku_features.encode_batch(states), symmetries))
    assert np.array_equal(gomoku_features.encode_batch(states, np.zeros(8, dtype=int)),
                          gomoku_features.encode_batch(states))


def test_policy_symmetries_follow_the_planes_and_invert():
    state = random_states(1, 7, seed=9)[0]
    last = state.last_move
    onehot = np.zeros(49, dtype=np.float32)
    onehot[last] = 1.0
    for symmetry in range(NUM_SYMMETRIES):
        planes = gomoku_features.encode_batch([state], np.array([symmetry]))[0]
        moved = gomoku_features.transform_policy(onehot, symmetry)
        assert np.array_equal(moved.reshape(7, 7), planes[2])  # the last-move plane and the policy agree
        back = gomoku_features.inverse_transform_policy(moved, symmetry)
        assert np.array_equal(back, onehot)
    batch = np.random.default_rng(0).random((NUM_SYMMETRIES, 49)).astype(np.float32)
    symmetries = np.arange(NUM_SYMMETRIES)
    moved = gomoku_features.transform_policy(batch, symmetries)
    assert np.array_equal(gomoku_features.inverse_transform_policy(moved, symmetries), batch)
    assert len({moved[s].tobytes() for s in range(NUM_SYMMETRIES)}) == NUM_SYMMETRIES
    with pytest.raises(ValueError, match="N\\*N"):
        gomoku_features.transform_policy(np.zeros(50), 1)  # Go's policy, with a pass entry

"""Random playouts: legality, own eyes never filled, ownership, dead stones, seki, cleanup moves."""
from __future__ import annotations

import random

import numpy as np

from tabula.engine.rules.board import EMPTY
from tabula.engine.rules.coords import BLACK, PASS, WHITE, parse_vertex
from tabula.engine.rules.game import GameState
from tabula.engine.rules.playout import (
    Playout,
    area_owners,
    cleanup_move,
    dead_stones,
    ownership,
    playout,
    random_move,
    seki_stones,
)
from tests.conftest import (
    SEKI_INNER_BLACK,
    SEKI_INNER_WHITE,
    SEKI_NO_EYES,
    SEKI_ONE_EYE_EACH,
    SEKI_SHARED_EYES,
    SEKI_SHARED_EYES_BLACK,
    SEKI_SHARED_EYES_WHITE,
    board_from_ascii,
)


def test_random_game_is_legal_and_never_fills_own_eyes(rng: random.Random) -> None:
    for size in (5, 9):
        state = GameState(size)
        while not state.is_game_over():
            color = state.to_move
            move = random_move(state, rng)
            if move != PASS:
                assert state.legal(move)
                assert not state.board.is_own_eye(state.board.geometry.padded[move], color)
            else:
                legal = state.legal_moves()
                assert all(state.board.is_own_eye(state.board.geometry.padded[m], color) for m in legal)
            state.play(move)
            assert len(state.moves) < 3 * size * size


def test_random_move_is_uniform(rng: random.Random) -> None:
    state = board_from_ascii("""
        X X X
        X . .
        X . O
    """, to_move=BLACK)
    counts = {}
    for _ in range(600):
        move = random_move(state, rng)
        counts[move] = counts.get(move, 0) + 1
    assert set(counts) == {parse_vertex(v, 3) for v in ("B2", "C2", "B1")}
    assert min(counts.values()) > 150


def test_playout_leaves_the_state_alone_and_ends_settled(rng: random.Random) -> None:
    state = GameState(9)
    state.play(parse_vertex("E5", 9))
    before = state.board.color[:]
    board = playout(state, rng)
    assert state.board.color == before
    empties = [pad for pad in board.geometry.padded if board.color[pad] == EMPTY]
    # every empty point left is somebody's single-point eye
    assert all(board.is_own_eye(p, BLACK) or board.is_own_eye(p, WHITE) for p in empties)


def test_playout_keeps_its_empty_list_exact(rng: random.Random) -> None:
    run = Playout(GameState(7).board.copy())
    color = BLACK
    for _ in range(120):
        run.step(color, rng)
        color = 3 - color
        board = run.board
        actual = sorted(p for p in board.geometry.padded if board.color[p] == EMPTY)
        assert sorted(run.empties) == actual
        assert all(run.where[p] == i for i, p in enumerate(run.empties))


def test_playout_max_moves(rng: random.Random) -> None:
    board = playout(GameState(9), rng, max_moves=3)
    assert sum(1 for p in board.geometry.padded if board.color[p] != EMPTY) <= 3


SETTLED = """
    . X O . O
    X X O O O
    . X O . O
    X X O O O
    . X O . O
"""


def test_ownership_of_a_settled_position(rng: random.Random) -> None:
    state = board_from_ascii(SETTLED)
    owned = ownership(state, rng, playouts=8)
    assert owned.shape == (25,) and owned.dtype == np.float32
    expected = np.array([1.0 if x < 2 else -1.0 for y in range(5) for x in range(5)], dtype=np.float32)
    assert np.array_equal(owned, expected)
    assert dead_stones(state, owned) == []
    assert area_owners(state.board).count(BLACK) == 10


def test_a_lone_stone_in_enemy_area_is_dead(rng: random.Random) -> None:
    state = board_from_ascii("""
        . . X . X . .
        . . X . X . .
        . . X . X . .
        O . X . X . .
        . . X . X . .
        . . X . X . .
        . . X . X . .
    """, to_move=WHITE)
    owned = ownership(state, rng, playouts=48)
    assert dead_stones(state, owned) == [parse_vertex("A4", 7)]
    assert all(owned[parse_vertex(v, 7)] > 0.5 for v in ("C1", "E7", "G4"))
    move = cleanup_move(state, BLACK, owned, rng)
    assert move in {parse_vertex(v, 7) for v in ("A5", "A3", "B4")}
    assert cleanup_move(state, WHITE, owned, rng) == PASS  # black has no dead stones


def test_seki_with_one_eye_each_and_two_shared_liberties() -> None:
    # Each inner string has one eye (B7, F7) and shares D7 and D6; each is walled in by the other's live group.
    seki = seki_stones(board_from_ascii(SEKI_ONE_EYE_EACH), [])
    assert seki == sorted(parse_vertex(v, 7) for v in SEKI_INNER_BLACK + SEKI_INNER_WHITE)


def test_seki_with_no_eyes() -> None:
    # The inner strings share D7 and D6 and have no other liberty: whoever fills one is captured.
    seki = seki_stones(board_from_ascii(SEKI_NO_EYES), [])
    assert len(seki) == 15 and parse_vertex("A7", 7) in seki and parse_vertex("E5", 7) in seki


def test_a_string_whose_eyes_are_shared_with_strings_in_seki_lives_by_the_seki() -> None:
    # Black's J13 string has two one-point regions of black beside it, L13 and L11, but it shares each with a black
    # string in seki (M13, M11): its life is the seki's, and so is its count.
    seki = seki_stones(board_from_ascii(SEKI_SHARED_EYES), [])
    assert seki == sorted(parse_vertex(v, 13) for v in SEKI_SHARED_EYES_BLACK + SEKI_SHARED_EYES_WHITE)


def test_no_seki_where_a_string_can_connect_out() -> None:
    # As the seki above, but black fills D6 and joins its outside group (D5), which white cannot: white's top
    # string is short of liberties, not in seki.
    state = board_from_ascii("""
        X X X . O O O
        X X X . O O O
        O O O X X X X
        O O O X . . .
        O O O X . . .
        . . O X . . .
        . . O X . . .
    """)
    assert seki_stones(state, []) == []


def test_no_seki_between_groups_with_two_eyes() -> None:
    state = board_from_ascii("""
        . X . O . O
        X X . O O .
        . X . O . O
        X X . O O O
        . X . O . O
        X X . O O O
    """)
    assert seki_stones(state, []) == []

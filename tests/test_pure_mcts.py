"""The baselines (engine/play/pure_mcts.py): pure MCTS with random rollouts, and the random player."""
from __future__ import annotations

import random

import pytest

from tabula.engine.play.pure_mcts import PureMctsPicker, RandomPicker, random_rollout_value
from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.gomoku import GomokuState


def position(width: int, n_in_row: int, black: list[tuple[int, int]], white: list[tuple[int, int]],
             to_move: int = BLACK) -> GomokuState:
    state = GomokuState(width, n_in_row=n_in_row)
    for x, y in black:
        state.play(y * width + x, BLACK)
    for x, y in white:
        state.play(y * width + x, WHITE)
    state.to_move = to_move
    return state


# 6x6, four in a row: black's three on the middle row is blocked on the left, so (4, 2) is its one winning point.
THREE = [(1, 2), (2, 2), (3, 2)]
BLOCKER = [(0, 2)]
ELSEWHERE = [(4, 4), (0, 0)]
POINT = 2 * 6 + 4


@pytest.mark.parametrize("seed", range(5))
def test_finds_an_immediate_win(seed):
    state = position(6, 4, black=THREE, white=BLOCKER + ELSEWHERE)
    assert PureMctsPicker(playouts=500, rng=seed).pick(state) == POINT


@pytest.mark.parametrize("seed", range(5))
def test_blocks_an_immediate_loss(seed):
    state = position(6, 4, black=BLOCKER + ELSEWHERE, white=THREE)
    assert PureMctsPicker(playouts=2000, rng=seed).pick(state) == POINT


def test_the_same_seed_searches_the_same_tree():
    state = position(7, 5, black=[(3, 3)], white=[(4, 3)])
    first = PureMctsPicker(playouts=300, rng=11).visit_counts(state)
    assert first == PureMctsPicker(playouts=300, rng=11).visit_counts(state)
    assert sum(first.values()) == 300 - 1  # the first playout only expands the root
    assert first != PureMctsPicker(playouts=300, rng=12).visit_counts(state)


def test_the_search_leaves_the_position_alone():
    state = position(7, 5, black=[(3, 3)], white=[(4, 3)])
    before = (bytes(state.grid), list(state.moves), state.to_move, state.hash)
    PureMctsPicker(playouts=100, rng=0).pick(state)
    assert (bytes(state.grid), list(state.moves), state.to_move, state.hash) == before


def test_a_budget_stops_the_search_early(fake_clock):
    def ticking() -> float:
        fake_clock.advance(0.01)  # every reading of the clock is 10 ms later
        return fake_clock()

    search = PureMctsPicker(playouts=10_000, rng=0, clock=ticking)
    search.pick(GomokuState(9), budget_s=0.5)
    assert 40 <= search.last_playouts <= 60
    search.pick(GomokuState(9), budget_s=0.0)
    assert search.last_playouts == 2  # the root's expansion and one child, so that there is a move


def test_the_only_move_is_played_at_once_and_finished_games_refuse():
    rows = ["XXOOX", "OOXXO", "XXOOX", "OOXXO", "XXOO."]  # no line of five; one point left
    black = [(x, 4 - i) for i, row in enumerate(rows) for x, cell in enumerate(row) if cell == "X"]
    white = [(x, 4 - i) for i, row in enumerate(rows) for x, cell in enumerate(row) if cell == "O"]
    state = position(5, 5, black=black, white=white)
    search = PureMctsPicker(playouts=50, rng=0)
    assert search.pick(state) == 4
    state.play(4)
    assert state.terminal_value() == 0.0
    with pytest.raises(ValueError, match="over"):
        search.pick(state)
    with pytest.raises(ValueError, match="over"):
        RandomPicker(0).pick(state)
    with pytest.raises(ValueError):
        PureMctsPicker(playouts=0)


def test_the_random_player_plays_legal_seeded_moves():
    state = GomokuState(9)
    moves = []
    player = RandomPicker(random.Random(4))
    while state.terminal_value() is None:
        move = player.pick(state)
        assert move in state.legal_moves()
        state.play(move)
        moves.append(move)
    again = GomokuState(9)
    replay = RandomPicker(4)
    for move in moves:
        assert replay.pick(again) == move
        again.play(move)


class Subtraction:
    """A toy game for the game-agnostic path (no fast rollout hook): take 1 or 2 from a pile; whoever takes the last
    one wins. Piles that are multiples of 3 are lost for the side to move."""

    def __init__(self, pile: int, to_move: int = BLACK):
        self.pile = pile
        self.to_move = to_move

    def copy(self) -> "Subtraction":
        return Subtraction(self.pile, self.to_move)

    def legal_moves(self) -> list[int]:
        return [take for take in (1, 2) if take <= self.pile]

    def play(self, move: int) -> None:
        if move not in self.legal_moves():
            raise ValueError("illegal")
        self.pile -= move
        self.to_move = WHITE if self.to_move == BLACK else BLACK

    def terminal_value(self) -> float | None:
        return -1.0 if self.pile == 0 else None


def test_the_search_needs_only_the_rules_interface():
    assert random_rollout_value(Subtraction(0), random.Random(0)) == -1.0
    assert random_rollout_value(Subtraction(1), random.Random(0)) == 1.0  # the one move takes the last
    for pile, best in ((4, 1), (5, 2), (7, 1), (8, 2)):
        assert PureMctsPicker(playouts=400, rng=pile).pick(Subtraction(pile)) == best

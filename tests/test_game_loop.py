"""engine.play.game_loop: two pickers play to the end, a resignation or the move limit."""
from __future__ import annotations

import random

from tabula.engine.play.game_loop import play_game
from tabula.engine.play.pure_mcts import RandomPicker
from tabula.engine.rules.coords import BLACK, RESIGN, WHITE
from tabula.engine.rules.game import GameState, Rules
from tabula.engine.rules.gomoku import GomokuState


class Scripted:
    """Plays a fixed list of moves, charging ``step_s`` of the fake clock for each."""

    def __init__(self, moves, clock=None, step_s=0.0):
        self.moves, self.clock, self.step_s = list(moves), clock, step_s

    def pick(self, state, budget_s=None):
        if self.clock is not None:
            self.clock.advance(self.step_s)
        return self.moves.pop(0)


def test_a_resignation_ends_the_game_unplayed_and_the_other_side_wins(fake_clock):
    state = GameState(5, Rules(komi=0.5))
    end = play_game(state, {BLACK: Scripted([0, 1], fake_clock, 1.0), WHITE: Scripted([24, RESIGN], fake_clock, 2.0)},
                    max_moves=50, clock=fake_clock)
    assert (end.winner, end.result) == (BLACK, "B+R")
    assert len(state.moves) == 3  # the resignation is not a move
    assert end.seconds == {BLACK: 2.0, WHITE: 4.0}


def test_the_move_limit_stops_the_game_and_it_is_counted():
    state = GameState(5, Rules(komi=0.5))
    end = play_game(state, {BLACK: Scripted([12]), WHITE: Scripted([])}, max_moves=1)
    assert len(state.moves) == 1 and (end.winner, end.result) == (BLACK, "B+24.5")


def test_random_pickers_play_gomoku_to_its_end():
    state = GomokuState(5, n_in_row=3)
    end = play_game(state, {BLACK: RandomPicker(random.Random(1)), WHITE: RandomPicker(random.Random(2))},
                    max_moves=25)
    assert state.terminal_value() is not None and end.winner in (0, BLACK, WHITE)
    assert end.result == {BLACK: "B+", WHITE: "W+", 0: "0"}[end.winner]

"""The one in-process game loop: two move pickers play a game of any game to its end, a resignation or a move limit.
Self-play, gating and the arena play their games through it (GTP games are driven from outside, move by move).

Layer: play, above ``picker.py``; asks of a position only the rules interface (``terminal_value``, ``to_move``,
``moves``, ``play``) and ``engine.rules.games.result_of``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Mapping

from tabula.engine.play.picker import MovePicker
from tabula.engine.rules.coords import BLACK, RESIGN, WHITE
from tabula.engine.rules.games import result_of


@dataclass(frozen=True)
class GameEnd:
    """How a game ended. ``winner``: BLACK, WHITE or 0 (a draw); ``result``: the SGF result (``B+R`` for a
    resignation, ``W+3.5``, ``B+``, ``0``); ``seconds``: each colour's time in its picker."""

    winner: int
    result: str
    seconds: dict[int, float]


def play_game(state, pickers: Mapping[int, MovePicker], max_moves: int,
              clock: Callable[[], float] = time.monotonic) -> GameEnd:
    """Play ``state`` (changed in place) with ``pickers[colour]`` choosing each side's moves, until the game is
    over, a picker resigns (RESIGN is not played) or ``state`` has ``max_moves`` moves; a game stopped at the limit
    is counted where the game has a count (``result_of``)."""
    seconds = {BLACK: 0.0, WHITE: 0.0}
    while state.terminal_value() is None and len(state.moves) < max_moves:
        color = state.to_move
        start = clock()
        move = pickers[color].pick(state)
        seconds[color] += clock() - start
        if move == RESIGN:
            winner = 3 - color
            return GameEnd(winner, f"{'B' if winner == BLACK else 'W'}+R", seconds)
        state.play(move)
    winner, result = result_of(state)
    return GameEnd(winner, result, seconds)


__all__ = ["GameEnd", "play_game"]

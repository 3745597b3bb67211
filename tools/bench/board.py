"""`tabula bench board`: random legal games through the rules code, in moves per second.

Two figures per size: the raw board (simple ko, what random playouts use) and the full game rules (positional
superko by Zobrist history, move history for the network), both never filling the mover's own single-point eyes.
"""
from __future__ import annotations

import argparse
import random
import time

from tabula.engine.rules.board import NO_POINT, IllegalMoveError
from tabula.engine.rules.coords import PASS
from tabula.engine.rules.game import GameState
from tabula.engine.rules.playout import Playout


def raw_board_game(size: int, rng: random.Random) -> int:
    """One random game on the raw board; returns the number of moves (passes included)."""
    run = Playout(GameState(size).board)
    color, passes, moves = 1, 0, 0
    while passes < 2 and moves < 3 * size * size:
        passes = passes + 1 if run.step(color, rng) == NO_POINT else 0
        color = 3 - color
        moves += 1
    return moves


def full_rules_game(size: int, rng: random.Random) -> int:
    """One random game through GameState (superko, history); returns the number of moves (passes included)."""
    state = GameState(size)
    board = state.board
    padded = board.geometry.padded
    empties = list(range(size * size))
    moves = 0
    while not state.is_game_over() and moves < 3 * size * size:
        color = state.to_move
        untried = len(empties)
        played = PASS
        while untried:
            i = rng.randrange(untried)
            untried -= 1
            empties[i], empties[untried] = empties[untried], empties[i]
            point = empties[untried]
            if board.is_own_eye(padded[point], color):
                continue
            try:
                captured = state.play(point)
            except IllegalMoveError:
                continue
            empties[untried] = empties[-1]
            empties.pop()
            empties.extend(captured)
            played = point
            break
        if played == PASS:
            state.play(PASS)
        moves += 1
    return moves


def measure(game, size: int, seconds: float, rng: random.Random) -> tuple[int, int, float]:
    start = time.perf_counter()
    games = moves = 0
    while time.perf_counter() - start < seconds:
        moves += game(size, rng)
        games += 1
    return games, moves, time.perf_counter() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tabula bench board", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[9, 19])
    parser.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"{'size':>4} {'rules':<22} {'games':>6} {'moves':>8} {'moves/s':>9} {'moves/game':>10}")
    for size in args.sizes:
        for label, game in (("raw board (simple ko)", raw_board_game), ("game (superko)", full_rules_game)):
            games, moves, elapsed = measure(game, size, args.seconds, rng)
            print(f"{size:>4} {label:<22} {games:>6} {moves:>8} {moves / elapsed:>9.0f} {moves / max(games, 1):>10.0f}")
    return 0

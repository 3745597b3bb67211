"""`tabula bench rollout`: rollouts with the pattern policy, in moves per second, by board size and batch size.

A batch of B rollouts plays in lockstep (``engine.rollout.rollout.play_out``): the numpy work of a move is shared by
the B boards, so the cost of a move falls with B. Each rollout starts from the empty board, or from a position
``--opening`` policy moves in (not timed), and plays to two passes. The uniform random playout of
``engine.rules.playout`` is measured beside it for scale.
"""
from __future__ import annotations

import argparse
import random
import sys
import time

import numpy as np

from tabula.engine.play.search_player import DEFAULT_ROLLOUT_WEIGHTS, WEIGHTS_DIR
from tabula.engine.rollout.policy import RolloutPolicy, RolloutPolicyError
from tabula.engine.rollout.rollout import play_out
from tabula.engine.rules.game import GameState
from tabula.tools.bench.board import raw_board_game

DEFAULT_WEIGHTS = str(WEIGHTS_DIR / DEFAULT_ROLLOUT_WEIGHTS)


def starting_positions(policy: RolloutPolicy, size: int, count: int, opening: int,
                       rng: np.random.Generator) -> list[GameState]:
    """``count`` positions reached by ``opening`` moves of the policy from the empty board."""
    states = [GameState(size) for _ in range(count)]
    if opening <= 0:
        return states
    boards, _ = play_out(states, policy, rng, max_moves=opening)
    for state, board in zip(states, boards):
        state.board = board
        state.to_move = 3 - state.to_move if opening % 2 else state.to_move
    return states


def measure(policy: RolloutPolicy, size: int, batch: int, seconds: float, opening: int,
            rng: np.random.Generator) -> tuple[int, int, float]:
    """(rollouts, moves, seconds) of whole batches played until ``seconds`` have passed."""
    rollouts = moves = 0
    elapsed = 0.0
    while elapsed < seconds:
        states = starting_positions(policy, size, batch, opening, rng)
        start = time.perf_counter()
        _, played = play_out(states, policy, rng)
        elapsed += time.perf_counter() - start
        rollouts += batch
        moves += int(played.sum())
    return rollouts, moves, elapsed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tabula bench rollout", description=__doc__)
    parser.add_argument("--weights", default=DEFAULT_WEIGHTS, help="rollout weights (.npz)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[9, 19])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64], help="rollouts played at once")
    parser.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    parser.add_argument("--opening", type=int, default=0, help="policy moves played before the timed rollout")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        policy = RolloutPolicy.load(args.weights)
    except (RolloutPolicyError, FileNotFoundError) as error:
        raise SystemExit(f"tabula bench rollout: {error}") from None
    rng = np.random.default_rng(args.seed)
    print(f"{'size':>4} {'batch':>5} {'rollouts':>8} {'moves':>8} {'moves/s':>9} {'us/move':>8} {'ms/rollout':>10} "
          f"{'moves/rollout':>13}")
    for size in args.sizes:
        for batch in args.batches:
            count, moves, elapsed = measure(policy, size, batch, args.seconds, args.opening, rng)
            print(f"{size:>4} {batch:>5} {count:>8} {moves:>8} {moves / elapsed:>9.0f} {elapsed / moves * 1e6:>8.1f} "
                  f"{elapsed / count * 1e3:>10.2f} {moves / count:>13.0f}")
        start, games, moves = time.perf_counter(), 0, 0
        uniform = random.Random(args.seed)
        while time.perf_counter() - start < args.seconds:
            moves += raw_board_game(size, uniform)
            games += 1
        elapsed = time.perf_counter() - start
        print(f"{size:>4} {'-':>5} {games:>8} {moves:>8} {moves / elapsed:>9.0f} {elapsed / moves * 1e6:>8.1f} "
              f"{elapsed / games * 1e3:>10.2f} {moves / games:>13.0f}  uniform random playout, for scale")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

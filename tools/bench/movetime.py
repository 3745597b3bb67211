"""`tabula bench movetime`: how long an engine's moves take against the clock a server gives it.

    tabula bench movetime --size 19 --moves 50 --rounds 2 --period-time 1 \\
        --engines "python3 -m tabula.gtp --rollout-mix 0.5 --visits 0 --lag-buffer 0.2" \\
                  "python3 -m tabula.gtp --visits 0"

Each engine plays both sides of a game from the empty board under byo-yomi of one period a move, as a server sets
it: ``time_settings 0 PERIOD 1`` once, then ``time_left COLOUR PERIOD 1`` before every ``genmove``. What is timed
is each ``genmove`` as the client sees it (the engine's search, its reply and the pipe), which is what a server's
clock charges. Several engines take turns within every round (``--moves`` each), so that a busy machine slows them
alike; a game that ends (two passes or a resignation) starts again from the empty board. Prints, per engine, the
mean, the 99th percentile and the longest move, and how many moves went past the period.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from tabula.tools.compete.gtp_client import EngineError, GtpEngine, GtpFailure


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabula bench movetime", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engines", nargs="+", required=True, help="GTP engine command lines, one per engine")
    parser.add_argument("--size", type=int, default=19)
    parser.add_argument("--komi", type=float, default=7.5)
    parser.add_argument("--period-time", type=float, default=1.0, help="seconds of the one byo-yomi period")
    parser.add_argument("--moves", type=int, default=50, help="moves of each engine in every round")
    parser.add_argument("--rounds", type=int, default=2)
    return parser


class _Game:
    """One engine's game against itself: the colour to move and the passes in a row."""

    def __init__(self, engine: GtpEngine, size: int, komi: float, period: float):
        self.engine, self.size, self.komi, self.period = engine, size, komi, period
        engine.send(f"boardsize {size}")
        engine.send(f"komi {komi}")
        engine.send(f"time_settings 0 {period:g} 1")
        self.restart()

    def restart(self) -> None:
        self.engine.send("clear_board")
        self.colour, self.passes = "b", 0

    def timed_move(self) -> float:
        self.engine.send(f"time_left {self.colour} {self.period:g} 1")
        start = time.monotonic()
        move = self.engine.send(f"genmove {self.colour}", timeout_s=60 + 10 * self.period).strip().lower()
        elapsed = time.monotonic() - start
        self.passes = self.passes + 1 if move == "pass" else 0
        self.colour = "w" if self.colour == "b" else "b"
        if move == "resign" or self.passes >= 2:
            self.restart()
        return elapsed


def summary(label: str, times: list[float], period: float) -> str:
    t = np.asarray(times)
    return (f"{label}: {len(t)} moves, mean {t.mean():.3f} s, 99th percentile {np.percentile(t, 99):.3f} s, "
            f"longest {t.max():.3f} s, past the {period:g} s period: {int((t > period).sum())}")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.moves < 1 or args.rounds < 1 or args.period_time <= 0 or not 2 <= args.size <= 25:
        print("tabula bench movetime: --moves and --rounds must be at least 1, --period-time positive, --size 2-25",
              file=sys.stderr)
        return 2
    engines: list[GtpEngine] = []
    try:
        games = []
        for index, command in enumerate(args.engines):
            engine = GtpEngine(command, label=f"engine{index}")
            engines.append(engine)
            games.append(_Game(engine, args.size, args.komi, args.period_time))
        times: list[list[float]] = [[] for _ in games]
        for _ in range(args.rounds):
            for game, record in zip(games, times):
                game.restart()
                record.extend(game.timed_move() for _ in range(args.moves))
    except (EngineError, GtpFailure, ValueError) as error:
        print(f"tabula bench movetime: {error}", file=sys.stderr)
        return 1
    finally:
        for engine in engines:
            engine.close()
    for command, record in zip(args.engines, times):
        print(summary(command, record, args.period_time))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

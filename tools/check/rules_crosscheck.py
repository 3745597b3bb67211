"""Our rules against GNU Go's at scale: random games on several board sizes until a number of positions is reached.

    python -m tabula.tools.check.rules_crosscheck --positions 100000 --seed 1

Layer: tools. This module owns the harness, which the CI's ``tests/test_gnugo_crosscheck.py`` imports:
``crosscheck_game`` plays one random game on GNU Go and on our ``GameState`` (simple ko, and positional superko
alongside), asks GNU Go ``is_legal`` for every empty point of every position, compares the stones after every move
and the score of finished games. It raises AssertionError at the first disagreement; this script records it and
goes on with the next game.

GNU Go plays simple ko and forbids suicide, so legality is compared against our rules with ``SIMPLE_KO`` (suicide
not allowed: the default ``Rules``, never Tromp-Taylor's named ruleset, which allows multi-stone suicide); our
positional-superko rules may only forbid more. On finished games our Tromp-Taylor count must match GNU Go's
Chinese-rules ``final_score`` wherever GNU Go calls no stone dead (random games end with every group settled, so
both count the same board).
"""
from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

from tabula.engine.rules.coords import BLACK, PASS, WHITE, format_vertex, parse_vertex
from tabula.engine.rules.game import POSITIONAL, SIMPLE_KO, GameState, Rules
from tabula.engine.rules.playout import random_move

GNUGO = "/usr/games/gnugo"
DEFAULT_SIZES = {9: 6, 13: 2, 19: 1, 5: 2, 7: 2}  # board size -> share of the games


@dataclass
class CrosscheckReport:
    games: Counter = field(default_factory=Counter)  # size -> games
    positions: Counter = field(default_factory=Counter)  # size -> positions whose every empty point was checked
    checks: Counter = field(default_factory=Counter)  # size -> (position, point) legality comparisons
    disagreements: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0

    def summary(self) -> str:
        sizes = sorted(self.games)
        lines = [f"games: {sum(self.games.values())}, positions: {sum(self.positions.values())}, "
                 f"point checks: {sum(self.checks.values())}, in {self.elapsed_s:.0f} s"]
        lines += [f"  {s}x{s}: {self.games[s]} games, {self.positions[s]} positions, {self.checks[s]} point checks"
                  for s in sizes]
        lines.append(f"disagreements: {len(self.disagreements)}")
        lines += [f"  {d}" for d in self.disagreements[:20]]
        return "\n".join(lines)


class Engine:
    """A GTP engine subprocess: send commands (pipelined), read replies."""

    def __init__(self, argv: list[str], **kwargs):
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, **kwargs)

    def send_many(self, commands: list[str]) -> list[str]:
        """Write all ``commands`` at once, then read one reply each (without its ending empty line)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("".join(c + "\n" for c in commands))
        self.process.stdin.flush()
        replies = []
        for command in commands:
            lines = []
            while True:
                line = self.process.stdout.readline()
                if line == "":
                    raise EOFError(f"engine closed while answering {command!r}")
                if line == "\n":
                    break
                lines.append(line.rstrip("\n"))
            replies.append("\n".join(lines))
        return replies

    def send(self, command: str) -> str:
        """The text of a successful reply; AssertionError on ``?``."""
        reply = self.send_many([command])[0]
        _expect(reply.startswith("="), f"{command!r} -> {reply!r}")
        return reply[1:].strip()

    def close(self) -> None:
        try:
            self.send_many(["quit"])
        except (EOFError, BrokenPipeError, OSError):
            pass
        self.process.wait(timeout=10)


def _expect(condition: bool, message: str) -> None:
    # Not ``assert``: the cross-check must not vanish under ``python -O``.
    if not condition:
        raise AssertionError(message)


def gnugo_engine(path: str, *extra: str) -> Engine:
    return Engine([path, "--mode", "gtp", "--chinese-rules", *extra])


def stones(engine: Engine, color: str, size: int) -> set[int]:
    return {parse_vertex(v, size) for v in engine.send(f"list_stones {color}").split()}


class Disagreement(AssertionError):
    """GNU Go and our rules disagree; says how far the game got (the position of the disagreement counts)."""

    def __init__(self, message: str, positions: int, checks: int):
        super().__init__(message)
        self.positions = positions
        self.checks = checks


def crosscheck_game(gnugo_path: str, size: int, seed: int, max_moves: int) -> tuple[int, int]:
    """Play one random game on both; returns (positions checked, point legality checks made).

    Raises ``Disagreement`` (an AssertionError) at the first disagreement.
    """
    rng = random.Random(seed)
    engine = gnugo_engine(gnugo_path)
    positions = 0
    checks = 0
    try:
        engine.send(f"boardsize {size}")
        engine.send("clear_board")
        engine.send("komi 7.5")
        simple = GameState(size, Rules(komi=7.5, superko=SIMPLE_KO))
        superko = GameState(size, Rules(komi=7.5, superko=POSITIONAL))
        while not simple.is_game_over() and len(simple.moves) < max_moves:
            color = simple.to_move
            name = "black" if color == BLACK else "white"
            empty = [p for p in range(size * size) if simple.color_at(p) == 0]
            replies = engine.send_many([f"is_legal {name} {format_vertex(p, size)}" for p in empty])
            positions += 1 if empty else 0
            for point, reply in zip(empty, replies):
                ours = simple.legal(point)
                reply = reply.strip()
                _expect(reply in ("= 1", "= 0"), f"is_legal -> {reply!r}")
                _expect(ours == (reply == "= 1"), f"{format_vertex(point, size)} for {name} after "
                        f"{len(simple.moves)} moves: GNU Go says {reply!r}, we say {'=' if ours else '?'}\n{simple}")
                if superko.legal(point):
                    _expect(ours, "positional superko allowed a move that simple ko forbids")
                checks += 1
            move = random_move(superko, rng)
            if move != PASS and not simple.legal(move):
                move = PASS
            simple.play(move)
            superko.play(move)
            engine.send(f"play {name} {format_vertex(move, size)}")
            board = simple.board
            for letter, color in (("black", BLACK), ("white", WHITE)):
                _expect(stones(engine, letter, size) == set(board.stones_of(color)),
                        f"{letter} stones differ after {len(simple.moves)} moves:\n{simple}")
        if simple.is_game_over() and engine.send("final_status_list dead") == "":
            theirs = engine.send("final_score")
            _expect(theirs == simple.result_string(), f"score: GNU Go {theirs}, ours {simple.result_string()}")
    except AssertionError as error:
        raise Disagreement(str(error), positions, checks) from error
    finally:
        engine.close()
    return positions, checks


def run(positions: int, seed: int, sizes: dict[int, int], gnugo: str, progress: bool = False) -> CrosscheckReport:
    """Play games round-robin over ``sizes`` (weighted by game count) until ``positions`` positions are checked."""
    report = CrosscheckReport()
    schedule = [size for size, share in sizes.items() for _ in range(share)]
    started = time.monotonic()
    game = 0
    while sum(report.positions.values()) < positions:
        size = schedule[game % len(schedule)]
        game_seed = seed * 1_000_003 + game
        try:
            checked, checks = crosscheck_game(gnugo, size, game_seed, max_moves=3 * size * size)
            report.positions[size] += checked
            report.checks[size] += checks
        except Disagreement as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else "assertion failed"
            report.disagreements.append(f"{size}x{size} seed {game_seed}: {first[:200]}")
            report.positions[size] += error.positions
            report.checks[size] += error.checks
        report.games[size] += 1
        game += 1
        if progress and game % 100 == 0:
            print(f"  {game} games, {sum(report.positions.values())} positions, "
                  f"{len(report.disagreements)} disagreements, {time.monotonic() - started:.0f} s",
                  file=sys.stderr, flush=True)
    report.elapsed_s = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tabula.tools.check.rules_crosscheck",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--positions", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sizes", default=",".join(f"{s}:{n}" for s, n in DEFAULT_SIZES.items()),
                        help="SIZE:SHARE,... (default %(default)s)")
    parser.add_argument("--gnugo", default=shutil.which(GNUGO) or shutil.which("gnugo") or GNUGO)
    args = parser.parse_args(argv)
    sizes = {int(s): int(n) for s, n in (part.split(":") for part in args.sizes.split(","))}
    report = run(args.positions, args.seed, sizes, args.gnugo, progress=True)
    print(report.summary())
    return 0 if not report.disagreements else 1


if __name__ == "__main__":
    sys.exit(main())

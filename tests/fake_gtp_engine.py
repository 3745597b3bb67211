"""A scriptable GTP engine for the match and client tests: plays seeded random legal moves, and can be told to crash,
hang, answer malformed replies, play an illegal move, be slow, resign or refuse moves.

Run as ``python tests/fake_gtp_engine.py [options]`` with the repository root on PYTHONPATH. Options that take N
act on the N-th ``genmove`` (1-based) after each ``clear_board``. Every command received is echoed to stderr, so
that tests can read what the match sent from the engine's log.
"""
from __future__ import annotations

import argparse
import random
import sys
import time

from tabula.engine.rules.coords import PASS, format_vertex, parse_color, parse_vertex
from tabula.engine.rules.game import GameState, Rules, handicap_points


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="Fake")
    parser.add_argument("--version", default="1.0")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--moves", type=int, default=6, help="genmoves that play a stone; pass after that")
    parser.add_argument("--slow", type=float, default=0.0, help="seconds to sleep before each genmove reply")
    parser.add_argument("--crash-at", type=int, default=0)
    parser.add_argument("--hang-at", type=int, default=0)
    parser.add_argument("--malformed-at", type=int, default=0, help="reply without '=' or '?'")
    parser.add_argument("--bad-vertex-at", type=int, default=0, help="reply '= Z99'")
    parser.add_argument("--wrong-id-at", type=int, default=0)
    parser.add_argument("--illegal-at", type=int, default=0, help="play on an occupied point")
    parser.add_argument("--resign-at", type=int, default=0)
    parser.add_argument("--refuse-play", action="store_true", help="answer '? illegal move' to every play")
    parser.add_argument("--score", default="", help="final_score reply (default: our Tromp-Taylor count)")
    parser.add_argument("--no-kgs", action="store_true", help="do not know kgs-time_settings")
    parser.add_argument("--crash-at-start", action="store_true")
    return parser


class FakeEngine:
    def __init__(self, options: argparse.Namespace):
        self.options = options
        self.rng = random.Random(options.seed)
        self.size = 19
        self.komi = 7.5
        self.state = GameState(self.size)
        self.genmoves = 0
        self.commands = ["protocol_version", "name", "version", "known_command", "list_commands", "boardsize",
                         "clear_board", "komi", "play", "genmove", "final_score", "time_settings", "time_left",
                         "fixed_handicap", "place_free_handicap", "set_free_handicap", "quit"]
        if not options.no_kgs:
            self.commands.append("kgs-time_settings")

    def reset(self) -> None:
        self.state = GameState(self.size, Rules(komi=self.komi))
        self.genmoves = 0  # so that --crash-at N and the like act in every game

    def handle(self, name: str, args: list[str]) -> tuple[bool, str]:
        """(success, text) for one command."""
        if name == "protocol_version":
            return True, "2"
        if name == "name":
            return True, self.options.name
        if name == "version":
            return True, self.options.version
        if name == "known_command":
            return True, "true" if args and args[0] in self.commands else "false"
        if name == "list_commands":
            return True, "\n".join(self.commands)
        if name == "boardsize":
            self.size = int(args[0])
            self.reset()
            return True, ""
        if name == "clear_board":
            self.reset()
            return True, ""
        if name == "komi":
            self.komi = float(args[0])
            self.state.rules = Rules(komi=self.komi)
            return True, ""
        if name in ("time_settings", "time_left", "kgs-time_settings"):
            return True, ""
        if name == "fixed_handicap":
            points = handicap_points(self.size, int(args[0]))
            self.state.place_handicap(points)
            return True, " ".join(format_vertex(p, self.size) for p in points)
        if name == "place_free_handicap":
            points = handicap_points(self.size, int(args[0]))[::-1]
            self.state.place_handicap(points)
            return True, " ".join(format_vertex(p, self.size) for p in points)
        if name == "set_free_handicap":
            self.state.place_handicap([parse_vertex(v, self.size) for v in args])
            return True, ""
        if name == "play":
            if self.options.refuse_play:
                return False, "illegal move"
            color, move = parse_color(args[0]), parse_vertex(args[1], self.size)
            try:
                self.state.play(move, color)
            except ValueError:
                return False, "illegal move"
            return True, ""
        if name == "genmove":
            return True, self.genmove(parse_color(args[0]))
        if name == "final_score":
            return True, self.options.score or self.state.result_string()
        if name == "quit":
            return True, ""
        return False, "unknown command"

    def genmove(self, color: int) -> str:
        self.genmoves += 1
        n = self.genmoves
        options = self.options
        if options.slow:
            time.sleep(options.slow)
        if n == options.crash_at:
            sys.exit(3)
        if n == options.hang_at:
            time.sleep(3600)
        if n == options.resign_at:
            return "resign"
        if n == options.illegal_at:
            occupied = [p for p in range(self.size * self.size) if self.state.color_at(p) != 0]
            if occupied:
                return format_vertex(occupied[0], self.size)
        move = PASS
        if n <= options.moves:
            legal = self.state.legal_moves(color)
            if legal:
                move = self.rng.choice(legal)
        self.state.play(move, color)
        return format_vertex(move, self.size)


def main() -> int:
    options = build_parser().parse_args()
    if options.crash_at_start:
        return 4
    engine = FakeEngine(options)
    for raw in sys.stdin:
        line = raw.strip()
        if not line:
            continue
        print(f"got: {line}", file=sys.stderr, flush=True)
        words = line.split()
        command_id = ""
        if words[0].isdigit():
            command_id, words = words[0], words[1:]
        name, args = words[0], words[1:]
        ok, text = engine.handle(name, args)
        n = engine.genmoves
        if name == "genmove" and n == options.malformed_at:
            sys.stdout.write("hello there\n\n")
        elif name == "genmove" and n == options.bad_vertex_at:
            sys.stdout.write(f"={command_id} Z99\n\n")
        elif name == "genmove" and n == options.wrong_id_at:
            sys.stdout.write(f"={int(command_id or 0) + 100} {text}\n\n")
        else:
            sys.stdout.write(f"{'=' if ok else '?'}{command_id} {text}\n\n")
        sys.stdout.flush()
        if name == "quit":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`tabula openings`: balanced opening lines for `tabula match --openings`, chosen by a network.

Between two strong engines on 9x9 at komi 7.5, white wins nearly every game: a match from the empty board then
measures the komi, not the engines. This command grows a tree of the network's likeliest moves (``--width`` moves a
ply whose prior is at least ``--min-prior``, so that every line is one a strong player might play) to ``--moves``
plies, merges lines that reach the same position under a symmetry of the board, evaluates the positions at their
end (the mean over the 8 symmetries), and writes the lines whose chance for black is nearest one half, within
``--window``. Each line is written with black's chance and, where the network has a score head, black's lead.

    tabula openings --weights b10c384h6nbttflrs.bin.gz --size 9 --komi 7.5 --moves 3 --count 25 --out book9.txt
    tabula match --openings book9.txt ...
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

from tabula.engine.net import features
from tabula.engine.net.network_set import load_networks
from tabula.engine.rules.coords import BLACK, format_vertex
from tabula.engine.rules.game import GameState, parse_rules


@dataclass
class Line:
    moves: list[int]
    state: GameState
    black_chance: float = 0.5
    black_lead: float | None = None

    def text(self, size: int) -> str:
        return " ".join(format_vertex(move, size) for move in self.moves)


def position_key(state: GameState) -> bytes:
    """The same bytes for positions that one of the 8 symmetries of the board maps onto each other."""
    planes = features.encode_batch([state], None)[:, [0, 8, 16]]  # own and opponent stones now, black to move
    return min(features.transform_planes(planes, symmetry).astype(np.uint8).tobytes()
               for symmetry in range(features.NUM_SYMMETRIES))


def black_view(evaluation, states: list[GameState]) -> tuple[np.ndarray, np.ndarray | None]:
    """(black's chance of winning, black's lead in points or None) of each position."""
    sign = np.array([1.0 if s.to_move == BLACK else -1.0 for s in states], np.float32)
    if evaluation.wdl is not None:  # a draw counts half
        win, loss, draw = evaluation.wdl[:, 0], evaluation.wdl[:, 1], evaluation.wdl[:, 2]
        chance = np.where(sign > 0, win, loss) + 0.5 * draw
    else:
        chance = (1.0 + sign * evaluation.value) / 2.0
    lead = None if evaluation.score is None else sign * evaluation.score
    return chance.astype(np.float64), lead


def grow(evaluator, root: GameState, moves: int, width: int, min_prior: float, batch: int = 64,
         log=lambda text: None) -> list[Line]:
    """Every line of ``moves`` plies through the network's likeliest moves, one a position up to symmetry."""
    frontier = [Line([], root)]
    for ply in range(moves):
        grown: dict[bytes, Line] = {}
        for start in range(0, len(frontier), batch):
            part = frontier[start:start + batch]
            evaluation = evaluator.evaluate_averaged([line.state for line in part])
            for line, policy in zip(part, evaluation.policy):
                order = np.argsort(-policy[:-1], kind="stable")[:width]  # the last entry is the pass
                for move in order:
                    if policy[move] < min_prior:
                        break
                    state = line.state.copy()
                    state.play(int(move))
                    grown.setdefault(position_key(state), Line(line.moves + [int(move)], state))
        frontier = list(grown.values())
        log(f"ply {ply + 1}: {len(frontier)} positions")
        if not frontier:
            break
    for start in range(0, len(frontier), batch):
        part = frontier[start:start + batch]
        evaluation = evaluator.evaluate_averaged([line.state for line in part])
        chances, leads = black_view(evaluation, [line.state for line in part])
        for i, line in enumerate(part):
            line.black_chance = float(chances[i])
            line.black_lead = None if leads is None else float(leads[i])
    return frontier


def choose(lines: list[Line], count: int, low: float, high: float) -> list[Line]:
    """The ``count`` lines nearest an even game, within [low, high] for black."""
    inside = [line for line in lines if low <= line.black_chance <= high]
    return sorted(inside, key=lambda line: (abs(line.black_chance - 0.5), line.moves))[:count]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabula openings", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--weights", required=True, help="the network that judges (any file tabula gtp plays)")
    parser.add_argument("--size", type=int, default=9)
    parser.add_argument("--komi", type=float, default=7.5)
    parser.add_argument("--rules", default="chinese", help="the ruleset the network is told (default chinese)")
    parser.add_argument("--moves", type=int, default=3, help="plies a line (default 3)")
    parser.add_argument("--width", type=int, default=6, help="likeliest moves expanded a ply (default 6)")
    parser.add_argument("--min-prior", type=float, default=0.02,
                        help="moves the network gives less than this are not expanded (default 0.02)")
    parser.add_argument("--count", type=int, default=25, help="lines written at most (default 25)")
    parser.add_argument("--window", default="0.35,0.65",
                        help="LOW,HIGH: black's chance a written line must have (default 0.35,0.65)")
    parser.add_argument("--out", default="-", help="the file written (default: standard output)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        low, high = (float(x) for x in args.window.split(","))
    except ValueError:
        parser.error(f"--window is LOW,HIGH, e.g. 0.35,0.65, not {args.window!r}")
    if not 0.0 <= low <= high <= 1.0:
        parser.error("--window: 0 <= LOW <= HIGH <= 1")
    if args.moves < 1 or args.width < 1 or args.count < 1:
        parser.error("--moves, --width and --count must be at least 1")
    try:
        rules = parse_rules(args.rules, args.komi)
    except ValueError as error:
        parser.error(str(error))
    try:
        evaluator, _ = load_networks([args.weights], np.random.SeedSequence(1))
        root = GameState(args.size, rules)
        lines = grow(evaluator, root, args.moves, args.width, args.min_prior,
                     log=lambda text: print(text, file=sys.stderr))
    except (OSError, ValueError) as error:
        print(f"tabula openings: {error}", file=sys.stderr)
        return 2
    chosen = choose(lines, args.count, low, high)
    judge = f"{args.weights.rsplit('/', 1)[-1]}, {args.size}x{args.size}, komi {args.komi:g}, {args.rules}"
    out = [f"# {len(chosen)} of {len(lines)} lines of {args.moves} moves, black's chance in [{low:g}, {high:g}] "
           f"by {judge} (tabula openings)"]
    for line in chosen:
        lead = "" if line.black_lead is None else f", black's lead {line.black_lead:+.1f}"
        out.append(f"{line.text(args.size):<24} # black {line.black_chance:.3f}{lead}")
    text = "\n".join(out) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as file:
            file.write(text)
        print(f"{len(chosen)} lines written to {args.out}", file=sys.stderr)
    return 0 if chosen else 1


__all__ = ["grow", "choose", "position_key", "main"]

if __name__ == "__main__":
    raise SystemExit(main())

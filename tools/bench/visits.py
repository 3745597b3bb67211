"""`tabula bench visits`: how batching bends a small search's visit distribution.

    tabula bench visits weights/tabula-6x64-sl.onnx --visits 100 --positions 40 \\
        --games ../shared/data/games/tygem-9d-2016.tar.xz

Every leaf in flight is a visit chosen without the results still to come (under virtual loss), so a search of N
visits in batches of B spends part of its visits where a one-leaf-at-a-time search would not. For positions from
held-out games (after 10 to 60 moves of the games of ``--games``, or of random games without them), this searches each
position three times with the same network (identity symmetry, so that only the batching differs): one leaf at a
time, with the adaptive batch (at most ``--batch-size``, one leaf in flight per ``--playouts-per-leaf`` playouts),
and with the fixed batch of ``--batch-size``, and prints the total variation
distance of the root's visit shares from the one-leaf search's, and how often the most visited move differs from it,
for all the positions and for each side to move. ``--moves 20-199`` takes the positions from further into the games
(a handicap game's, say, where one side's every move is lost and the other's won).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np

from tabula.engine.config import SearchConfig
from tabula.engine.net.evaluator import OnnxEvaluator
from tabula.engine.play.search import Search
from tabula.engine.rules.coords import BLACK
from tabula.engine.rules.game import GameState
from tabula.gtp.flags import add_flags, from_flags
from tabula.tools.learn.export import positions

BENCH_VISITS = SearchConfig(visits=100, threads=1, early_stop=False, root_symmetries=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabula bench visits", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weights", help="Tabula .onnx")
    add_flags(parser, BENCH_VISITS, {"visits": "visits of each search", "batch_size": "the fixed batch compared",
                                     "threads": "search threads of the batched searches",
                                     "playouts_per_leaf": "the adaptive batch's playouts per leaf in flight "
                                                          "(default 0: as the engine chooses)"})
    parser.add_argument("--positions", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--games", default="", metavar="GLOB",
                        help="SGF archives (a glob) of held-out 19x19 games (default: none, random games)")
    parser.add_argument("--moves", type=move_range, default=MOVES, metavar="FIRST-LAST",
                        help="the positions are taken after FIRST to LAST moves of a game (default: 10-60)")
    return parser


# The moves into a game the positions are taken after: the opening and early middle game.
MOVES = range(10, 61)


def move_range(text: str) -> range:
    """``FIRST-LAST`` (move numbers, 1 or more, FIRST at most LAST) as a range."""
    first, dash, last = text.partition("-")
    try:
        low, high = int(first), int(last if dash else first)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST-LAST, two move numbers, got {text!r}") from None
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected 1 <= FIRST <= LAST, got {text!r}")
    return range(low, high + 1)


def shares(search: Search, state: GameState) -> tuple[dict[int, float], int]:
    result = search.run(state)
    total = sum(c.visits for c in result.candidates) or 1
    visits = {c.move: c.visits / total for c in result.candidates}
    return visits, max(visits, key=visits.get)


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    config = from_flags(BENCH_VISITS, args)
    try:
        evaluator = OnnxEvaluator(args.weights, symmetry="identity", log=None)
    except (ValueError, RuntimeError) as error:
        raise SystemExit(f"tabula bench visits: {error}") from None
    config = config.for_network(evaluator.on_gpu)  # the batch the variants compare, as the engine would choose it
    size = 19 if 19 in evaluator.board_sizes else max(evaluator.board_sizes)
    variants = {
        "one leaf at a time": dataclasses.replace(config, batch_size=1, threads=1, adaptive_batch=False),
        f"adaptive (at most {config.batch_size})": dataclasses.replace(config, adaptive_batch=True),
        f"fixed batch {config.batch_size}": dataclasses.replace(config, adaptive_batch=False),
    }
    distance = {name: [] for name in variants}
    other_top = {name: [] for name in variants}
    sides = []
    for state in positions(size, args.positions, args.seed, args.games, per_game=1, moves=args.moves):
        sides.append("black" if state.to_move == BLACK else "white")
        reference, top = None, None
        for name, variant in variants.items():
            visits, best = shares(Search(evaluator, variant, rng=np.random.default_rng(args.seed)), state)
            if reference is None:
                reference, top = visits, best
            moves = set(visits) | set(reference)
            distance[name].append(0.5 * sum(abs(visits.get(m, 0.0) - reference.get(m, 0.0)) for m in moves))
            other_top[name].append(best != top)
    print(f"{len(sides)} positions on {size}x{size} after moves {args.moves.start}-{args.moves.stop - 1}, "
          f"{config.visits} visits, {config.threads} threads for the batched searches; distance from the one-leaf "
          f"search's visit shares (total variation), and how often the most visited move differs, for all the "
          f"positions and by side to move:")
    for name in variants:
        line = f"  {name:<28}"
        for side in ("all", "black", "white"):
            chosen = [i for i, to_move in enumerate(sides) if side in ("all", to_move)]
            if chosen:
                line += (f"  {side} {np.mean([distance[name][i] for i in chosen]):.3f} "
                         f"{sum(other_top[name][i] for i in chosen)}/{len(chosen)}")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Free handicap stones chosen by the network against the GTP table, judged by the network itself.

    python3 -m tabula.tools.check.handicap_placement [--sizes 9,13,19] [--stones 2,4,5,7,9] [--weights FILE]

Layer: tools (imports engine.play for the engine as GTP builds it). For each size and number of stones it places
the stones ``place_free_handicap`` chooses (``SearchGenerator.handicap_stones``) and, where the GTP spec has one, the
fixed placement, and prints white's value and expected score (the mean over the 8 symmetries, white to move) after
each: the lower, the better the stones are for black by the network's own judgement. A first check that the network's
placement is no worse than the table's; a match is what tells.
"""
from __future__ import annotations

import argparse
import sys

from tabula.engine.config import EngineConfig, NetConfig
from tabula.engine.net.evaluator import NetworkFileError, evaluate_all_symmetries
from tabula.engine.play.search_player import NoNetworkError, from_config
from tabula.engine.rules.coords import MAX_SIZE, MIN_SIZE, format_vertex
from tabula.engine.rules.game import GameState, handicap_points


def judged(evaluator, size: int, points: list[int]) -> tuple[float, float | None]:
    """White's value and expected score lead after black's ``points``, white to move."""
    state = GameState(size)
    state.place_handicap(points)
    evaluation = evaluate_all_symmetries(evaluator, [state])
    score = None if evaluation.score is None else float(evaluation.score[0])
    return float(evaluation.value[0]), score


def describe(value: float, score: float | None) -> str:
    lead = "" if score is None else f", score {score:+.1f}"
    return f"value {value:+.3f}{lead}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tabula.tools.check.handicap_placement",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="9,13,19", help="board sizes, comma-separated (default: %(default)s)")
    parser.add_argument("--stones", default="2,4,5,7,9", help="numbers of stones (default: %(default)s)")
    parser.add_argument("--weights", default=None, help="the network (default: the shipped one)")
    args = parser.parse_args(argv)
    try:
        sizes = [int(text) for text in args.sizes.split(",")]
        counts = [int(text) for text in args.stones.split(",")]
    except ValueError:
        parser.error("--sizes and --stones take comma-separated whole numbers")
    net = NetConfig(weights=(args.weights,)) if args.weights else NetConfig()
    try:
        generator = from_config(EngineConfig(net=net, seed=1))
    except (NetworkFileError, NoNetworkError) as error:
        print(f"tabula: {error}", file=sys.stderr)
        return 2
    evaluator = generator.search.evaluator
    playable = generator.board_sizes
    for size in sizes:
        if not MIN_SIZE <= size <= MAX_SIZE or (playable is not None and size not in playable):
            print(f"tabula: the network does not play {size}x{size}", file=sys.stderr)
            return 2
    print("| size | stones | the network's stones | white after them | white after the table's |")
    print("|---|---|---|---|---|")
    for size in sizes:
        for count in counts:
            if not 2 <= count < size * size:
                print(f"tabula: {count} stones do not fit a {size}x{size} board", file=sys.stderr)
                return 2
            free = generator.handicap_stones(GameState(size), count)
            try:
                table = describe(*judged(evaluator, size, handicap_points(size, count)))
            except ValueError:
                table = "no table placement"
            stones = " ".join(format_vertex(point, size) for point in free)
            print(f"| {size}×{size} | {count} | {stones} | {describe(*judged(evaluator, size, free))} | {table} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

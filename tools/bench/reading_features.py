"""`tabula bench reading-features`: the cost of AlphaGo's reading planes (engine.net.reading_features) per position,
beside KataGo's V7 inputs (engine.net.katago_features) on the same positions in the same run.

Positions as ``tabula bench katago-features`` takes them: 19x19 from SGF archives (moves 60 to 150), and with
``--weights`` (a KataGo model file) 9x9 and 13x13 games played by that network's policy. Two figures per size and
encoder, each the best of ``--rounds`` rounds: a position with nothing cached, and a search leaf (a child of a
position already encoded, ``--children`` legal moves per position), after its parent, as in a search.

    tabula bench reading-features --sgf '../shared/data/games/kgs-*.tar.gz' --weights b10c384h6nbttflrs.bin.gz
"""
from __future__ import annotations

import time
from typing import Callable

from tabula.engine.net import katago_features, reading_features
from tabula.engine.rules.game import GameState
from tabula.tools.bench.katago_features import leaves_of, position_parser, position_sets

ENCODERS: dict[str, tuple[Callable[[GameState], object], Callable[[], None]]] = {
    "katago-v7": (katago_features.features, katago_features.clear_caches),
    "reading": (reading_features.encode, reading_features.clear_caches),
}


def measure(positions: list[GameState], leaves: list[GameState], rounds: int) -> dict[str, tuple[float, float]]:
    """{encoder: (seconds per position with nothing cached, seconds per search leaf)}, best of ``rounds``."""
    best = {name: [float("inf"), float("inf")] for name in ENCODERS}
    for _ in range(rounds):
        for name, (encode, clear) in ENCODERS.items():
            for _, other_clear in ENCODERS.values():
                other_clear()
            start = time.perf_counter()
            for state in positions:
                encode(state)
            best[name][0] = min(best[name][0], (time.perf_counter() - start) / len(positions))
            start = time.perf_counter()
            for leaf in leaves:
                encode(leaf)
            best[name][1] = min(best[name][1], (time.perf_counter() - start) / max(1, len(leaves)))
    return {name: (cold, leaf) for name, (cold, leaf) in best.items()}


def main(argv: list[str]) -> int:
    parser = position_parser("tabula bench reading-features", __doc__)
    args = parser.parse_args(argv)
    sets = position_sets(parser, args)
    print(f"{'size':>5} {'positions':>9} {'leaves':>6} | {'katago-v7: nothing cached':>25} {'search leaf':>11} | "
          f"{'reading: nothing cached':>23} {'search leaf':>11}")
    for size, positions in sorted(sets.items()):
        if not positions:
            continue
        leaves = leaves_of(positions, args.children)
        costs = measure(positions, leaves, args.rounds)
        v7, reading = costs["katago-v7"], costs["reading"]
        print(f"{size:>2}x{size:<2} {len(positions):>9} {len(leaves):>6} | {v7[0] * 1e3:>22.3f} ms "
              f"{v7[1] * 1e3:>8.3f} ms | {reading[0] * 1e3:>20.3f} ms {reading[1] * 1e3:>8.3f} ms")
    return 0

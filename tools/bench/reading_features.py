"""`tabula bench reading-features`: the cost of AlphaGo's reading planes (engine.net.reading_features) per position,
beside KataGo's V7 inputs (engine.net.katago_features) on the same positions in the same run.

Positions as ``tabula bench katago-features`` takes them: 19x19 from SGF archives (moves 60 to 150), and with
``--weights`` (a KataGo model file) 9x9 and 13x13 games played by that network's policy. Two figures per size and
encoder, each the best of ``--rounds`` rounds: a position with nothing cached, and a search leaf (a child of a
position already encoded, ``--children`` legal moves per position), after its parent, as in a search.

    tabula bench reading-features --sgf '../shared/data/games/kgs-*.tar.gz' --weights b10c384h6nbttflrs.bin.gz
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Callable

import numpy as np

from tabula.engine.net import katago_features, reading_features
from tabula.engine.rules.game import GameState
from tabula.tools.bench.katago_features import network_positions, sgf_positions

ENCODERS: dict[str, tuple[Callable[[GameState], object], Callable[[], None]]] = {
    "katago-v7": (katago_features.features, katago_features.clear_caches),
    "reading": (reading_features.encode, reading_features.clear_caches),
}


def leaves_of(positions: list[GameState], children: int) -> list[GameState]:
    """Up to ``children`` children of each position, spread over its legal moves."""
    leaves = []
    for state in positions:
        legal = np.flatnonzero(state.legal_mask()[:-1])
        for move in legal[:: max(1, len(legal) // children)][:children]:
            leaf = state.copy()
            leaf.play(int(move))
            leaves.append(leaf)
    return leaves


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
    parser = argparse.ArgumentParser(prog="tabula bench reading-features", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sgf", nargs="*", default=[], help="SGF archives (tar) for the 19x19 positions")
    parser.add_argument("--weights", help="a KataGo model file: plays the 9x9 and 13x13 positions")
    parser.add_argument("--positions", type=int, default=30, help="19x19 positions")
    parser.add_argument("--games", type=int, default=8, help="9x9 and 13x13 positions (games played)")
    parser.add_argument("--children", type=int, default=12, help="search leaves per position")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    if args.weights and not os.path.isfile(args.weights):
        parser.error(f"{args.weights}: no such file")
    sets = {}
    if args.weights:
        for size in (9, 13):
            sets[size] = network_positions(args.weights, size, args.games)
    if args.sgf:
        sets[19] = sgf_positions(args.sgf, args.positions, args.seed)
    if not any(sets.values()):
        parser.error("no positions: give --sgf archives and/or --weights")
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

"""`tabula bench katago-features`: the cost of KataGo's V7 inputs (engine.net.katago_features) per position.

Midgame positions: 19x19 from SGF archives (moves 60 to 150), and with ``--weights`` (a KataGo model file) 9x9 and
13x13 games played by that network's policy (30 to 77 moves); without it, the sizes the archives do not give are
left out. Two figures per size, each the best of ``--rounds`` rounds: a position with nothing cached (three ladder
readings: now, one and two moves ago, and the pass-alive area), and a search leaf, a child of a position already
encoded (its parent's ladders cached, as in a search), ``--children`` legal moves per position.

    tabula bench katago-features --sgf '../shared/data/games/kgs-*.tar.gz' --weights b10c384h6nbttflrs.bin.gz
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import time

import numpy as np

from tabula.engine.net import katago_features
from tabula.engine.rules.game import GameState, parse_rules


def sgf_positions(patterns: list[str], count: int, seed: int) -> list[GameState]:
    """Up to ``count`` 19x19 positions, moves 60 to 150 of games from the archives (tar files of SGF)."""
    import tarfile

    from tabula.engine.rules.sgf import SgfError, read_sgf, replay

    rng = random.Random(seed)
    positions: list[GameState] = []
    for path in sorted(p for pattern in patterns for p in glob.glob(pattern)):
        with tarfile.open(path) as archive:
            for member in archive:
                if len(positions) >= count:
                    return positions
                if not member.isfile() or not member.name.endswith(".sgf"):
                    continue
                try:
                    record = read_sgf(archive.extractfile(member).read())
                    if record.size != 19 or len(record.moves) < 160:
                        continue
                    move = rng.randint(60, 150)
                    positions.append(replay(record, parse_rules("chinese", record.komi), move, 0)[-1])
                except (SgfError, ValueError):
                    continue
    return positions


def network_positions(weights: str, size: int, games: int) -> list[GameState]:
    """One position per game, played by the KataGo network's policy (sampled) from the empty board."""
    import torch

    from tabula.engine.net import katago_network

    net, _ = katago_network.load(weights)
    rng = np.random.default_rng(size)
    positions = []
    for game in range(games):
        state = GameState(size, parse_rules("chinese", 7.0))
        for _ in range(30 + game * (size - 3)):
            planes = katago_features.encode(state)[None]
            with torch.no_grad():
                logits = net(torch.from_numpy(planes))[0][0].numpy().astype(np.float64)
            logits = np.where(state.legal_mask(), logits, -np.inf)
            p = np.exp(logits - logits.max())
            move = int(rng.choice(len(p), p=p / p.sum()))
            state.play(-1 if move == size * size else move)
        positions.append(state)
    return positions


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


def measure(positions: list[GameState], children: int, rounds: int) -> tuple[float, float, int]:
    """(seconds per position with nothing cached, seconds per search leaf, leaves), best of ``rounds``."""
    leaves = leaves_of(positions, children)
    cold = leaf_cost = float("inf")
    for _ in range(rounds):
        katago_features.clear_caches()
        start = time.perf_counter()
        for state in positions:
            katago_features.features(state)
        cold = min(cold, (time.perf_counter() - start) / len(positions))
        start = time.perf_counter()
        for leaf in leaves:
            katago_features.features(leaf)
        leaf_cost = min(leaf_cost, (time.perf_counter() - start) / max(1, len(leaves)))
    return cold, leaf_cost, len(leaves)


def position_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The options that choose the positions, shared by the input-feature benches."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sgf", nargs="*", default=[], help="SGF archives (tar) for the 19x19 positions")
    parser.add_argument("--weights", help="a KataGo model file: plays the 9x9 and 13x13 positions")
    parser.add_argument("--positions", type=int, default=30, help="19x19 positions")
    parser.add_argument("--games", type=int, default=8, help="9x9 and 13x13 positions (games played)")
    parser.add_argument("--children", type=int, default=12, help="search leaves per position")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=5)
    return parser


def position_sets(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[int, list[GameState]]:
    """{board size: positions} as the options ask; a parser error where there are none."""
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
    return sets


def main(argv: list[str]) -> int:
    parser = position_parser("tabula bench katago-features", __doc__)
    args = parser.parse_args(argv)
    sets = position_sets(parser, args)
    print(f"{'size':>5} {'positions':>9} {'leaves':>6} {'nothing cached':>15} {'search leaf':>12}")
    for size, positions in sorted(sets.items()):
        if not positions:
            continue
        cold, leaf, leaves = measure(positions, args.children, args.rounds)
        print(f"{size:>2}x{size:<2} {len(positions):>9} {leaves:>6} {cold * 1e3:>12.2f} ms {leaf * 1e3:>9.2f} ms")
    return 0

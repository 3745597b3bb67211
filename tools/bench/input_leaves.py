"""`tabula bench input-leaves WEIGHTS`: the CPU cost of a network's inputs per search leaf, on the very positions a
search asks the network for.

Plays ``--moves`` moves of self-play from the empty board (``tabula bench search``'s settings, one search thread, so
that the leaves are the same each time), records every position the network is asked for, then encodes them again
in their order, the encoding's caches emptied first (as a search starts), ``--rounds`` times. The cost is CPU time of
this process per leaf (``time.process_time``: other jobs' load moves it far less than the wall clock), best round.
For katago-v7 and tabula-v2 the V7 part (engine.net.katago_features) is also timed alone, and for tabula-v2 the
reading planes (engine.net.reading_features) after it, as the encoding computes them.

    tabula bench input-leaves s-6x64/model-int8.onnx --size 19 --moves 3 --playouts 400
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import numpy as np

from tabula.engine.net import katago_features, reading_features
from tabula.engine.net.encodings import TABULA_V2
from tabula.engine.rules.game import GameState


def record(weights: str, size: int, moves: int, playouts: int, seed: int) -> tuple[object, list[list[GameState]]]:
    """(the network's encoding, the batches of positions its search evaluated, copied, in their order)."""
    from tabula.engine.net.onnx_evaluator import OnnxEvaluator
    from tabula.engine.play.search import Search
    from tabula.tools.bench.search import BENCH_SEARCH

    evaluator = OnnxEvaluator(weights, symmetry="random", rng=np.random.default_rng(seed), threads=1, log=None)
    if size not in evaluator.board_sizes:
        raise ValueError(f"{weights} plays {', '.join(map(str, evaluator.board_sizes))}, not {size}x{size}")
    batches: list[list[GameState]] = []
    evaluate = evaluator.evaluate

    def recording(states, *args, **kwargs):
        batches.append([state.copy() for state in states])
        return evaluate(states, *args, **kwargs)

    evaluator.evaluate = recording
    search = Search(evaluator, replace(BENCH_SEARCH, threads=1), rng=np.random.default_rng(seed))
    state = GameState(size)
    for _ in range(moves):
        state.play(search.run(state, visits=0, playouts=playouts, early_stop=False).move)
    return evaluator.encoding, batches


def cpu_per_leaf(encode, batches: list[list[GameState]], rounds: int) -> float:
    """Best CPU seconds per leaf of ``encode`` over the batches in order, the feature caches emptied first."""
    leaves = sum(map(len, batches))
    best = float("inf")
    for _ in range(rounds):
        katago_features.clear_caches()
        reading_features.clear_caches()
        start = time.process_time()
        for batch in batches:
            encode(batch)
        best = min(best, (time.process_time() - start) / leaves)
    return best


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tabula bench input-leaves", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weights", help="a Tabula .onnx network")
    parser.add_argument("--size", type=int, default=19)
    parser.add_argument("--moves", type=int, default=3, help="self-play moves from the empty board")
    parser.add_argument("--playouts", type=int, default=400, help="playouts per move")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not os.path.isfile(args.weights):
        parser.error(f"{args.weights}: no such file")
    if min(args.moves, args.playouts, args.rounds) < 1:
        parser.error("--moves, --playouts and --rounds must be at least 1")
    try:
        encoding, batches = record(args.weights, args.size, args.moves, args.playouts, args.seed)
    except (ValueError, RuntimeError) as error:
        raise SystemExit(f"tabula bench input-leaves: {error}") from None
    leaves = sum(map(len, batches))
    print(f"{encoding.name}, {args.size}x{args.size}: {leaves} leaves in {len(batches)} batches "
          f"({args.moves} moves x {args.playouts} playouts); CPU ms per leaf, best of {args.rounds}")
    print(f"  {encoding.name:<24} {cpu_per_leaf(encoding.encode_batch, batches, args.rounds) * 1e3:8.3f}")
    if encoding.name in (katago_features.INPUT_ENCODING, TABULA_V2):
        v7 = cpu_per_leaf(katago_features.encode_batch, batches, args.rounds)
        print(f"  {katago_features.INPUT_ENCODING + ' part':<24} {v7 * 1e3:8.3f}")
    if encoding.name == TABULA_V2:
        def both(batch):
            katago_features.encode_batch(batch)
            reading_features.encode_batch(batch)

        print(f"  {'reading planes part':<24} {(cpu_per_leaf(both, batches, args.rounds) - v7) * 1e3:8.3f}")
    return 0

"""`tabula bench KIND ...`: benchmarks are commands, not timed tests. Each kind lives in its own module."""
from __future__ import annotations

import importlib
import sys

KINDS = {
    "board": "tabula.tools.bench.board",  # random legal games through the rules code: moves/s
    "net": "tabula.tools.bench.net",  # raw network throughput by batch size and threads
    "search": "tabula.tools.bench.search",  # playouts/s, batch fill and efficiency against the raw network
    "visits": "tabula.tools.bench.visits",  # how batching bends a small search's visit distribution
    "rollout": "tabula.tools.bench.rollout",  # pattern-policy rollouts: moves/s by board size and batch
    "movetime": "tabula.tools.bench.movetime",  # an engine's moves against a byo-yomi period, timed as a server would
    "analysis": "tabula.tools.bench.analysis",  # a game reviewed in one analysis query against one search at a time
    "katago-features": "tabula.tools.bench.katago_features",  # KataGo's V7 inputs: ms per position and leaf
    "reading-features": "tabula.tools.bench.reading_features",  # AlphaGo's reading planes beside V7's cost
    "input-leaves": "tabula.tools.bench.input_leaves",  # a network's inputs: CPU ms per leaf of its own search
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in KINDS:
        print(f"usage: tabula bench {{{'|'.join(KINDS)}}} [options]", file=sys.stderr)
        return 2
    return importlib.import_module(KINDS[argv[0]]).main(argv[1:]) or 0

"""The stored search output: one thread, fixed seeds, a dump of many searches compared line for line with the one
committed in tests/golden/search.txt, so that a refactor of the search proves itself (KataGo's cpp/tests/results).

Each scenario is a sequence of searches on one ``Search``: several board sizes, three evaluators (uniform, a scored
stand-in, the shipped network under random symmetries), tree reuse between moves, a search of an earlier position as
after ``undo``, and Dirichlet noise. A change that moves one visit anywhere shows in the diff.

After a change that is meant to change the search: ``python -m tests.test_search_golden --write``, and say why in the
commit. It also rewrites tests/golden/search-no-score-utility.txt, the same searches with the score utility's weights
0, the variance scaling of the exploration off and no atari floor (tests/test_score_utility.py), first stored as
search.txt was before the search had any of them, byte for byte.
"""
from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Callable
from unittest import mock

import numpy as np

from tabula.engine.config import SearchConfig
from tabula.engine.net.evaluator import Evaluator, OnnxEvaluator, UniformEvaluator
from tabula.engine.play.result import SearchResult
from tabula.engine.play.search import Search
from tabula.engine.rules.coords import format_vertex, parse_vertex
from tabula.engine.rules.game import GameState, Rules
from tests.test_search import RandomValueEvaluator, ScoreEvaluator

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden" / "search.txt"
# The same searches without the score utility (tests/test_score_utility.py): the output of the search before it had one
NO_SCORE_UTILITY = ROOT / "tests" / "golden" / "search-no-score-utility.txt"
NETWORK = ROOT / "weights" / "tabula-6x64-anysize.onnx"  # fp32: int8 kernels may differ between processors


# The batching the stored searches were made with: one leaf in flight per 32 playouts, as a search bounded by visits
# had on every machine before the CPU's went to one per 1,024. Kept, so that the stored searches still send batches of
# several leaves and the files stay the record of the search as it was.
STORED_PLAYOUTS_PER_LEAF = 32


def one_thread(**changes) -> SearchConfig:
    """The search's defaults on one thread (the only way a search is repeatable), with ``changes``."""
    return SearchConfig(threads=1, playouts_per_leaf=STORED_PLAYOUTS_PER_LEAF, **changes)


def describe(label: str, state: GameState, result: SearchResult, top: int = 6) -> list[str]:
    """A search's result as text: totals, then the first ``top`` candidates with their principal variations."""
    size = state.size
    lines = [f"{label}: move {format_vertex(result.move, size)} root {result.root_visits} playouts {result.playouts} "
             f"reused {result.reused_visits} batches {result.batches} evaluated {result.evaluated} "
             f"cache {result.cache_hits} collisions {result.collisions} early {int(result.stopped_early)}"]
    for c in result.candidates[:top]:
        pv = " ".join(format_vertex(m, size) for m in c.pv[:8])
        lines.append(f"  {format_vertex(c.move, size):>4} n {c.visits:4d} v {c.value:+.3f} p {c.prior:.3f} "
                     f"lcb {c.lcb:+.3f} pv {pv}")
    return lines


def position(size: int, vertices: str, komi: float = 7.5) -> GameState:
    state = GameState(size, Rules(komi=komi))
    for vertex in vertices.split():
        state.play(parse_vertex(vertex, size))
    return state


def undo(state: GameState, plies: int) -> GameState:
    """The position ``plies`` moves back, as the engine rebuilds it after ``undo`` (the game replayed)."""
    earlier = GameState(state.size, state.rules)
    for color, move in state.moves[:len(state.moves) - plies]:
        earlier.play(move, color)
    return earlier


def then(state: GameState, vertices: str) -> GameState:
    state = state.copy()
    for vertex in vertices.split():
        state.play(parse_vertex(vertex, state.size))
    return state


Step = tuple[str, "GameState | Callable[[GameState, SearchResult], GameState]", dict]


def sequence(search: Search, steps: list[Step]) -> list[str]:
    """Runs the steps' searches in turn on one search; a step's state may be made from the last state and result."""
    lines, state, result = [], None, None
    for label, make, options in steps:
        state = make(state, result) if callable(make) else make
        result = search.run(state, **options)
        lines += describe(label, state, result)
    return lines


def along_pv(plies: int) -> Callable[[GameState, SearchResult], GameState]:
    """The last searched state with the first ``plies`` moves of the last result's principal variation played: the
    subtree the search keeps."""
    def make(state: GameState, result: SearchResult) -> GameState:
        state = state.copy()
        for move in result.candidates[0].pv[:plies]:
            state.play(move)
        return state
    return make


def uniform_9x9() -> list[str]:
    search = Search(UniformEvaluator(), one_thread(visits=96), rng=np.random.default_rng(1))
    return sequence(search, [("empty", GameState(9), {}), ("after E5 C3", position(9, "E5 C3"), {}),
                             ("two plies along the pv (reuse)", along_pv(2), {})])


def scored_7x7() -> list[str]:
    search = Search(ScoreEvaluator(), one_thread(visits=200, early_stop=False), rng=np.random.default_rng(2))
    start = position(7, "D4 C3 C5 E3 E5")
    return sequence(search, [("position", start, {}), ("two plies along the pv (reuse)", along_pv(2), {}),
                             ("undo one ply (the ancestor kept)", lambda state, result: undo(state, 1), {}),
                             ("playouts 50", along_pv(1), {"playouts": 50, "visits": 0})])


def random_values_with_noise_9x9() -> list[str]:
    search = Search(RandomValueEvaluator(), one_thread(visits=120, batch_size=4), rng=np.random.default_rng(3))
    state = position(9, "C3 G7 G3")
    return sequence(search, [("noise", state, {"noise": True}), ("noise again (reuse)", then(state, "C7"),
                                                                  {"noise": True}),
                             ("no noise", then(state, "C7 E5"), {})])


def network(size: int, seed: int) -> Evaluator:
    return OnnxEvaluator(NETWORK, symmetry="random", rng=np.random.default_rng(seed), threads=1, provider="cpu",
                         log=None)


def network_13x13() -> list[str]:
    search = Search(network(13, 4), one_thread(visits=64), rng=np.random.default_rng(4))
    state = position(13, "D4 K10 K4")
    return sequence(search, [("D4 K10 K4", state, {}), ("then D10 (reuse)", then(state, "D10"), {}),
                             ("komi 0.5, handicap-like", position(13, "D4 K10 K4 D10", komi=0.5), {})])


def network_19x19() -> list[str]:
    search = Search(network(19, 5), one_thread(visits=48, batch_size=4), rng=np.random.default_rng(5))
    state = position(19, "Q16 D4 Q3")
    return sequence(search, [("Q16 D4 Q3", state, {}), ("noise", then(state, "D16"), {"noise": True})])


SCENARIOS: dict[str, Callable[[], list[str]]] = {
    "uniform 9x9": uniform_9x9, "scored 7x7: reuse, undo, playouts": scored_7x7,
    "random values 9x9: noise": random_values_with_noise_9x9, "network 13x13": network_13x13,
    "network 19x19": network_19x19,
}


def dump() -> str:
    lines = []
    for name, scenario in SCENARIOS.items():
        lines.append(f"## {name}")
        lines += scenario()
    return "\n".join(lines) + "\n"


def dump_without_score_utility() -> str:
    """``dump`` with every search's score utility off (its weights 0), the plain exploration (no variance
    scaling) and the network's priors as they are (no atari floor): the search before those terms were added."""
    def off(**changes) -> SearchConfig:
        return SearchConfig(threads=1, playouts_per_leaf=STORED_PLAYOUTS_PER_LEAF, static_score_utility=0.0,
                            dynamic_score_utility=0.0, cpuct_utility_stdev_scale=0.0, atari_prior=0.0, **changes)

    with mock.patch(f"{__name__}.one_thread", off):
        return dump()


def test_the_searches_match_the_stored_output():
    got = dump()
    want = GOLDEN.read_text()
    diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "stored", "now", n=1))
    assert got == want, ("the search's output changed (if meant: python -m tests.test_search_golden --write)\n"
                         + diff[:6000])


def stored_section(name: str) -> list[str]:
    """One scenario's lines of the stored output."""
    text = GOLDEN.read_text()
    return text.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0].rstrip("\n").splitlines()


def test_the_comparison_sees_one_playout_fewer(monkeypatch):
    """The stored output is fine-grained enough to fail when a search's visits change: one playout fewer in one
    search of a scenario changes that scenario's lines."""
    name = "scored 7x7: reuse, undo, playouts"
    assert scored_7x7() == stored_section(name)
    original = Search.run

    def one_playout_fewer(self, state, **options):
        if options.get("playouts") == 50:
            options["playouts"] = 49
        return original(self, state, **options)

    monkeypatch.setattr(Search, "run", one_playout_fewer)
    assert scored_7x7() != stored_section(name)


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.test_search_golden --write   (rewrites tests/golden/search*.txt)")
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(dump())
    NO_SCORE_UTILITY.write_text(dump_without_score_utility())
    print(f"wrote {GOLDEN} and {NO_SCORE_UTILITY}")

"""Our rules against GNU Go's, move by move, and our GTP engine in a real game against GNU Go.

The harness (``crosscheck_game``, ``Engine``) lives in ``tools/check/rules_crosscheck.py``, which also runs it at scale;
its docstring says what is compared. Every test here is skipped where GNU Go is not installed.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tabula.engine.rules.coords import BLACK, RESIGN, WHITE, parse_vertex
from tabula.engine.rules.game import GameState, Rules
from tabula.tools.check.rules_crosscheck import Engine, crosscheck_game, gnugo_engine
from tests.conftest import SEED

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_rules_match_gnugo_on_9x9(gnugo: str) -> None:
    counts = [crosscheck_game(gnugo, 9, SEED + i, max_moves=400) for i in range(6)]
    assert sum(checks for _, checks in counts) > 10_000
    assert sum(positions for positions, _ in counts) > 6 * 50


@pytest.mark.slow  # a few seconds: the quick suite stays under 3 minutes
def test_rules_match_gnugo_on_larger_boards(gnugo: str) -> None:
    crosscheck_game(gnugo, 13, SEED, max_moves=3 * 13 * 13)
    crosscheck_game(gnugo, 19, SEED, max_moves=120)


def test_the_crosscheck_script_runs(gnugo: str) -> None:
    """CI smoke test of ``python -m tabula.tools.check.rules_crosscheck`` (the 100,000-position run is
    docs/RELIABILITY.md)."""
    done = subprocess.run([sys.executable, "-m", "tabula.tools.check.rules_crosscheck", "--positions", "200",
                           "--seed", "1", "--gnugo", gnugo], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "disagreements: 0" in done.stdout
    positions = int(done.stdout.split("positions: ", 1)[1].split(",", 1)[0])
    assert positions >= 200


@pytest.mark.slow
@pytest.mark.parametrize("size, games", [(9, 10), (13, 3), (19, 2), (5, 10)])
def test_rules_match_gnugo_full_games(gnugo: str, size: int, games: int) -> None:
    for i in range(games):
        crosscheck_game(gnugo, size, SEED + 100 + i, max_moves=3 * size * size)


def referee_game(gnugo_path: str, size: int, max_moves: int, seed: int) -> GameState:
    """Tabula (random, black) against GNU Go level 1 (white), refereed with our positional-superko rules."""
    tabula = Engine([sys.executable, "-m", "tabula.gtp", "--player", "random", "--seed", str(seed)], cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)})
    gnugo = gnugo_engine(gnugo_path, "--level", "1")
    state = GameState(size, Rules(komi=7.5))
    try:
        for engine in (tabula, gnugo):
            engine.send(f"boardsize {size}")
            engine.send("clear_board")
            engine.send("komi 7.5")
        players = {BLACK: (tabula, gnugo), WHITE: (gnugo, tabula)}
        while not state.is_game_over() and len(state.moves) < max_moves:
            color = state.to_move
            name = "black" if color == BLACK else "white"
            mover, other = players[color]
            vertex = mover.send(f"genmove {name}")
            move = parse_vertex(vertex, size)
            if move == RESIGN:
                break
            if mover is tabula:
                assert state.legal(move), f"Tabula played an illegal {vertex}:\n{state}"
            elif not state.legal(move):
                break  # GNU Go plays simple ko; a superko repetition ends the game here
            state.play(move)
            assert other.send_many([f"play {name} {vertex}"])[0].strip() == "=", vertex
        if state.is_game_over():
            assert tabula.send("final_score")[0] in "BW0"
    finally:
        tabula.close()
        gnugo.close()
    return state


def test_tabula_plays_gnugo_for_a_few_moves(gnugo: str) -> None:
    state = referee_game(gnugo, 9, max_moves=24, seed=SEED)
    assert len(state.moves) >= 10


@pytest.mark.slow
def test_tabula_plays_a_full_game_against_gnugo(gnugo: str) -> None:
    state = referee_game(gnugo, 9, max_moves=400, seed=SEED)
    assert len(state.moves) > 20

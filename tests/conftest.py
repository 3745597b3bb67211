"""Shared fixtures: positions from ASCII, a fake clock, fixed seeds, GNU Go's path, and a GTP session."""
from __future__ import annotations

import random
import shutil

import pytest

from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.game import POSITIONAL, GameState, Rules

pytest_plugins = ["tests.conftest_network"]  # the tiny networks, built once per session

SEED = 20240607
GNUGO = "/usr/games/gnugo"


def board_from_ascii(ascii_rows: str, to_move: int = BLACK, komi: float = 7.5,
                     superko: str = POSITIONAL) -> GameState:
    """A game set up from rows written top (highest row) first: X black, O white, . empty (spaces optional)."""
    rows = [row.replace(" ", "") for row in ascii_rows.strip().splitlines()]
    size = len(rows)
    if any(len(row) != size for row in rows):
        raise ValueError("the rows must form a square")
    state = GameState(size, Rules(komi=komi, superko=superko))
    for i, row in enumerate(rows):
        y = size - 1 - i
        for x, cell in enumerate(row):
            if cell in "XO":
                state.place_setup(y * size + x, BLACK if cell == "X" else WHITE)
    state.to_move = to_move
    state.seen = {state._superko_key(state.board.hash, to_move)}
    return state


# Below two inner strings at the top, each walled in by the other colour's live group (two eyes each, B3 B1 and
# F3 F1): the top rows decide whether the inner strings are in seki.
SEKI_WALLS = """
    O O X X O X X
    O O O O X X X
    O . O O X . X
    O O O O X X X
    O . O O X . X
"""
SEKI_ONE_EYE_EACH = "X . X . O . O\nX X X . O O O" + SEKI_WALLS  # eyes B7 and F7; D7 and D6 shared
SEKI_NO_EYES = "X X X . O O O\nX X X . O O O" + SEKI_WALLS  # D7 and D6 shared, nothing else
SEKI_INNER_BLACK = ("A7", "C7", "A6", "B6", "C6", "C5", "D5")  # in SEKI_ONE_EYE_EACH
SEKI_INNER_WHITE = ("E7", "G7", "E6", "F6", "G6", "E5")

# A game's end on 13x13 with a seki of four strings at the top right: white's M12 N12 (liberties N13 and N11) between
# black's M13 and black's M11 string, neither of which can fill N13 or N11; black's big J13 string has L13 and L11
# for eyes, but each is shared with one of those two, so it lives only by the seki. A referee counts all 13 alive.
SEKI_SHARED_EYES = """
    X . X X O O . O X X . X .
    X X . X O . O O O X X O O
    X O X X X O . X O X . X .
    O O O O O O . X X O X X X
    . . . . . . X X O O O O X
    . O . . X . X O O . O O O
    . . . X . . . O . O X X X
    . X X O O . O . O O X . X
    . X O . . . . O X X O O X
    . X . O . . . . O X . X .
    . O O . . . . . O X . . .
    . . . . . O O O X X . . .
    . . . . . O X X X . . . .
"""
SEKI_SHARED_EYES_BLACK = ("J13", "K13", "K12", "L12", "K11", "M13", "M11", "M10", "L10", "N10", "N9")
SEKI_SHARED_EYES_WHITE = ("M12", "N12")


class FakeClock:
    """A time source for tests: ``clock()`` returns the fake time, ``advance(s)`` moves it on. No sleeping."""

    def __init__(self, start: float = 1000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rng() -> random.Random:
    return random.Random(SEED)


@pytest.fixture(name="board_from_ascii")
def board_from_ascii_fixture():
    return board_from_ascii


@pytest.fixture
def gnugo() -> str:
    """GNU Go's path; the test is skipped where it is not installed."""
    path = shutil.which(GNUGO) or shutil.which("gnugo")
    if path is None:
        pytest.skip("GNU Go is not installed")
    return path


def make_session(seed: int = SEED, size: int = 19, clock=None):
    """An in-process GTP session with the random player and a fixed seed."""
    from tabula.engine.config import EngineConfig
    from tabula.engine.play.player import Player
    from tabula.gtp.__main__ import load_extensions
    from tabula.gtp.commands import Session

    load_extensions()
    config = EngineConfig(seed=seed, board_size=size, player="random")
    player = Player.from_config(config, clock=clock) if clock is not None else Player.from_config(config)
    return Session(player=player, config=config)


@pytest.fixture
def session():
    return make_session()


__all__ = ["board_from_ascii", "FakeClock", "SEED", "GNUGO", "make_session", "WHITE", "BLACK"]

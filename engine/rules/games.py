"""The games Tabula plays, by name: the one place where a game is chosen (at an entry point, from ``--game``) and
from where its positions and records are made, so that self-play, the replay window and the trainer take a
``GameSpec`` and never ask which game they play.

Layer: rules. Go is ``engine.rules.game.GameState``; gomoku (freestyle n in a row) is
``engine.rules.gomoku.GomokuState``, imported on first use.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.interface import Game

GO = "go"
GOMOKU = "gomoku"
GAMES = (GO, GOMOKU)


@dataclass(frozen=True)
class GameSpec:
    """Which game, and its settings that every position of a run shares (komi is Go's, given per position)."""

    name: str = GO  # go | gomoku
    n_in_row: int = 5  # gomoku: the stones in a row that win (n or more; 3 to 6)

    def __post_init__(self) -> None:
        if self.name not in GAMES:
            raise ValueError(f"unknown game {self.name!r} ({', '.join(GAMES)})")
        if self.name == GOMOKU:
            from tabula.engine.rules.gomoku import MAX_IN_ROW, MIN_IN_ROW

            if not MIN_IN_ROW <= self.n_in_row <= MAX_IN_ROW:
                raise ValueError(f"gomoku n_in_row {self.n_in_row} is outside {MIN_IN_ROW}..{MAX_IN_ROW}")

    @property
    def scored(self) -> bool:
        """Whether the game ends in a count of points (Go's margins and final owners are training targets)."""
        return self.name == GO

    def check_size(self, size: int) -> None:
        """ValueError unless the game is played on a ``size`` x ``size`` board."""
        if self.name == GO:
            if not 2 <= size <= 25:
                raise ValueError(f"Go board size {size}: 2 to 25")
        else:
            from tabula.engine.rules.gomoku import check_dimensions

            check_dimensions(size, size, self.n_in_row)

    def new_state(self, size: int, komi: float = 7.5) -> Game:
        """The empty board of ``size``, black to move (``komi``: Go's)."""
        if self.name == GO:
            from tabula.engine.rules.game import GameState, Rules

            return GameState(size, Rules(komi=komi))
        from tabula.engine.rules.gomoku import GomokuState

        return GomokuState(size, n_in_row=self.n_in_row)

    def record_state(self, size: int, komi: float) -> Game:
        """The empty board a stored game is replayed on: Go's with simple ko only (records come from servers whose
        rules have no superko), other games' as ``new_state``."""
        if self.name == GO:
            from tabula.engine.rules.game import SIMPLE_KO, GameState, Rules

            return GameState(size, Rules(komi=komi, superko=SIMPLE_KO))
        return self.new_state(size, komi)

    def sgf(self, state: Game, black_name: str, white_name: str, result: str) -> bytes:
        """The game of ``state`` as SGF (Go through ``engine.rules.sgf``; gomoku as GM[4], points as letters from
        the top left, the way Gomoku programs read SGF)."""
        if self.name == GO:
            from tabula.engine.rules.sgf import write_sgf

            return write_sgf(state, black_name=black_name, white_name=white_name, result=result)
        size = state.size
        moves = "".join(f";{'B' if color == BLACK else 'W'}[{chr(97 + move % size)}{chr(97 + size - 1 - move // size)}]"
                        for color, move in state.moves)
        return (f"(;GM[4]FF[4]CA[UTF-8]SZ[{size}]PB[{black_name}]PW[{white_name}]RE[{result}]"
                f"GC[freestyle, {self.n_in_row} or more in a row]{moves})\n").encode()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> "GameSpec":
        """A saved spec; None (a file from before games had names) is Go."""
        return cls() if data is None else cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def result_of(state: Game) -> tuple[int, str]:
    """(winner: BLACK, WHITE or 0, the SGF result) of a game played to its end or stopped at a move limit. A game
    not over is counted now where it has a count (Go's ``terminal_score`` hook, and its ``result_string``, e.g.
    ``B+3.5``), else it is a draw; a gomoku win reads ``B+``."""
    value = state.terminal_value()
    if value is None:
        count = getattr(state, "terminal_score", None)
        score = count() if count is not None else 0.0
        value = 1.0 if score > 0 else -1.0 if score < 0 else 0.0
    winner = state.to_move if value > 0 else 3 - state.to_move if value < 0 else 0
    result_string = getattr(state, "result_string", None)
    if result_string is not None:
        return winner, result_string()
    return winner, {BLACK: "B+", WHITE: "W+"}.get(winner, "0")


__all__ = ["GameSpec", "GO", "GOMOKU", "GAMES", "result_of"]

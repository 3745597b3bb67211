"""Gomoku, freestyle: n or more stones in a row (n from 3 to 6) on a W x H board (5 to 20 each) win; a full board is
a draw. ``GomokuState`` is the second game behind the ``Game`` interface (rules/interface.py), beside Go's GameState.

Layer: rules (imports only coords and board's IllegalMoveError). Moves are flat ints ``y * width + x`` with ``x`` the
column from the left and ``y`` the row from the BOTTOM, as Go's are; there is no pass. BLACK moves first. Stones sit
on a padded grid (one border row above and below, one border column shared by the left and right edges) so that the
win check walks the four directions from the last move until a cell of another colour, with no bounds checks.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, WHITE

MIN_SIDE, MAX_SIDE = 5, 20
MIN_IN_ROW, MAX_IN_ROW = 3, 6
BORDER = 3  # a padded cell off the board: no colour matches it, so a walk along a line stops there


class GomokuGeometry:
    """Everything about a W x H board that never changes: the padded layout, directions, Zobrist keys."""

    _cache: dict[tuple[int, int], "GomokuGeometry"] = {}

    def __init__(self, width: int, height: int):
        self.width = width
        self.height = height
        self.points = width * height
        self.stride = stride = width + 1
        self.padded_len = (height + 2) * stride + 1
        self.padded = [(y + 1) * stride + x + 1 for y in range(height) for x in range(width)]  # flat -> padded
        self.flat = [-1] * self.padded_len  # padded -> flat, -1 on the border
        for flat, pad in enumerate(self.padded):
            self.flat[pad] = flat
        # East, north, north-east, north-west; each line is walked both ways from the last move.
        self.directions = (1, stride, stride + 1, stride - 1)
        grid = bytearray([BORDER]) * self.padded_len
        for pad in self.padded:
            grid[pad] = EMPTY
        self.empty_grid = bytes(grid)
        rng = random.Random(0x60A0C0 + 64 * width + height)
        self.zobrist = [[0] * self.points,
                        [rng.getrandbits(64) for _ in range(self.points)],
                        [rng.getrandbits(64) for _ in range(self.points)]]  # [colour][flat]
        self.zobrist_white_to_move = rng.getrandbits(64)
        self.padded_array = np.array(self.padded, dtype=np.int64)

    @classmethod
    def of(cls, width: int, height: int) -> "GomokuGeometry":
        geometry = cls._cache.get((width, height))
        if geometry is None:
            geometry = cls._cache[(width, height)] = cls(width, height)
        return geometry


@dataclass(frozen=True)
class GomokuRules:
    """What besides the board's shape decides a gomoku game: how many in a row win (freestyle: that many or more).
    The search compares states' ``rules`` so that it never shares a tree or a cached evaluation across them."""

    n_in_row: int = 5


def check_dimensions(width: int, height: int, n_in_row: int) -> None:
    """ValueError, naming what is wrong, unless a W x H board with n in a row is a game these rules play."""
    for name, value in (("width", width), ("height", height), ("n_in_row", n_in_row)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"gomoku {name} must be an int, not {value!r}")
    if not (MIN_SIDE <= width <= MAX_SIDE and MIN_SIDE <= height <= MAX_SIDE):
        raise ValueError(f"gomoku board {width}x{height} is outside {MIN_SIDE}x{MIN_SIDE}..{MAX_SIDE}x{MAX_SIDE}")
    if not (MIN_IN_ROW <= n_in_row <= MAX_IN_ROW):
        raise ValueError(f"gomoku n_in_row {n_in_row} is outside {MIN_IN_ROW}..{MAX_IN_ROW}")
    if n_in_row > max(width, height):
        raise ValueError(f"{n_in_row} in a row cannot fit on a {width}x{height} board")


def _makes_row(grid: bytearray, pad: int, color: int, directions: tuple[int, ...], n_in_row: int) -> bool:
    """Whether the stone of ``color`` at padded ``pad`` stands in a line of ``n_in_row`` or more.

    The hot loop of random rollouts: a direction whose two neighbours are both of another colour (most of them) is
    dismissed after two reads.
    """
    for step in directions:
        p = pad + step
        if grid[p] != color:
            p = pad - step
            if grid[p] != color:
                continue
            count = 2
            p -= step
            while grid[p] == color:
                count += 1
                p -= step
        else:
            count = 2
            p += step
            while grid[p] == color:
                count += 1
                p += step
            p = pad - step
            while grid[p] == color:
                count += 1
                p -= step
        if count >= n_in_row:
            return True
    return False


class GomokuState:
    """One gomoku position: stones, side to move, the moves so far, the winner if any. Changed in place by ``play``;
    ``copy()`` is four list copies.

    Fixed for the game: ``geometry``, ``rules`` (with ``n_in_row``). Changed by every move: ``grid`` (padded
    colours), ``to_move``, ``moves``, ``empty`` with ``empty_index`` (the empty flat points, kept by swap-remove so
    no move scans the board), ``stone_hash`` and ``winner``.
    """

    INPUT_ENCODING = "gomoku-4"  # the planes engine/net/gomoku_features.py encodes, named in network metadata

    __slots__ = ("geometry", "rules", "n_in_row", "grid", "to_move", "moves", "empty", "empty_index", "stone_hash",
                 "winner")

    def __init__(self, width: int = 15, height: int | None = None, n_in_row: int = 5):
        height = width if height is None else height
        check_dimensions(width, height, n_in_row)
        self.geometry = geometry = GomokuGeometry.of(width, height)
        self.rules = GomokuRules(n_in_row)
        self.n_in_row = n_in_row  # = rules.n_in_row, kept beside it for the win check's speed
        self.grid = bytearray(geometry.empty_grid)
        self.to_move = BLACK
        self.moves: list[tuple[int, int]] = []  # (colour, flat move) in order
        self.empty = list(range(geometry.points))
        self.empty_index = list(range(geometry.points))  # flat -> index in ``empty``, -1 when occupied
        self.stone_hash = 0  # Zobrist hash of the stones alone
        self.winner: int | None = None  # the colour that made n in a row, if one did

    # -- shape ---------------------------------------------------------------------------------------------------

    @property
    def width(self) -> int:
        return self.geometry.width

    @property
    def height(self) -> int:
        return self.geometry.height

    @property
    def size(self) -> int:
        """The side of a square board. The network and search play square boards only; a rectangular board (the
        Gomocup protocol's RECTSTART) has no ``size`` and says so."""
        if self.geometry.width != self.geometry.height:
            raise ValueError(f"a {self.width}x{self.height} gomoku board is not square; the network and search "
                             "need square boards")
        return self.geometry.width

    @property
    def policy_size(self) -> int:
        """One policy entry per point, ``y * width + x``; gomoku has no pass."""
        return self.geometry.points

    # -- copies and keys -----------------------------------------------------------------------------------------

    def with_to_move(self, color: int) -> "GomokuState":
        """This position with ``color`` to move (a move picker asks for the mover): itself, or an
        IllegalMoveError, since gomoku has no pass that would give the other colour the move."""
        if color != self.to_move:
            raise IllegalMoveError("not this colour's turn")
        return self

    def copy(self) -> "GomokuState":
        other = GomokuState.__new__(GomokuState)
        other.geometry = self.geometry
        other.rules = self.rules
        other.n_in_row = self.n_in_row
        other.grid = self.grid[:]
        other.to_move = self.to_move
        other.moves = self.moves[:]
        other.empty = self.empty[:]
        other.empty_index = self.empty_index[:]
        other.stone_hash = self.stone_hash
        other.winner = self.winner
        return other

    @property
    def hash(self) -> int:
        """Transposition key: the stones and the side to move (gomoku has no ko), the same whatever the order of
        the moves that led here."""
        if self.to_move == WHITE:
            return self.stone_hash ^ self.geometry.zobrist_white_to_move
        return self.stone_hash

    # -- moves ---------------------------------------------------------------------------------------------------

    def check(self, move: int, color: int | None = None) -> None:
        """Raise IllegalMoveError (a ValueError) unless ``color`` (default: the side to move) may play ``move``.
        Reasons: "game over", "off board" (passes and resignations included: gomoku has neither), "occupied"."""
        if color is not None and color not in (BLACK, WHITE):
            raise ValueError(f"invalid colour {color!r}")
        if self.winner is not None or not self.empty:
            raise IllegalMoveError("game over")
        if isinstance(move, bool) or not isinstance(move, (int, np.integer)) or not 0 <= move < self.geometry.points:
            raise IllegalMoveError("off board")
        if self.empty_index[move] < 0:
            raise IllegalMoveError("occupied")

    def legal(self, move: int, color: int | None = None) -> bool:
        try:
            self.check(move, color)
        except ValueError:
            return False
        return True

    def play(self, move: int, color: int | None = None) -> None:
        """Put a stone of ``color`` (default: the side to move) on ``move``; the other colour moves next. An illegal
        move raises IllegalMoveError and leaves the state as it was."""
        self.check(move, color)
        move = int(move)
        color = self.to_move if color is None else color
        geometry = self.geometry
        pad = geometry.padded[move]
        self.grid[pad] = color
        self._remove_empty(move)
        self.stone_hash ^= geometry.zobrist[color][move]
        self.moves.append((color, move))
        self.to_move = 3 - color
        if _makes_row(self.grid, pad, color, geometry.directions, self.n_in_row):
            self.winner = color

    def undo(self) -> None:
        """Take back the last move (ValueError when there is none)."""
        if not self.moves:
            raise ValueError("no move to undo")
        color, move = self.moves.pop()
        self.grid[self.geometry.padded[move]] = EMPTY
        self.empty_index[move] = len(self.empty)
        self.empty.append(move)
        self.stone_hash ^= self.geometry.zobrist[color][move]
        self.to_move = color
        self.winner = None  # no move is played after a win, so the position before the last move had no winner

    def _remove_empty(self, move: int) -> None:
        empty, index = self.empty, self.empty_index
        i = index[move]
        last = empty.pop()
        if last != move:
            empty[i] = last
            index[last] = i
        index[move] = -1

    def legal_moves(self) -> list[int]:
        """The empty points in increasing order, or [] once the game is over."""
        if self.winner is not None:
            return []
        return sorted(self.empty)

    def legal_mask(self) -> np.ndarray:
        """bool [policy_size]: True where the side to move may play."""
        mask = np.zeros(self.geometry.points, dtype=bool)
        if self.winner is None and self.empty:
            mask[self.empty] = True
        return mask

    # -- the end of the game -------------------------------------------------------------------------------------

    def terminal_value(self) -> float | None:
        """None while the game goes on; else the result for the side to move: -1 when the last move made n in a
        row (+1 in the odd case that the side to move made it, when colours were given out of turn), 0 for a full
        board without a winner."""
        if self.winner is not None:
            return 1.0 if self.winner == self.to_move else -1.0
        if not self.empty:
            return 0.0
        return None

    def is_game_over(self) -> bool:
        return self.winner is not None or not self.empty

    def random_playout_value(self, rng: random.Random) -> float:
        """Play uniformly random moves from here to the end of the game on a scratch grid (this state is not
        changed) and return the result for the side to move here: +1, -1 or 0.

        The fast path of pure MCTS's rollouts: each move is drawn from a scratch list of the empty points by
        swap-remove (one ``rng.random()`` a move), and only needs the win check through itself.
        """
        value = self.terminal_value()
        if value is not None:
            return value
        grid = self.grid[:]
        empty = self.empty[:]
        padded = self.geometry.padded
        directions = self.geometry.directions
        n_in_row = self.n_in_row
        rand = rng.random
        color = self.to_move
        remaining = len(empty)
        while remaining:
            i = int(rand() * remaining)
            remaining -= 1
            move = empty[i]
            empty[i] = empty[remaining]
            pad = padded[move]
            grid[pad] = color
            if _makes_row(grid, pad, color, directions, n_in_row):
                return 1.0 if color == self.to_move else -1.0
            color = 3 - color
        return 0.0

    # -- what the encoder and the front ends read ----------------------------------------------------------------

    @property
    def last_move(self) -> int | None:
        return self.moves[-1][1] if self.moves else None

    def color_at(self, move: int) -> int:
        return self.grid[self.geometry.padded[move]]

    def colors(self) -> np.ndarray:
        """uint8 [width * height]: EMPTY, BLACK or WHITE at each flat point ``y * width + x``."""
        grid = np.frombuffer(bytes(self.grid), dtype=np.uint8)
        return grid[self.geometry.padded_array]

    def __str__(self) -> str:
        """The board as text, the top row first: X black, O white, . empty, the last move in parentheses."""
        symbols = {EMPTY: ".", BLACK: "X", WHITE: "O"}
        last = self.last_move
        lines = []
        for y in range(self.height - 1, -1, -1):
            cells = []
            for x in range(self.width):
                move = y * self.width + x
                symbol = symbols[self.color_at(move)]
                cells.append(f"({symbol})" if move == last else f" {symbol} ")
            lines.append(f"{y + 1:2d} " + "".join(cells).rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"GomokuState({self.width}x{self.height}, n_in_row={self.n_in_row}, moves={len(self.moves)}, "
                f"to_move={'black' if self.to_move == BLACK else 'white'})")


__all__ = ["GomokuState", "GomokuGeometry", "GomokuRules", "IllegalMoveError", "check_dimensions", "MIN_SIDE",
           "MAX_SIDE", "MIN_IN_ROW", "MAX_IN_ROW"]

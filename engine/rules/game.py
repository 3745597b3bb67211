"""A game: the board plus what the rules need of the past — side to move, superko history, passes, komi, handicap,
scoring — and the recent positions the network reads.

Layer: above board. ``GameState`` is changed in place by ``play``; ``copy()`` is cheap (the board copy plus one set
copy), which is how the search and the GTP undo stack keep positions.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabula.engine.rules.board import NO_POINT, Board, IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, RESIGN, WHITE, format_vertex

HISTORY_LENGTH = 8  # positions the network sees: the current one and 7 before it

POSITIONAL = "positional"
SITUATIONAL = "situational"
SIMPLE_KO = "simple"  # only the immediate recapture is forbidden, as GNU Go plays


@dataclass(frozen=True)
class Rules:
    """The rules a game is played under. Scoring is always Tromp-Taylor area scoring."""

    komi: float = 7.5
    superko: str = POSITIONAL  # positional | situational | simple

    def __post_init__(self) -> None:
        if self.superko not in (POSITIONAL, SITUATIONAL, SIMPLE_KO):
            raise ValueError(f"unknown superko rule {self.superko!r}")


# The GTP specification's fixed handicap placement, as (x, y) from the bottom-left, for 19x19; other sizes scale.
def handicap_points(size: int, count: int) -> list[int]:
    """The GTP spec's fixed placement for ``count`` stones, or ValueError where the spec defines none."""
    if count < 2 or count > 9:
        raise ValueError("invalid handicap")
    if size < 7 or (size % 2 == 0 and count > 4) or (size == 7 and count > 4):
        raise ValueError(f"no fixed placement of {count} stones on {size}x{size}")
    edge = 2 if size <= 12 else 3
    low, mid, high = edge, size // 2, size - 1 - edge
    corners = [(high, high), (low, low), (low, high), (high, low)]  # upper right, lower left, upper left, lower right
    sides = [(low, mid), (high, mid)]  # left, right
    vertical = [(mid, high), (mid, low)]  # top, bottom
    center = (mid, mid)
    if count <= 4:
        chosen = corners[:count]
    elif count == 5:
        chosen = corners + [center]
    elif count == 6:
        chosen = corners + sides
    elif count == 7:
        chosen = corners + sides + [center]
    elif count == 8:
        chosen = corners + sides + vertical
    else:
        chosen = corners + sides + vertical + [center]
    return [y * size + x for x, y in chosen]


def format_result(score: float) -> str:
    """The SGF/GTP result for black's margin ``score`` (komi included): ``B+3.5``, ``W+0.5`` or ``0``."""
    if score > 0:
        return f"B+{score:g}"
    if score < 0:
        return f"W+{-score:g}"
    return "0"


class GameState:
    """One position of a game and the history the rules and the network need.

    Fields that change with every move: ``board``, ``to_move``, ``moves``, ``passes``, ``recent`` and ``seen``.
    ``rules`` and ``handicap`` are fixed for the game.
    """

    __slots__ = ("board", "to_move", "rules", "moves", "passes", "recent", "seen", "handicap", "setup", "stones",
                 "peak_stones")

    def __init__(self, size: int = 19, rules: Rules | None = None):
        self.board = Board(size)
        self.rules = rules or Rules()
        self.to_move = BLACK
        self.moves: list[tuple[int, int]] = []  # (colour, move) played since the setup
        self.setup: list[tuple[int, int]] = []  # (colour, point) stones placed outside of play
        self.handicap = 0
        self.passes = 0  # consecutive passes at the end of the move list
        # Padded colours of the previous positions (immutable snapshots), newest first, at most HISTORY_LENGTH - 1.
        self.recent: tuple[bytes, ...] = ()
        self.seen: set[int] = {self._superko_key(self.board.hash, BLACK)}
        # Stones on the board, and the most there were in any position of ``seen``: a move that captures nothing
        # adds a stone, so it can repeat a position only if some earlier one had more stones than there are now.
        self.stones = 0
        self.peak_stones = 0

    @property
    def size(self) -> int:
        return self.board.geometry.size

    def copy(self) -> "GameState":
        other = GameState.__new__(GameState)
        other.board = self.board.copy()
        other.rules = self.rules
        other.to_move = self.to_move
        other.moves = self.moves[:]
        other.setup = self.setup[:]
        other.handicap = self.handicap
        other.passes = self.passes
        other.recent = self.recent
        other.seen = set(self.seen)
        other.stones = self.stones
        other.peak_stones = self.peak_stones
        return other

    def with_to_move(self, color: int) -> "GameState":
        """This position with ``color`` to move: itself when it already is, else a copy (GTP may ask either colour
        to move, whoever moved last)."""
        if self.to_move == color:
            return self
        other = self.copy()
        other.to_move = color
        return other

    def without_stones(self, points: Sequence[int]) -> "GameState":
        """A position with the stones on ``points`` taken off (dead stones a referee removes), for counting only:
        same size, rules and side to move, the other stones as setup, no history."""
        counted = GameState(self.size, self.rules)
        removed = set(points)
        board = self.board
        for flat, pad in enumerate(board.geometry.padded):
            color = board.color[pad]
            if color in (BLACK, WHITE) and flat not in removed:
                # Every string keeps at least the liberties it has here, so no placement captures or is suicide.
                counted.place_setup(flat, color)
        counted.to_move = self.to_move
        return counted

    def _superko_key(self, stone_hash: int, to_move: int) -> int:
        if self.rules.superko == SITUATIONAL and to_move == WHITE:
            return stone_hash ^ self.board.geometry.zobrist_white_to_move
        return stone_hash

    @property
    def hash(self) -> int:
        """Identifies the position for the transposition table: stones, side to move and ko point."""
        geometry = self.board.geometry
        key = self.board.hash ^ geometry.zobrist_ko[self.board.ko]
        return key ^ geometry.zobrist_white_to_move if self.to_move == WHITE else key

    def is_game_over(self) -> bool:
        return self.passes >= 2

    # -- moves ---------------------------------------------------------------------------------------------------

    def play(self, move: int, color: int | None = None) -> list[int]:
        """Play ``move`` for ``color`` (default: the side to move) and return the captured flat points.

        Raises IllegalMoveError (occupied, suicide, ko, superko) and leaves the state unchanged.
        """
        if color is None:
            color = self.to_move
        if move == RESIGN:
            raise IllegalMoveError("resign is not a move")
        board = self.board
        if move == PASS:
            captured_flat: list[int] = []
            board.ko = NO_POINT
            self.passes += 1
        else:
            # The search replays every move of every descent through here: geometry and history are inlined.
            geometry = board.geometry
            padded = geometry.padded
            if not (0 <= move < len(padded)):
                raise IllegalMoveError("off board")
            point = padded[move]
            new_hash, captured_roots = board.try_play(point, color)
            superko = self.rules.superko
            if superko == SIMPLE_KO:
                key = None
            else:
                key = new_hash ^ geometry.zobrist_white_to_move if superko == SITUATIONAL and color == BLACK \
                    else new_hash  # as _superko_key(new_hash, 3 - color)
                if key in self.seen:
                    raise IllegalMoveError("superko")
            self.recent = (bytes(board.color),) + self.recent[: HISTORY_LENGTH - 2]  # as _push_history()
            flat = geometry.flat
            captured_flat = [flat[p] for p in board._commit(point, color, new_hash, captured_roots)]
            if key is not None:
                self.seen.add(key)
            self.stones += 1 - len(captured_flat)
            if self.stones > self.peak_stones:
                self.peak_stones = self.stones
            self.passes = 0
        if move == PASS:
            self._push_history()
            if self.rules.superko == SITUATIONAL:
                self.seen.add(self._superko_key(board.hash, 3 - color))
        self.moves.append((color, move))
        self.to_move = 3 - color
        return captured_flat

    def _push_history(self) -> None:
        self.recent = (bytes(self.board.color),) + self.recent[: HISTORY_LENGTH - 2]

    def legal(self, move: int, color: int | None = None) -> bool:
        if move == PASS:
            return True
        try:
            self.check(move, color)
        except IllegalMoveError:
            return False
        return True

    def check(self, move: int, color: int | None = None) -> None:
        """Raise IllegalMoveError if ``move`` is not legal for ``color`` now."""
        if color is None:
            color = self.to_move
        if move == PASS:
            return
        if not (0 <= move < self.size * self.size):
            raise IllegalMoveError("off board")
        new_hash, _ = self.board.try_play(self.board.geometry.padded[move], color)
        if self.rules.superko != SIMPLE_KO and self._superko_key(new_hash, 3 - color) in self.seen:
            raise IllegalMoveError("superko")

    def legal_moves(self, color: int | None = None) -> list[int]:
        """Every legal point for ``color`` (flat), pass not included."""
        return np.flatnonzero(self.legal_mask(color)[:-1]).tolist()

    def legal_mask(self, color: int | None = None) -> np.ndarray:
        """bool [N*N+1]: the legal points for ``color`` (default: the side to move), and pass (always legal)."""
        return legal_masks([self], None if color is None else [color])[0]

    def place_handicap(self, points: list[int]) -> None:
        """Put black handicap stones on an empty board; white moves next."""
        if self.moves or self.setup:
            raise ValueError("board not empty")
        if len(points) < 2 or len(set(points)) != len(points):
            raise ValueError("bad handicap")
        self.to_move = WHITE
        for point in points:
            self.place_setup(point, BLACK)
        self.handicap = len(points)

    def place_setup(self, point: int, color: int) -> None:
        """A stone placed outside of play (handicap, SGF AB/AW). It starts the history afresh."""
        if not (0 <= point < self.size * self.size):
            raise IllegalMoveError("off board")
        self.board.place_setup_stone(self.board.geometry.padded[point], color)
        self.setup.append((color, point))
        self.seen = {self._superko_key(self.board.hash, self.to_move)}
        self.stones += 1
        self.peak_stones = self.stones
        self.recent = ()

    # -- reading the position --------------------------------------------------------------------------------------

    def color_at(self, point: int) -> int:
        return self.board.color[self.board.geometry.padded[point]]

    def area_score(self) -> float:
        """Tromp-Taylor score from black's view, komi included: positive means black wins."""
        black, white = self.board.area_score()
        return black - white - self.rules.komi

    def result_string(self) -> str:
        """The SGF/GTP result of counting this position now, e.g. ``B+3.5`` or ``0``."""
        return format_result(self.area_score())

    def history_colors(self, age: int) -> bytes | bytearray | None:
        """Padded colours of the position ``age`` moves ago (0 = now), or None before the game's start."""
        if age == 0:
            return self.board.color
        if age - 1 < len(self.recent):
            return self.recent[age - 1]
        return None

    def last_move(self) -> int | None:
        return self.moves[-1][1] if self.moves else None

    def __str__(self) -> str:
        size = self.size
        header = "   " + " ".join("ABCDEFGHJKLMNOPQRSTUVWXYZ"[:size])
        lines = [header]
        rows = self.board.to_ascii().split("\n")
        for i, row in enumerate(rows):
            number = size - i
            lines.append(f"{number:2d} {row} {number:2d}")
        lines.append(header)
        moved = f", last {format_vertex(self.moves[-1][1], size)}" if self.moves else ""
        lines.append(f"{'Black' if self.to_move == BLACK else 'White'} to move{moved}, komi {self.rules.komi:g}")
        return "\n".join(lines)


def legal_masks(states: Sequence[GameState], colors: Sequence[int] | None = None) -> np.ndarray:
    """bool [B, N*N+1]: each state's legal points for its colour (default: its side to move), and pass (always legal).

    The search calls this for every batch of leaves (states of one board size), so most points are decided in numpy
    for the whole batch at once: an empty point with an empty neighbour is legal unless it captures (then the rules
    are played out in Python) or repeats a position (one Zobrist key away from the current hash when it captures
    nothing, and only possible when an earlier position had more stones than this one).
    """
    count = len(states)
    if colors is None:
        colors = [state.to_move for state in states]
    geometry = states[0].board.geometry
    size = geometry.size
    width = geometry.width
    grid = np.frombuffer(b"".join([state.board.color for state in states]), dtype=np.int8).reshape(count, -1)
    empty = grid == EMPTY  # padded; the border is never empty
    # Points with an empty neighbour, by shifting the padded grid (neighbours are ±1 and ±width; the border rows
    # and the shared border column keep the shifts from reaching across an edge).
    free = np.zeros_like(empty)
    free[:, width:-width] = empty[:, :-2 * width] | empty[:, 2 * width:] | empty[:, width - 1:-width - 1] \
        | empty[:, width + 1:-width + 1]
    padded_index = geometry.padded_array
    points = empty[:, padded_index]
    easy = points & free[:, padded_index]
    flat = geometry.flat
    for row, (state, color) in enumerate(zip(states, colors)):
        board = state.board
        board_color = board.color
        other = 3 - color
        # Points that capture: the lone liberty of each opponent string in atari.
        capturing = [flat[next(iter(libs))] for root, libs in board.liberties.items()
                     if len(libs) == 1 and board_color[root] == other]
        if capturing:
            easy[row, capturing] = False
        if board.ko_color == color and board.ko != NO_POINT:
            points[row, flat[board.ko]] = False
            easy[row, flat[board.ko]] = False
    masks = np.zeros((count, size * size + 1), dtype=bool)
    masks[:, -1] = True
    masks[:, :-1] = easy
    for row, (state, color) in enumerate(zip(states, colors)):
        superko = state.rules.superko
        if superko != SIMPLE_KO and len(state.seen) > 1 and state.peak_stones > state.stones:
            key = state._superko_key(state.board.hash, 3 - color)
            candidates = np.flatnonzero(easy[row])
            after = geometry.zobrist_array[color][candidates] ^ np.uint64(key)
            seen = np.sort(np.fromiter(state.seen, dtype=np.uint64, count=len(state.seen)))
            found = np.searchsorted(seen, after).clip(max=len(seen) - 1)  # np.isin costs 5x more here
            masks[row, candidates[seen[found] == after]] = False
    padded = geometry.padded
    rows, hard = np.nonzero(points & ~easy)
    for row, point in zip(rows.tolist(), hard.tolist()):
        state = states[row]
        color = colors[row]
        try:
            new_hash, _ = state.board.try_play(padded[point], color)
        except IllegalMoveError:
            continue
        if state.rules.superko != SIMPLE_KO and state._superko_key(new_hash, 3 - color) in state.seen:
            continue
        masks[row, point] = True
    return masks


__all__ = ["GameState", "Rules", "IllegalMoveError", "format_result", "handicap_points", "legal_masks",
           "HISTORY_LENGTH", "POSITIONAL", "SITUATIONAL", "SIMPLE_KO", "EMPTY"]

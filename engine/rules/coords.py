"""Moves and their spellings: flat indices, GTP vertices, SGF points.

A move is an int. On an N×N board a point is ``y * N + x`` with ``x`` the column (0 = "A") and ``y`` the row counted
from the bottom (0 = GTP row 1), the layout Leela Zero's input planes and policy use. ``PASS`` and ``RESIGN`` are
negative so that they mean the same on every board size; the policy index of a pass is ``N * N``.
"""
from __future__ import annotations

PASS = -1
RESIGN = -2

MIN_SIZE = 2
MAX_SIZE = 25
# GTP skips "I" so that it cannot be mistaken for "J" or "1".
COLUMNS = "ABCDEFGHJKLMNOPQRSTUVWXYZ"

EMPTY, BLACK, WHITE = 0, 1, 2


class CoordinateError(ValueError):
    """A vertex or colour that cannot be read, or lies off the board."""


def opponent(color: int) -> int:
    return 3 - color


def parse_color(text: str) -> int:
    """GTP colour: ``b``, ``w``, ``black``, ``white`` in any case."""
    word = text.lower()
    if word in ("b", "black"):
        return BLACK
    if word in ("w", "white"):
        return WHITE
    raise CoordinateError(f"invalid color {text!r}")


def color_name(color: int) -> str:
    return "black" if color == BLACK else "white"


def parse_vertex(text: str, size: int) -> int:
    """GTP vertex (``D4``, ``pass``, ``resign``, any case) to a move on a ``size`` board."""
    word = text.strip().upper()
    if word == "PASS":
        return PASS
    if word == "RESIGN":
        return RESIGN
    if len(word) < 2 or word[0] not in COLUMNS or not word[1:].isdigit() or not word[1:].isascii():
        raise CoordinateError(f"invalid vertex {text!r}")
    x = COLUMNS.index(word[0])
    y = int(word[1:]) - 1
    if not (0 <= x < size and 0 <= y < size):
        raise CoordinateError(f"vertex {text!r} is off the {size}x{size} board")
    return y * size + x


def format_vertex(move: int, size: int) -> str:
    if move == PASS:
        return "pass"
    if move == RESIGN:
        return "resign"
    y, x = divmod(move, size)
    return f"{COLUMNS[x]}{y + 1}"


def to_rowcol(move: int, size: int) -> tuple[int, int] | None:
    """sgfmill's (row, col) with row 0 at the bottom, or None for a pass."""
    if move < 0:
        return None
    return divmod(move, size)


def from_rowcol(point: tuple[int, int] | None, size: int) -> int:
    if point is None:
        return PASS
    row, col = point
    if not (0 <= row < size and 0 <= col < size):
        raise CoordinateError(f"point {point} is off the {size}x{size} board")
    return row * size + col

"""The buckets of KataGo's subtree value bias correction (``SearchConfig.subtree_value_bias``; KataGo's
docs/KataGoMethods.md, "Subtree Value Bias Correction"): the search learns, while it runs, how far the network's
utility of a position after a local sequence differs from what the search below such positions found, and corrects
new evaluations in the same bucket by part of it. A bucket is the mover, the move, the move before it, the 5×5
pattern around the move on the board before it (colours, and which stones were in atari) and the ko ban the mover
faced. The tree keeps the table (``engine.play.tree``); this module only names the buckets.

Layer: above rules; Go only: another game's positions have no bucket, and the correction leaves them alone.
"""
from __future__ import annotations

from tabula.engine.rules.board import EDGE, NO_POINT
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tabula.engine.rules.game import GameState

RADIUS = 2  # the 5×5 pattern around the move
_windows: dict[int, list[tuple[int, ...]]] = {}


def _window(size: int) -> list[tuple[int, ...]]:
    """For each flat point of a board of ``size``, the padded points of the 5×5 window around it, row by row,
    -1 where the window leaves the board."""
    found = _windows.get(size)
    if found is None:
        width = size + 1  # Geometry's padded layout: (y + 1)·width + x + 1
        found = []
        for y in range(size):
            for x in range(size):
                found.append(tuple((y + dy + 1) * width + x + dx + 1
                                   if 0 <= x + dx < size and 0 <= y + dy < size else -1
                                   for dy in range(-RADIUS, RADIUS + 1) for dx in range(-RADIUS, RADIUS + 1)))
        _windows[size] = found
    return found


def bucket(state: object, move: int) -> tuple | None:
    """The bucket of the position after ``move`` (a flat point, or PASS) is played in ``state``, read before it is
    played; None for a pass, before the game's first move, and in a game other than Go (KataGo gives those no
    bucket either)."""
    if move == PASS or not isinstance(state, GameState) or not state.moves:
        return None
    board = state.board
    color, root, liberties = board.color, board.root, board.liberties
    cells = bytearray()
    for point in _window(board.geometry.size)[move]:
        if point < 0:
            cells.append(EDGE)
            continue
        stone = color[point]
        atari = (stone == BLACK or stone == WHITE) and len(liberties[root[point]]) == 1
        cells.append(stone + 4 * atari)
    mover = state.to_move
    ko = board.ko if board.ko_color == mover else NO_POINT
    return mover, state.moves[-1][1], move, ko, bytes(cells)


__all__ = ["bucket", "RADIUS"]

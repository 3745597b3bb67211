"""The raw board: stones, strings with their liberties, captures, simple ko and a Zobrist hash. No history, no komi.

Layer: the bottom of the engine (imports only coords). Points are kept on a padded one-dimensional grid, row-major
with one border column shared by the left and right edges, so that the four neighbours of a point are ``±1`` and
``±(N+1)`` and the border needs no bounds checks. Strings are kept incrementally: every stone knows its string's
root, stones of one string form a cycle through ``next_stone``, and each root owns a set of liberties. Those sets are
never changed in place once stored, only replaced, so that ``copy()`` is three list copies and one shallow dict copy.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np

from tabula.engine.rules.coords import BLACK, EMPTY, MAX_SIZE, MIN_SIZE, WHITE

EDGE = 3
NO_POINT = 0  # a padded index that is always on the border: "no ko", "no root"


class IllegalMoveError(ValueError):
    """A move the rules forbid. ``reason`` is one of: occupied, suicide, ko, superko."""

    def __init__(self, reason: str):
        super().__init__(f"illegal move ({reason})")
        self.reason = reason


class Geometry:
    """Everything about a board size that never changes: padded layout, neighbours, Zobrist keys."""

    _cache: dict[int, "Geometry"] = {}

    def __init__(self, size: int):
        self.size = size
        self.width = width = size + 1
        self.padded_len = (size + 2) * width + 1
        # padded index of flat point y*size+x, and back
        self.padded = [(y + 1) * width + x + 1 for y in range(size) for x in range(size)]
        self.flat = [-1] * self.padded_len
        for flat, pad in enumerate(self.padded):
            self.flat[pad] = flat
        self.neighbors: list[tuple[int, ...]] = [()] * self.padded_len
        self.diagonals: list[tuple[int, ...]] = [()] * self.padded_len
        for pad in self.padded:
            self.neighbors[pad] = (pad - width, pad - 1, pad + 1, pad + width)
            self.diagonals[pad] = (pad - width - 1, pad - width + 1, pad + width - 1, pad + width + 1)
        rng = random.Random(0x7ABC1A + size)
        self.zobrist = [
            [0] * self.padded_len,
            [rng.getrandbits(64) for _ in range(self.padded_len)],
            [rng.getrandbits(64) for _ in range(self.padded_len)],
        ]
        self.zobrist_ko = [rng.getrandbits(64) for _ in range(self.padded_len)]
        self.zobrist_ko[NO_POINT] = 0
        self.zobrist_white_to_move = rng.getrandbits(64)
        # numpy views of the same tables, for the vectorised legality and eye masks
        self.padded_array = np.array(self.padded, dtype=np.int64)
        self.zobrist_array = [np.array([keys[pad] for pad in self.padded], dtype=np.uint64)
                              for keys in self.zobrist]
        empty_colors = bytearray([EDGE]) * self.padded_len
        for pad in self.padded:
            empty_colors[pad] = EMPTY
        self.empty_colors = bytes(empty_colors)

    @classmethod
    def of(cls, size: int) -> "Geometry":
        if not (MIN_SIZE <= size <= MAX_SIZE):
            raise ValueError(f"board size {size} is outside {MIN_SIZE}..{MAX_SIZE}")
        geometry = cls._cache.get(size)
        if geometry is None:
            geometry = cls._cache[size] = cls(size)
        return geometry


class Board:
    """Stones and strings on one board. Methods take padded points (see ``Geometry.padded``)."""

    __slots__ = ("geometry", "color", "root", "next_stone", "liberties", "ko", "ko_color", "hash")

    def __init__(self, size: int):
        self.geometry = geometry = Geometry.of(size)
        self.color = bytearray(geometry.empty_colors)  # padded point -> EMPTY, BLACK, WHITE or EDGE
        self.root: list[int] = [NO_POINT] * geometry.padded_len
        self.next_stone: list[int] = [NO_POINT] * geometry.padded_len
        self.liberties: dict[int, frozenset[int] | set[int]] = {}
        self.ko = NO_POINT  # the point ko_color may not take back right now, if any
        self.ko_color = EMPTY  # the colour just captured in a ko: GTP lets either colour move, so the ban is theirs
        self.hash = 0  # Zobrist hash of the stones alone

    @property
    def size(self) -> int:
        return self.geometry.size

    def copy(self) -> "Board":
        other = Board.__new__(Board)
        other.geometry = self.geometry
        other.color = self.color[:]
        other.root = self.root[:]
        other.next_stone = self.next_stone[:]
        other.liberties = self.liberties.copy()
        other.ko = self.ko
        other.ko_color = self.ko_color
        other.hash = self.hash
        return other

    def string_stones(self, point: int) -> list[int]:
        stones = [point]
        next_stone = self.next_stone
        stone = next_stone[point]
        while stone != point:
            stones.append(stone)
            stone = next_stone[stone]
        return stones

    def string_liberties(self, point: int) -> frozenset[int] | set[int]:
        return self.liberties[self.root[point]]

    def try_play(self, point: int, color: int, suicide: bool = False) -> tuple[int, list[int]]:
        """Check a move without playing it: (hash after it, roots it captures), or IllegalMoveError.

        Occupied points, simple ko and suicide are checked here; superko is the game's business. ``suicide``: a
        multi-stone suicide is legal (the rules' ``Rules.suicide``, as KataGo's multiStoneSuicideLegal); the hash
        after it is the board's without the strings the stone joins. A single stone's suicide is never legal.
        """
        board_color = self.color
        if board_color[point] != EMPTY:
            raise IllegalMoveError("occupied")
        if point == self.ko and color == self.ko_color:
            raise IllegalMoveError("ko")
        other = 3 - color
        root = self.root
        liberties = self.liberties
        has_liberty = False
        captured_roots: list[int] = []
        for neighbor in self.geometry.neighbors[point]:
            neighbor_color = board_color[neighbor]
            if neighbor_color == EMPTY:
                has_liberty = True
            elif neighbor_color == color:
                if len(liberties[root[neighbor]]) > 1:
                    has_liberty = True
            elif neighbor_color == other:
                neighbor_root = root[neighbor]
                if len(liberties[neighbor_root]) == 1 and neighbor_root not in captured_roots:
                    captured_roots.append(neighbor_root)
        if not has_liberty and not captured_roots:
            return self._try_suicide(point, color, suicide)
        keys = self.geometry.zobrist
        new_hash = self.hash ^ keys[color][point]
        if captured_roots:
            other_keys = keys[other]
            for captured_root in captured_roots:
                for stone in self.string_stones(captured_root):
                    new_hash ^= other_keys[stone]
        return new_hash, captured_roots

    def _try_suicide(self, point: int, color: int, suicide: bool) -> tuple[int, list[int]]:
        """``try_play`` of a move that leaves its string without liberties and captures nothing: legal only where
        ``suicide`` allows it and the stone joins a string (every string it joins has this point as its last
        liberty). The hash after it: the joined strings' stones taken off (the new stone never stays)."""
        board_color = self.color
        root = self.root
        own_roots = {root[n] for n in self.geometry.neighbors[point] if board_color[n] == color}
        if not suicide or not own_roots:
            raise IllegalMoveError("suicide")
        own_keys = self.geometry.zobrist[color]
        new_hash = self.hash
        for own_root in own_roots:
            for stone in self.string_stones(own_root):
                new_hash ^= own_keys[stone]
        return new_hash, []

    def play(self, point: int, color: int, forbidden_hashes: set[int] | None = None, suicide: bool = False) \
            -> list[int]:
        """Place a stone and resolve captures; returns the points whose stones came off: the captured ones, or
        after a multi-stone suicide (legal where ``suicide``) the mover's own string, the played point included.

        ``forbidden_hashes`` are stone hashes the move may not create (positional superko); the board is left
        unchanged when the move is illegal.
        """
        new_hash, captured_roots = self.try_play(point, color, suicide)
        if forbidden_hashes is not None and new_hash in forbidden_hashes:
            raise IllegalMoveError("superko")
        return self._commit(point, color, new_hash, captured_roots)

    def _commit(self, point: int, color: int, new_hash: int, captured_roots: list[int]) -> list[int]:
        board_color = self.color
        root = self.root
        next_stone = self.next_stone
        liberties = self.liberties
        neighbors = self.geometry.neighbors
        other = 3 - color

        board_color[point] = color
        root[point] = point
        next_stone[point] = point
        own_liberties = {n for n in neighbors[point] if board_color[n] == EMPTY}
        own_root = point
        for neighbor in neighbors[point]:
            neighbor_color = board_color[neighbor]
            if neighbor_color == other:
                neighbor_root = root[neighbor]
                if neighbor_root not in captured_roots:
                    libs = liberties[neighbor_root]
                    if point in libs:
                        liberties[neighbor_root] = libs - {point}
            elif neighbor_color == color:
                neighbor_root = root[neighbor]
                if neighbor_root == own_root:
                    continue
                own_liberties |= liberties.pop(neighbor_root)
                if own_root == point:
                    # The lone new stone joins the first friendly string; later strings are relabelled into it.
                    root[point] = own_root = neighbor_root
                else:
                    for stone in self.string_stones(neighbor_root):
                        root[stone] = own_root
                # Splice the two cycles into one.
                next_stone[point], next_stone[neighbor] = next_stone[neighbor], next_stone[point]
        own_liberties.discard(point)
        if not own_liberties and not captured_roots:
            return self._remove_suicided(own_root, color, new_hash)

        captured: list[int] = []
        if captured_roots:
            grown: dict[int, set[int]] = {}
            for captured_root in captured_roots:
                del liberties[captured_root]
                for stone in self.string_stones(captured_root):
                    captured.append(stone)
                    board_color[stone] = EMPTY
                    root[stone] = NO_POINT
            for stone in captured:
                for neighbor in neighbors[stone]:
                    if board_color[neighbor] == color:
                        neighbor_root = root[neighbor]
                        if neighbor_root == own_root:
                            own_liberties.add(stone)
                        else:
                            grown.setdefault(neighbor_root, set()).add(stone)
            for neighbor_root, points in grown.items():
                liberties[neighbor_root] = liberties[neighbor_root] | points
            for stone in captured:
                next_stone[stone] = NO_POINT
        liberties[own_root] = own_liberties

        if (len(captured) == 1 and len(own_liberties) == 1 and next_stone[point] == point):
            self.ko = captured[0]
            self.ko_color = other
        else:
            self.ko = NO_POINT
        self.hash = new_hash
        return captured

    def _remove_suicided(self, own_root: int, color: int, new_hash: int) -> list[int]:
        """The end of a multi-stone suicide (``try_play`` allowed it): the mover's string, the new stone merged into
        it, comes off and its points become liberties of the opponent strings beside it. No ko follows."""
        board_color = self.color
        root = self.root
        liberties = self.liberties
        neighbors = self.geometry.neighbors
        other = 3 - color
        removed = self.string_stones(own_root)
        for stone in removed:
            board_color[stone] = EMPTY
            root[stone] = NO_POINT
        grown: dict[int, set[int]] = {}
        for stone in removed:
            for neighbor in neighbors[stone]:
                if board_color[neighbor] == other:
                    grown.setdefault(root[neighbor], set()).add(stone)
        for neighbor_root, points in grown.items():
            liberties[neighbor_root] = liberties[neighbor_root] | points
        for stone in removed:
            self.next_stone[stone] = NO_POINT
        self.ko = NO_POINT
        self.hash = new_hash
        return removed

    def place_setup_stone(self, point: int, color: int) -> None:
        """Add a stone outside of play (handicap, SGF setup). It may neither capture nor be left without liberties:
        a setup that would is refused with IllegalMoveError and the board is unchanged."""
        new_hash, captured_roots = self.try_play(point, color)
        if captured_roots:
            raise IllegalMoveError("setup stone would capture")
        self._commit(point, color, new_hash, captured_roots)
        self.ko = NO_POINT

    def is_own_eye(self, point: int, color: int) -> bool:
        """A single empty point whose neighbours are all ``color`` (or the edge), with at most one diagonal
        belonging to the opponent (none at the edge) — filling it could only hurt ``color``."""
        board_color = self.color
        for neighbor in self.geometry.neighbors[point]:
            c = board_color[neighbor]
            if c != color and c != EDGE:
                return False
        other = 3 - color
        bad = 0
        on_edge = False
        for diagonal in self.geometry.diagonals[point]:
            c = board_color[diagonal]
            if c == other:
                bad += 1
            elif c == EDGE:
                on_edge = True
        return bad == 0 if on_edge else bad <= 1

    def own_eye_mask(self, color: int) -> np.ndarray:
        """bool [N*N]: ``is_own_eye`` of every flat point at once."""
        return own_eye_masks([self], [color])[0]

    def stones_of(self, color: int) -> list[int]:
        """Flat points of ``color``'s stones."""
        board_color = self.color
        return [flat for flat, pad in enumerate(self.geometry.padded) if board_color[pad] == color]

    def area_owners(self) -> list[int]:
        """Tromp-Taylor owner of every padded point: the stone's colour, or for an empty point the one colour its
        empty region reaches (EMPTY when it reaches both or neither). Border points are EDGE."""
        board_color = self.color
        neighbors = self.geometry.neighbors
        owners = board_color[:]
        seen = [False] * self.geometry.padded_len
        for pad in self.geometry.padded:
            if board_color[pad] != EMPTY or seen[pad]:
                continue
            region = [pad]
            seen[pad] = True
            reaches = 0
            i = 0
            while i < len(region):
                for neighbor in neighbors[region[i]]:
                    nc = board_color[neighbor]
                    if nc == EMPTY:
                        if not seen[neighbor]:
                            seen[neighbor] = True
                            region.append(neighbor)
                    elif nc != EDGE:
                        reaches |= nc
                i += 1
            if reaches == BLACK or reaches == WHITE:
                for point in region:
                    owners[point] = reaches
        return owners

    def area_score(self) -> tuple[int, int]:
        """Tromp-Taylor area: (black, white) = stones plus empty regions that reach only that colour."""
        owners = self.area_owners()
        return owners.count(BLACK), owners.count(WHITE)

    def to_ascii(self) -> str:
        size = self.size
        rows = []
        for y in range(size - 1, -1, -1):
            row = []
            for x in range(size):
                c = self.color[self.geometry.padded[y * size + x]]
                row.append(".XO"[c])
            rows.append(" ".join(row))
        return "\n".join(rows)


def own_eye_masks(boards: Sequence[Board], colors: Sequence[int]) -> np.ndarray:
    """bool [B, N*N]: ``Board.is_own_eye`` of every flat point of each board (one size) for its colour.

    The search asks this for every batch of leaves, so it works on all the padded grids at once by shifting them
    (neighbours are ±1 and ±width, diagonals ±width±1): a few whole-array operations instead of gathers. ``inner``
    is every padded point whose diagonals exist."""
    geometry = boards[0].geometry
    width = geometry.width
    length = geometry.padded_len
    count = len(boards)
    grid = np.frombuffer(b"".join([board.color for board in boards]), dtype=np.int8).reshape(count, length)
    own = np.asarray(colors, dtype=np.int8).reshape(count, 1)
    inner = slice(width + 1, length - width - 1)

    def shifted(values: np.ndarray, offset: int) -> np.ndarray:
        return values[:, width + 1 + offset: length - width - 1 + offset]

    edge = grid == EDGE
    friendly = (grid == own) | edge
    eyes = np.zeros((count, length), dtype=bool)
    eyes[:, inner] = ((grid[:, inner] == EMPTY) & shifted(friendly, -width) & shifted(friendly, width)
                      & shifted(friendly, -1) & shifted(friendly, 1))
    if eyes.any():
        hostile = (grid == 3 - own).view(np.int8)
        bad = np.zeros((count, length), dtype=np.int8)
        bad[:, inner] = (shifted(hostile, -width - 1) + shifted(hostile, -width + 1) + shifted(hostile, width - 1)
                         + shifted(hostile, width + 1))
        at_edge = np.zeros((count, length), dtype=bool)
        at_edge[:, inner] = (shifted(edge, -width - 1) | shifted(edge, -width + 1) | shifted(edge, width - 1)
                             | shifted(edge, width + 1))
        eyes &= np.where(at_edge, bad == 0, bad <= 1)
    return eyes[:, geometry.padded_array]


def atari_stakes(boards: Sequence[Board]) -> np.ndarray:
    """int32 [B, N*N]: the stones at stake at each flat point of each board (one size): those of every string in
    atari whose only liberty it is. Either colour's: for the side to move a move there captures the opponent's
    strings and gives its own a liberty. 0 at every other point.

    Why: a network that never saw a big group left in atari gives the capture (or the escape) a prior of about 0,
    so the search never tries it and reads a lost position as won (most of the 13×13 losses to GNU Go,
    docs/STRENGTH.md); the search raises such moves' priors (``SearchConfig.atari_prior``). Cheap: one pass over
    each board's strings, most of which have more than one liberty."""
    size = boards[0].geometry.size
    stakes = np.zeros((len(boards), size * size), dtype=np.int32)
    for row, board in enumerate(boards):
        flat = board.geometry.flat
        for root, liberties in board.liberties.items():
            if len(liberties) == 1:
                (liberty,) = liberties
                stakes[row, flat[liberty]] += len(board.string_stones(root))
    return stakes


__all__ = ["Board", "Geometry", "IllegalMoveError", "own_eye_masks", "atari_stakes", "EDGE", "NO_POINT", "BLACK",
           "WHITE", "EMPTY"]

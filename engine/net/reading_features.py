"""AlphaGo's reading features that KataGo's V7 inputs lack: for every legal move of the side to move, what the move
does to liberties and stones, read one move deep; 11 binary planes ``[plane, y, x]`` in Tabula's point order (``y =
0`` the bottom row), meant to sit beside ``katago-v7`` in the next network's input.

Layer: net (numpy only; reads engine.rules, and katago_features' ladder search).

Planes, each 1 only at an empty point where the side to move may legally play (``GameState.legal_mask``: occupied
points, the ko point, suicide and superko, all exact):

- 0, 1, 2 ``liberties_after_2``, ``_3``, ``_4+`` (AlphaGo's "liberties after move"): the move leaves its string,
  after its captures, 2, 3, >= 4 liberties;
- 3, 4, 5 ``self_atari_1``, ``_2``, ``_3+`` ("self-atari size"): the move leaves its string of 1, 2, >= 3 stones in
  atari, or takes it off (a multi-stone suicide, where the rules allow it);
- 6, 7, 8 ``capture_1``, ``_2``, ``_3+`` ("capture size"): the move captures 1, 2, >= 3 stones (all strings taken);
- 9 ``ladder_escape`` ("ladder escape"): the move extends an own string in atari, which then has 3 or more liberties,
  or 2 and KataGo's ladder search (``katago_features``', the attacker moving first) does not take it;
- 10 ``own_eye`` (the other half of "sensibleness"): the move fills the mover's own single-point eye
  (``Board.is_own_eye``).

What changed from AlphaGo's table, and why:
- Liberties after the move and self-atari size are one-hot over 8 buckets in AlphaGo; here buckets stop at 4
  liberties and 3 stones (beyond that a move's reading rarely changes), and "1 liberty after the move" has no plane of
  its own: it is the union of the three self-atari planes (a test checks it). Planes 0-5 are therefore a partition of
  the legal moves, and their union is the legal-move mask: no separate "legal" plane is needed.
- Sensibleness ("legal and does not fill its own eyes") is given as its missing half, the own-eye plane: legality is
  already the union of planes 0-5.
- Capture size, likewise, stops at 3 stones.

What V7 already has, and is left out here: stone colours and the board (V7 0-2); turns since a move (the last five
moves, V7 9-13); liberties of the strings on the board, 1, 2, 3 (V7 3-5); ko bans (V7 6); and of the ladders, both
AlphaGo's "ladder capture" (the moves that start a working ladder against a two-liberty string: V7 17, by KataGo's
own ladder search) and the strings a ladder takes now and one and two moves ago (V7 14-16). V7 says which own string
in atari a ladder takes (feature 14), not which move saves one: plane 9 adds that, with the same search
(``katago_features``' ladder reading, attacker first, on the position after the extension).

Cost: a batch of positions is computed at once (``encode_batch``; numpy's per-call overhead, not the arithmetic, is
what a small board's planes cost, so a search's leaf batch pays for it once). One pass over the strings
(``Board.root``) labels them; their stones and their dilations become bit rows (``np.packbits``, a row per string),
so that for every empty point at once the string it would make is an OR of at most four rows and its liberties a
popcount, with the captured stones counted back in; legality follows from those
counts (none: a suicide), the ko point and katago_features' superko bans (computed once per position for the V7
features, the search's table key and these planes). Python runs only for the ladder-escape reading (own strings in
atari whose extension has exactly two liberties; most positions have none), and those results are cached by position
(stones and side to move), bounded like katago_features' ladder cache, and per move in katago_features' string cache
(``_extension_ladder``: reused where the stones the reading looked at are unchanged, as in a search's children and
siblings).
"""
from __future__ import annotations

from itertools import chain
from typing import Sequence

import numpy as np

from tabula.engine.net import katago_features
from tabula.engine.net.features import transform_planes
from tabula.engine.rules.board import NO_POINT, Board, Geometry, IllegalMoveError, own_eye_masks
from tabula.engine.rules.coords import EMPTY
from tabula.engine.rules.game import SIMPLE_KO, GameState

PLANES: tuple[str, ...] = (
    "liberties_after_2", "liberties_after_3", "liberties_after_4+",
    "self_atari_1", "self_atari_2", "self_atari_3+",
    "capture_1", "capture_2", "capture_3+",
    "ladder_escape",
    "own_eye",
)
NUM_PLANES = len(PLANES)
LIBERTIES_AFTER = 0  # planes 0-2: 2, 3, >= 4 liberties
SELF_ATARI = 3  # planes 3-5: 1, 2, >= 3 stones
CAPTURE = 6  # planes 6-8: 1, 2, >= 3 stones
LADDER_ESCAPE = 9
OWN_EYE = 10
_CACHE_LIMIT = 20000  # positions in the ladder-escape cache before it is emptied


class _Layout:
    """What a board size's bit rows need, computed once: packed neighbour rows of every padded point, and where the
    flat points sit in the padded grid."""

    __slots__ = ("width", "padded_len", "offsets", "neighbor_bits", "flat")

    def __init__(self, geometry: Geometry):
        self.width = width = geometry.width
        self.padded_len = length = geometry.padded_len
        self.offsets = np.array([-width, -1, 1, width], dtype=np.int64)
        near = np.zeros((length, length), dtype=bool)
        inner = geometry.padded_array
        for offset in self.offsets:
            near[inner, inner + offset] = True
        self.neighbor_bits = np.packbits(near, axis=1)  # [padded point, bytes]: its four neighbours (edge included)
        self.flat = np.asarray(geometry.flat, dtype=np.int64)  # padded point -> flat point (-1 on the border)


def _class_planes() -> np.ndarray:
    """uint8 [96, 9]: planes 0-8 of a legal move of class (liberties after + 1, at most 5) * 16 + (stones of its
    string, at most 3) * 4 + (stones captured, at most 3); class 0 and the rows of no move are zeros."""
    table = np.zeros((96, CAPTURE + 3), dtype=np.uint8)
    for liberties in range(5):
        for stones in range(1, 4):
            for captured in range(4):
                row = table[(liberties + 1) * 16 + stones * 4 + captured]
                if liberties >= 2:
                    row[LIBERTIES_AFTER + liberties - 2] = 1
                else:  # 0: a legal multi-stone suicide, its stones lost at once
                    row[SELF_ATARI + stones - 1] = 1
                if captured:
                    row[CAPTURE + captured - 1] = 1
    return table


_CLASS_PLANES = _class_planes()
_LAYOUTS: dict[int, _Layout] = {}
_ESCAPE_CACHE: dict[tuple[bytes, int], frozenset[int]] = {}


def _layout(geometry: Geometry) -> _Layout:
    layout = _LAYOUTS.get(geometry.size)
    if layout is None:
        layout = _LAYOUTS[geometry.size] = _Layout(geometry)
    return layout


def encode(state: GameState) -> np.ndarray:
    """uint8 [11, N, N], 0 or 1: the planes of ``PLANES`` for the side to move."""
    size = state.size
    planes = np.zeros((1, NUM_PLANES, size * size), dtype=np.uint8)
    _fill([state], planes)
    return planes.reshape(NUM_PLANES, size, size)


def encode_batch(states: Sequence[GameState], symmetries: np.ndarray | None = None) -> np.ndarray:
    """float32 [B, 11, N, N]: each position's planes, seen under its symmetry (int [B], engine.net.features'
    numbering) or as it is."""
    if not states:
        raise ValueError("encode_batch needs at least one position")
    size = states[0].size
    for state in states:
        if state.size != size:
            raise ValueError(f"positions of sizes {size} and {state.size} in one batch")
    out = np.zeros((len(states), NUM_PLANES, size * size), dtype=np.uint8)
    _fill(states, out)
    planes = out.reshape(len(states), NUM_PLANES, size, size).astype(np.float32)
    if symmetries is not None:
        planes = transform_planes(planes, np.asarray(symmetries))
    return planes


def clear_caches() -> None:
    """Empty the ladder-escape cache (tests, and memory after a game)."""
    _ESCAPE_CACHE.clear()


# -- the planes ----------------------------------------------------------------------------------------------------


def _fill(states: Sequence[GameState], planes: np.ndarray) -> None:
    """Fill ``planes`` (uint8 [B, 11, N*N], zeros) for ``states`` (one size), all positions at once.

    The batch's padded grids sit end to end in one array (points numbered ``board * padded_len + point``) and its
    strings are numbered across the batch, so that every numpy call below covers the whole batch: a search's leaf
    batch pays for about 60 small calls once, not once a position. A point's neighbours never leave its own grid
    (the border surrounds every grid). Only the bit rows of strings use the point within its grid."""
    count_boards = len(states)
    boards = [state.board for state in states]
    geometry = boards[0].geometry
    layout = _layout(geometry)
    length = layout.padded_len
    width = layout.width
    pla_of = np.fromiter((state.to_move for state in states), dtype=np.int8, count=count_boards)
    base = np.arange(count_boards, dtype=np.int64) * length  # each grid's first point in the joined array
    pla = np.repeat(pla_of, length)
    opp = 3 - pla

    colors = np.frombuffer(b"".join([board.color for board in boards]), dtype=np.int8)
    empty = colors == EMPTY  # the border is never empty
    moves = np.flatnonzero(empty)  # joined points of the empty points
    if len(moves) == 0:
        return
    board_of = moves // length
    local = moves - base[board_of]  # the same points within their own grid
    move_flat = layout.flat[local]

    # Strings, numbered board by board as each Board.liberties (keyed by its roots) lists them; number ``count``
    # stands for "none".
    sizes = [len(board.liberties) for board in boards]
    count = sum(sizes)
    first = np.repeat(base, sizes)
    heads = np.fromiter(chain.from_iterable(board.liberties for board in boards), dtype=np.int64,
                        count=count) + first
    liberties = np.zeros(count + 1, dtype=np.int64)
    liberties[:count] = np.fromiter(map(len, chain.from_iterable(board.liberties.values() for board in boards)),
                                    dtype=np.int64, count=count)
    number = np.full(count_boards * length, count, dtype=np.int64)
    number[heads] = np.arange(count)
    roots = np.fromiter(chain.from_iterable(board.root for board in boards), dtype=np.int64,
                        count=count_boards * length) + np.repeat(base, length)
    string_of = number[roots]  # root NO_POINT: the grid's border point 0, never a string's root

    # A move beside neither an own stone nor an opponent string in atari makes a lone stone whose liberties are its
    # empty neighbours. Neighbour counts of the whole padded grid by shifting it (as legal_masks does).
    near = (colors == pla) | ((colors == opp) & (liberties[string_of] == 1))
    touches = _neighbors_any(near, width)[moves]
    after = _neighbors_sum(empty, width)[moves]
    group = np.ones(len(moves), dtype=np.int64)
    capture = np.zeros(len(moves), dtype=np.int64)
    joins = np.zeros(len(moves), dtype=bool)
    hard = np.flatnonzero(touches)
    around = moves[hard, None] + layout.offsets[None, :]
    around_color = colors[around]
    around_string = string_of[around]
    is_own = around_color == pla[moves[hard], None]
    own = np.where(is_own, around_string, count)
    if len(hard):
        taken = np.where((around_color == opp[moves[hard], None]) & (liberties[around_string] == 1),
                         around_string, count)
        # One row of stones and one of stones and their neighbours (the dilation) per string, over its own grid's
        # points, and an empty last row.
        stones = np.flatnonzero(string_of < count)
        member = np.zeros((count + 1, length), dtype=bool)
        member[string_of[stones], stones % length] = True
        grown = member.copy()
        grown[:, 1:] |= member[:, :-1]
        grown[:, :-1] |= member[:, 1:]
        grown[:, width:] |= member[:, :-width]
        grown[:, :-width] |= member[:, width:]
        member_bits = np.packbits(member, axis=1)
        joined = _any_of(np.packbits(grown, axis=1)[own])
        joined_stones = _any_of(member_bits[own])
        captured = _any_of(member_bits[taken])
        # The new string's liberties: empty points (the captured stones among them) next to the move or to a string
        # it joins; a joined string's dilation holds the move itself, counted out again.
        reach = joined | layout.neighbor_bits[local[hard]]
        empty_bits = np.packbits(empty.reshape(count_boards, length), axis=1)[board_of[hard]]
        joins[hard] = is_own.any(axis=1)
        after[hard] = np.bitwise_count(reach & (empty_bits | captured)).sum(axis=1, dtype=np.int64) - joins[hard]
        group[hard] = 1 + np.bitwise_count(joined_stones).sum(axis=1, dtype=np.int64)
        capture[hard] = np.bitwise_count(captured).sum(axis=1, dtype=np.int64)

    keep = _legal(states, moves, board_of, move_flat, after, joins)
    if not keep.any():
        return
    area = geometry.size * geometry.size
    legal = np.zeros((count_boards, area), dtype=bool)
    legal[board_of[keep], move_flat[keep]] = True
    # Planes 0-8 in one lookup (_CLASS_PLANES) of each legal move's class: its liberties after, the stones left in
    # atari and the stones captured, bucketed.
    classes = (np.minimum(after, 4) + 1) * 16 + np.minimum(group, 3) * 4 + np.minimum(capture, 3)
    planes[board_of[keep], :CAPTURE + 3, move_flat[keep]] = _CLASS_PLANES[classes[keep]]

    # Ladder escapes: moves that extend an own string in atari.
    in_atari = np.flatnonzero((colors[heads] == pla[heads]) & (liberties[:count] == 1))
    if len(in_atari):
        extends = np.isin(own, in_atari).any(axis=1)
        targets = hard[extends]
        targets = targets[keep[targets]]
        sure = targets[after[targets] >= 3]
        planes[board_of[sure], LADDER_ESCAPE, move_flat[sure]] = 1
        read = targets[after[targets] == 2]
        for index in np.unique(board_of[read]).tolist():
            mine = read[board_of[read] == index]
            escapes = _ladder_escapes(boards[index], int(pla_of[index]), local[mine].tolist())
            if escapes:
                planes[index, LADDER_ESCAPE, layout.flat[np.fromiter(escapes, dtype=np.int64)]] = 1

    planes[:, OWN_EYE] = own_eye_masks(boards, pla_of.tolist()) & legal


def _legal(states: Sequence[GameState], moves: np.ndarray, board_of: np.ndarray, move_flat: np.ndarray,
           after: np.ndarray, joins: np.ndarray) -> np.ndarray:
    """bool [moves]: ``GameState.legal_mask`` at the empty ``moves`` (joined points of the batch's grids; ``board_of``
    the position each is in, ``move_flat`` its flat point), from what the planes compute anyway: the string a move
    makes keeps ``after`` liberties, captures counted (none: a suicide, legal where the rules allow it and the move
    ``joins`` own stones); the ko point is the colour it binds' to refuse; superko bans come from katago_features
    (computed once per position, with the V7 features' and the search's table key's)."""
    keep = after > 0
    suicide = np.fromiter((state.rules.suicide for state in states), dtype=bool, count=len(states))
    if suicide.any():
        keep |= joins & suicide[board_of]
    size = states[0].size
    ban = None
    for index, state in enumerate(states):
        board = state.board
        pla = state.to_move
        ko = board.ko
        banned = []
        if ko != NO_POINT and board.ko_color == pla:
            banned.append(board.geometry.flat[ko])
        if state.rules.superko != SIMPLE_KO:
            banned += katago_features._bans(state, ko)
            if ko != NO_POINT and board.ko_color != pla and len(state.seen) > 1:
                # The bans leave the ko point to the ko rule, which binds the other colour here.
                try:
                    new_hash, _ = board.try_play(ko, pla, state.rules.suicide)
                except IllegalMoveError:
                    pass
                else:
                    if state._superko_key(new_hash, 3 - pla) in state.seen:
                        banned.append(board.geometry.flat[ko])
        if banned:
            if ban is None:
                ban = np.zeros((len(states), size * size), dtype=bool)
            ban[index, banned] = True
    if ban is not None:
        keep &= ~ban[board_of, move_flat]
    return keep


def _neighbors_any(grid: np.ndarray, width: int) -> np.ndarray:
    """bool [padded]: whether any of each point's four neighbours is set in ``grid`` (bool [padded])."""
    out = np.zeros_like(grid)
    out[width:-width] = grid[:-2 * width] | grid[2 * width:] | grid[width - 1:-width - 1] | grid[width + 1:-width + 1]
    return out


def _neighbors_sum(grid: np.ndarray, width: int) -> np.ndarray:
    """int64 [padded]: how many of each point's four neighbours are set in ``grid`` (bool [padded])."""
    ones = grid.view(np.int8)
    out = np.zeros(len(grid), dtype=np.int64)
    out[width:-width] = ones[:-2 * width] + ones[2 * width:] + ones[width - 1:-width - 1] + ones[width + 1:-width + 1]
    return out


def _any_of(rows: np.ndarray) -> np.ndarray:
    """uint8 [M, bytes]: the OR of the four bit rows of each move (``rows`` uint8 [M, 4, bytes])."""
    return rows[:, 0] | rows[:, 1] | rows[:, 2] | rows[:, 3]


def _ladder_escapes(board: Board, pla: int, moves: list[int]) -> frozenset[int]:
    """Of ``moves`` (padded points that extend a ``pla`` string in atari to exactly two liberties), those after which
    KataGo's ladder search, the attacker moving first, does not take the string. Cached by stones and colour (the
    result depends on nothing else: the two-liberty string after the move leaves no ko), and per move by the stones
    its reading looked at."""
    key = (bytes(board.color), pla)
    known = _ESCAPE_CACHE.get(key, frozenset())
    wanted = set(moves)
    if not wanted <= {abs(move) for move in known}:
        read = set(known)
        masks = katago_features._stone_bits(key[0])
        for move in wanted:
            if move in read or -move in read:
                continue
            # One that escapes is kept as itself, one that does not as its negation (padded points are positive).
            read.add(-move if katago_features._extension_ladder(board, move, pla, masks) else move)
        if len(_ESCAPE_CACHE) > _CACHE_LIMIT:
            _ESCAPE_CACHE.clear()
        _ESCAPE_CACHE[key] = known = frozenset(read)
    return frozenset(move for move in known if move in wanted)


__all__ = ["PLANES", "NUM_PLANES", "encode", "encode_batch", "clear_caches"]

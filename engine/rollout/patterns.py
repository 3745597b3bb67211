"""Local pattern features of the rollout policy (after AlphaGo's, Silver et al. 2016, Extended Data Table 4).

Layer: rollout, above rules (reads ``LibertyStates`` boards). For a candidate point and the side to move:

* **3×3 pattern**: the four orthogonal neighbours, each empty, edge, or a stone of the mover or of the opponent
  whose string has 1, 2 or 3+ liberties (3 bits), and the four diagonal neighbours' colours (empty, own, opponent,
  edge: 2 bits): a 20-bit code relative to the mover. ``CANONICAL`` maps it to the least code among its 8 dihedral
  images, so the pattern id is the same under every symmetry, and is colour-normalised because it is relative.
  The code also decides whether the point is the mover's own single-point eye (the rule of ``Board.is_own_eye``) or
  suicide; neither is a candidate.
* **self-atari** (the mover's string has one liberty after the move and it captures nothing) and **save-atari** (a
  string of the mover in atari has 2+ liberties after the move, or the move captures): the code decides both except
  where a neighbouring string of the mover has two liberties that may be shared (``AMBIGUOUS``); those few points are
  counted exactly on the board.
* **response pattern**: the 12-point diamond around the previous move (states as for the 3×3 orthogonal points,
  relative to the mover) together with which of the 12 points the candidate is, canonical under the 8 symmetries.
* **distance** to the previous move and to the mover's own move before it, in 4 buckets (|dx| + |dy| + max: 2 to 5).

Everything is computed for all points of many boards at once from their liberty-state grids (a few numpy gathers
per move, whatever the number of boards), which is what makes a Python rollout affordable.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tabula.engine.rules.board import NO_POINT, Geometry
from tabula.engine.rules.coords import BLACK
from tabula.engine.rules.playout import STATE_EMPTY, LibertyStates

PATTERN_BITS = 20
NUM_CODES = 1 << PATTERN_BITS

# (dx, dy) offsets. ORTH and DIAG follow Geometry.neighbors and Geometry.diagonals (dy counts padded rows).
ORTH = ((0, -1), (-1, 0), (1, 0), (0, 1))
DIAG = ((-1, -1), (1, -1), (-1, 1), (1, 1))
DIAMOND = ORTH + DIAG + ((0, -2), (-2, 0), (2, 0), (0, 2))  # the response pattern's 12 points
NEAR = DIAMOND + ((-1, -2), (1, -2), (-2, -1), (2, -1), (-2, 1), (2, 1), (-1, 2), (1, 2))  # distance <= 5
NUM_DISTANCES = 4  # |dx| + |dy| + max(|dx|, |dy|) = 2, 3, 4, 5
NEAR_BUCKET = np.array([abs(x) + abs(y) + max(abs(x), abs(y)) - 2 for x, y in NEAR], dtype=np.int64)

SYMMETRIES = (lambda x, y: (x, y), lambda x, y: (-x, y), lambda x, y: (x, -y), lambda x, y: (-x, -y),
              lambda x, y: (y, x), lambda x, y: (-y, x), lambda x, y: (y, -x), lambda x, y: (-y, -x))

# Liberty states (engine.rules.playout): 0 empty, 1-3 black 1/2/3+ liberties, 4-6 white, 7 edge.
SWAP_STATE = np.array([0, 4, 5, 6, 1, 2, 3, 7], dtype=np.uint8)  # black <-> white
DIAG_STATE = np.array([0, 1, 1, 1, 2, 2, 2, 3], dtype=np.uint8)  # empty, black, white, edge
DIAG_STATE_32 = DIAG_STATE.astype(np.int32)
SWAP_DIAG = np.array([0, 2, 1, 3], dtype=np.int64)
SHIFTS = np.array([0, 3, 6, 9, 12, 14, 16, 18], dtype=np.int64)  # bit position of ORTH then DIAG fields
WIDTHS = np.array([3, 3, 3, 3, 2, 2, 2, 2], dtype=np.int64)
DIAMOND_WEIGHTS = np.array([1 << (3 * i) for i in range(12)], dtype=np.int64)
OFFSET_BITS = 4  # response key = diamond code << 4 | the candidate's index in DIAMOND

OWN_EYE = 1  # pattern flags: not a candidate ...
SUICIDE = 2
SELF_ATARI = 4  # ... the move is self-atari, saves a string from atari, or needs an exact count to tell
SAVES = 8
AMBIGUOUS = 16
OWN_IN_ATARI = 32


def _permutation(offsets: Sequence[tuple[int, int]], symmetry: int) -> np.ndarray:
    """perm[i] = where offset i goes under the symmetry."""
    transform = SYMMETRIES[symmetry]
    return np.array([offsets.index(transform(x, y)) for x, y in offsets], dtype=np.int64)


def _fields(codes: np.ndarray) -> list[np.ndarray]:
    return [(codes >> shift) & ((1 << width) - 1) for shift, width in zip(SHIFTS, WIDTHS)]


def _place(fields: list[np.ndarray], symmetry: int) -> np.ndarray:
    orth, diag = _permutation(ORTH, symmetry), _permutation(DIAG, symmetry)
    out = np.zeros_like(fields[0])
    for i in range(4):
        out |= fields[i] << SHIFTS[orth[i]]
        out |= fields[4 + i] << SHIFTS[4 + diag[i]]
    return out


def transform_codes(codes: np.ndarray, symmetry: int) -> np.ndarray:
    """3×3 codes (int array) as seen under ``symmetry``."""
    return _place(_fields(np.asarray(codes, dtype=np.int64)), symmetry)


def swap_codes(codes: np.ndarray) -> np.ndarray:
    """3×3 codes with the colours exchanged."""
    fields = _fields(np.asarray(codes, dtype=np.int64))
    out = np.zeros_like(fields[0])
    for i in range(4):
        out |= SWAP_STATE[fields[i]].astype(np.int64) << SHIFTS[i]
        out |= SWAP_DIAG[fields[4 + i]] << SHIFTS[4 + i]
    return out


@dataclass(frozen=True)
class CodeTables:
    """Per 3×3 code (relative to the mover), int [NUM_CODES] each: its canonical code, its colour swap, its flags."""

    canonical: np.ndarray  # int32
    swap: np.ndarray  # int32
    flags: np.ndarray  # uint8: OWN_EYE | SUICIDE | SELF_ATARI | SAVES | AMBIGUOUS | OWN_IN_ATARI


@functools.lru_cache(maxsize=1)
def code_tables() -> CodeTables:
    """Built once per process (about half a second)."""
    codes = np.arange(NUM_CODES, dtype=np.int32)
    fields = _fields(codes)
    canonical = codes.copy()
    for symmetry in range(1, 8):
        np.minimum(canonical, _place(fields, symmetry), out=canonical)
    orth, diag = fields[:4], fields[4:]
    empty = sum((o == 0).astype(np.int64) for o in orth)
    own = [sum((o == k).astype(np.int64) for o in orth) for k in (1, 2, 3)]  # own strings with 1, 2, 3+ liberties
    own_or_edge = np.all([(o >= 1) & (o <= 3) | (o == 7) for o in orth], axis=0)
    opp_diag = sum((d == 2).astype(np.int64) for d in diag)
    edge_diag = np.any([d == 3 for d in diag], axis=0)
    own_eye = own_or_edge & np.where(edge_diag, opp_diag == 0, opp_diag <= 1)
    captures = np.any([o == 4 for o in orth], axis=0)
    suicide = (empty == 0) & (own[1] + own[2] == 0) & ~captures
    # Liberties after the move: at least `empty`, plus one more from each own string of two liberties (possibly the
    # same string or the same liberty: AMBIGUOUS), 2+ from a string of 3+. A capture frees at least one point.
    settled = captures | (own[2] > 0) | (empty >= 2) | (empty + own[1] <= 1)
    ambiguous = ~settled
    known_libs_one = ~captures & (own[2] == 0) & (empty + own[1] == 1)
    self_atari = known_libs_one
    saves = (own[0] > 0) & (captures | (own[2] > 0) | (empty >= 2))
    flags = (own_eye * OWN_EYE | suicide * SUICIDE | self_atari * SELF_ATARI | saves * SAVES
             | ambiguous * AMBIGUOUS | (own[0] > 0) * OWN_IN_ATARI).astype(np.uint8)
    return CodeTables(canonical, swap_codes(codes).astype(np.int32), flags)


# -- the geometry of one board size ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PatternGeometry:
    """Index tables of one board size: padded index (or NO_POINT, always edge) and flat index (or N*N) of each
    point's neighbourhoods."""

    size: int
    padded: np.ndarray  # int64 [N*N]: flat -> padded
    near_flat: np.ndarray  # int64 [N*N, 20]: flat index of the NEAR points (N*N off the board)
    near_padded: np.ndarray  # int64 [padded_len, 20]: padded index of the NEAR points (NO_POINT off the board)


@functools.lru_cache(maxsize=None)
def pattern_geometry(size: int) -> PatternGeometry:
    geometry = Geometry.of(size)
    padded = np.array(geometry.padded, dtype=np.int64)
    near = np.full((size * size, len(NEAR)), size * size, dtype=np.int64)
    for flat in range(size * size):
        x, y = flat % size, flat // size
        for i, (dx, dy) in enumerate(NEAR):
            if 0 <= x + dx < size and 0 <= y + dy < size:
                near[flat, i] = (y + dy) * size + x + dx
    near_padded = np.full((geometry.padded_len, len(NEAR)), NO_POINT, dtype=np.int64)
    near_padded[padded] = np.where(near < size * size, padded[np.minimum(near, size * size - 1)], NO_POINT)
    return PatternGeometry(size, padded, near, near_padded)


# -- features of many boards at once --------------------------------------------------------------------------------


def state_grids(boards: Sequence[LibertyStates]) -> np.ndarray:
    """uint8 [B, padded_len]: the boards' liberty states."""
    length = len(boards[0].states)
    return np.frombuffer(b"".join([b.states for b in boards]), dtype=np.uint8).reshape(len(boards), length)


def padded_codes(grids: np.ndarray, geometry: PatternGeometry) -> np.ndarray:
    """int32 [B, padded_len]: the 3×3 code of every padded point as black sees it (``code_tables().swap`` gives
    white's view); meaningless off the board. Shifted views of the grids, no gathers."""
    width = geometry.size + 1
    length = grids.shape[1]
    inner = slice(width + 1, length - width - 1)

    def at(values: np.ndarray, dx: int, dy: int) -> np.ndarray:
        offset = dy * width + dx
        return values[:, width + 1 + offset: length - width - 1 + offset]

    orth = grids.astype(np.int32)
    diag = DIAG_STATE_32[grids]
    codes = np.zeros(grids.shape, dtype=np.int32)
    body = codes[:, inner]
    for (dx, dy), shift in zip(ORTH, (0, 3, 6, 9)):
        body |= at(orth, dx, dy) << shift
    for (dx, dy), shift in zip(DIAG, (12, 14, 16, 18)):
        body |= at(diag, dx, dy) << shift
    return codes


def pattern_codes(grids: np.ndarray, geometry: PatternGeometry) -> np.ndarray:
    """int32 [B, N*N]: ``padded_codes`` of the board's points, in flat order."""
    return padded_codes(grids, geometry)[:, geometry.padded]


def relative_codes(codes: np.ndarray, white: np.ndarray) -> np.ndarray:
    """``pattern_codes`` as each board's mover sees them (``white``: bool [B])."""
    if not white.any():
        return codes
    codes = codes.copy()
    codes[white] = code_tables().swap[codes[white]]
    return codes


def liberties_after(board_states: LibertyStates, point: int, color: int) -> int:
    """Liberties of ``color``'s string after playing padded ``point``, ignoring captures (AMBIGUOUS points capture
    nothing), counted up to 2."""
    board = board_states.board
    board_color = board.color
    liberties = set()
    for n in board.geometry.neighbors[point]:
        c = board_color[n]
        if c == 0:
            liberties.add(n)
        elif c == color:
            liberties |= board.liberties[board.root[n]]
    liberties.discard(point)
    return min(len(liberties), 2)


def resolve_ambiguous(boards: Sequence[LibertyStates], colors: Sequence[int], rows: np.ndarray, flats: np.ndarray,
                      own_in_atari: np.ndarray, geometry: PatternGeometry) -> tuple[np.ndarray, np.ndarray]:
    """(self_atari, saves) bool [K] at AMBIGUOUS points ``rows``/``flats`` (``own_in_atari``: their codes' flag)."""
    padded = geometry.padded
    libs = np.array([liberties_after(boards[r], int(padded[f]), colors[r]) for r, f in zip(rows.tolist(),
                                                                                            flats.tolist())],
                    dtype=np.int64)
    return libs == 1, own_in_atari & (libs >= 2)


def response_codes(grids: np.ndarray, geometry: PatternGeometry, white: np.ndarray,
                   previous: np.ndarray) -> np.ndarray:
    """int64 [B]: the 12-point diamond around each board's previous move (padded), relative to the mover."""
    states = grids[np.arange(len(previous))[:, None], geometry.near_padded[previous, :12]]  # [B, 12]
    states = np.where(white[:, None], SWAP_STATE[states], states).astype(np.int64)
    return states @ DIAMOND_WEIGHTS


@functools.lru_cache(maxsize=1)
def _diamond_permutations() -> tuple[np.ndarray, np.ndarray]:
    """(perm [8, 12]: where point i goes, inverse [8, 12])."""
    perms = np.stack([_permutation(DIAMOND, s) for s in range(8)])
    return perms, np.argsort(perms, axis=1)


def _diamond_states(codes: np.ndarray) -> np.ndarray:
    return (np.asarray(codes, dtype=np.int64)[:, None] >> (3 * np.arange(12))) & 7


def transform_response_keys(keys: np.ndarray, symmetry: int) -> np.ndarray:
    """Response keys (diamond code << OFFSET_BITS | candidate index) as seen under ``symmetry``."""
    keys = np.asarray(keys, dtype=np.int64)
    perms, inverse = _diamond_permutations()
    states = _diamond_states(keys >> OFFSET_BITS)[:, inverse[symmetry]]
    return (states @ DIAMOND_WEIGHTS) << OFFSET_BITS | perms[symmetry][keys & ((1 << OFFSET_BITS) - 1)]


def canonical_response_keys(keys: np.ndarray) -> np.ndarray:
    """The least of the 8 symmetric images of each response key."""
    keys = np.asarray(keys, dtype=np.int64)
    out = keys.copy()
    for symmetry in range(1, 8):
        np.minimum(out, transform_response_keys(keys, symmetry), out=out)
    return out


def swap_response_keys(keys: np.ndarray) -> np.ndarray:
    """Response keys with the colours exchanged."""
    keys = np.asarray(keys, dtype=np.int64)
    states = SWAP_STATE[_diamond_states(keys >> OFFSET_BITS)].astype(np.int64)
    return (states @ DIAMOND_WEIGHTS) << OFFSET_BITS | (keys & ((1 << OFFSET_BITS) - 1))


# -- the features a softmax reads, for training and checks ----------------------------------------------------------


@dataclass
class Features:
    """The rollout policy's features of B positions; a candidate is an empty point that is neither the mover's own
    eye, suicide, nor a simple-ko recapture.

    ``pattern``: int32 [B, N*N] canonical 3×3 code of each candidate, -1 elsewhere. ``tactics``: uint8 [B, N*N]
    bit 0 self-atari, bit 1 saves. ``response``: int64 [B, 12] canonical response key of each candidate of the
    previous move's diamond, -1 elsewhere. ``previous``, ``own_previous``: int64 [B] the last move and the mover's
    own move before it (flat; -1 for none or a pass).
    """

    pattern: np.ndarray
    tactics: np.ndarray
    response: np.ndarray
    previous: np.ndarray
    own_previous: np.ndarray


def candidate_codes(boards: Sequence[LibertyStates], colors: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(relative 3×3 codes int32 [B, N*N], candidate mask bool [B, N*N]) of boards of one size."""
    geometry = pattern_geometry(boards[0].board.size)
    grids = state_grids(boards)
    codes = relative_codes(pattern_codes(grids, geometry), np.asarray(colors) != BLACK)
    flags = code_tables().flags[codes]
    candidate = (grids[:, geometry.padded] == STATE_EMPTY) & ((flags & (OWN_EYE | SUICIDE)) == 0)
    for row, run in enumerate(boards):
        board = run.board
        if board.ko != NO_POINT and board.ko_color == colors[row]:
            candidate[row, board.geometry.flat[board.ko]] = False
    return codes, candidate


def features(boards: Sequence[LibertyStates], colors: Sequence[int], previous: Sequence[int],
             own_previous: Sequence[int]) -> Features:
    """The features of boards of one size with ``colors`` to move; moves flat, -1 for none or a pass."""
    geometry = pattern_geometry(boards[0].board.size)
    codes, candidate = candidate_codes(boards, colors)
    tables = code_tables()
    flags = tables.flags[codes]
    tactics = ((flags & SELF_ATARI) != 0).astype(np.uint8) | ((flags & SAVES) != 0).astype(np.uint8) << 1
    rows, flats = np.nonzero(candidate & ((flags & AMBIGUOUS) != 0))
    if len(rows):
        self_atari, saves = resolve_ambiguous(boards, colors, rows, flats,
                                              (flags[rows, flats] & OWN_IN_ATARI) != 0, geometry)
        tactics[rows, flats] = self_atari.astype(np.uint8) | saves.astype(np.uint8) << 1
    pattern = np.where(candidate, tables.canonical[codes], -1).astype(np.int32)
    previous = np.asarray(previous, dtype=np.int64)
    response = np.full((len(boards), 12), -1, dtype=np.int64)
    has = np.flatnonzero(previous >= 0)
    if len(has):
        grids = state_grids(boards)
        white = np.asarray(colors)[has] != BLACK
        diamond = response_codes(grids[has], geometry, white, geometry.padded[previous[has]])
        size2 = geometry.size ** 2
        points = geometry.near_flat[previous[has], :12]
        padded_candidate = np.concatenate([candidate[has], np.zeros((len(has), 1), dtype=bool)], axis=1)
        inside = padded_candidate[np.arange(len(has))[:, None], points] & (points < size2)
        keys = diamond[:, None] << OFFSET_BITS | np.arange(12)
        response[has] = np.where(inside, canonical_response_keys(keys.ravel()).reshape(keys.shape), -1)
    return Features(pattern, tactics, response, previous, np.asarray(own_previous, dtype=np.int64))


__all__ = ["Features", "CodeTables", "PatternGeometry", "code_tables", "pattern_geometry", "pattern_codes",
           "features", "candidate_codes", "state_grids", "padded_codes", "relative_codes", "transform_codes",
           "swap_codes", "response_codes",
           "canonical_response_keys", "transform_response_keys", "swap_response_keys", "resolve_ambiguous",
           "liberties_after", "NUM_CODES", "NUM_DISTANCES", "NEAR", "NEAR_BUCKET", "DIAMOND", "OFFSET_BITS",
           "OWN_EYE", "SUICIDE", "SELF_ATARI", "SAVES", "AMBIGUOUS", "OWN_IN_ATARI"]

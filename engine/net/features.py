"""Network inputs: ``GameState`` → Leela Zero's 18 input planes, and the 8 dihedral symmetries of planes and policies.

Layer: above game, below evaluator; numpy only. Planes are float32 ``[18, N, N]`` indexed ``[plane, y, x]`` with
``y = 0`` the bottom row (GTP row 1), so that a plane flattened is in flat-point order ``y * N + x``, Leela Zero's
order. Planes 0–7: the side to move's stones now and 1..7 moves ago; 8–15: the opponent's; 16: ones if black is to
move; 17: ones if white is to move. Positions before the game's first move are empty.

``leelaz-18+komi`` (``encode_batch_with_komi``) adds plane 18, constant: the side to move's komi over
``KOMI_SCALE`` (KataGo feeds komi/20 to its global inputs): what the count gives white beyond the board
(``GameState.counted_komi``: komi and any handicap bonus), positive for white to move and negative for black, so
that the plane says how many points the rules give the side to move, in either colour's turn.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

from tabula.engine.rules.board import Geometry
from tabula.engine.rules.coords import BLACK
from tabula.engine.rules.game import HISTORY_LENGTH, GameState

NUM_PLANES = 2 * HISTORY_LENGTH + 2  # 18
NUM_SYMMETRIES = 8
IDENTITY = 0
INPUT_ENCODING = "leelaz-18"  # the name written into network metadata
KOMI_INPUT_ENCODING = "leelaz-18+komi"  # the 18 planes and a komi plane (a network that sees the komi)
KOMI_PLANE = NUM_PLANES  # 18: the komi plane's index in leelaz-18+komi
KOMI_SCALE = 20.0  # points of komi per unit of the komi plane


@lru_cache(maxsize=None)
def _padded_index(size: int) -> np.ndarray:
    """int64 [8, N*N]: under each symmetry, the padded index that each flat point of the encoded planes reads."""
    padded = np.asarray(Geometry.of(size).padded, dtype=np.int64)
    return padded[symmetry_tables(size)[0][:, : size * size]]


def encode_batch(states: Sequence[GameState], symmetries: np.ndarray | None = None) -> np.ndarray:
    """float32 [B, 18, N, N]: the input planes of positions that share one board size.

    ``symmetries`` (int [B]): encode each position as seen under its symmetry, the same as ``transform_planes``
    afterwards but cheaper, since the gather happens on int8 colours.
    """
    if not states:
        raise ValueError("encode_batch needs at least one position")
    size = states[0].size
    padded_len = Geometry.of(size).padded_len
    count = len(states)
    empty = bytes(padded_len)  # history before the first move: no stones
    chunks: list[bytes | bytearray] = []
    to_move = np.empty(count, dtype=np.int8)
    for i, state in enumerate(states):
        if state.size != size:
            raise ValueError(f"positions of sizes {size} and {state.size} in one batch")
        to_move[i] = state.to_move
        for age in range(HISTORY_LENGTH):
            row = state.history_colors(age)
            chunks.append(empty if row is None else row)  # colours are bytes already: joining them is a memcpy
    # Colours of the last 8 positions on the padded grid, one row per (position, age).
    colors = np.frombuffer(b"".join(chunks), dtype=np.int8)
    tables = _padded_index(size)
    if symmetries is None:
        points = colors.reshape(count * HISTORY_LENGTH, padded_len)[:, tables[IDENTITY]]
    else:
        # One flat gather: row (b, age) starts at (b * 8 + age) * padded_len and reads position b's symmetry.
        starts = np.arange(0, count * HISTORY_LENGTH * padded_len, padded_len).reshape(count, HISTORY_LENGTH, 1)
        points = colors[starts + tables[np.asarray(symmetries)][:, None, :]]
    points = points.reshape(count, HISTORY_LENGTH, size * size)
    own = to_move[:, None, None]
    planes = np.empty((count, NUM_PLANES, size * size), dtype=np.float32)
    np.equal(points, own, out=planes[:, :HISTORY_LENGTH])
    np.equal(points, 3 - own, out=planes[:, HISTORY_LENGTH: 2 * HISTORY_LENGTH])
    black = (to_move == BLACK)[:, None]
    planes[:, 16] = black
    planes[:, 17] = ~black
    return planes.reshape(count, NUM_PLANES, size, size)


def komi_points(state: GameState) -> float:
    """The side to move's komi in points: ``counted_komi`` (komi and handicap bonus) for white to move, its
    negation for black; what the komi plane carries, times ``KOMI_SCALE``."""
    komi = float(state.counted_komi)
    return komi if state.to_move != BLACK else -komi


def with_komi_plane(planes: np.ndarray, komi: np.ndarray) -> np.ndarray:
    """float32 [B, 19, N, N]: ``planes`` (float32 [B, 18, N, N], any symmetry, since a constant plane has none) and
    the komi plane of ``komi`` (float [B], the side to move's komi in points, ``komi_points``)."""
    count, _, size, _ = planes.shape
    out = np.empty((count, NUM_PLANES + 1, size, size), dtype=np.float32)
    out[:, :NUM_PLANES] = planes
    out[:, KOMI_PLANE] = (np.asarray(komi, dtype=np.float32) / np.float32(KOMI_SCALE))[:, None, None]
    return out


def encode_batch_with_komi(states: Sequence[GameState], symmetries: np.ndarray | None = None) -> np.ndarray:
    """float32 [B, 19, N, N]: ``encode_batch``'s planes and the komi plane (``leelaz-18+komi``)."""
    return with_komi_plane(encode_batch(states, symmetries), np.array([komi_points(s) for s in states]))


def encode(state: GameState) -> np.ndarray:
    """float32 [18, N, N] for one position."""
    return encode_batch([state])[0]


# -- symmetries ---------------------------------------------------------------------------------------------------


def symmetric_point(x: int, y: int, symmetry: int, size: int) -> tuple[int, int]:
    """Leela Zero's numbering: bit 2 swaps x and y, then bit 1 mirrors x, then bit 0 mirrors y."""
    if symmetry & 4:
        x, y = y, x
    if symmetry & 2:
        x = size - 1 - x
    if symmetry & 1:
        y = size - 1 - y
    return x, y


def katago_symmetry(index: int, rows_from_top: bool = False) -> int:
    """This module's symmetry under which a network reads what KataGo's symmetry ``index`` (``kata-raw-nn INDEX``)
    feeds KataGo's network, for the same board.

    KataGo's ``copyInputsWithSymmetry`` puts the point (x, y) of its tensor (y = 0 the top row) at ``getSymLoc``:
    mirror x (bit 1), mirror y (bit 0), then swap x and y (bit 2). Read as a gather, that is ``symmetric_point``'s
    own numbering, so in a network's own frame the indices agree. ``rows_from_top``: the network was trained with
    rows from the top (KataGo's networks) while Tabula's planes run from the bottom (``katago_features``), so
    Tabula's identity shows it the board mirrored top to bottom, which is KataGo's symmetry 1: every index then
    differs in bit 0. ValueError for an index outside 0..7."""
    if not (isinstance(index, int) and 0 <= index < NUM_SYMMETRIES):
        raise ValueError(f"symmetry {index!r} is not one of 0..{NUM_SYMMETRIES - 1}")
    return index ^ 1 if rows_from_top else index


@lru_cache(maxsize=None)
def symmetry_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """(forward, inverse), both int64 [8, N*N+1].

    ``transformed[i] = original[forward[s, i]]`` for planes and policies alike (pass, the last index, stays);
    ``original[j] = transformed[inverse[s, j]]``. This is Leela Zero's ``symmetry_nn_idx_table``.
    """
    points = size * size
    forward = np.empty((NUM_SYMMETRIES, points + 1), dtype=np.int64)
    for s in range(NUM_SYMMETRIES):
        for i in range(points):
            x, y = symmetric_point(i % size, i // size, s, size)
            forward[s, i] = y * size + x
        forward[s, points] = points
    inverse = np.argsort(forward, axis=1)
    forward.setflags(write=False)
    inverse.setflags(write=False)
    return forward, inverse


# The values a row from which ``_apply`` takes each row on its own (below it, one take_along_axis is as fast).
_ROW_TAKE_MIN = 1024


def _apply(table: np.ndarray, flat: np.ndarray, symmetry: int | np.ndarray) -> np.ndarray:
    """Gather ``flat[..., table[s]]``; ``symmetry`` is one int, or int [B] for ``flat`` of shape [B, ..., L]."""
    if np.ndim(symmetry) == 0:
        return flat[..., table[int(symmetry), : flat.shape[-1]]]
    symmetry = np.asarray(symmetry)
    if flat.ndim > 2 and symmetry.shape == flat.shape[:1] and flat.size >= _ROW_TAKE_MIN * len(flat):
        # Many planes a row: one take per row with its own table row is about 4x faster than take_along_axis,
        # which builds and walks an index as large as the planes.
        out = np.empty_like(flat)
        index = table[:, : flat.shape[-1]]
        for row, s in enumerate(symmetry.tolist()):
            np.take(flat[row], index[s], axis=-1, out=out[row])
        return out
    index = table[symmetry, : flat.shape[-1]]  # [B, L]
    index = index.reshape((index.shape[0],) + (1,) * (flat.ndim - 2) + (index.shape[1],))
    return np.take_along_axis(flat, index, axis=-1)


def transform_planes(planes: np.ndarray, symmetry: int | np.ndarray) -> np.ndarray:
    """Planes [..., N, N] seen under ``symmetry`` (one int, or int [B] for a batch [B, C, N, N])."""
    size = planes.shape[-1]
    flat = planes.reshape(planes.shape[:-2] + (size * size,))
    return _apply(symmetry_tables(size)[0], flat, symmetry).reshape(planes.shape)


def inverse_transform_planes(planes: np.ndarray, symmetry: int | np.ndarray) -> np.ndarray:
    size = planes.shape[-1]
    flat = planes.reshape(planes.shape[:-2] + (size * size,))
    return _apply(symmetry_tables(size)[1], flat, symmetry).reshape(planes.shape)


def _policy_size(policy: np.ndarray) -> int:
    size = int(round((policy.shape[-1] - 1) ** 0.5))
    if size * size + 1 != policy.shape[-1]:
        raise ValueError(f"policy length {policy.shape[-1]} is not N*N+1")
    return size


def transform_policy(policy: np.ndarray, symmetry: int | np.ndarray) -> np.ndarray:
    """Policy [..., N*N+1] (pass last, which stays) seen under ``symmetry``."""
    return _apply(symmetry_tables(_policy_size(policy))[0], policy, symmetry)


def inverse_transform_policy(policy: np.ndarray, symmetry: int | np.ndarray) -> np.ndarray:
    """Back from the frame of planes transformed by ``symmetry`` to the board's frame."""
    return _apply(symmetry_tables(_policy_size(policy))[1], policy, symmetry)


__all__ = ["NUM_PLANES", "NUM_SYMMETRIES", "IDENTITY", "INPUT_ENCODING", "KOMI_INPUT_ENCODING", "KOMI_PLANE",
           "KOMI_SCALE", "komi_points", "with_komi_plane", "encode_batch_with_komi", "encode", "encode_batch",
           "symmetric_point", "katago_symmetry", "symmetry_tables", "transform_planes", "inverse_transform_planes",
           "transform_policy", "inverse_transform_policy"]

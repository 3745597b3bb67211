"""Gomoku's input planes ("gomoku-4", the AlphaZero gomoku chapter's four) and its policy symmetries.

Layer: net (reads rules/gomoku.py). Planes are [B, 4, H, W] float32 with row ``y`` counted from the bottom and
column ``x`` from the left, so that plane[..., y, x] is flat point ``y * W + x``, the policy's index:
    0: the side to move's stones, 1: the opponent's stones, 2: the last move (all zero before the first move),
    3: ones when BLACK (the first player) is to move, zeros when WHITE is.
The 8 dihedral symmetries are Go's (features.symmetry_tables, Leela Zero's numbering); the gomoku policy has no pass
entry, so its transforms use the tables without their last (pass) column.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tabula.engine.net.features import NUM_SYMMETRIES, symmetry_tables, transform_planes
from tabula.engine.rules.coords import BLACK
from tabula.engine.rules.gomoku import GomokuState

INPUT_ENCODING = GomokuState.INPUT_ENCODING  # "gomoku-4", the name written into network metadata
NUM_PLANES = 4


def encode_batch(states: Sequence[GomokuState], symmetries: np.ndarray | None = None) -> np.ndarray:
    """float32 [B, 4, H, W]: the planes of positions that share one board shape.

    ``symmetries`` (int [B], 0..7): each position seen under its symmetry, the same as ``transform_planes``
    afterwards; only square boards have them.
    """
    if not states:
        raise ValueError("encode_batch needs at least one position")
    width, height = states[0].width, states[0].height
    for state in states:
        if (state.width, state.height) != (width, height):
            raise ValueError(f"gomoku positions of {width}x{height} and {state.width}x{state.height} in one batch")
    count, points = len(states), width * height
    colors = np.stack([state.colors() for state in states])  # uint8 [B, HW]
    to_move = np.fromiter((state.to_move for state in states), dtype=np.uint8, count=count)[:, None]
    planes = np.zeros((count, NUM_PLANES, points), dtype=np.float32)
    planes[:, 0] = colors == to_move
    planes[:, 1] = (colors != 0) & (colors != to_move)
    for i, state in enumerate(states):
        last = state.last_move
        if last is not None:
            planes[i, 2, last] = 1.0
    planes[:, 3] = to_move == BLACK
    if symmetries is not None:
        planes = _gather(planes, symmetries, width, height, inverse=False)
    return planes.reshape(count, NUM_PLANES, height, width)


def encode(state: GomokuState) -> np.ndarray:
    """float32 [4, H, W] for one position."""
    return encode_batch([state])[0]


def _tables(width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    if width != height:
        raise ValueError(f"a {width}x{height} gomoku board has no dihedral symmetries; only square boards do")
    forward, inverse = symmetry_tables(width)
    points = width * width
    return forward[:, :points], inverse[:, :points]  # the pass column maps to itself, so slicing keeps a permutation


def _gather(flat: np.ndarray, symmetry: int | np.ndarray, width: int, height: int, inverse: bool) -> np.ndarray:
    """``flat[..., table[s]]`` for one symmetry, or per row of a batch for int [B]."""
    table = _tables(width, height)[1 if inverse else 0]
    if np.ndim(symmetry) == 0:
        return flat[..., table[int(symmetry)]]
    index = table[np.asarray(symmetry)]  # [B, HW]
    index = index.reshape((index.shape[0],) + (1,) * (flat.ndim - 2) + (index.shape[1],))
    return np.take_along_axis(flat, index, axis=-1)


def _square_side(policy: np.ndarray) -> int:
    side = int(round(policy.shape[-1] ** 0.5))
    if side * side != policy.shape[-1]:
        raise ValueError(f"gomoku policy length {policy.shape[-1]} is not N*N (a square board, no pass)")
    return side


def transform_policy(policy: np.ndarray, symmetry: int | np.ndarray) -> np.ndarray:
    """Policy [..., N*N] (no pass) seen under ``symmetry`` (one int, or int [B] for a batch [B, N*N])."""
    side = _square_side(policy)
    return _gather(policy, symmetry, side, side, inverse=False)


def inverse_transform_policy(policy: np.ndarray, symmetry: int | np.ndarray) -> np.ndarray:
    """Back from the frame of planes transformed by ``symmetry`` to the board's frame."""
    side = _square_side(policy)
    return _gather(policy, symmetry, side, side, inverse=True)


__all__ = ["INPUT_ENCODING", "NUM_PLANES", "NUM_SYMMETRIES", "encode", "encode_batch", "transform_planes",
           "transform_policy", "inverse_transform_policy"]

"""The network input encodings by name: what a state class's ``INPUT_ENCODING`` and a network file's
``input_encoding`` metadata name, and what the evaluator, the network and the trainer need of each.

Layer: net (numpy only). Go's ``leelaz-18`` is ``engine.net.features``; gomoku's ``gomoku-4`` is
``engine.net.gomoku_features``, read on first use. Both games use the 8 dihedral symmetries of a square board; the
policy has a pass entry (its last) only where ``has_pass``.

A state class names one encoding, its own; an encoding may read the states of another's name (``state_encoding``):
Go's ``GameState`` is encoded under ``leelaz-18``, for a network that sees the komi ``leelaz-18+komi`` (a komi
plane added), and for KataGo's networks ``katago-v7`` (``engine.net.katago_features``). Which one is the network's
choice, by its metadata.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from tabula.engine.net import features


@dataclass(frozen=True)
class Encoding:
    """One input encoding and its policy layout."""

    name: str
    planes: int  # input planes C of float32 [B, C, N, N]
    has_pass: bool  # the policy has N*N+1 entries, pass last; else N*N
    # (states of one size, symmetries int [B] or None) -> float32 [B, C, N, N]
    encode_batch: Callable[[Sequence, np.ndarray | None], np.ndarray]
    # policy [B, L] in the frame of planes seen under symmetries int [B] (or one int) -> the board's frame
    inverse_transform_policy: Callable[[np.ndarray, object], np.ndarray]
    new_state: Callable[[int], object]  # the empty position of a board size (trial runs of a network file)
    board_sizes: tuple[int, ...] = tuple(range(2, 26))  # the square boards the game is played on
    # Planes whose sum over the board is all ones (Go: 16 and 17, the side-to-move planes), from which the pooled
    # head reads the board's size without reading the tensor's shape; None: an all-ones plane is made instead.
    size_planes: tuple[int, int] | None = None
    # The game is scored in points with territory (Go): the networks' score, ownership and small-board value
    # heads, and the records' margins and final owners, have a meaning.
    scored: bool = False
    # The encoding named by the states this encoding reads (their class's INPUT_ENCODING); "": this one's name.
    state_encoding: str = ""
    # The constant plane of the side to move's komi (features.KOMI_PLANE), read by the networks' komi terms; None:
    # the network does not see the komi.
    komi_plane: int | None = None

    def accepts(self, state) -> bool:
        """Whether positions of ``state``'s class can be encoded under this encoding."""
        return type(state).INPUT_ENCODING == (self.state_encoding or self.name)

    def policy_size(self, size: int) -> int:
        return size * size + (1 if self.has_pass else 0)

    def trial_planes(self, size: int) -> np.ndarray:
        """float32 [1, C, N, N]: the empty board of ``size``, black to move."""
        return self.encode_batch([self.new_state(size)], None)


LEELAZ = Encoding(features.INPUT_ENCODING, features.NUM_PLANES, True, features.encode_batch,
                  features.inverse_transform_policy, lambda size: _go_state(size), size_planes=(16, 18), scored=True)
LEELAZ_KOMI = Encoding(features.KOMI_INPUT_ENCODING, features.NUM_PLANES + 1, True, features.encode_batch_with_komi,
                       features.inverse_transform_policy, lambda size: _go_state(size), size_planes=(16, 18),
                       scored=True, state_encoding=features.INPUT_ENCODING, komi_plane=features.KOMI_PLANE)


def _go_state(size: int):
    from tabula.engine.rules.game import GameState

    return GameState(size)


@lru_cache(maxsize=None)
def _all() -> dict[str, Encoding]:
    from tabula.engine.net import gomoku_features
    from tabula.engine.rules.gomoku import MAX_SIDE, MIN_SIDE, GomokuState

    gomoku = Encoding(gomoku_features.INPUT_ENCODING, gomoku_features.NUM_PLANES, False,
                      gomoku_features.encode_batch, gomoku_features.inverse_transform_policy,
                      lambda size: GomokuState(size), board_sizes=tuple(range(MIN_SIDE, MAX_SIDE + 1)))
    return {encoding.name: encoding for encoding in (LEELAZ, LEELAZ_KOMI, _katago_v7(), gomoku)}


def _katago_v7() -> Encoding:
    """KataGo's V7 inputs (``engine.net.katago_features``) for Go's positions: 22 spatial features and 19 globals as
    constant planes; plane 0 (on the board) is all ones. KataGo's networks play 2x2 to 19x19."""
    from tabula.engine.net import katago_features

    return Encoding(katago_features.INPUT_ENCODING, katago_features.NUM_PLANES, True, katago_features.encode_batch,
                    features.inverse_transform_policy, lambda size: _go_state(size), board_sizes=tuple(range(2, 20)),
                    size_planes=(0, 1), scored=True, state_encoding=features.INPUT_ENCODING)


def encoding_named(name: str) -> Encoding:
    """The encoding called ``name``; ValueError naming the known ones otherwise."""
    if name == LEELAZ.name:
        return LEELAZ
    if name == LEELAZ_KOMI.name:
        return LEELAZ_KOMI
    found = _all().get(name)
    if found is None:
        raise ValueError(f"unknown input encoding {name!r} (known: {', '.join(sorted(_all()))})")
    return found


def encoding_of(state) -> Encoding:
    """The encoding a position's class names (``INPUT_ENCODING``): Go's is ``leelaz-18``."""
    return encoding_named(type(state).INPUT_ENCODING)


def names() -> list[str]:
    return sorted(_all())


__all__ = ["Encoding", "LEELAZ", "LEELAZ_KOMI", "encoding_named", "encoding_of", "names"]

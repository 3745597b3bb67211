"""The network input encodings by name: what a state class's ``INPUT_ENCODING`` and a network file's
``input_encoding`` metadata name, and what the evaluator, the network and the trainer need of each.

Layer: net (numpy only). Go's ``leelaz-18`` is ``engine.net.features``; gomoku's ``gomoku-4`` is
``engine.net.gomoku_features``, read on first use. Both games use the 8 dihedral symmetries of a square board; the
policy has a pass entry (its last) only where ``has_pass``.

A state class names one encoding, its own; an encoding may read the states of another's name (``state_encoding``):
Go's ``GameState`` is encoded under ``leelaz-18``, for a network that sees the komi ``leelaz-18+komi`` (a komi
plane added), for KataGo's networks ``katago-v7`` (``engine.net.katago_features``), and for Tabula's own networks of
the next architecture ``tabula-v2`` (katago-v7's planes, then the reading features of ``engine.net.reading_features``).
Which one is the network's choice, by its metadata; an encoding says nothing of a network's outputs (a Tabula network
may read ``katago-v7``: ``engine.net.netfile.is_katago_network`` tells KataGo's conversions apart).
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
    # Planes whose value is the same at every point (side to move, komi, rules): stored by the labels as one number
    # a position (tools/learn/teacher.py); every other plane is 0 or 1 at each point.
    constant_planes: tuple[int, ...] = ()
    # A name for each plane (empty: unnamed), by which tabula distill --zero-planes chooses them
    plane_names: tuple[str, ...] = ()
    # The encoding whose planes are this one's first, computed the same ("": none): a labeller that encodes those
    # for its teacher gives them to the student's too.
    extends: str = ""
    # state -> what the planes read beyond the state's ``hash`` (and its rules), that a table of network results
    # keys on besides it (engine.play.search.table_key); None: nothing
    table_key: Callable[[object], tuple] | None = None

    def accepts(self, state) -> bool:
        """Whether positions of ``state``'s class can be encoded under this encoding."""
        return type(state).INPUT_ENCODING == (self.state_encoding or self.name)

    def policy_size(self, size: int) -> int:
        return size * size + (1 if self.has_pass else 0)

    def trial_planes(self, size: int) -> np.ndarray:
        """float32 [1, C, N, N]: the empty board of ``size``, black to move."""
        return self.encode_batch([self.new_state(size)], None)


_LEELAZ_NAMES = (*(f"own_{age}" for age in range(8)), *(f"opp_{age}" for age in range(8)), "black_to_move",
                 "white_to_move")


def _go_table_key(state) -> tuple:
    """Every Go encoding's table key (``katago_features.table_key``): a Go position is keyed the same whatever the
    network reads it as (the key's state class names leelaz-18), so it covers katago-v7's reads as well."""
    from tabula.engine.net import katago_features

    return katago_features.table_key(state)


LEELAZ = Encoding(features.INPUT_ENCODING, features.NUM_PLANES, True, features.encode_batch,
                  features.inverse_transform_policy, lambda size: _go_state(size), size_planes=(16, 18), scored=True,
                  constant_planes=(16, 17), plane_names=_LEELAZ_NAMES, table_key=_go_table_key)
LEELAZ_KOMI = Encoding(features.KOMI_INPUT_ENCODING, features.NUM_PLANES + 1, True, features.encode_batch_with_komi,
                       features.inverse_transform_policy, lambda size: _go_state(size), size_planes=(16, 18),
                       scored=True, state_encoding=features.INPUT_ENCODING, komi_plane=features.KOMI_PLANE,
                       constant_planes=(16, 17, 18), plane_names=(*_LEELAZ_NAMES, "komi"),
                       extends=features.INPUT_ENCODING, table_key=_go_table_key)
# katago-v7's planes by name (engine.net.katago_features: the 22 spatial features, then the 19 globals)
KATAGO_V7_NAMES = (
    "on_board", "own_stones", "opp_stones", "liberties_1", "liberties_2", "liberties_3", "ko_ban", "encore_ko",
    "encore_ko_2", "last_move_1", "last_move_2", "last_move_3", "last_move_4", "last_move_5", "ladder_captured",
    "ladder_captured_1", "ladder_captured_2", "ladder_move", "own_area", "opp_area", "encore_stones",
    "encore_stones_2",
    "pass_1", "pass_2", "pass_3", "pass_4", "pass_5", "komi", "ko_rule", "ko_rule_situational", "suicide",
    "territory_scoring", "seki_tax", "group_tax", "encore", "encore_2", "pass_ends_phase", "playout_doubling",
    "playout_doubling_2", "button", "komi_wave")
TABULA_V2 = "tabula-v2"
# Where tabula-v2's reading features come from: the one place its planes beyond katago-v7's join (_tabula_v2)
READING_FEATURES = "tabula.engine.net.reading_features"


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
    found = [LEELAZ, LEELAZ_KOMI, _katago_v7(), gomoku]
    v2 = _tabula_v2()
    if v2 is not None:
        found.append(v2)
    return {encoding.name: encoding for encoding in found}


def _katago_v7() -> Encoding:
    """KataGo's V7 inputs (``engine.net.katago_features``) for Go's positions: 22 spatial features and 19 globals as
    constant planes; plane 0 (on the board) is all ones. KataGo's networks play 2x2 to 19x19."""
    from tabula.engine.net import katago_features

    return Encoding(katago_features.INPUT_ENCODING, katago_features.NUM_PLANES, True, katago_features.encode_batch,
                    features.inverse_transform_policy, lambda size: _go_state(size), board_sizes=tuple(range(2, 20)),
                    size_planes=(0, 1), scored=True, state_encoding=features.INPUT_ENCODING,
                    constant_planes=tuple(range(katago_features.NUM_SPATIAL, katago_features.NUM_PLANES)),
                    plane_names=KATAGO_V7_NAMES, table_key=_go_table_key)


def _tabula_v2() -> Encoding | None:
    """Tabula's inputs for its own networks of the next architecture: katago-v7's 41 planes (the komi and the rules
    among its globals), then the reading features' planes (``READING_FEATURES``: ``PLANES``, the names; ``encode``
    or ``encode_batch``, 0/1 planes [plane, y, x]). Every Go size, 2x2 to 25x25: katago-v7's features are computed
    for any board (KataGo's networks stop at 19x19, not its inputs). None where the reading features' module is
    missing (the encoding is then unknown, ``encoding_named`` says why)."""
    import importlib

    from tabula.engine.net import katago_features

    try:
        reading = importlib.import_module(READING_FEATURES)
    except ImportError:
        return None
    names = tuple(str(name) for name in reading.PLANES)
    base = katago_features.NUM_PLANES
    count = base + len(names)

    def encode_batch(states, symmetries=None) -> np.ndarray:
        if not states:
            raise ValueError("encode_batch needs at least one position")
        size = states[0].size
        out = np.empty((len(states), count, size, size), dtype=np.float32)
        out[:, :base] = katago_features.encode_batch(states, None)
        if hasattr(reading, "encode_batch"):
            out[:, base:] = reading.encode_batch(states, None)
        else:
            for i, state in enumerate(states):
                out[i, base:] = reading.encode(state)
        if symmetries is not None:
            out = features.transform_planes(out, np.asarray(symmetries))
        return out

    return Encoding(TABULA_V2, count, True, encode_batch, features.inverse_transform_policy,
                    lambda size: _go_state(size), board_sizes=tuple(range(2, 26)),
                    size_planes=(0, 1), scored=True, state_encoding=features.INPUT_ENCODING,
                    constant_planes=tuple(range(katago_features.NUM_SPATIAL, base)),
                    plane_names=KATAGO_V7_NAMES + names, extends=katago_features.INPUT_ENCODING,
                    table_key=_go_table_key)


def encoding_named(name: str) -> Encoding:
    """The encoding called ``name``; ValueError naming the known ones otherwise."""
    if name == LEELAZ.name:
        return LEELAZ
    if name == LEELAZ_KOMI.name:
        return LEELAZ_KOMI
    found = _all().get(name)
    if found is None and name == TABULA_V2:
        raise ValueError(f"input encoding {TABULA_V2} needs the reading features ({READING_FEATURES}), which this "
                         "installation lacks")
    if found is None:
        raise ValueError(f"unknown input encoding {name!r} (known: {', '.join(sorted(_all()))})")
    return found


def encoding_of(state) -> Encoding:
    """The encoding a position's class names (``INPUT_ENCODING``): Go's is ``leelaz-18``."""
    return encoding_named(type(state).INPUT_ENCODING)


def names() -> list[str]:
    return sorted(_all())


def plane_indices(encoding: Encoding, chosen: str) -> list[int]:
    """The planes of ``encoding`` that ``chosen`` names: comma-separated plane names or indices; ValueError naming
    the encoding's planes for one it has not."""
    found: list[int] = []
    for word in (w.strip() for w in chosen.split(",")):
        if not word:
            continue
        if word.isdigit() and int(word) < encoding.planes:
            index = int(word)
        elif word in encoding.plane_names:
            index = encoding.plane_names.index(word)
        else:
            known = ", ".join(encoding.plane_names) or f"0 to {encoding.planes - 1}"
            raise ValueError(f"{encoding.name} has no plane {word!r} (its planes: {known})")
        if index not in found:
            found.append(index)
    return found


__all__ = ["Encoding", "LEELAZ", "LEELAZ_KOMI", "KATAGO_V7_NAMES", "TABULA_V2", "READING_FEATURES", "encoding_named",
           "encoding_of", "names", "plane_indices"]

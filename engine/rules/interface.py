"""The game interface: what the search, the move decision, self-play, the replay window and the trainer ask of a
game, so that they run on Go and on gomoku without ``if game == ...`` branches (AlphaZero's point).

Layer: rules (no imports from above; no numpy-heavy logic here, only the protocol, its documentation and helpers that
read it). Go's ``GameState`` (``engine.rules.game``) satisfies ``Game``, and so does gomoku's ``GomokuState``.

Conventions, the same for every game:

- A move is a flat int ``y * size + x`` (x the column from the left, y the row from the BOTTOM, as
  ``engine.rules.coords`` has it); Go's pass is ``coords.PASS`` (-1).
- The policy has ``policy_size`` entries: the points in flat order, then, for a game that can pass, one entry for the
  pass at index ``size * size`` (Go: ``size * size + 1`` entries; gomoku: ``size * size``).
- Colours are ``coords.BLACK`` (1) and ``coords.WHITE`` (2); black moves first.
- ``value`` is in [-1, 1], from the side to move's view.
- The network's input encoding is named by the state class's ``INPUT_ENCODING`` (``engine.net.features`` maps the
  name to its planes and encoder: Go ``leelaz-18``, gomoku ``gomoku-4``); both games use the 8 dihedral symmetries
  of a square board.

Optional hooks. A game may have these; where it has not, the engine does what the default says. Go has all of them;
they are how Go's own rules (passes, eyes, area scoring, setup stones, batched legality) stay Go's:

- ``terminal_score() -> float``: the final margin in points of a finished game, side to move's view (default 0.0:
  a game without a score).
- ``own_eye_masks(states) -> bool [B, size*size]`` (static): the points that fill the mover's own single-point eye,
  which the search never plays (default: no filter).
- ``atari_stakes(states) -> int [B, size*size]`` (static): the stones of the strings in atari whose only liberty
  each point is, which the search keeps a floor of prior on (default: none).
- ``legal_masks(states) -> bool [B, policy_size]`` (static): ``legal_mask`` of many positions at once (default: one
  ``legal_mask`` each).
- ``rules`` (anything comparable with ``==``), ``setup`` and ``handicap``: what, with the size and the move list,
  identifies a game's position for the search's tree reuse (defaults None, () and 0). A game whose rules vary (komi,
  n in a row) puts them in ``rules``, so that a search never reuses a tree or a cached network result across them.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Game(Protocol):
    """One position of a two-player board game and what the engine needs of it. ``play`` changes it in place;
    ``copy`` is cheap (the search copies the root once a playout)."""

    INPUT_ENCODING: str  # class attribute: the network input encoding's name (engine.net.features)

    @property
    def size(self) -> int:
        """The side of the (square) board."""
        ...

    to_move: int  # BLACK or WHITE
    moves: list[tuple[int, int]]  # (colour, move) played, in order

    @property
    def policy_size(self) -> int:
        """Entries of a policy: ``size * size``, plus one (the last) for the pass in a game that can pass."""
        ...

    @property
    def hash(self) -> int:
        """A compact transposition key of the position, side to move included (Zobrist)."""
        ...

    def copy(self) -> "Game":
        ...

    def play(self, move: int, color: int | None = None) -> object:
        """Play ``move`` for ``color`` (default: the side to move); raise a ValueError subclass on an illegal move
        and leave the position unchanged."""
        ...

    def legal_moves(self) -> list[int]:
        """The legal points for the side to move (flat), a pass not included."""
        ...

    def legal_mask(self) -> np.ndarray:
        """bool [policy_size]: the side to move's legal moves, in policy order."""
        ...

    def terminal_value(self) -> float | None:
        """None while the game goes on; else its result from the side to move's view: +1 won, -1 lost, 0 a draw."""
        ...


def has_pass(game: Game) -> bool:
    """Whether the game's policy has a pass entry (at index ``size * size``, its last)."""
    return game.policy_size > game.size * game.size


def game_key(game: Game) -> tuple:
    """What, besides the move list, must be equal for two positions to belong to one game tree: the game's class,
    the size, its rules, setup stones and handicap (see the optional hooks)."""
    return (type(game), game.size, getattr(game, "rules", None), tuple(getattr(game, "setup", ())),
            getattr(game, "handicap", 0))


def batch_legal_masks(states: Sequence[Game]) -> np.ndarray:
    """bool [B, policy_size]: the legal moves of positions of one game and size, through the game's batched
    ``legal_masks`` where it has one."""
    batched = getattr(type(states[0]), "legal_masks", None)
    if batched is not None:
        return batched(states)
    return np.stack([state.legal_mask() for state in states])


__all__ = ["Game", "has_pass", "game_key", "batch_legal_masks"]

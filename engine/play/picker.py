"""The one move-picker protocol: a move for the side to move of a position. GTP's player, self-play, gating, the arena
and the Gomocup front end all ask their players through it; Go under GTP asks a little more (``GoMovePicker``).

Layer: play, below everything that plays a game. Its implementations: ``engine.play.search_player.SearchPicker``
(the network's search, then ``MoveDecider``), ``engine.play.player.RandomGoPicker``,
``engine.play.pure_mcts.PureMctsPicker`` and ``RandomPicker`` (any game), and self-play's ``SelfPlayPicker``.
"""
from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

Progress = Callable[[list], None]  # called with a search's candidates (engine.play.result.Candidate) as it goes


class MovePicker(Protocol):
    """Picks moves. ``pick`` must not change ``state``; a RESIGN it returns is not played."""

    def pick(self, state, budget_s: float | None = None) -> int:
        """A legal move of ``state``'s side to move (flat int), PASS or RESIGN, chosen within ``budget_s`` seconds
        (None: no time limit; the picker's own visits or playouts decide)."""
        ...


class GoMovePicker(MovePicker, Protocol):
    """A ``MovePicker`` of Go as GTP's ``engine.play.player.Player`` drives it: what it plays, progress while it
    searches, cleanup, the end-of-game judgement and free handicap.

    A picker without a capability says so in its value (``board_sizes`` None, ``last_search`` None), it is never
    probed for."""

    name: str
    board_sizes: tuple[int, ...] | None  # the sizes it plays; None: every size
    last_search: object | None  # the search behind the latest picked move (an engine.play.result.SearchResult)

    def pick(self, state, budget_s: float | None = None, on_progress: Progress | None = None,
             progress_interval_s: float = 1.0, spend_all: bool = False) -> int:
        """``MovePicker.pick``; ``on_progress``: called with the candidates every ``progress_interval_s`` while a
        search runs (genmove_analyze). ``spend_all``: the clock loses whatever part of ``budget_s`` the move leaves
        unspent (a byo-yomi period), so a search should run to its end rather than stop once its move is settled."""
        ...

    def pick_cleanup(self, state, budget_s: float | None = None, spend_all: bool = False) -> int:
        """kgs-genmove_cleanup's move: like ``pick``, but capturing the opponent's dead stones first."""
        ...

    def stop(self) -> None:
        """End a running search early (GoGui's interrupt), from any thread; nothing where nothing runs."""
        ...

    def ownership(self, state) -> np.ndarray:
        """float32 [N*N] in [-1, 1], black's view: who ends up owning each point (final_status_list, scoring)."""
        ...

    def dead_stones(self, state) -> list[int]:
        """Flat points of the stones, of either colour, judged dead in ``state`` (final_status_list, scoring)."""
        ...

    def handicap_stones(self, state, count: int) -> list[int] | None:
        """place_free_handicap's stones on ``state``'s empty board (its size, rules and komi): up to ``count``
        flat points, or None where the picker has no choice of its own (the player then uses the GTP table)."""
        ...


__all__ = ["MovePicker", "GoMovePicker", "Progress"]

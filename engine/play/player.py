"""The player: owns the game, its undo stack, the rules, the clocks and a move picker. The one object GTP drives.

Layer: the top of the engine. Its ``GoMovePicker`` (engine/play/picker.py: random, search, ...) is chosen by name
from ``PICKERS``; adding one is one entry there. The player raises typed exceptions (``IllegalMoveError``,
``CoordinateError``, ``SgfError``, ``CannotUndoError``, ``HandicapError``, ``ValueError``) and never prints.
"""
from __future__ import annotations

import gc
import logging
import math
import random
import time
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from tabula.engine.config import EngineConfig, TimeConfig
from tabula.engine.play.decision import opponent_passed
from tabula.engine.play.judging import count_without
from tabula.engine.play.picker import GoMovePicker, Progress
from tabula.engine.play.timecontrol import ClockState, TimeSettings, budget_s, nearly_out_of_time, unspent_time_is_lost
from tabula.engine.rules import playout, sgf
from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import BLACK, MAX_SIZE, MIN_SIZE, PASS, RESIGN, WHITE, color_name, format_vertex
from tabula.engine.rules.game import GameState, Rules, format_result, handicap_points

log = logging.getLogger("tabula.play")

SHORT_CLOCK_S = 0.05  # a first move's budget below this is "almost no search": set_time_settings warns once
OVERHEAD_SMOOTHING = 0.3  # weight of the newest move in the overhead average
OVERHEAD_SAMPLE_CAP_S = 5.0  # one stall (a network loading, a swapped-out process) must not starve the game

MAX_ABS_KOMI = 1000.0  # beyond this a komi is a typo, whatever the board size
UNDO_SNAPSHOT_MOVES = 128  # a loaded game keeps a position every this many moves; undo replays fewer than this


class RandomGoPicker:
    """A ``GoMovePicker`` of uniformly random legal moves that never fill an own single-point eye; passes when none
    are left."""

    name = "random"
    board_sizes = None
    last_search = None  # it never searches

    def __init__(self, rng: random.Random, ownership_playouts: int = playout.DEFAULT_OWNERSHIP_PLAYOUTS):
        self.rng = rng
        self.ownership_playouts = ownership_playouts

    def pick(self, state: GameState, budget_s: float | None = None, on_progress: Progress | None = None,
             progress_interval_s: float = 1.0, spend_all: bool = False) -> int:
        return playout.random_move(state, self.rng)

    def pick_cleanup(self, state: GameState, budget_s: float | None = None, spend_all: bool = False) -> int:
        return playout.cleanup_move(state, state.to_move, self.ownership(state), self.rng)

    def stop(self) -> None:
        pass  # its moves take no time

    def ownership(self, state: GameState) -> np.ndarray:
        return playout.ownership(state, self.rng, self.ownership_playouts)

    def dead_stones(self, state: GameState) -> list[int]:
        return playout.dead_stones(state, self.ownership(state))

    def handicap_stones(self, state: GameState, count: int) -> list[int] | None:
        return None  # random stones would be a worse handicap than the table's


def _random_picker(config: EngineConfig) -> GoMovePicker:
    return RandomGoPicker(random.Random(config.seed))


def _search_picker(config: EngineConfig) -> GoMovePicker:
    from tabula.engine.play.search_player import from_config  # onnxruntime loads only when the search plays

    return from_config(config)


# name (``tabula gtp --player``) -> factory. A new picker is one entry here; import heavy modules inside its factory.
PICKERS: dict[str, Callable[[EngineConfig], GoMovePicker]] = {
    "random": _random_picker,
    "search": _search_picker,
}


def first_size(picker: GoMovePicker, preferred: int = 19) -> int:
    """The board a new engine starts on: ``preferred`` where the picker plays it, else its smallest size."""
    playable = picker.board_sizes
    return preferred if not playable or preferred in playable else min(playable)


class CannotUndoError(ValueError):
    """``undo`` with no move to take back."""


class HandicapError(ValueError):
    """A handicap request that cannot be met. ``kind``: board not empty | invalid number of stones |
    bad vertex list."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


@dataclass
class _LoadedLine:
    """The undo stack under a position loaded from SGF, without a copy of every position (each copy is O(moves),
    so that would make loading a long file quadratic): a snapshot every ``UNDO_SNAPSHOT_MOVES`` moves, and the
    moves to replay from one."""

    snapshots: list[GameState]  # the positions after 0, N, 2N, ... moves (N = UNDO_SNAPSHOT_MOVES), not changed
    moves: list[tuple[int, int]]  # (colour, move) of the loaded line
    undoable: int  # the positions after 0 .. undoable - 1 moves are still on the undo stack

    def pop(self, rules: Rules) -> GameState:
        """The position after ``undoable - 1`` moves, taken off the stack."""
        self.undoable -= 1
        state = self.snapshots[self.undoable // UNDO_SNAPSHOT_MOVES].copy()
        for color, move in self.moves[len(state.moves):self.undoable]:
            state.play(move, color)
        state.rules = rules
        return state


class Player:
    """The game being played, and everything that changes it.

    Fixed for the player's life: ``picker``, ``time_config``, ``clock`` (a callable returning seconds),
    ``rng``. Per game (reset by ``clear``): ``state``, ``history`` (undo stack, on top of ``loaded``: the
    positions of a loaded SGF file), ``clocks``, ``result``.
    Kept across games: ``rules`` (komi persists across ``set_size`` and ``clear``), ``time_settings``,
    ``move_overhead_s`` (what a move costs beyond its search budget, a moving average over recent moves).
    Not thread-safe: one caller at a time.
    """

    def __init__(self, picker: GoMovePicker, size: int = 19, rules: Rules | None = None,
                 time_config: TimeConfig | None = None, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None):
        self.picker = picker
        self.time_config = time_config or TimeConfig()
        self.clock = clock
        self.rng = rng or random.Random()
        self.rules = rules or Rules()
        self.time_settings = TimeSettings.none()
        self.move_overhead_s = 0.0
        self.warned_short_clock = False  # set_time_settings says once that the clock leaves almost no search
        self.black_name = ""
        self.white_name = ""
        self.last_search: object | None = None  # the search behind the latest genmove (None: it did not search)
        self._dead_judged: tuple[tuple, list[int]] | None = None  # (position key, dead stones): see dead_stones
        self._frozen_moves = False  # genmove froze the heap since the last new game (_new_game_heap)
        self._size = size
        self.set_size(size)

    @classmethod
    def from_config(cls, config: EngineConfig, clock: Callable[[], float] = time.monotonic) -> "Player":
        if config.player not in PICKERS:
            raise ValueError(f"unknown player {config.player!r}; known: {', '.join(PICKERS)}")
        picker = PICKERS[config.player](config)
        return cls(picker, size=config.board_size or first_size(picker), rules=config.rules,
                   time_config=config.time, clock=clock, rng=random.Random(config.seed))

    # -- the game ------------------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.state.size

    @property
    def komi(self) -> float:
        return self.rules.komi

    def set_size(self, size: int) -> None:
        """A new empty game on a ``size`` board; ValueError if the size is not supported."""
        if not isinstance(size, int) or not (MIN_SIZE <= size <= MAX_SIZE):
            raise ValueError(f"unacceptable size {size!r}")
        playable = self.picker.board_sizes  # a network plays only the sizes it was made for
        if playable is not None and size not in playable:
            raise ValueError(f"unacceptable size {size}: {self.picker.name} plays "
                             f"{', '.join(f'{s}x{s}' for s in playable)}")
        self._size = size
        self.clear()

    def clear(self) -> None:
        """A new empty game; komi, rules and time settings stay."""
        self.state = GameState(self._size, self.rules)
        self.history: list[GameState] = []
        self.loaded: _LoadedLine | None = None
        self.result = ""
        self.black_name = self.white_name = ""  # a new game is not the loaded file's game: its players go too
        self.clocks = {BLACK: ClockState.start(self.time_settings), WHITE: ClockState.start(self.time_settings)}
        self._new_game_heap()

    def _new_game_heap(self) -> None:
        """A new game (``clear``, ``load_sgf``), off the clock: what the last game's moves froze (see ``genmove``) goes
        back to the collector, one full collection frees any cycle among it, and what is still alive (the table of
        network results, what start-up loaded) is frozen again, so that the new game's first searches do not scan it
        either. Nothing to do where no move was frozen since the last new game."""
        if not self._frozen_moves:
            return
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._frozen_moves = False

    def set_komi(self, komi: float) -> None:
        komi = float(komi)
        if not math.isfinite(komi) or abs(komi) > MAX_ABS_KOMI:
            raise ValueError(f"unacceptable komi {komi!r}")
        self.rules = replace(self.rules, komi=komi)
        self._set_rules_of_state(self.state)
        for state in self.history:
            self._set_rules_of_state(state)

    def set_rules(self, rules: Rules) -> None:
        """Play this game and the next ones under ``rules`` (kata-set-rules, kgs-rules; the komi is ``rules``'s).
        Another ko or suicide rule replays the game so far and its undo stack under it; ValueError, and nothing
        changes, where a move of the game breaks it."""
        if rules.superko != self.rules.superko or rules.suicide != self.rules.suicide:
            self._replay_under(rules)
        self.rules = rules
        self._set_rules_of_state(self.state)
        for state in self.history:
            self._set_rules_of_state(state)

    def _replay_under(self, rules: Rules) -> None:
        """The game, its undo stack and the loaded line played again under ``rules`` (their superko histories)."""
        line = len(self.state.moves)
        first_undoable = line - len(self.history)  # the undo stack holds the positions after these moves and on
        loaded = self.loaded
        snapshots = range(0, loaded.undoable, UNDO_SNAPSHOT_MOVES) if loaded is not None else range(0)
        state, copies = self.state.replayed(rules, [*range(first_undoable, line), *snapshots])
        self.state = state
        self.history = [copies[number] for number in range(first_undoable, line)]
        if loaded is not None:
            self.loaded = _LoadedLine([copies[number] for number in snapshots], loaded.moves, loaded.undoable)

    def _set_rules_of_state(self, state: GameState) -> None:
        # Rules are frozen and shared; komi, scoring and the handicap bonus do not affect legality, so swapping them
        # mid-game is safe (another ko or suicide rule is replayed first: set_rules).
        state.rules = self.rules

    def play(self, color: int, move: int) -> None:
        """Play ``move`` for ``color`` (either colour, in any order); IllegalMoveError leaves the game as it was."""
        if move == RESIGN:
            raise IllegalMoveError("resign is not a move")
        before = self.state.copy()
        self.state.play(move, color)
        self.history.append(before)

    def undo(self) -> None:
        if self.history:
            self.state = self.history.pop()
        elif self.loaded is not None and self.loaded.undoable > 0:
            self.state = self.loaded.pop(self.rules)
        else:
            raise CannotUndoError("cannot undo")
        self.result = ""

    def genmove(self, color: int, cleanup: bool = False, on_progress: Progress | None = None,
                progress_interval_s: float = 1.0) -> int:
        """Choose a move for ``color``, play it (RESIGN is returned without playing) and charge its time.

        ``cleanup`` (kgs-genmove_cleanup): do not pass while the opponent has dead stones on the board.
        ``on_progress``: the search's candidates every ``progress_interval_s`` while it runs (genmove_analyze).
        ``last_search`` then holds the search behind the move, or None when none ran.
        """
        start = self.clock()
        budget = self.budget_s(color)
        move = self._choose(color, cleanup, budget, on_progress, progress_interval_s)
        elapsed = self.clock() - start
        self.clocks[color].charge(self.time_settings, elapsed)
        # What is alive after a move (the tree kept for the next one, the table of network results, everything
        # loaded at start-up) leaves the cyclic collector's scans until the next game: a full collection of it
        # pauses every thread, and one that lands as the search stops makes the move late by that pause
        # (docs/RELIABILITY.md, "Time"). Those objects are freed by reference counting as the tree moves on; a cycle
        # among them waits for the next game (_new_game_heap). The freeze is process-wide and costs nothing.
        gc.freeze()
        self._frozen_moves = True
        if budget is not None:
            # Under load even a move at zero budget takes time; over a long absolute-time game that adds up.
            overrun = min(max(0.0, elapsed - budget), OVERHEAD_SAMPLE_CAP_S)
            self.move_overhead_s += OVERHEAD_SMOOTHING * (overrun - self.move_overhead_s)
        if move == RESIGN:
            self.result = f"{'W' if color == BLACK else 'B'}+Resign"
            return move
        self.play(color, move)
        return move

    def reg_genmove(self, color: int) -> int:
        """The move ``genmove`` would choose, without playing it or charging the clock."""
        return self._choose(color, cleanup=False, budget=self.budget_s(color))

    def _choose(self, color: int, cleanup: bool, budget: float | None, on_progress: Progress | None = None,
                progress_interval_s: float = 1.0) -> int:
        state = self.state.with_to_move(color)
        self.last_search = None
        if opponent_passed(state) and not cleanup and nearly_out_of_time(
                self.time_settings, self.clocks[color], self.time_config.lag_buffer_s, self.move_overhead_s,
                self.size):
            return PASS  # end the game on the board rather than play on into a loss on time
        # Time a byo-yomi period leaves unspent is lost: then the search runs to the end of its budget.
        spend_all = budget is not None and unspent_time_is_lost(self.time_settings, self.clocks[color])
        if cleanup:
            move = self.picker.pick_cleanup(state, budget, spend_all=spend_all)
        else:
            move = self.picker.pick(state, budget, on_progress, progress_interval_s, spend_all=spend_all)
        self.last_search = self.picker.last_search
        if cleanup and move in (PASS, RESIGN):
            move = playout.cleanup_move(state, color, self.picker.ownership(state), self.rng)
        if move not in (PASS, RESIGN) and not state.legal(move, color):
            raise RuntimeError(f"{self.picker.name} picked an illegal move "
                               f"{format_vertex(move, self.size)} for {color_name(color)}")
        return move

    # -- handicap ------------------------------------------------------------------------------------------------

    def _place_handicap(self, points: list[int]) -> None:
        if self.state.moves or self.state.setup:
            raise HandicapError("board not empty")
        state = GameState(self.size, self.rules)
        try:
            state.place_handicap(points)
        except (IllegalMoveError, ValueError) as error:
            raise HandicapError("bad vertex list", str(error)) from error
        self.state = state
        self.history = []
        self.loaded = None

    def fixed_handicap(self, count: int) -> list[int]:
        """The GTP spec's placement of ``count`` stones; HandicapError if there is none for this size."""
        if self.state.moves or self.state.setup:
            raise HandicapError("board not empty")
        try:
            points = handicap_points(self.size, count)
        except ValueError as error:
            raise HandicapError("invalid number of stones", str(error)) from error
        self._place_handicap(points)
        return points

    def free_handicap(self, count: int) -> list[int]:
        """The engine's choice of ``count`` handicap stones: the picker's (a network's: ``handicap_stones``);
        where it has none, the fixed placement where one exists, else points spread over the board that never
        touch each other (fewer when the board has no room, as GTP allows)."""
        if self.state.moves or self.state.setup:
            raise HandicapError("board not empty")
        if count < 2 or count > self.size * self.size - 1:
            raise HandicapError("invalid number of stones")
        points = self.picker.handicap_stones(self.state, count)
        if points is None:
            try:
                points = handicap_points(self.size, count)
            except ValueError:
                points = self._spread_points(count)
        if len(points) < 2:
            raise HandicapError("invalid number of stones", f"no room for {count} stones")
        self._place_handicap(points)
        return points

    def _spread_points(self, count: int) -> list[int]:
        size = self.size
        center = (size - 1) / 2
        # Points of one checkerboard colour, fourth-line-ish first (closest to a third of the way in), so that
        # no two stones touch and every stone keeps its liberties.
        target = max(0.0, center - (2 if size <= 12 else 3))
        candidates = [(abs(max(abs(x - center), abs(y - center)) - target), (x + y) % 4, y * size + x)
                      for y in range(size) for x in range(size) if (x + y) % 2 == 0]
        candidates.sort()
        return [point for _, _, point in candidates[:count]]

    def set_free_handicap(self, points: list[int]) -> None:
        if self.state.moves or self.state.setup:
            raise HandicapError("board not empty")
        if len(points) < 2 or len(points) > self.size * self.size - 1 or len(set(points)) != len(points):
            raise HandicapError("bad vertex list")
        self._place_handicap(points)

    # -- the end of the game -------------------------------------------------------------------------------------

    def dead_stones(self) -> list[int]:
        """Flat points of the stones judged dead in the current position (by the picker).

        Judged once per position: the judgement draws random playouts, and a GUI or server that asks
        ``final_status_list dead`` and then ``final_score`` must see the same stones in both (in 100 9x9 games
        against GNU Go, three had answers that did not fit each other when each drew its own)."""
        state = self.state
        key = (state.size, state.hash, len(state.moves), tuple(state.setup), state.rules)
        if self._dead_judged is None or self._dead_judged[0] != key:
            self._dead_judged = (key, self.picker.dead_stones(state))
        return list(self._dead_judged[1])

    def final_status(self, kind: str) -> list[list[int]]:
        """Strings (lists of flat points) whose status is ``kind``: alive, dead or seki. Dead stones are those
        the picker's ownership gives to the opponent; seki is judged in the position without them."""
        if kind not in ("alive", "dead", "seki"):
            raise ValueError(f"unknown status {kind!r}")
        state = self.state
        dead = set(self.dead_stones())
        seki = set(playout.seki_stones(state, sorted(dead))) - dead
        board = state.board
        geometry = board.geometry
        strings: list[list[int]] = []
        done: set[int] = set()
        for flat, pad in enumerate(geometry.padded):
            if board.color[pad] not in (BLACK, WHITE) or board.root[pad] in done:
                continue
            done.add(board.root[pad])
            status = "dead" if flat in dead else "seki" if flat in seki else "alive"
            if status == kind:
                strings.append(sorted(geometry.flat[p] for p in board.string_stones(pad)))
        return strings

    def final_score(self, remove_dead: bool = True) -> str:
        """The result of counting now (``B+3.5``, ``W+0.5``, ``0``) under the rules (``GameState.score``: area or
        territory, komi and handicap bonus), after removing the stones ``final_status`` calls dead; with the seki
        tax (territory scoring), the empty points of a seki count for nobody. A resignation, once recorded, is the
        result."""
        if self.result.endswith("Resign"):
            return self.result
        state = self.state
        dead = [p for string in self.final_status("dead") for p in string] if remove_dead else []
        return format_result(count_without(state, dead))

    # -- clocks --------------------------------------------------------------------------------------------------

    def set_time_settings(self, settings: TimeSettings) -> None:
        """New time settings; both clocks restart from them. Warns once (log ``tabula.play``) where the clock
        leaves almost no time to search a move."""
        self.time_settings = settings
        self.clocks = {BLACK: ClockState.start(settings), WHITE: ClockState.start(settings)}
        first = budget_s(settings, self.clocks[BLACK], 0, self.size, self.time_config.lag_buffer_s)
        if first is not None and first < SHORT_CLOCK_S and not self.warned_short_clock:
            self.warned_short_clock = True
            log.warning("the clock leaves about %.2f s to search a move: moves will be close to the network's first "
                        "choice", first)

    def time_left(self, color: int, seconds: float, stones: int) -> None:
        self.clocks[color].set_left(self.time_settings, seconds, stones)

    def budget_s(self, color: int) -> float | None:
        """Seconds the next move of ``color`` may take (None: no limit), capped by ``max_time_per_move_s``."""
        budget = budget_s(self.time_settings, self.clocks[color], len(self.state.moves), self.size,
                          self.time_config.lag_buffer_s, self.move_overhead_s)
        cap = self.time_config.max_time_per_move_s
        if cap > 0:
            budget = cap if budget is None else min(budget, cap)
        return budget

    # -- SGF -----------------------------------------------------------------------------------------------------

    def load_sgf(self, data: bytes, move_number: int | None = None) -> None:
        """Replace the game with an SGF file's main line (up to just before ``move_number``); komi and size come
        from the file. SgfError leaves the game as it was."""
        record = sgf.read_sgf(data)
        positions = sgf.replay(record, self.rules, move_number, snapshot_every=UNDO_SNAPSHOT_MOVES)
        state = positions[-1]
        self.rules = state.rules
        self._size = record.size
        self.state = state
        self.history = []
        self.loaded = _LoadedLine(positions[:-1], record.moves[:len(state.moves)], len(state.moves))
        self.result = ""
        self.black_name, self.white_name = record.black_name, record.white_name
        self.clocks = {BLACK: ClockState.start(self.time_settings), WHITE: ClockState.start(self.time_settings)}
        self._new_game_heap()

    def to_sgf(self) -> bytes:
        result = self.result
        if not result and self.state.is_game_over():
            result = self.final_score()
        return sgf.write_sgf(self.state, self.black_name, self.white_name, result)

    def showboard(self) -> str:
        return str(self.state)


__all__ = ["Player", "RandomGoPicker", "PICKERS", "CannotUndoError", "HandicapError"]

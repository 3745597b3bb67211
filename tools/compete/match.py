"""`tabula match`: games between GTP engines run as subprocesses, refereed by our own rules, saved as SGF, resumable,
and summarised as win rates and Elo.

Layer: tools (imports engine.rules.coords and engine.rules.game for the referee, tools.compete.gtp_client and tools.compete.elo). Every move is
replayed through ``GameState``, so an illegal move is caught by our rules as well as by the opponent's refusal. One
JSON line per finished game goes to ``results.jsonl`` (appended and fsynced), which is what a rerun of the same
command in the same ``--out`` directory reads to skip finished games.

Usage:
    tabula match --out runs/gg --games 10 --size 9 "gnugo --mode gtp --level 1" "gnugo --mode gtp --level 5"
    tabula match --out runs/rr --games 4 --size 9 --engines "A" "B" "C" --anchor 2=1500
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import signal
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from engine.rules.board import IllegalMoveError
from engine.rules.coords import BLACK, PASS, RESIGN, WHITE, CoordinateError, color_name, format_vertex, parse_vertex
from engine.play.timecontrol import ClockState, TimeSettings
from engine.rules.sgf import write_game
from engine.rules.game import POSITIONAL, SIMPLE_KO, SITUATIONAL, GameState, Rules, handicap_points
from tools.compete.elo import WinRate, fit_ratings
from tools.compete.gtp_client import EngineError, EngineTimeout, GtpEngine, GtpFailure, MalformedReply

RESULTS_FILE = "results.jsonl"
CONFIG_FILE = "config.json"

NO_TIME, ABSOLUTE, CANADIAN, BYOYOMI = "none", "absolute", "canadian", "byoyomi"
SCORING_METHODS = ("engines", "referee", "tromp-taylor")

# Fault kinds, one per way an engine can lose a game other than on the board.
ILLEGAL, CRASH, HANG, MALFORMED, REFUSED, TIME_LOSS = "illegal", "crash", "hang", "malformed", "refused", "time"
FAULT_KINDS = (ILLEGAL, CRASH, HANG, MALFORMED, REFUSED, TIME_LOSS)

# Settings that define what a game is: a rerun in the same directory must agree on all of these to resume.
IDENTITY_FIELDS = ("engines", "names", "size", "komi", "handicap", "handicap_mode", "max_moves", "time", "scoring",
                   "referee", "superko", "gauntlet", "fixed_colors")


@dataclass(frozen=True)
class TimeControl:
    """A clock for each side, as both engines are told it."""

    system: str = NO_TIME  # none | absolute | canadian | byoyomi (Japanese)
    main_s: float = 0.0  # main time
    period_s: float = 0.0  # canadian: time for `stones` moves; byoyomi: one period
    stones: int = 0  # canadian: moves per period
    periods: int = 0  # byoyomi: number of periods
    grace_s: float = 0.5  # overrun forgiven before a side loses on time (transport and process start-up)

    def __post_init__(self) -> None:
        if self.system not in (NO_TIME, ABSOLUTE, CANADIAN, BYOYOMI):
            raise ValueError(f"unknown time system {self.system!r}")
        if self.system == ABSOLUTE and self.main_s <= 0:
            raise ValueError("absolute time needs --main-time > 0")
        if self.system == CANADIAN and (self.period_s <= 0 or self.stones <= 0):
            raise ValueError("canadian time needs --period-time > 0 and --stones > 0")
        if self.system == BYOYOMI and (self.period_s <= 0 or self.periods <= 0):
            raise ValueError("byoyomi needs --period-time > 0 and --periods > 0")

    def settings(self) -> TimeSettings:
        """The same control as the engine's time settings (``engine.play.timecontrol``)."""
        if self.system == ABSOLUTE:
            return TimeSettings.absolute(self.main_s)
        if self.system == CANADIAN:
            return TimeSettings.canadian(self.main_s, self.period_s, self.stones)
        if self.system == BYOYOMI:
            return TimeSettings.byoyomi(self.main_s, self.period_s, self.periods)
        return TimeSettings.none()

    def sgf_overtime(self) -> str:
        if self.system == CANADIAN:
            return f"{self.stones}/{self.period_s:g} Canadian"
        if self.system == BYOYOMI:
            return f"{self.periods}x{self.period_s:g} byo-yomi"
        return ""


@dataclass(frozen=True)
class MatchConfig:
    """Everything a match needs; built only by ``main`` from argparse and saved as ``config.json``."""

    engines: tuple[str, ...]  # command lines, run without a shell
    out: str  # output directory: config.json, results.jsonl, games/*.sgf, logs/*.log
    names: tuple[str, ...] = ()  # labels for the summary; default: each engine's `name version`
    games: int = 2  # per pair of engines
    size: int = 9
    komi: float = 7.5
    handicap: int = 0  # 0 or 2..9 black stones
    handicap_mode: str = "fixed"  # fixed: fixed_handicap to both; free: black places, white is told
    max_moves: int = 0  # a game reaching this many moves (passes included) is scored as it stands; 0: 3 * size^2
    time: TimeControl = field(default_factory=TimeControl)
    move_timeout_s: float = 0.0  # a genmove without reply for this long is a hang; 0: 60 s, or the clock + grace
    command_timeout_s: float = 30.0  # any other command
    startup_timeout_s: float = 120.0  # first reply of a freshly started engine (loading weights)
    scoring: str = "engines"  # engines | referee | tromp-taylor
    referee: str = ""  # command line of a referee engine that replays each game and runs final_score
    engine_scores: bool = True  # ask both engines' final_score even when another method decides (for the record)
    superko: str = POSITIONAL  # our referee's ko rule: positional | situational | simple
    parallel: int = 1  # games at once, each worker owning its own engine processes
    gauntlet: bool = False  # with more than two engines: the first plays each other one, not a round robin
    fixed_colors: bool = False  # the first engine of each pair always takes black (e.g. for handicap games)
    anchor: str = ""  # INDEX=ELO or NAME=ELO: the engine whose rating is fixed in the table

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def move_limit(self) -> int:
        return self.max_moves or 3 * self.size * self.size


# -- clocks ---------------------------------------------------------------------------------------------------------


class Clock:
    """One side's clock, kept by the match (the referee), not by the engine: the engine's own clock
    (``engine.play.timecontrol.ClockState``, so that both count periods alike) with the referee's grace on top.
    Times in seconds of wall time."""

    def __init__(self, control: TimeControl):
        self.control = control
        self.settings = control.settings()
        self.state = ClockState.start(self.settings)

    @property
    def active(self) -> bool:
        return self.control.system != NO_TIME

    @property
    def overtime(self) -> bool:
        return self.state.in_overtime(self.settings)

    def limit_s(self) -> float:
        """How long the next move may take before the flag falls (grace not included)."""
        return self.state.limit_s(self.settings)

    def spend(self, elapsed_s: float) -> bool:
        """Charge one move; False when the side has run out of time (beyond the grace)."""
        self.state.charge(self.settings, elapsed_s, self.control.grace_s)
        return not self.state.flagged

    def time_left_args(self) -> tuple[int, int]:
        """GTP ``time_left`` arguments: whole seconds, and stones (Canadian) or periods (byo-yomi) left; 0 stones
        means main time."""
        return self.state.time_left_args(self.settings)

    def sgf_left(self) -> tuple[float, int | None]:
        """(time left, stones or periods left or None) for the SGF BL/WL and OB/OW properties."""
        state = self.state
        if not self.overtime:
            return max(state.main_left_s, 0.0), None
        if self.control.system == CANADIAN:
            return max(state.period_left_s, 0.0), state.stones_left
        return self.control.period_s, state.periods_left


# -- scoring --------------------------------------------------------------------------------------------------------

_SCORE = re.compile(r"([BW])\+(\d+(?:\.\d*)?)")


def parse_score(text: str | None) -> float | None:
    """A GTP final_score reply (``B+3.5``, ``W+2``, ``0``) as a score from black's view, or None."""
    if text is None:
        return None
    word = text.strip().split()[0].upper() if text.strip() else ""
    if word in ("0", "DRAW", "JIGO", "B+0", "W+0"):
        return 0.0
    match = _SCORE.fullmatch(word)
    if not match:
        return None
    value = float(match.group(2))
    return value if match.group(1) == "B" else -value


def score_result(score: float) -> str:
    if score > 0:
        return f"B+{score:g}"
    if score < 0:
        return f"W+{-score:g}"
    return "0"


def winner_of(score: float) -> str:
    return "B" if score > 0 else "W" if score < 0 else "draw"


# -- engines owned by one worker ------------------------------------------------------------------------------------


class EnginePool:
    """The engine processes of one worker: started on first use, restarted after a crash, hang or bad reply.

    Only the owning worker thread calls ``get``; ``kill_all`` may be called from the main thread to interrupt.
    """

    def __init__(self, config: MatchConfig, worker: int, log_dir: Path):
        self.config = config
        self.worker = worker
        self.log_dir = log_dir
        self.engines: dict[int | str, GtpEngine] = {}
        self.identities: dict[int | str, str] = {}
        self.starts: dict[int | str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def command(self, key: int | str) -> str:
        return self.config.referee if key == "referee" else self.config.engines[key]

    def get(self, key: int | str) -> GtpEngine:
        """A working engine for ``key`` (an engine index or "referee"). Raises EngineError if it cannot start."""
        engine = self.engines.get(key)
        if engine is not None and (engine.broken or not engine.alive()):
            engine.close(quit_timeout_s=0.5)
            engine = None
        if engine is None:
            name = f"referee-w{self.worker}" if key == "referee" else f"engine{key}-w{self.worker}"
            engine = GtpEngine(self.command(key), label=name, stderr_path=self.log_dir / f"{name}.log",
                               startup_timeout_s=self.config.startup_timeout_s)
            with self._lock:
                self.engines[key] = engine
            self.starts[key] += 1
            try:
                self.identities[key] = engine.identity()
            except EngineError:
                engine.close(quit_timeout_s=0.5)
                raise
        return engine

    def close_all(self) -> None:
        with self._lock:
            engines = list(self.engines.values())
            self.engines.clear()
        for engine in engines:
            engine.close()

    def kill_all(self) -> None:
        with self._lock:
            engines = list(self.engines.values())
        for engine in engines:
            engine.kill()


# -- one game -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GameSpec:
    """One scheduled game: engines by index, and its place in the schedule."""

    game_id: str
    pair: tuple[int, int]
    round: int
    black: int
    white: int


class GameOver(Exception):
    """Ends a game early: ``winner`` is "B", "W" or None (void), ``result`` the SGF RE text."""

    def __init__(self, winner: str | None, result: str, reason: str, fault: dict | None = None):
        super().__init__(reason)
        self.winner = winner
        self.result = result
        self.reason = reason
        self.fault = fault


class Game:
    """Plays one game between two engines of a pool and returns its record (a JSON-able dict)."""

    def __init__(self, config: MatchConfig, spec: GameSpec, pool: EnginePool, stop: threading.Event):
        self.config = config
        self.spec = spec
        self.pool = pool
        self.stop = stop
        self.state = GameState(config.size, Rules(komi=config.komi, superko=config.superko))
        self.clocks = {BLACK: Clock(config.time), WHITE: Clock(config.time)}
        self.engines: dict[int, GtpEngine] = {}
        # per move: (colour, move, seconds, clock left or None, stones/periods left or None)
        self.log: list[tuple[int, int, float, float | None, int | None]] = []
        self.handicap_stones: list[int] = []
        self.scores: dict[str, float | str | None] = {}
        self.notes: list[str] = []

    def index(self, color: int) -> int:
        return self.spec.black if color == BLACK else self.spec.white

    def side(self, color: int) -> str:
        return "B" if color == BLACK else "W"

    def forfeit(self, color: int, kind: str, detail: str) -> GameOver:
        """The side ``color`` loses by ``kind``; ``B+T``/``W+T`` on time, ``+F`` otherwise."""
        winner = self.side(3 - color)
        letter = "T" if kind == TIME_LOSS else "F"
        fault = {"engine": self.index(color), "color": color_name(color), "kind": kind, "detail": detail}
        return GameOver(winner, f"{winner}+{letter}", f"{color_name(color)} {kind}: {detail}", fault)

    def fault_from(self, color: int, error: Exception, doing: str) -> GameOver:
        if isinstance(error, EngineTimeout):
            return self.forfeit(color, HANG, f"no reply to {doing} in {error.elapsed_s:.1f} s")
        if isinstance(error, GtpFailure):
            return self.forfeit(color, REFUSED, f"{doing}: ? {error.text}")
        kind = MALFORMED if isinstance(error, MalformedReply) else CRASH
        return self.forfeit(color, kind, f"{doing}: {error}")

    def send(self, color: int, command: str, timeout_s: float | None = None) -> str:
        """Send to one side; any failure (a refusal included) forfeits that side."""
        try:
            return self.engines[color].send(command, timeout_s or self.config.command_timeout_s)
        except (EngineError, GtpFailure) as error:
            raise self.fault_from(color, error, command) from error

    def play(self) -> dict:
        started = time.time()
        try:
            self.start_engines()
            self.setup()
            self.play_moves()
            winner, result, reason, fault = self.count()
        except GameOver as over:
            winner, result, reason, fault = over.winner, over.result, over.reason, over.fault
        return self.record(winner, result, reason, fault, time.time() - started)

    def start_engines(self) -> None:
        for color in (BLACK, WHITE):
            try:
                self.engines[color] = self.pool.get(self.index(color))
            except EngineError as error:
                raise self.forfeit(color, CRASH, f"cannot start: {error}") from error

    def setup(self) -> None:
        config = self.config
        for color in (BLACK, WHITE):
            self.send(color, f"boardsize {config.size}")
            self.send(color, "clear_board")
            self.send(color, f"komi {config.komi:g}")
        if config.handicap >= 2:
            self.place_handicap()
        if config.time.system != NO_TIME:
            for color in (BLACK, WHITE):
                self.send_time_settings(color)

    def place_handicap(self) -> None:
        config = self.config
        count = config.handicap
        if config.handicap_mode == "free":
            vertices = self.send(BLACK, f"place_free_handicap {count}").split()
            try:
                points = [parse_vertex(v, config.size) for v in vertices]
                self.state.place_handicap(points)
            except (CoordinateError, ValueError) as error:
                raise self.forfeit(BLACK, MALFORMED, f"place_free_handicap gave {vertices}: {error}") from error
            self.send(WHITE, "set_free_handicap " + " ".join(vertices))
        else:
            points = handicap_points(config.size, count)
            self.state.place_handicap(points)
            for color in (BLACK, WHITE):
                reply = None
                try:
                    reply = self.engines[color].send(f"fixed_handicap {count}", config.command_timeout_s)
                except GtpFailure:
                    pass
                except EngineError as error:
                    raise self.fault_from(color, error, "fixed_handicap") from error
                placed = set()
                if reply is not None:
                    try:
                        placed = {parse_vertex(v, config.size) for v in reply.split()}
                    except CoordinateError:
                        placed = set()
                if placed != set(points):
                    # The engine has no fixed placement of its own (or a different one): tell it ours.
                    self.notes.append(f"{color_name(color)}: fixed_handicap gave {reply!r}; sent set_free_handicap")
                    self.send(color, "clear_board")
                    self.send(color, "set_free_handicap " + " ".join(format_vertex(p, config.size) for p in points))
        self.handicap_stones = list(points)

    def send_time_settings(self, color: int) -> None:
        control = self.config.time
        engine = self.engines[color]
        if control.system == ABSOLUTE:
            self.send(color, f"time_settings {control.main_s:.0f} 0 0")
        elif control.system == CANADIAN:
            self.send(color, f"time_settings {control.main_s:.0f} {control.period_s:.0f} {control.stones}")
        elif control.system == BYOYOMI:
            try:
                known = engine.known_command("kgs-time_settings", self.config.command_timeout_s)
            except EngineError as error:
                raise self.fault_from(color, error, "known_command kgs-time_settings") from error
            if known:
                self.send(color, f"kgs-time_settings byoyomi {control.main_s:.0f} {control.period_s:.0f} "
                                 f"{control.periods}")
            else:
                # Plain GTP has no Japanese byo-yomi; one stone per period is the same clock for a single period,
                # and a safe under-statement for several.
                self.send(color, f"time_settings {control.main_s:.0f} {control.period_s:.0f} 1")

    def play_moves(self) -> None:
        config = self.config
        size = config.size
        while not self.state.is_game_over():
            if self.stop.is_set():
                raise GameOver(None, "Void", "match interrupted")
            if len(self.state.moves) >= config.move_limit:
                self.notes.append(f"move limit {config.move_limit} reached")
                return
            color = self.state.to_move
            clock = self.clocks[color]
            if clock.active:
                seconds, stones = clock.time_left_args()
                try:
                    self.engines[color].send(f"time_left {color_name(color)} {seconds} {stones}",
                                             config.command_timeout_s)
                except GtpFailure:
                    pass  # an engine without time_left still plays; it just does not know its clock
                except EngineError as error:
                    raise self.fault_from(color, error, "time_left") from error
            limit_s = clock.limit_s() + config.time.grace_s if clock.active else math.inf
            timeout_s = min(config.move_timeout_s or (math.inf if clock.active else 60.0), limit_s)
            command = f"genmove {color_name(color)}"
            started = time.monotonic()
            try:
                reply = self.engines[color].send(command, timeout_s)
            except EngineTimeout as error:
                if clock.active and error.elapsed_s >= limit_s:
                    clock.spend(error.elapsed_s)
                    raise self.forfeit(color, TIME_LOSS, f"no move after {error.elapsed_s:.1f} s, "
                                                         f"clock had {limit_s - config.time.grace_s:.1f} s") from error
                raise self.fault_from(color, error, command) from error
            except (EngineError, GtpFailure) as error:
                raise self.fault_from(color, error, command) from error
            elapsed_s = time.monotonic() - started
            allowed_s = clock.limit_s()
            if not clock.spend(elapsed_s):
                raise self.forfeit(color, TIME_LOSS, f"move took {elapsed_s:.2f} s, clock had {allowed_s:.2f} s")
            word = reply.split()[0] if reply.split() else ""
            try:
                move = parse_vertex(word, size)
            except CoordinateError as error:
                raise self.forfeit(color, MALFORMED, f"genmove replied {reply!r}") from error
            if move == RESIGN:
                self.log_move(color, RESIGN, elapsed_s)
                winner = self.side(3 - color)
                raise GameOver(winner, f"{winner}+R", f"{color_name(color)} resigned")
            self.referee_move(color, move, word)
            self.log_move(color, move, elapsed_s)

    def referee_move(self, color: int, move: int, word: str) -> None:
        """Our rules and the opponent's must both accept the move; an illegal one forfeits the mover."""
        vertex = format_vertex(move, self.config.size)
        try:
            self.state.play(move, color)
            ours = ""
        except IllegalMoveError as error:
            ours = error.reason
        opponent = 3 - color
        theirs = ""
        try:
            self.engines[opponent].send(f"play {color_name(color)} {vertex}", self.config.command_timeout_s)
        except GtpFailure as error:
            theirs = error.text or "refused"
        except EngineError as error:
            if ours:
                theirs = f"(then failed: {error})"
            else:
                raise self.fault_from(opponent, error, f"play {color_name(color)} {vertex}") from error
        if ours:
            opinion = f"opponent also refused it ({theirs})" if theirs else "opponent accepted it"
            raise self.forfeit(color, ILLEGAL, f"{vertex} is illegal ({ours}); {opinion}")
        if theirs:
            # Our rules accept it and the opponent does not: one of the two engines disagrees with the rules we
            # referee by, and we cannot tell which one the match should punish.
            self.notes.append(f"disagreement: the opponent refused {vertex} ({theirs}), which our rules accept")
            raise GameOver(None, "Void", f"{color_name(opponent)} refused {color_name(color)}'s legal move "
                                         f"{vertex}: {theirs}")

    def log_move(self, color: int, move: int, elapsed_s: float) -> None:
        clock = self.clocks[color]
        left, stones = clock.sgf_left() if clock.active else (None, None)
        self.log.append((color, move, elapsed_s, left, stones))

    def count(self) -> tuple[str | None, str, str, dict | None]:
        """Score a finished (or move-limited) game by the configured method; record every scorer's opinion."""
        config = self.config
        ours = self.state.area_score()
        self.scores["tromp_taylor"] = ours
        for color, key in ((BLACK, "black_engine"), (WHITE, "white_engine")):
            if not config.engine_scores and config.scoring != "engines":
                continue
            try:
                text = self.engines[color].send("final_score", config.command_timeout_s)
            except GtpFailure as error:
                text = None
                self.notes.append(f"{color_name(color)} final_score: ? {error.text}")
            except EngineError as error:
                text = None
                self.notes.append(f"{color_name(color)} final_score failed: {error}")
            self.scores[key] = text
        if config.referee:
            self.scores["referee"] = self.referee_score()
        opinions = {key: parse_score(value) if isinstance(value, str) or value is None else value
                    for key, value in self.scores.items()}
        # Our raw count leaves dead stones on the board, so it is only a voice here when it is the chosen method.
        voices = [key for key in opinions if key != "tromp_taylor" or config.scoring == "tromp-taylor"]
        winners = {winner_of(opinions[key]) for key in voices if opinions[key] is not None}
        if len(winners) > 1:
            self.notes.append("scorers disagree: " + ", ".join(f"{k}={v}" for k, v in self.scores.items()))
        method, score = self.choose_score(opinions)
        ended = "two passes" if self.state.is_game_over() else f"move limit {config.move_limit}"
        winner = winner_of(score)
        return (None if winner == "draw" else winner), score_result(score), f"{ended}; scored by {method}", None

    def choose_score(self, opinions: dict[str, float | None]) -> tuple[str, float]:
        method = self.config.scoring
        black, white = opinions.get("black_engine"), opinions.get("white_engine")
        referee = opinions.get("referee")
        if method == "engines":
            if black is not None and white is not None and winner_of(black) == winner_of(white):
                return "engines", black
            if referee is not None:
                return "referee (engines disagree)", referee
            return "tromp-taylor (engines disagree)", opinions["tromp_taylor"]
        if method == "referee" and referee is not None:
            return "referee", referee
        if method == "referee":
            return "tromp-taylor (referee failed)", opinions["tromp_taylor"]
        return "tromp-taylor", opinions["tromp_taylor"]

    def referee_score(self) -> str | None:
        config = self.config
        size = config.size
        try:
            referee = self.pool.get("referee")
            for command in (f"boardsize {size}", "clear_board", f"komi {config.komi:g}"):
                referee.send(command, config.command_timeout_s)
            if self.handicap_stones:
                referee.send("set_free_handicap " + " ".join(format_vertex(p, size) for p in self.handicap_stones),
                             config.command_timeout_s)
            for color, move in self.state.moves:
                referee.send(f"play {color_name(color)} {format_vertex(move, size)}", config.command_timeout_s)
            return referee.send("final_score", max(config.command_timeout_s, 60.0))
        except (EngineError, GtpFailure) as error:
            self.notes.append(f"referee failed: {error}")
            return None

    def record(self, winner: str | None, result: str, reason: str, fault: dict | None, duration_s: float) -> dict:
        spec = self.spec
        times: dict[str, list[float]] = {"black": [], "white": []}
        for color, _move, seconds, _left, _stones in self.log:
            times[color_name(color)].append(seconds)
        identities = {color_name(c): self.pool.identities.get(self.index(c), "") for c in (BLACK, WHITE)}
        engines = {color_name(c): self.engines.get(c) for c in (BLACK, WHITE)}
        return {
            "game": spec.game_id, "pair": list(spec.pair), "round": spec.round,
            "black": spec.black, "white": spec.white,
            "black_name": identities["black"], "white_name": identities["white"],
            "winner": winner, "result": result, "reason": reason, "fault": fault,
            "moves": len(self.state.moves), "handicap": len(self.handicap_stones),
            "scores": self.scores, "disagreement": any(n.startswith(("disagreement", "scorers disagree"))
                                                     for n in self.notes),
            "notes": self.notes,
            "time_s": {side: round(sum(values), 4) for side, values in times.items()},
            "timed_moves": {side: len(values) for side, values in times.items()},
            "max_move_s": {side: round(max(values, default=0.0), 4) for side, values in times.items()},
            "duration_s": round(duration_s, 3),
            # per side: the engine's pid and resident memory (MiB) at the end of the game, to watch for leaks
            "pid": {side: engine.process.pid if engine else None for side, engine in engines.items()},
            "memory_mb": {side: engine.memory_mb() if engine else None for side, engine in engines.items()},
            "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "sgf": f"games/{spec.game_id}.sgf",
        }

    def sgf_bytes(self, record: dict) -> bytes:
        config = self.config
        root: dict[str, object] = {
            "PB": record["black_name"] or f"engine {record['black']}",
            "PW": record["white_name"] or f"engine {record['white']}",
            "RE": record["result"], "GN": record["game"], "DT": datetime.now().strftime("%Y-%m-%d"),
            "C": f"engine {record['black']} (black): {config.engines[record['black']]}\n"
                 f"engine {record['white']} (white): {config.engines[record['white']]}"}
        if config.time.system != NO_TIME:
            root["TM"] = config.time.main_s
            if config.time.sgf_overtime():
                root["OT"] = config.time.sgf_overtime()
        moves, per_move, notes = [], [], []
        for color, move, seconds, left, stones in self.log:
            if move == RESIGN:
                notes.append(f"{color_name(color)} resigns after {seconds:.2f} s")
                break
            side = "B" if color == BLACK else "W"
            properties: dict[str, object] = {}
            if left is not None:
                properties[side + "L"] = round(left, 3)
                if stones is not None:
                    properties["O" + side] = stones
            properties["C"] = f"{seconds:.3f} s"
            moves.append((color, move))
            per_move.append(properties)
        ending = f"Result {record['result']}: {record['reason']}"
        if record["scores"]:
            ending += "\nscores: " + ", ".join(f"{k} {v}" for k, v in record["scores"].items())
        if record["notes"]:
            ending += "\n" + "\n".join(record["notes"])
        notes.append(ending)
        setup = [(BLACK, p) for p in self.handicap_stones]
        return write_game(config.size, moves, config.komi, config.superko, setup=setup,
                          handicap=len(self.handicap_stones), root=root, per_move=per_move,
                          final_comment="\n".join(notes), application=("tabula-match", "1"))


# -- the match ------------------------------------------------------------------------------------------------------


def schedule(config: MatchConfig) -> list[GameSpec]:
    """Every game of the match, in order: pairs (round robin, or the first engine against each other in a
    gauntlet), ``games`` per pair, colours alternating unless fixed."""
    count = len(config.engines)
    if config.gauntlet:
        pairs = [(0, j) for j in range(1, count)]
    else:
        pairs = [(i, j) for i in range(count) for j in range(i + 1, count)]
    specs = []
    for round_ in range(config.games):
        for i, j in pairs:
            black, white = (i, j) if config.fixed_colors or round_ % 2 == 0 else (j, i)
            specs.append(GameSpec(f"{i}-{j}-{round_:04d}", (i, j), round_, black, white))
    return specs


def read_results(path: Path) -> list[dict]:
    """The finished games in a results file; a torn last line (the runner was killed mid-write) is ignored, and a
    game recorded twice keeps its last record."""
    if not path.exists():
        return []
    by_game: dict[str, dict] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "game" in record:
            by_game[record["game"]] = record
    return list(by_game.values())


class ResultsWriter:
    """Appends one JSON line per game and fsyncs it, so that a finished game survives a crash of the runner."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        if path.exists() and path.stat().st_size:
            with open(path, "rb") as existing:
                existing.seek(-1, os.SEEK_END)
                torn = existing.read(1) != b"\n"
            if torn:  # start on a fresh line after a torn write
                with open(path, "ab") as handle:
                    handle.write(b"\n")

    def append(self, record: dict) -> None:
        line = json.dumps(record, sort_keys=True) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def probe_names(config: MatchConfig, log_dir: Path) -> tuple[str, ...]:
    """Start each engine once and ask its name and version; labels that collide get their index appended.

    Raises EngineError when an engine cannot start: better to stop before the match than forfeit every game.
    """
    names = []
    for index, command in enumerate(config.engines):
        with GtpEngine(command, label=f"probe{index}", stderr_path=log_dir / f"probe{index}.log",
                       startup_timeout_s=config.startup_timeout_s) as engine:
            names.append(engine.identity())
    return tuple(f"{name} [{i}]" if names.count(name) > 1 else name for i, name in enumerate(names))


def run_match(config: MatchConfig, progress: Callable[[str], None] = print) -> list[dict]:
    """Play every game of the schedule not yet in the results file; returns all records (old and new)."""
    out = Path(config.out)
    log_dir = out / "logs"
    results_path = out / RESULTS_FILE
    done = {record["game"] for record in read_results(results_path)}
    pending = [spec for spec in schedule(config) if spec.game_id not in done]
    if done:
        progress(f"resuming: {len(done)} games already played, {len(pending)} to play")
    writer = ResultsWriter(results_path)
    stop = threading.Event()
    lock = threading.Lock()
    queue_ = list(reversed(pending))
    pools = [EnginePool(config, worker, log_dir) for worker in range(max(1, min(config.parallel, len(pending))))]
    errors: list[BaseException] = []
    finished = [0]

    def next_spec() -> GameSpec | None:
        with lock:
            return queue_.pop() if queue_ and not stop.is_set() else None

    def work(pool: EnginePool) -> None:
        try:
            while (spec := next_spec()) is not None:
                game = Game(config, spec, pool, stop)
                record = game.play()
                if stop.is_set():
                    return  # the game was cut short by the interrupt, not by the engines: do not record it
                write_atomic(out / record["sgf"], game.sgf_bytes(record))
                writer.append(record)
                with lock:
                    finished[0] += 1
                    count = finished[0]
                progress(f"[{count}/{len(pending)}] {spec.game_id}: {config_name(config, spec.black)} (B) vs "
                         f"{config_name(config, spec.white)} (W) {record['result']} ({record['reason']}, "
                         f"{record['moves']} moves)")
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)
            stop.set()
        finally:
            pool.close_all()

    threads = [threading.Thread(target=work, args=(pool,), name=f"match-worker-{pool.worker}", daemon=True)
               for pool in pools]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=0.2)
    except KeyboardInterrupt:
        stop.set()
        for pool in pools:
            pool.kill_all()
        for thread in threads:
            thread.join(timeout=10)
        raise
    if errors:
        raise errors[0]
    return read_results(results_path)


def config_name(config: MatchConfig, index: int) -> str:
    return config.names[index] if index < len(config.names) else f"engine {index}"


# -- the summary ----------------------------------------------------------------------------------------------------


def summarise(config: MatchConfig, records: Sequence[dict]) -> str:
    """Text summary: per pair, wins and losses by colour, the win rate and Elo with 95% intervals; per engine,
    faults and mean time per move; with more than two engines, a fitted rating table."""
    lines = []
    count = len(config.engines)
    name = lambda index: config_name(config, index)  # noqa: E731
    by_pair: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for record in records:
        by_pair[tuple(record["pair"])].append(record)
    lines.append(f"{len(records)} games, {config.size}x{config.size}, komi {config.komi:g}"
                 + (f", handicap {config.handicap}" if config.handicap else "")
                 + (f", {config.time.system} time" if config.time.system != NO_TIME else "")
                 + f", scoring: {config.scoring}")
    lines += [f"  engine {index}: {name(index)} <- {command}" for index, command in enumerate(config.engines)]
    for (i, j), games in sorted(by_pair.items()):
        stats = pair_stats(i, games)
        lines.append(f"\n{name(i)} vs {name(j)}")
        lines.append(f"  {name(i)} as black: {stats['black_wins']} wins, {stats['black_losses']} losses; "
                     f"as white: {stats['white_wins']} wins, {stats['white_losses']} losses"
                     + (f"; draws {stats['draws']}" if stats["draws"] else ""))
        if stats["void"]:
            lines.append(f"  void (no result): {stats['void']}")
        rate = WinRate(stats["black_wins"] + stats["white_wins"], stats["black_losses"] + stats["white_losses"],
                       stats["draws"])
        lines.append(f"  {name(i)}: {rate.describe()}")
        lines.append(f"  black won {stats['black_side_wins']} of {stats['decided']} decided games")
        if stats["disagreements"]:
            lines.append(f"  scoring or legality disagreements: {stats['disagreements']}")
    lines.append("")
    lines.append(engine_table(config, records))
    if count > 2:
        results = [(r["pair"][0], r["pair"][1], pair_score(r["pair"][0], r)) for r in records]
        results = [(i, j, s) for i, j, s in results if s is not None]
        anchor, anchor_elo = parse_anchor(config.anchor, config.names)
        try:
            ratings = fit_ratings([name(k) for k in range(count)], results, anchor=anchor,
                                  anchor_elo=anchor_elo)
            lines.append("\nratings (maximum likelihood, 2 virtual draws per pair"
                         + (f", {name(anchor)} fixed at {anchor_elo:g}" if anchor is not None else "") + ")")
            lines.append(ratings.table())
        except ValueError as error:
            lines.append(f"\nno rating table: {error}")
    return "\n".join(lines)


def pair_score(first: int, record: dict) -> float | None:
    """The first engine of the pair's score in one game: 1, 0.5, 0, or None for a void game."""
    winner = record["winner"]
    if winner is None:
        return 0.5 if record["result"] == "0" else None
    first_color = "B" if record["black"] == first else "W"
    return 1.0 if winner == first_color else 0.0


def pair_stats(first: int, games: Sequence[dict]) -> dict[str, int]:
    stats = dict.fromkeys(("black_wins", "black_losses", "white_wins", "white_losses", "draws", "void",
                           "disagreements", "black_side_wins", "decided"), 0)
    for record in games:
        score = pair_score(first, record)
        colour = "black" if record["black"] == first else "white"
        stats["disagreements"] += bool(record.get("disagreement"))
        if score is None:
            stats["void"] += 1
        elif score == 0.5:
            stats["draws"] += 1
        else:
            stats[f"{colour}_{'wins' if score == 1.0 else 'losses'}"] += 1
            stats["decided"] += 1
            stats["black_side_wins"] += record["winner"] == "B"
    return stats


def engine_table(config: MatchConfig, records: Sequence[dict]) -> str:
    """Per engine: games, faults by kind, resignations and mean wall time per move."""
    count = len(config.engines)
    games = [0] * count
    seconds = [0.0] * count
    moves = [0] * count
    slowest = [0.0] * count
    faults = [defaultdict(int) for _ in range(count)]
    resigns = [0] * count
    for record in records:
        for side in ("black", "white"):
            index = record[side]
            games[index] += 1
            seconds[index] += record["time_s"][side]
            moves[index] += record["timed_moves"][side]
            slowest[index] = max(slowest[index], record["max_move_s"][side])
        if record.get("fault"):
            faults[record["fault"]["engine"]][record["fault"]["kind"]] += 1
        if record["result"].endswith("+R"):
            resigns[record["white"] if record["winner"] == "B" else record["black"]] += 1
    width = max([len(config_name(config, i)) for i in range(count)] + [6])
    head = f"{'engine':<{width}}  {'games':>5}  " + "  ".join(f"{k:>9}" for k in FAULT_KINDS)
    lines = [head + f"  {'resigned':>8}  {'ms/move':>8}  {'max s':>6}"]
    for index in range(count):
        mean_ms = 1000 * seconds[index] / moves[index] if moves[index] else 0.0
        lines.append(f"{config_name(config, index):<{width}}  {games[index]:>5}  "
                     + "  ".join(f"{faults[index][k]:>9}" for k in FAULT_KINDS)
                     + f"  {resigns[index]:>8}  {mean_ms:>8.1f}  {slowest[index]:>6.2f}")
    return "\n".join(lines)


def parse_anchor(text: str, names: Sequence[str]) -> tuple[int | None, float]:
    """``INDEX=ELO`` or ``NAME=ELO`` (a name as shown in the summary) to (index, rating)."""
    if not text:
        return None, 0.0
    key, _, value = text.rpartition("=")
    if not key:
        raise ValueError(f"--anchor {text!r}: expected INDEX=ELO or NAME=ELO")
    if key.isdigit():
        return int(key), float(value)
    if key in names:
        return list(names).index(key), float(value)
    raise ValueError(f"--anchor {text!r}: no engine named {key!r} (engines: {', '.join(names)})")


# -- command line ---------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tabula match", description="Play games between GTP engines, save them as SGF and rate the engines.",
        epilog='example: tabula match --out runs/gg --size 9 --games 10 "gnugo --mode gtp --level 1" '
               '"gnugo --mode gtp --level 5"')
    parser.add_argument("commands", nargs="*", metavar="ENGINE", help="engine command lines (quote each one)")
    parser.add_argument("--engines", nargs="+", default=[], metavar="ENGINE", help="more engine command lines")
    parser.add_argument("--names", nargs="+", default=[], help="labels for the engines, in order")
    parser.add_argument("--out", required=True, help="output directory; rerun the same command there to resume")
    parser.add_argument("--games", type=int, default=2, help="games per pair of engines (default 2)")
    parser.add_argument("--size", type=int, default=9, help="board size (default 9)")
    parser.add_argument("--komi", type=float, default=7.5)
    parser.add_argument("--handicap", type=int, default=0, help="black handicap stones, 2..9 (default none)")
    parser.add_argument("--handicap-mode", choices=("fixed", "free"), default="fixed",
                        help="fixed: fixed_handicap to both engines (set_free_handicap where an engine has no such "
                             "placement); free: black chooses with place_free_handicap")
    parser.add_argument("--max-moves", type=int, default=0,
                        help="score a game as it stands after this many moves (default 3 * size^2)")
    parser.add_argument("--time-system", choices=(NO_TIME, ABSOLUTE, CANADIAN, BYOYOMI), default=NO_TIME)
    parser.add_argument("--main-time", type=float, default=0.0, help="main time per side, seconds")
    parser.add_argument("--period-time", type=float, default=0.0, help="canadian or byoyomi period, seconds")
    parser.add_argument("--stones", type=int, default=0, help="canadian: moves per period")
    parser.add_argument("--periods", type=int, default=0, help="byoyomi: number of periods")
    parser.add_argument("--grace", type=float, default=0.5, help="overrun forgiven before a loss on time, seconds")
    parser.add_argument("--move-timeout", type=float, default=0.0,
                        help="seconds without a reply to genmove that count as a hang (default: 60 s without a "
                             "clock, the clock plus the grace with one)")
    parser.add_argument("--command-timeout", type=float, default=30.0, help="seconds for any other command")
    parser.add_argument("--startup-timeout", type=float, default=120.0,
                        help="seconds for a new engine's first reply")
    parser.add_argument("--scoring", choices=SCORING_METHODS, default=None,
                        help="engines: both final_score replies when they agree (else the referee, else ours); "
                             "referee: the --referee engine; tromp-taylor: our count (default: referee if given, "
                             "else engines)")
    parser.add_argument("--referee", default="", help='referee engine, e.g. "gnugo --mode gtp --chinese-rules"')
    parser.add_argument("--engine-scores", action=argparse.BooleanOptionalAction, default=True,
                        help="ask both engines' final_score even where --scoring is not engines, to record "
                             "disagreements (GNU Go's can take seconds on an unfinished game)")
    parser.add_argument("--superko", choices=(POSITIONAL, SITUATIONAL, SIMPLE_KO), default=POSITIONAL,
                        help="the ko rule our referee enforces (simple: as GNU Go plays)")
    parser.add_argument("--parallel", type=int, default=1, help="games played at once")
    parser.add_argument("--gauntlet", action="store_true", help="the first engine plays each other one")
    parser.add_argument("--fixed-colors", action="store_true", help="the first engine of each pair always has black")
    parser.add_argument("--anchor", default="", help="INDEX=ELO or NAME=ELO: fix one engine's rating in the table")
    parser.add_argument("--summary", action="store_true", help="print the summary of --out and play nothing")
    return parser


def config_from_args(args: argparse.Namespace) -> MatchConfig:
    engines = tuple(args.commands) + tuple(args.engines)
    time_control = TimeControl(args.time_system, args.main_time, args.period_time, args.stones, args.periods,
                               args.grace)
    if args.handicap == 1 or not 0 <= args.handicap <= 9:
        raise ValueError("--handicap must be 0 or 2..9")
    if args.handicap and args.handicap_mode == "fixed":
        handicap_points(args.size, args.handicap)  # raises where the GTP spec has no placement for this size
    if args.names and len(args.names) != len(engines):
        raise ValueError(f"{len(args.names)} names for {len(engines)} engines")
    scoring = args.scoring or ("referee" if args.referee else "engines")
    if scoring == "referee" and not args.referee:
        raise ValueError("--scoring referee needs --referee")
    return MatchConfig(engines=engines, out=args.out, names=tuple(args.names), games=args.games, size=args.size,
                       komi=args.komi, handicap=args.handicap, handicap_mode=args.handicap_mode,
                       max_moves=args.max_moves, time=time_control, move_timeout_s=args.move_timeout,
                       command_timeout_s=args.command_timeout, startup_timeout_s=args.startup_timeout,
                       scoring=scoring, referee=args.referee, engine_scores=args.engine_scores, superko=args.superko,
                       parallel=args.parallel, gauntlet=args.gauntlet, fixed_colors=args.fixed_colors, anchor=args.anchor)


def load_config(path: Path) -> MatchConfig:
    data = json.loads(path.read_text(encoding="utf-8"))
    data["time"] = TimeControl(**data["time"])
    for key in ("engines", "names"):
        data[key] = tuple(data[key])
    return MatchConfig(**data)


def check_resumable(saved: MatchConfig, wanted: MatchConfig) -> None:
    """A rerun may change the number of games, the parallelism, timeouts and the anchor, nothing else."""
    old, new = saved.to_dict(), wanted.to_dict()
    if not wanted.names:
        new["names"] = old["names"]
    changed = [key for key in IDENTITY_FIELDS if old[key] != new[key]]
    if changed:
        raise ValueError(f"{saved.out} holds a different match (changed: {', '.join(changed)}); "
                         "use another --out directory")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = Path(args.out)
    config_path = out / CONFIG_FILE
    if args.summary:
        if not config_path.exists():
            parser.error(f"no {CONFIG_FILE} in {out}")
        saved = load_config(config_path)
        print(summarise(saved, read_results(out / RESULTS_FILE)))
        return 0
    try:
        config = config_from_args(args)
        if len(config.engines) < 2:
            parser.error("give at least two engine command lines")
        if config_path.exists():
            saved = load_config(config_path)
            check_resumable(saved, config)
            config = dataclasses.replace(config, names=saved.names)
    except ValueError as error:
        parser.error(str(error))
    out.mkdir(parents=True, exist_ok=True)
    if not config.names:
        try:
            config = dataclasses.replace(config, names=probe_names(config, out / "logs"))
        except EngineError as error:
            print(f"tabula match: {error}", file=sys.stderr)
            return 1
    try:
        parse_anchor(config.anchor, config.names)
    except ValueError as error:
        parser.error(str(error))
    write_atomic(config_path, (json.dumps(config.to_dict(), indent=2) + "\n").encode())

    def terminate(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        records = run_match(config, progress=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("\ninterrupted: finished games are saved; rerun the same command to resume", file=sys.stderr)
        records = read_results(out / RESULTS_FILE)
        print(summarise(config, records))
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    print()
    print(summarise(config, records))
    return 0


if __name__ == "__main__":
    sys.exit(main())

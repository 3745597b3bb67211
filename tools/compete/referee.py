"""One game of `tabula match`, refereed: the clocks (engine.play.timecontrol's, with the referee's grace), the
engines a worker owns, every move replayed through GameState, the scoring and the game's SGF."""
from __future__ import annotations

import hashlib
import math
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from tabula.engine.play.timecontrol import ClockState
from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import BLACK, RESIGN, WHITE, CoordinateError, color_name, format_vertex, parse_vertex
from tabula.engine.rules.game import GameState, Rules, format_result, handicap_points
from tabula.engine.rules.sgf import write_game
from tabula.tools.compete.gtp_client import EngineError, EngineTimeout, GtpEngine, GtpFailure, MalformedReply
from tabula.tools.compete.settings import (
    ABSOLUTE,
    BYOYOMI,
    CANADIAN,
    CRASH,
    HANG,
    ILLEGAL,
    MALFORMED,
    NO_TIME,
    REFUSED,
    TIME_LOSS,
    MatchConfig,
    TimeControl,
)

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


def moves_fingerprint(handicap: Sequence[int], moves: Sequence[tuple[int, int]], result: str) -> str:
    """Names a game by its stones and result, so that a match can tell how many of its games were different:
    engines that choose their moves deterministically replay the same game again and again."""
    text = ",".join(map(str, handicap)) + ";" + ",".join(f"{color}:{move}" for color, move in moves) + ";" + result
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def opening_moves(line: str, state: GameState) -> list[tuple[int, int]]:
    """The (colour, move) pairs of an opening line (GTP vertices separated by spaces or commas) played from
    ``state``, colours alternating from its side to move. ValueError, naming the move, for a word that is no
    vertex of the board, a pass or resignation, or an illegal move; ``state`` is not changed."""
    trial = state.copy()
    moves = []
    for word in line.replace(",", " ").split():
        try:
            move = parse_vertex(word, trial.size)
        except CoordinateError as error:
            raise ValueError(f"{word!r} is not a vertex of a {trial.size}x{trial.size} board") from error
        if move < 0:
            raise ValueError(f"{word!r}: an opening holds stones only (no pass or resign)")
        color = trial.to_move
        try:
            trial.play(move, color)
        except IllegalMoveError as error:
            raise ValueError(f"{color_name(color)} {word} is illegal there ({error.reason})") from error
        moves.append((color, move))
    return moves


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
    opening: int = -1  # index into the match's openings; -1: none


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

    def __init__(self, config: MatchConfig, spec: GameSpec, pool: EnginePool, stop: threading.Event,
                 on_move: Callable[["Game"], None] | None = None):
        """``on_move``: called after each move is played (``tabula match`` reports a game's progress from it)."""
        self.config = config
        self.spec = spec
        self.pool = pool
        self.stop = stop
        self.on_move = on_move
        self.state = GameState(config.size, Rules(komi=config.komi, superko=config.superko))
        self.clocks = {color: Clock(TimeControl() if self.index(color) in config.untimed else config.time)
                       for color in (BLACK, WHITE)}
        self.engines: dict[int, GtpEngine] = {}
        # per move: (colour, move, seconds, clock left or None, stones/periods left or None)
        self.log: list[tuple[int, int, float, float | None, int | None]] = []
        self.handicap_stones: list[int] = []
        self.opening_moves: list[tuple[int, int]] = []  # (colour, move) played out before the engines' own
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
        if self.spec.opening >= 0:
            self.play_opening(config.openings[self.spec.opening])
        for color in (BLACK, WHITE):
            if self.clocks[color].active:
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

    def play_opening(self, line: str) -> None:
        """The opening's moves, told to both engines as ``play``; an engine that refuses one forfeits."""
        for color, move in opening_moves(line, self.state):
            self.state.play(move, color)  # opening_moves checked it on this very position
            vertex = format_vertex(move, self.config.size)
            for side in (BLACK, WHITE):
                self.send(side, f"play {color_name(color)} {vertex}")
            self.opening_moves.append((color, move))

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
        if self.on_move is not None:
            self.on_move(self)

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
        return (None if winner == "draw" else winner), format_result(score), f"{ended}; scored by {method}", None

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
            "opening": spec.opening if spec.opening >= 0 else None,
            "moves_sha1": moves_fingerprint(self.handicap_stones, self.state.moves, result),
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
        moves: list[tuple[int, int]] = list(self.opening_moves)
        per_move: list[dict[str, object]] = [{"C": "opening"} for _ in moves]
        notes: list[str] = []
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

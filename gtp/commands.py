"""GTP commands: a table of handlers, the session that dispatches to them, and the stdin/stdout loop.

Layer: gtp (imports engine, never the other way).

How to add commands (for ``gtp/analysis.py`` and other families)
-----------------------------------------------------------------
Every handler is a function registered in a ``CommandTable`` with the ``command`` decorator. Its first parameter
is the ``Session``; the rest are converted from the GTP words by their type hints (``str``, ``int``, ``float``,
``bool``; defaults make an argument optional; ``*args: str`` takes the rest). A wrong number of words or a word
that does not convert becomes ``? syntax error``. Return the reply text (``""`` for an empty success), or raise
``GtpError("message")`` for ``? message``. The engine's typed exceptions (``IllegalMoveError``, ``CannotUndoError``,
...) are mapped in one place (``ERROR_MESSAGES``). Any other exception, a plain ``ValueError`` or ``KeyError``
included, is an engine bug, not the client's mistake: ``? internal error``, its traceback on stderr, and the loop
keeps serving. So a handler that expects a ``ValueError`` (a size the player refuses) catches it and raises
``GtpError`` with the spec's text.

    from tabula.gtp.commands import TABLE, Session

    @TABLE.command("lz-setoption")
    def lz_setoption(session: Session, *words: str) -> str:
        ...

``known_command`` and ``list_commands`` read the table, so a family is registered by importing its module
before the loop starts (``gtp/__main__.py`` imports ``EXTENSION_MODULES``; add yours there).

Streaming commands (lz-analyze, kata-analyze, pondering). Register with ``streaming=True``. The handler checks
its arguments (raise GtpError as usual, before anything is written) and returns an iterator of output lines.
The dispatcher writes ``=id``, then every line the iterator yields (flushed at once), then the blank line that
ends the reply. Input is read by a separate thread: as soon as the next line arrives (or stdin closes),
``session.interrupt`` (a ``threading.Event``) is set. The iterator must watch it and return promptly (the
dispatcher pulls it to its end, so that a closing line such as ``play D4`` still goes out), and is closed
afterwards (so ``finally:`` blocks run). Example:

    @TABLE.command("lz-analyze", streaming=True)
    def lz_analyze(session: Session, *words: str) -> Iterator[str]:
        interval = parse_interval(words)          # may raise GtpError -> "? syntax error"
        def lines() -> Iterator[str]:
            search = start_search(session.player)
            try:
                while not session.interrupt.wait(interval):
                    yield format_info(search)
            finally:
                search.stop()
        return lines()

Work between commands (pondering after genmove): set ``session.idle_task`` to a callable taking the interrupt
event. The loop calls it whenever no input is waiting, and it must return once the event is set.

GoGui's ``# interrupt`` line is a comment (no reply). Like any input it sets ``session.interrupt``; it also stops a
running genmove search (``picker.stop()``, where the picker has one), which then plays its best move so far.

Game chat (``--ogs-chat``): ``session.chat`` receives ``MALKOVICH: ...`` lines (a summary of each generated move,
shown to observers) and ``DISCUSSION: ...`` lines (resigning, passing to end the game; shown to the opponent).
gtp2ogs relays stderr lines with these prefixes to the OGS game chat; ``__main__`` points ``chat`` at stderr.
"""
from __future__ import annotations

import inspect
import io
import json
import logging
import math
import os
import queue
import stat
import threading
import time
import typing
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Iterable, Iterator

from tabula.engine.config import EngineConfig
from tabula.engine.play.player import CannotUndoError, HandicapError, Player
from tabula.engine.play.timecontrol import TimeSettings, TimeSettingsError
from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import (
    BLACK,
    PASS,
    RESIGN,
    CoordinateError,
    color_name,
    format_vertex,
    parse_color,
    parse_vertex,
)
from tabula.engine.rules.game import UnsupportedRulesError, parse_rules
from tabula.engine.rules.sgf import SgfError

from .protocol import Command, GtpError, format_failure, format_success, is_interrupt, parse_command, preprocess

NAME = "Tabula"
VERSION = "0.1.0"

log = logging.getLogger("tabula.gtp")


@dataclass
class Handler:
    name: str
    function: Callable[..., Any]
    streaming: bool
    family: str
    convert: Callable[[tuple[str, ...]], list[Any]]


def _to_int(word: str) -> int:
    body = word[1:] if word[:1] in "+-" else word
    if not (body.isascii() and body.isdigit()):
        raise ValueError(word)
    return int(word)


def _to_float(word: str) -> float:
    if not word.isascii() or "_" in word:
        raise ValueError(word)
    return float(word)


def _to_bool(word: str) -> bool:
    lowered = word.lower()
    if lowered in ("true", "1", "on", "yes"):
        return True
    if lowered in ("false", "0", "off", "no"):
        return False
    raise ValueError(word)


_CONVERTERS: dict[Any, Callable[[str], Any]] = {str: str, int: _to_int, float: _to_float, bool: _to_bool}


def _converter(function: Callable[..., Any]) -> Callable[[tuple[str, ...]], list[Any]]:
    """Build the words -> arguments conversion of ``function`` from its signature (first parameter: session)."""
    hints = typing.get_type_hints(function)
    parameters = list(inspect.signature(function).parameters.values())[1:]
    fixed = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    rest = next((p for p in parameters if p.kind == p.VAR_POSITIONAL), None)
    required = sum(1 for p in fixed if p.default is p.empty)
    kinds = [_CONVERTERS[hints.get(p.name, str)] for p in fixed]
    rest_kind = _CONVERTERS[hints.get(rest.name, str)] if rest is not None else None

    def convert(words: tuple[str, ...]) -> list[Any]:
        if len(words) < required or (rest is None and len(words) > len(fixed)):
            raise GtpError("syntax error")
        try:
            values = [kind(word) for kind, word in zip(kinds, words)]
            if rest_kind is not None:
                values += [rest_kind(word) for word in words[len(fixed):]]
        except ValueError as error:
            raise GtpError("syntax error") from error
        return values

    return convert


class CommandTable:
    """GTP command name -> handler. Names are matched exactly (no prefixes, case-sensitive, as the spec says)."""

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}

    def command(self, name: str, streaming: bool = False, family: str = "") -> Callable:
        """Decorator registering a handler under ``name``; see the module docstring."""

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            if name in self.handlers:
                raise ValueError(f"GTP command {name!r} registered twice")
            self.handlers[name] = Handler(name, function, streaming, family or function.__module__,
                                          _converter(function))
            return function

        return register

    def __contains__(self, name: str) -> bool:
        return name in self.handlers

    def names(self) -> list[str]:
        return list(self.handlers)


TABLE = CommandTable()


def _illegal_move(error: Exception) -> str:
    log.info("illegal move: %s", error)
    return "illegal move"


def _coordinate(error: Exception) -> str:
    return "invalid color" if "color" in str(error) else "invalid coordinate"


# The engine's typed exceptions -> GTP error text, first match wins (subclasses before their bases). Nothing else is
# the client's doing: any other exception answers "internal error" (_error_message).
ERROR_MESSAGES: list[tuple[type[BaseException], Callable[[Exception], str]]] = [
    (GtpError, str),
    (IllegalMoveError, _illegal_move),
    (CoordinateError, _coordinate),
    (SgfError, lambda error: f"cannot load file: {error}"),
    (CannotUndoError, lambda error: "cannot undo"),
    (HandicapError, lambda error: error.kind),
    (TimeSettingsError, lambda error: "syntax error"),
]


@dataclass
class Session:
    """One GTP conversation: the player, the table it serves, and the state of the loop.

    ``interrupt`` is set by the reader thread whenever input arrives; streaming handlers and ``idle_task`` watch
    it. ``stop_running`` is called by the reader thread too. Everything else is touched by the main loop only.
    """

    player: Player
    config: EngineConfig = field(default_factory=EngineConfig)
    table: CommandTable = field(default_factory=lambda: TABLE)
    interrupt: threading.Event = field(default_factory=threading.Event)
    idle_task: Callable[[threading.Event], None] | None = None
    chat: Callable[[str], None] | None = None  # where MALKOVICH:/DISCUSSION: lines go (stderr); None: no chat
    quit: bool = False

    def stop_running(self) -> None:
        """GoGui's ``# interrupt``: end the picker's running search early, if one runs. Any thread."""
        self.player.picker.stop()

    def handle(self, line: str, write: Callable[[str], None]) -> None:
        """Run one raw input line, writing its reply (if any) through ``write``."""
        cleaned = preprocess(line)
        if cleaned is None:
            return
        command = parse_command(cleaned)
        handler = self.table.handlers.get(command.name)
        if handler is None:
            write(format_failure(command.id, "unknown command" if command.name else "syntax error"))
            return
        try:
            result = handler.function(self, *handler.convert(command.args))
        except Exception as error:  # noqa: BLE001 - the loop must keep serving whatever a handler does
            write(format_failure(command.id, _error_message(error, command.name)))
            return
        if handler.streaming:
            self._stream(command, result, write)
        else:
            write(format_success(command.id, "" if result is None else str(result)))

    def _stream(self, command: Command, lines: Iterable[str], write: Callable[[str], None]) -> None:
        write("=" if command.id is None else f"={command.id}")
        write("\n")
        iterator = iter(lines)
        try:
            # The iterator watches ``interrupt`` itself and ends promptly; pulling it to its end lets a command
            # such as genmove_analyze write its closing ``play`` line even when the next command is already waiting.
            for line in iterator:
                if line:
                    write(line.rstrip("\n") + "\n")
        except Exception:  # noqa: BLE001 - the reply is already open: log and end it
            log.exception("streaming command %s failed", command.name)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
        write("\n")

    def dispatch(self, line: str) -> str:
        """The reply to one line, as text ("" when the line is blank or a comment). For tests and tools."""
        parts: list[str] = []
        self.handle(line, parts.append)
        return "".join(parts)


def _error_message(error: Exception, command: str) -> str:
    """The ``?`` text for what a handler raised; an exception ERROR_MESSAGES does not name is logged with its
    traceback (call this inside the ``except`` block)."""
    for kind, message in ERROR_MESSAGES:
        if isinstance(error, kind):
            return message(error)
    log.exception("internal error in %s", command)
    return "internal error"


def serve(session: Session, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Answer GTP commands from ``stdin`` until ``quit`` or end of input. Returns the exit status.

    A reader thread decodes input (invalid UTF-8 is replaced, never fatal) into a queue and sets
    ``session.interrupt`` whenever a line arrives, so that a running streaming command can stop.
    """
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        try:
            for raw in _input_lines(stdin):
                line = raw.decode("utf-8", errors="replace")
                if is_interrupt(line):
                    session.stop_running()
                lines.put(line)
                session.interrupt.set()
        except (OSError, ValueError) as error:
            log.warning("stdin failed: %s", error)
        finally:
            lines.put(None)
            session.interrupt.set()

    threading.Thread(target=read, name="gtp-stdin", daemon=True).start()

    def write(text: str) -> None:
        stdout.write(text.encode("utf-8"))
        stdout.flush()

    while not session.quit:
        if session.idle_task is not None and lines.empty():
            session.interrupt.clear()
            if lines.empty():
                session.idle_task(session.interrupt)
        line = lines.get()
        if line is None:
            break
        session.interrupt.clear()
        if not lines.empty():
            session.interrupt.set()  # pipelined input: a streaming command stops at once
        try:
            session.handle(line, write)
        except BrokenPipeError:
            # The controller went away: nobody is left to answer.
            log.info("stdout closed; exiting")
            break
        except Exception:  # noqa: BLE001 - a line the framing chokes on must not end the process
            log.exception("internal error on an input line")
            try:
                write(format_failure(_id_if_any(line), "internal error"))
            except BrokenPipeError:
                break
    return 0


def _id_if_any(line: str) -> str | None:
    """The id of ``line`` for a last-resort reply, or None where even that cannot be parsed."""
    try:
        cleaned = preprocess(line)
        return None if cleaned is None else parse_command(cleaned).id
    except Exception:  # noqa: BLE001 - already answering a failure: never raise from here
        return None


def _input_lines(stdin: IO[bytes]) -> Iterator[bytes]:
    """Lines of ``stdin``. A real file is read with ``os.read`` on its descriptor: a thread blocked in a buffered
    read holds the buffer's lock and makes the interpreter abort at exit after ``quit``."""
    try:
        fd = stdin.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        yield from iter(stdin.readline, b"")
        return
    pending = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if pending:
        yield pending


# -- argument helpers ---------------------------------------------------------------------------------------------

def _color(word: str) -> int:
    try:
        return parse_color(word)
    except CoordinateError as error:
        raise GtpError("invalid color") from error


def _vertex(session: Session, word: str) -> int:
    try:
        return parse_vertex(word, session.player.size)
    except CoordinateError as error:
        raise GtpError("invalid coordinate") from error


def _vertices(session: Session, points: Iterable[int]) -> str:
    return " ".join(format_vertex(p, session.player.size) for p in points)


# -- administrative -----------------------------------------------------------------------------------------------

@TABLE.command("protocol_version", family="admin")
def protocol_version(session: Session) -> str:
    return "2"


@TABLE.command("name", family="admin")
def name(session: Session) -> str:
    return NAME


@TABLE.command("version", family="admin")
def version(session: Session) -> str:
    return f"{VERSION} ({session.player.picker.name})"


@TABLE.command("known_command", family="admin")
def known_command(session: Session, command: str) -> str:
    return "true" if command in session.table else "false"


@TABLE.command("list_commands", family="admin")
def list_commands(session: Session) -> str:
    return "\n".join(session.table.names())


@TABLE.command("quit", family="admin")
def quit_(session: Session) -> str:
    session.quit = True
    return ""


# -- setup --------------------------------------------------------------------------------------------------------

@TABLE.command("boardsize", family="setup")
def boardsize(session: Session, size: int, *height: int) -> str:
    """``boardsize N``; gtp2ogs sometimes sends ``boardsize W H``: a square one is accepted, others are not."""
    if len(height) > 1:
        raise GtpError("syntax error")
    if height and height[0] != size:
        raise GtpError("unacceptable size")
    try:
        session.player.set_size(size)
    except ValueError as error:
        raise GtpError("unacceptable size") from error
    return ""


@TABLE.command("rectangular_boardsize", family="setup")
def rectangular_boardsize(session: Session, width: int, height: int) -> str:
    if width != height:
        raise GtpError("unacceptable size (only square boards are supported)")
    return boardsize(session, width)


@TABLE.command("clear_board", family="setup")
def clear_board(session: Session) -> str:
    session.player.clear()
    return ""


@TABLE.command("komi", family="setup")
def komi(session: Session, value: float) -> str:
    try:
        session.player.set_komi(value)
    except ValueError as error:
        raise GtpError("unacceptable komi") from error
    return ""


@TABLE.command("fixed_handicap", family="setup")
def fixed_handicap(session: Session, count: int) -> str:
    return _vertices(session, session.player.fixed_handicap(count))


@TABLE.command("place_free_handicap", family="setup")
def place_free_handicap(session: Session, count: int) -> str:
    return _vertices(session, session.player.free_handicap(count))


@TABLE.command("set_free_handicap", family="setup")
def set_free_handicap(session: Session, *vertices: str) -> str:
    try:
        points = [parse_vertex(v, session.player.size) for v in vertices]
    except CoordinateError as error:
        raise GtpError("bad vertex list") from error
    if any(p < 0 for p in points):
        raise GtpError("bad vertex list")
    session.player.set_free_handicap(points)
    return ""


MAX_SGF_BYTES = 16 << 20  # loadsgf refuses bigger files: a game record is kilobytes


@TABLE.command("loadsgf", family="setup")
def loadsgf(session: Session, filename: str, move_number: int = 0) -> str:
    if move_number < 0:
        raise GtpError("syntax error")
    session.player.load_sgf(_read_sgf_file(filename), move_number or None)
    return ""


def _read_sgf_file(filename: str) -> bytes:
    """The bytes of a regular file of at most MAX_SGF_BYTES; anything else (a device such as /dev/zero, a pipe,
    a directory, a huge file) is refused before it is read, so it cannot eat memory."""
    try:
        with open(filename, "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise GtpError("cannot load file: not a regular file")
            if status.st_size > MAX_SGF_BYTES:
                raise GtpError(f"cannot load file: larger than {MAX_SGF_BYTES >> 20} MB")
            data = file.read(MAX_SGF_BYTES + 1)  # the file may grow after fstat
    except OSError as error:
        raise GtpError("cannot load file") from error
    if len(data) > MAX_SGF_BYTES:
        raise GtpError(f"cannot load file: larger than {MAX_SGF_BYTES >> 20} MB")
    return data


@TABLE.command("printsgf", family="setup")
def printsgf(session: Session, filename: str = "") -> str:
    data = session.player.to_sgf()
    if not filename:
        return data.decode("utf-8", errors="replace")
    try:
        with open(filename, "wb") as file:
            file.write(data)
    except OSError as error:
        raise GtpError("cannot save file") from error
    return ""


# -- play ---------------------------------------------------------------------------------------------------------

@TABLE.command("play", family="play")
def play(session: Session, color: str, vertex: str) -> str:
    session.player.play(_color(color), _vertex(session, vertex))
    return ""


@TABLE.command("genmove", family="play")
def genmove(session: Session, color: str) -> str:
    return _genmove(session, _color(color), cleanup=False)


@TABLE.command("reg_genmove", family="play")
def reg_genmove(session: Session, color: str) -> str:
    return format_vertex(session.player.reg_genmove(_color(color)), session.player.size)


@TABLE.command("kgs-genmove_cleanup", family="play")
def kgs_genmove_cleanup(session: Session, color: str) -> str:
    return _genmove(session, _color(color), cleanup=True)


def _genmove(session: Session, color: int, cleanup: bool) -> str:
    move = session.player.genmove(color, cleanup=cleanup)
    if session.chat is not None:
        try:
            _chat_move(session, color, move, session.player.last_search)
        except Exception:  # noqa: BLE001 - the move is played: a chat failure must not turn it into "? ..."
            log.exception("chat after genmove failed")
    return format_vertex(move, session.player.size)


def _chat_move(session: Session, color: int, move: int, searched: Any) -> None:
    """The chat after a generated move. ``searched``: the picker's summary of this move's search (a
    ``SearchResult``), or None when it did not search (the random player, a cleanup pass)."""
    assert session.chat is not None
    player = session.player
    size = player.size
    vertex = format_vertex(move, size)
    number = len(player.state.moves) + (1 if move == RESIGN else 0)
    text = f"move {number} ({'B' if color == BLACK else 'W'}) {vertex}"
    if searched is not None and searched.candidates:
        chosen = next((c for c in searched.candidates if c.move == move), searched.candidates[0])
        pv = " ".join(format_vertex(m, size) for m in chosen.pv[:10])
        text += (f": {searched.root_visits} visits, winrate {100 * chosen.winrate:.1f}% for "
                 f"{color_name(color)}, PV {pv}")
    else:
        text += f": {player.picker.name} player, no search"
    session.chat(f"MALKOVICH: {text}")
    if move == RESIGN:
        session.chat(f"DISCUSSION: {NAME} resigns. Thank you for the game.")
    elif move == PASS and player.state.is_game_over():
        session.chat(f"DISCUSSION: {NAME} passes to end the game; by its count the result is "
                     f"{player.final_score()}.")


@TABLE.command("undo", family="play")
def undo(session: Session) -> str:
    session.player.undo()
    return ""


@TABLE.command("showboard", family="play")
def showboard(session: Session) -> str:
    return "\n" + session.player.showboard()


# -- scoring ------------------------------------------------------------------------------------------------------

@TABLE.command("final_score", family="score")
def final_score(session: Session) -> str:
    return session.player.final_score()


@TABLE.command("final_status_list", family="score")
def final_status_list(session: Session, status: str) -> str:
    if status.lower() not in ("alive", "dead", "seki"):
        raise GtpError("syntax error")
    strings = session.player.final_status(status.lower())
    return "\n".join(_vertices(session, string) for string in strings)


@TABLE.command("kgs-game_over", family="score")
def kgs_game_over(session: Session) -> str:
    log.info("game over: %s", session.player.final_score())
    return ""


# -- rules --------------------------------------------------------------------------------------------------------
# KataGo's extensions (docs/GTP_Extensions.md): the rules are KataGo's JSON object, the names its shorthands, and the
# komi is left as it is. A name or value Tabula does not know or cannot play is refused and changes nothing.

def _set_rules(session: Session, text: str) -> None:
    player = session.player
    try:
        rules = parse_rules(text, player.komi)
    except UnsupportedRulesError as error:
        raise GtpError(str(error)) from error
    try:
        player.set_rules(rules)
    except ValueError as error:
        raise GtpError(f"cannot change the rules of this game: {error}") from error


@TABLE.command("kata-set-rules", family="rules")
def kata_set_rules(session: Session, first: str, *rest: str) -> str:
    """``kata-set-rules japanese`` or ``kata-set-rules {"ko":"SIMPLE","scoring":"TERRITORY",...}``."""
    _set_rules(session, " ".join((first,) + rest))
    return ""


@TABLE.command("kata-get-rules", family="rules")
def kata_get_rules(session: Session) -> str:
    return session.player.rules.kata_json()


_KATA_RULE_KEYS = {"ko", "score", "scoring", "tax", "suicide", "hasButton", "whiteHandicapBonus", "friendlyPassOk"}
_KATA_BOOL_KEYS = {"suicide", "hasButton", "friendlyPassOk"}


@TABLE.command("kata-set-rule", family="rules")
def kata_set_rule(session: Session, key: str, value: str) -> str:
    """One field of the rules, the others kept: ``kata-set-rule ko SIMPLE``, ``kata-set-rule scoring TERRITORY``."""
    if key not in _KATA_RULE_KEYS:
        raise GtpError(f"unknown rules option {key!r}")
    fields = json.loads(session.player.rules.kata_json())
    if key in _KATA_BOOL_KEYS:
        if value.lower() not in ("true", "false"):
            raise GtpError(f"{key} must be true or false")
        fields[key] = value.lower() == "true"
    else:
        fields["scoring" if key == "score" else key] = value.upper()
    _set_rules(session, json.dumps(fields))
    return ""


# kgsGtp's names (its documentation): chinese is KataGo's chinese-kgs (positional superko), the others its own.
KGS_RULES = {"japanese": "japanese", "chinese": "chinese-kgs", "aga": "aga", "new_zealand": "new-zealand"}


@TABLE.command("kgs-rules", family="rules")
def kgs_rules(session: Session, name: str) -> str:
    if name.lower() not in KGS_RULES:
        raise GtpError(f"unknown rules {name!r} (kgs-rules takes {', '.join(KGS_RULES)})")
    _set_rules(session, KGS_RULES[name.lower()])
    return ""


# -- time ---------------------------------------------------------------------------------------------------------

def _finite(*values: float) -> None:
    if not all(math.isfinite(v) for v in values):
        raise GtpError("syntax error")


@TABLE.command("time_settings", family="time")
def time_settings(session: Session, main_time: float, byo_yomi_time: float, byo_yomi_stones: int) -> str:
    _finite(main_time, byo_yomi_time)
    session.player.set_time_settings(TimeSettings.from_gtp(main_time, byo_yomi_time, byo_yomi_stones))
    return ""


@TABLE.command("kgs-time_settings", family="time")
def kgs_time_settings(session: Session, *words: str) -> str:
    session.player.set_time_settings(TimeSettings.from_kgs(_no_fischer(words)))
    return ""


def _no_fischer(words: tuple[str, ...]) -> list[str]:
    if words and words[0].lower() == "fischer":
        raise GtpError("syntax error")  # KGS has no fischer; kata-time_settings does
    return list(words)


@TABLE.command("kata-time_settings", family="time")
def kata_time_settings(session: Session, *words: str) -> str:
    session.player.set_time_settings(TimeSettings.from_kgs(list(words)))
    return ""


@TABLE.command("cputime", family="time")
def cputime(session: Session) -> str:
    """GoGui's ``cputime``: the CPU seconds this engine process has used, all threads (the network's included);
    gogui-twogtp records it per game and reads 0 from engines without it."""
    return f"{time.process_time():.3f}"


@TABLE.command("time_left", family="time")
def time_left(session: Session, color: str, time: float, stones: int) -> str:
    _finite(time)
    session.player.time_left(_color(color), time, stones)
    return ""


__all__ = ["CommandTable", "Session", "TABLE", "ERROR_MESSAGES", "serve", "GtpError"]

"""Analysis commands for GUIs: lz-analyze / lz-genmove_analyze (Leela Zero's line format), analyze /
genmove_analyze (Sabaki's spec), GoGui's analyze commands and interrupt, and pondering between commands.

Layer: gtp (registers into ``gtp.commands.TABLE`` when imported). Every command here needs the search player.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Iterator

import numpy as np

from engine.coords import BLACK, PASS, format_vertex, parse_color
from engine.game import GameState
from engine.search import Candidate
from engine.search_player import SearchGenerator

from .commands import TABLE, Session
from .protocol import GtpError

DEFAULT_INTERVAL_CS = 100
_POLL_S = 0.05  # how often a waiting stream looks at the interrupt


# -- formatting and arguments -------------------------------------------------------------------------------------

def format_info(candidates: list[Candidate], size: int) -> str:
    """One Leela Zero analysis line: every candidate as ``info move V visits N winrate W prior P lcb L order O
    pv V...``, winrate/prior/lcb as integers ×10000 from the side to move's view."""
    parts = []
    for c in candidates:
        pv = " ".join(format_vertex(m, size) for m in c.pv)
        parts.append(f"info move {format_vertex(c.move, size)} visits {c.visits} "
                     f"winrate {_per10k(c.winrate)} prior {_per10k(c.prior)} lcb {_per10k(c.lcb_winrate)} "
                     f"order {c.order} pv {pv}")
    return " ".join(parts)


def _per10k(x: float) -> int:
    return int(round(min(1.0, max(0.0, x)) * 10000))


def parse_analyze_args(words: tuple[str, ...], default_color: int) -> tuple[int, float]:
    """``[color] [interval]`` or ``[color] interval N`` (Leela Zero also takes ``minmoves N``, ignored here).
    Returns (colour, interval in seconds); GtpError("syntax error") for anything else."""
    color = default_color
    interval_cs = DEFAULT_INTERVAL_CS
    rest = list(words)
    if rest:
        try:
            color = parse_color(rest[0])
            rest.pop(0)
        except ValueError:
            pass
    try:
        while rest:
            word = rest.pop(0).lower()
            if word == "interval":
                interval_cs = int(rest.pop(0))
            elif word == "minmoves":
                int(rest.pop(0))
            else:
                interval_cs = int(word)
    except (ValueError, IndexError) as error:
        raise GtpError("syntax error") from error
    if interval_cs < 0:
        raise GtpError("syntax error")
    return color, max(interval_cs, 1) / 100.0


def _generator(session: Session) -> SearchGenerator:
    generator = session.player.generator
    if not isinstance(generator, SearchGenerator):
        raise GtpError("analysis needs the search player (--player search)")
    return generator


def _position(session: Session, color: int) -> GameState:
    state = session.player.state
    if state.to_move != color:
        state = state.copy()
        state.to_move = color
    return state


def _drain(updates: queue.Queue, session: Session, size: int, on_input: Callable[[], bool]) -> Iterator[str]:
    """Analysis lines from a search thread's ``updates`` (candidate lists; an exception, raised here; None at its
    end). While input waits, ``on_input()`` is called: True stops reading at once, False reads on to the end
    without showing more lines."""
    while True:
        if session.interrupt.is_set() and on_input():
            return
        try:
            item = updates.get(timeout=_POLL_S)
        except queue.Empty:
            continue
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        if item and not session.interrupt.is_set():
            yield format_info(item, size)


# -- lz-analyze / analyze -----------------------------------------------------------------------------------------

def _analyze(session: Session, words: tuple[str, ...]) -> Iterator[str]:
    generator = _generator(session)
    color, interval_s = parse_analyze_args(words, session.player.state.to_move)
    state = _position(session, color)
    size = state.size

    def lines() -> Iterator[str]:
        updates: queue.Queue = queue.Queue()
        stop = threading.Event()

        def work() -> None:
            try:
                generator.analyze(state, stop, updates.put, interval_s)
            except BaseException as error:  # handed to the stream, which logs it
                updates.put(error)
            finally:
                updates.put(None)

        thread = threading.Thread(target=work, name="analysis", daemon=True)
        thread.start()
        try:
            yield from _drain(updates, session, size, on_input=lambda: True)  # input ends the analysis
        finally:
            stop.set()
            thread.join()

    return lines()


@TABLE.command("lz-analyze", streaming=True, family="analysis")
def lz_analyze(session: Session, *words: str) -> Iterator[str]:
    """``lz-analyze [color] [interval]``: Leela Zero's analysis lines every interval (centiseconds) until input."""
    return _analyze(session, words)


@TABLE.command("analyze", streaming=True, family="analysis")
def analyze(session: Session, *words: str) -> Iterator[str]:
    """Sabaki's ``analyze <color> <interval>``: the same lines as lz-analyze."""
    return _analyze(session, words)


# -- lz-genmove_analyze / genmove_analyze --------------------------------------------------------------------------

def _genmove_analyze(session: Session, words: tuple[str, ...]) -> Iterator[str]:
    generator = _generator(session)
    color, interval_s = parse_analyze_args(words, session.player.state.to_move)
    size = session.player.size

    def lines() -> Iterator[str]:
        updates: queue.Queue = queue.Queue()
        chosen: list[int] = []

        def work() -> None:
            try:
                chosen.append(session.player.genmove(color))
            except BaseException as error:  # handed to the stream, which logs it
                updates.put(error)
            finally:
                updates.put(None)

        generator.on_progress, generator.progress_interval_s = updates.put, interval_s
        thread = threading.Thread(target=work, name="genmove-analysis", daemon=True)
        thread.start()
        def play_now() -> bool:
            generator.stop()  # input arrived: play the best move so far, then answer
            return False

        try:
            yield from _drain(updates, session, size, on_input=play_now)
        finally:
            thread.join()
            generator.on_progress = None
        if chosen:
            # The search's final candidates, so that a move found faster than one interval still shows its analysis.
            final = generator.last_result
            if final is not None and final.candidates:
                yield format_info(final.candidates, size)
            yield f"play {format_vertex(chosen[0], size)}"

    return lines()


@TABLE.command("lz-genmove_analyze", streaming=True, family="analysis")
def lz_genmove_analyze(session: Session, *words: str) -> Iterator[str]:
    """``lz-genmove_analyze [color] [interval]``: genmove with analysis lines, ending with ``play <vertex>``."""
    return _genmove_analyze(session, words)


@TABLE.command("genmove_analyze", streaming=True, family="analysis")
def genmove_analyze(session: Session, *words: str) -> Iterator[str]:
    """Sabaki's ``genmove_analyze <color> <interval>``."""
    return _genmove_analyze(session, words)


# -- GoGui ----------------------------------------------------------------------------------------------------------

GOGUI_COMMANDS = [
    "dboard/Policy/tabula-policy",
    "gfx/Visits/tabula-visits",
    "gfx/Winrate/tabula-winrate",
    "var/Principal variation/tabula-pv",
]


@TABLE.command("gogui-analyze_commands", family="analysis")
def gogui_analyze_commands(session: Session) -> str:
    return "\n".join(GOGUI_COMMANDS)


@TABLE.command("gogui-interrupt", family="analysis")
def gogui_interrupt(session: Session) -> str:
    """Tells GoGui that a ``# interrupt`` line stops a running search (any input line does)."""
    return ""


def _searched(session: Session) -> tuple[list[Candidate], int]:
    """Search the current position with the configured limits; ``# interrupt`` (any input) ends it early."""
    generator = _generator(session)
    state = session.player.state
    visits = generator.config.visits or None
    time_s = None if visits or generator.config.playouts else 5.0
    result = generator.search.run(state, visits=visits, time_s=time_s, stop=session.interrupt, early_stop=False)
    return result.candidates, state.size


@TABLE.command("tabula-policy", family="analysis")
def tabula_policy(session: Session) -> str:
    """The network's policy as a GoGui dboard: N rows of N numbers, top row first."""
    generator = _generator(session)
    state = session.player.state
    size = state.size
    policy = np.asarray(generator.search.evaluator.evaluate([state]).policy[0][:size * size]).reshape(size, size)
    return "\n" + "\n".join(" ".join(f"{p:.3f}" for p in policy[y]) for y in range(size - 1, -1, -1))


@TABLE.command("tabula-visits", family="analysis")
def tabula_visits(session: Session) -> str:
    """Visits of each candidate as GoGui gfx: shaded by share of the top move, labelled with the count."""
    candidates, size = _searched(session)
    board = [c for c in candidates if c.move != PASS]
    if not board:
        return ""
    top = max(c.visits for c in board)
    influence = " ".join(f"{format_vertex(c.move, size)} {c.visits / top:.2f}" for c in board)
    labels = " ".join(f"{format_vertex(c.move, size)} {c.visits}" for c in board)
    return f"INFLUENCE {influence}\nLABEL {labels}"


@TABLE.command("tabula-winrate", family="analysis")
def tabula_winrate(session: Session) -> str:
    """Winrate (side to move, percent) of each candidate as GoGui gfx labels; the chosen move is marked."""
    candidates, size = _searched(session)
    board = [c for c in candidates if c.move != PASS]
    if not board:
        return ""
    labels = " ".join(f"{format_vertex(c.move, size)} {100 * c.winrate:.0f}" for c in board)
    return f"LABEL {labels}\nSQUARE {format_vertex(board[0].move, size)}"


@TABLE.command("tabula-pv", family="analysis")
def tabula_pv(session: Session) -> str:
    """The chosen move's principal variation as a GoGui var: ``b D4 w Q16 ...``."""
    candidates, size = _searched(session)
    if not candidates:
        return ""
    color = session.player.state.to_move
    moves = []
    for move in candidates[0].pv:
        moves.append(f"{'b' if color == BLACK else 'w'} {format_vertex(move, size)}")
        color = 3 - color
    return " ".join(moves)


# -- pondering ------------------------------------------------------------------------------------------------------

def install_pondering(session: Session) -> None:
    """Ponder between commands when the configuration asks for it and the player searches.

    Sets ``session.idle_task``: the GTP loop runs it whenever no input waits, and it returns at the next line."""
    generator = session.player.generator
    if not session.config.search.ponder or not isinstance(generator, SearchGenerator):
        return

    def ponder(interrupt: threading.Event) -> None:
        player = session.player
        if player.result or player.state.is_game_over():
            return
        generator.ponder(player.state, interrupt)

    session.idle_task = ponder


__all__ = ["format_info", "parse_analyze_args", "install_pondering", "GOGUI_COMMANDS"]

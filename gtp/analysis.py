"""Analysis commands for GUIs: lz-analyze / lz-genmove_analyze (Leela Zero's line format), kata-analyze /
kata-genmove_analyze (KataGo's format, with score and ownership), analyze / genmove_analyze (Sabaki's spec: Leela
Zero's lines plus KataGo's scoreLead), GoGui's analyze commands and interrupt, and pondering between commands.

Layer: gtp (registers into ``gtp.commands.TABLE`` when imported). Every command here needs the search player.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from tabula.engine.play.result import Candidate
from tabula.engine.play.search_player import SearchPicker
from tabula.engine.rules.coords import BLACK, PASS, format_vertex, parse_color

from .commands import TABLE, Session
from .protocol import GtpError

DEFAULT_INTERVAL_CS = 100
_POLL_S = 0.05  # how often a waiting stream looks at the interrupt


# -- formatting and arguments -------------------------------------------------------------------------------------

def format_info(candidates: list[Candidate], size: int, score_lead: bool = False) -> str:
    """One Leela Zero analysis line: every candidate as ``info move V visits N winrate W prior P lcb L order O
    pv V...``, winrate/prior/lcb as integers ×10000 from the side to move's view. ``score_lead`` adds KataGo's
    ``scoreLead`` (points, side to move's view) after the winrate, which Sabaki reads from ``analyze`` lines."""
    parts = []
    for c in candidates:
        pv = " ".join(format_vertex(m, size) for m in c.pv)
        score = f"scoreLead {c.score:.2f} " if score_lead else ""
        parts.append(f"info move {format_vertex(c.move, size)} visits {c.visits} "
                     f"winrate {_per10k(c.winrate)} {score}prior {_per10k(c.prior)} lcb {_per10k(c.lcb_winrate)} "
                     f"order {c.order} pv {pv}")
    return " ".join(parts)


def format_kata_info(candidates: list[Candidate], size: int, score: bool,
                     ownership: np.ndarray | None = None) -> str:
    """One KataGo ``kata-analyze`` line: ``info move V visits N utility U winrate W scoreMean S scoreStdev D
    scoreLead L prior P lcb C order K pv V...`` per candidate, win rates and priors in [0, 1], scores in points,
    the utility what the search ranks by (the value plus the score utility, as KataGo's), everything from the side
    to move's view; the score fields only from a network with a score head. Then, with
    ``ownership`` (side to move's view, flat points with y = 0 the bottom row), ``ownership`` and one value per
    point in KataGo's order: rows from the top (A19 on 19x19) to the bottom, each from left to right."""
    parts = []
    for c in candidates:
        pv = " ".join(format_vertex(m, size) for m in c.pv)
        scores = (f"scoreMean {c.score:.3f} scoreStdev {c.score_stdev:.3f} scoreLead {c.score:.3f} "
                  if score else "")
        parts.append(f"info move {format_vertex(c.move, size)} visits {c.visits} utility {c.utility:.5f} "
                     f"winrate {_unit(c.winrate):.5f} {scores}prior {_unit(c.prior):.5f} "
                     f"lcb {_unit(c.lcb_winrate):.5f} order {c.order} pv {pv}")
    if ownership is not None:
        rows = np.asarray(ownership, dtype=np.float64).reshape(size, size)[::-1]
        parts.append("ownership " + " ".join(f"{v:.4f}" for v in rows.reshape(-1)))
    return " ".join(parts)


def _unit(x: float) -> float:
    return min(1.0, max(0.0, x))


def _per10k(x: float) -> int:
    return int(round(min(1.0, max(0.0, x)) * 10000))


def _leading_color(words: tuple[str, ...], default_color: int) -> tuple[int, list[str]]:
    """The colour an analysis command names first (or ``default_color``), and the words after it."""
    rest = list(words)
    if rest:
        try:
            return parse_color(rest[0]), rest[1:]
        except ValueError:
            pass
    return default_color, rest


def parse_analyze_args(words: tuple[str, ...], default_color: int) -> tuple[int, float]:
    """``[color] [interval]`` or ``[color] interval N`` (Leela Zero also takes ``minmoves N``, ignored here).
    Returns (colour, interval in seconds); GtpError("syntax error") for anything else."""
    interval_cs = DEFAULT_INTERVAL_CS
    color, rest = _leading_color(words, default_color)
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


@dataclass(frozen=True)
class KataOptions:
    """What ``kata-analyze`` was asked for."""

    color: int
    interval_s: float
    max_moves: int = 0  # 0: every visited move
    ownership: bool = False


# KataGo's keys that take more than one value; every other unknown key takes one, and is ignored as KataGo does
_KATA_KEY_WORDS = {"allow": 3, "avoid": 3}


def parse_kata_args(words: tuple[str, ...], default_color: int) -> KataOptions:
    """``[color] [interval] KEY VALUE ...`` of kata-analyze: ``interval``, ``maxmoves``, ``minmoves`` (accepted,
    as candidates come from the visits), ``ownership true|false``; keys Tabula does not support
    (``ownershipStdev``, ``pvVisits``, ``movesOwnership``, ``rootInfo``, ``allow``, ``avoid`` ...) are skipped with
    their values. GtpError("syntax error") for a value that is not a number or a boolean where one is needed."""
    interval_cs, max_moves, ownership = DEFAULT_INTERVAL_CS, 0, False
    color, rest = _leading_color(words, default_color)
    if rest and rest[0].lstrip("-").isdigit():
        interval_cs = int(rest.pop(0))
    try:
        while rest:
            key = rest.pop(0)
            lowered = key.lower()
            if lowered == "interval":
                interval_cs = int(rest.pop(0))
            elif lowered == "maxmoves":
                max_moves = int(rest.pop(0))
            elif lowered == "minmoves":
                int(rest.pop(0))
            elif lowered == "ownership":
                value = rest.pop(0).lower()
                if value not in ("true", "false"):
                    raise ValueError(value)
                ownership = value == "true"
            else:
                del rest[:_KATA_KEY_WORDS.get(lowered, 1)]
    except (ValueError, IndexError) as error:
        raise GtpError("syntax error") from error
    if interval_cs < 0 or max_moves < 0:
        raise GtpError("syntax error")
    return KataOptions(color, max(interval_cs, 1) / 100.0, max_moves, ownership)


def _search_picker(session: Session) -> SearchPicker:
    picker = session.player.picker
    if not isinstance(picker, SearchPicker):
        raise GtpError("analysis needs the search player (--player search)")
    return picker


Formatter = Callable[[list[Candidate]], str]


def _drain(updates: queue.Queue, session: Session, format_line: Formatter,
           on_input: Callable[[], bool]) -> Iterator[str]:
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
            yield format_line(item)


# -- lz-analyze / analyze -----------------------------------------------------------------------------------------

def _lz_format(picker: SearchPicker, size: int, score_lead: bool) -> Formatter:
    return lambda candidates: format_info(candidates, size, score_lead and picker.has_score)


def _kata_format(picker: SearchPicker, size: int, color: int, ownership: bool) -> Formatter:
    def line(candidates: list[Candidate]) -> str:
        owned = picker.tree_ownership() if ownership else None
        if owned is not None and color != BLACK:
            owned = -owned  # KataGo reports the side to move's view
        return format_kata_info(candidates, size, picker.has_score, owned)
    return line


def _request(session: Session, words: tuple[str, ...], kata: bool, score_lead: bool
             ) -> tuple[SearchPicker, int, float, Formatter]:
    """The search player, the colour to analyse for, the interval and the line format of an analysis command."""
    picker = _search_picker(session)
    to_move = session.player.state.to_move
    size = session.player.size
    if not kata:
        color, interval_s = parse_analyze_args(words, to_move)
        return picker, color, interval_s, _lz_format(picker, size, score_lead)
    options = parse_kata_args(words, to_move)
    format_line = _kata_format(picker, size, options.color, options.ownership)
    if options.max_moves:
        full, format_line = format_line, lambda candidates: full(candidates[:options.max_moves])
    return picker, options.color, options.interval_s, format_line


def _analyze(session: Session, words: tuple[str, ...], kata: bool = False, score_lead: bool = False
             ) -> Iterator[str]:
    picker, color, interval_s, format_line = _request(session, words, kata, score_lead)
    state = session.player.state.with_to_move(color)

    def lines() -> Iterator[str]:
        updates: queue.Queue = queue.Queue()
        stop = threading.Event()

        def work() -> None:
            try:
                picker.analyze(state, stop, updates.put, interval_s)
            except BaseException as error:  # handed to the stream, which logs it
                updates.put(error)
            finally:
                updates.put(None)

        thread = threading.Thread(target=work, name="analysis", daemon=True)
        thread.start()
        try:
            yield from _drain(updates, session, format_line, on_input=lambda: True)  # input ends the analysis
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
    """Sabaki's ``analyze <color> <interval>``: the lines of lz-analyze, with KataGo's ``scoreLead`` where the
    network has a score head."""
    return _analyze(session, words, score_lead=True)


@TABLE.command("kata-analyze", streaming=True, family="analysis")
def kata_analyze(session: Session, *words: str) -> Iterator[str]:
    """``kata-analyze [color] [interval] [KEY VALUE ...]``: KataGo's analysis lines (``ownership true`` adds the
    ownership of every point) every interval until input."""
    return _analyze(session, words, kata=True)


# -- lz-genmove_analyze / genmove_analyze --------------------------------------------------------------------------

def _genmove_analyze(session: Session, words: tuple[str, ...], kata: bool = False, score_lead: bool = False
                     ) -> Iterator[str]:
    picker, color, interval_s, format_line = _request(session, words, kata, score_lead)

    def lines() -> Iterator[str]:
        updates: queue.Queue = queue.Queue()
        chosen: list[int] = []

        def work() -> None:
            try:
                chosen.append(session.player.genmove(color, on_progress=updates.put,
                                                     progress_interval_s=interval_s))
            except BaseException as error:  # handed to the stream, which logs it
                updates.put(error)
            finally:
                updates.put(None)

        thread = threading.Thread(target=work, name="genmove-analysis", daemon=True)
        thread.start()

        def play_now() -> bool:
            picker.stop()  # input arrived: play the best move so far, then answer
            return False

        try:
            yield from _drain(updates, session, format_line, on_input=play_now)
        finally:
            thread.join()
        if chosen:
            # The search's final candidates, so that a move found faster than one interval still shows its analysis.
            final = session.player.last_search
            if final is not None and final.candidates:
                yield format_line(final.candidates)
            yield f"play {format_vertex(chosen[0], session.player.size)}"

    return lines()


@TABLE.command("lz-genmove_analyze", streaming=True, family="analysis")
def lz_genmove_analyze(session: Session, *words: str) -> Iterator[str]:
    """``lz-genmove_analyze [color] [interval]``: genmove with analysis lines, ending with ``play <vertex>``."""
    return _genmove_analyze(session, words)


@TABLE.command("genmove_analyze", streaming=True, family="analysis")
def genmove_analyze(session: Session, *words: str) -> Iterator[str]:
    """Sabaki's ``genmove_analyze <color> <interval>``, with ``scoreLead`` as in ``analyze``."""
    return _genmove_analyze(session, words, score_lead=True)


@TABLE.command("kata-genmove_analyze", streaming=True, family="analysis")
def kata_genmove_analyze(session: Session, *words: str) -> Iterator[str]:
    """``kata-genmove_analyze [color] [interval] [KEY VALUE ...]``: genmove with kata-analyze lines, ending with
    ``play <vertex>``."""
    return _genmove_analyze(session, words, kata=True)


# -- GoGui ----------------------------------------------------------------------------------------------------------

GOGUI_COMMANDS = [
    "dboard/Policy/tabula-policy",
    "gfx/Visits/tabula-visits",
    "gfx/Winrate/tabula-winrate",
    "gfx/Score lead/tabula-score-lead",
    "gfx/Ownership/tabula-ownership",
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
    state = session.player.state
    return _search_picker(session).search_position(state, session.interrupt).candidates, state.size


@TABLE.command("tabula-policy", family="analysis")
def tabula_policy(session: Session) -> str:
    """The network's policy as a GoGui dboard: N rows of N numbers, top row first."""
    picker = _search_picker(session)
    state = session.player.state
    size = state.size
    policy = picker.network_policy(state)[:size * size].reshape(size, size)
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


def _labelled(candidates: list[Candidate], size: int, label: Callable[[Candidate], str]) -> str:
    """GoGui gfx: a label on every candidate on the board, and a square on the chosen one."""
    board = [c for c in candidates if c.move != PASS]
    if not board:
        return ""
    labels = " ".join(f"{format_vertex(c.move, size)} {label(c)}" for c in board)
    return f"LABEL {labels}\nSQUARE {format_vertex(board[0].move, size)}"


@TABLE.command("tabula-winrate", family="analysis")
def tabula_winrate(session: Session) -> str:
    """Winrate (side to move, percent) of each candidate as GoGui gfx labels; the chosen move is marked."""
    candidates, size = _searched(session)
    return _labelled(candidates, size, lambda c: f"{100 * c.winrate:.0f}")


@TABLE.command("tabula-score-lead", family="analysis")
def tabula_score_lead(session: Session) -> str:
    """Score lead (points, side to move's view) of each candidate as GoGui gfx labels; the chosen move is marked.
    Needs a network with a score head."""
    picker = _search_picker(session)
    candidates, size = _searched(session)
    if not picker.has_score:
        raise GtpError("the network has no score head")
    return _labelled(candidates, size, lambda c: f"{c.score:+.1f}")


@TABLE.command("tabula-ownership", family="analysis")
def tabula_ownership(session: Session) -> str:
    """Who owns each point at the end, averaged over the search tree, as GoGui's INFLUENCE (positive: black,
    negative: white). Needs a network with an ownership head."""
    picker = _search_picker(session)
    _, size = _searched(session)
    owned = picker.tree_ownership()
    if owned is None:
        raise GtpError("the network has no ownership head")
    return "INFLUENCE " + " ".join(f"{format_vertex(point, size)} {owned[point]:.2f}" for point in range(size * size))


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
    picker = session.player.picker
    if not session.config.play.ponder or not isinstance(picker, SearchPicker):
        return

    def ponder(interrupt: threading.Event) -> None:
        player = session.player
        if player.result or player.state.is_game_over():
            return
        picker.ponder(player.state, interrupt)

    session.idle_task = ponder


__all__ = ["format_info", "parse_analyze_args", "install_pondering", "GOGUI_COMMANDS"]

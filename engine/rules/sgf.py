"""The sgfmill bridge: SGF bytes to a game record and a ``GameState``, and games back to SGF bytes.

Layer: above game. The one SGF reader: GTP's loadsgf and the training records (``engine.data.records``) both read
with ``read_sgf``. Only the main line is read. Setup stones (AB/AW) are accepted before the first move; a file that
cannot be read, whose moves break the rules, or whose main line is absurdly long (``MAX_MOVES``, ``MAX_NODES``)
raises ``SgfError`` with the reason (and the move number); a board size or setup Tabula does not play raises one of
its two subclasses, which a reader that sorts refusals can tell apart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Sequence

from sgfmill import sgf

from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import BLACK, MAX_SIZE, MIN_SIZE, PASS, WHITE, CoordinateError, from_rowcol, to_rowcol
from tabula.engine.rules.game import GameState, Rules, scoring_from_sgf, sgf_ruleset, suicide_from_sgf

MAX_MOVES = 10_000  # a longer main line is not a game of Go: refused (reading is O(moves), undo keeps snapshots)
MAX_NODES = 100_000  # nodes of the main line, moves or not (comments, setup): a bound on the work per file

_COLORS = {"b": BLACK, "w": WHITE}
_LETTERS = {BLACK: "b", WHITE: "w"}


class SgfError(ValueError):
    """An SGF file that cannot be read or replayed."""


class SgfSizeError(SgfError):
    """A game on a board size Tabula does not play."""


class SgfSetupError(SgfError):
    """Setup that Tabula does not replay: AE (clearing points), or setup stones after the first move."""


@dataclass
class SgfRecord:
    """The main line of an SGF file, checked for shape but not yet replayed."""

    size: int
    komi: float
    handicap: int = 0
    setup: list[tuple[int, int]] = field(default_factory=list)  # (colour, flat point)
    first_to_move: int = BLACK
    moves: list[tuple[int, int]] = field(default_factory=list)  # (colour, move)
    black_name: str = ""
    white_name: str = ""
    result: str = ""
    ruleset: str = ""  # RU, as written ("Japanese", "Chinese", ...)


def read_sgf(data: bytes) -> SgfRecord:
    """Parse SGF bytes into an ``SgfRecord``; raises SgfError."""
    try:
        game = sgf.Sgf_game.from_bytes(data)
    except (ValueError, TypeError) as error:
        raise SgfError(f"unreadable SGF: {error}") from error
    try:
        return _record(game)
    except SgfError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as error:
        raise SgfError(f"malformed SGF: {_reason(error)}") from error


def _reason(error: Exception, default: str = "") -> str:
    """The text of ``error``, never empty: sgfmill often raises a bare ValueError, which gets ``default``."""
    text = str(error).strip()
    if isinstance(error, KeyError) and error.args:
        text = f"unknown value {error.args[0]!r}"
    return text or default or type(error).__name__


def _record(game: sgf.Sgf_game) -> SgfRecord:
    size = game.get_size()
    if not (MIN_SIZE <= size <= MAX_SIZE):
        raise SgfSizeError(f"board size {size} is not supported")
    root = game.get_root()
    komi = game.get_komi()
    if not math.isfinite(komi) or abs(komi) > 2 * size * size:
        raise SgfError(f"komi {komi!r} is not acceptable")
    handicap = game.get_handicap() or 0
    record = SgfRecord(size=size, komi=float(komi), handicap=handicap,
                       black_name=game.get_player_name("b") or "", white_name=game.get_player_name("w") or "")
    if root.has_property("RE"):
        record.result = str(root.get("RE"))
    if root.has_property("RU"):
        record.ruleset = str(root.get("RU"))
    seen_move = False
    has_player_to_move = False
    # main_sequence_iter reads the main line without building the whole tree (a file of many variations).
    for number, node in enumerate(game.main_sequence_iter()):
        if number >= MAX_NODES:
            raise SgfError(f"too many nodes: the main line has more than {MAX_NODES:,}")
        if node.has_setup_stones():
            try:
                black, white, empty = node.get_setup_stones()
            except ValueError as error:
                raise SgfError(f"malformed setup stones in node {number}: "
                               f"{_reason(error, 'a bad point or point range')}") from error
            if seen_move:
                raise SgfSetupError(f"setup stones after the first move (node {number}) are not supported")
            if empty:
                raise SgfSetupError("AE (clearing points) is not supported")
            for color, points in ((BLACK, black), (WHITE, white)):
                for point in sorted(points):
                    record.setup.append((color, _point(point, size)))
        if node.has_property("PL") and not seen_move:
            try:
                record.first_to_move = _COLORS[node.get("PL")]
            except ValueError as error:
                raise SgfError(f"malformed PL (player to move) in node {number}: "
                               f"{_reason(error, 'not B or W')}") from error
            has_player_to_move = True
        try:
            letter, point = node.get_move()
        except ValueError as error:
            raise SgfError(f"malformed move in node {number}: {_reason(error, 'bad point')}") from error
        if letter is None:
            continue
        if not seen_move and not has_player_to_move:
            record.first_to_move = _COLORS[letter]
        seen_move = True
        if len(record.moves) >= MAX_MOVES:
            raise SgfError(f"too many moves: the main line has more than {MAX_MOVES:,}")
        record.moves.append((_COLORS[letter], _point(point, size)))
    if not has_player_to_move and not record.moves and record.handicap >= 2 \
            and all(color == BLACK for color, _ in record.setup):
        record.first_to_move = WHITE  # a handicap setup with no moves yet: white plays first
    return record


def _point(point: tuple[int, int] | None, size: int) -> int:
    try:
        return from_rowcol(point, size)
    except CoordinateError as error:
        raise SgfError(str(error)) from error


def start_position(record: SgfRecord, rules: Rules | None = None) -> GameState:
    """The position before the first move of ``record``: its size, komi and setup stones.

    ``rules`` supplies the rules; komi comes from the file, and so do the scoring and multi-stone suicide where the
    file's RU names them (``scoring_from_sgf``: Japanese and Korean count territory, Chinese, AGA, NZ, ... area;
    ``suicide_from_sgf``: Tromp-Taylor, NZ and GOE allow suicide). The ko rule and white's handicap bonus stay
    ``rules``'s. Raises SgfError for an impossible setup.
    """
    rules = replace(rules or Rules(), komi=record.komi)
    scoring = scoring_from_sgf(record.ruleset)
    if scoring is not None and scoring != rules.scoring:
        rules = replace(rules, scoring=scoring, tax=None)  # the tax that goes with the scoring
    suicide = suicide_from_sgf(record.ruleset)
    if suicide is not None and suicide != rules.suicide:
        rules = replace(rules, suicide=suicide)
    state = GameState(record.size, rules)
    try:
        for color, point in record.setup:
            if state.color_at(point) != 0:
                raise SgfError(f"setup stone on an occupied point {point}")
            state.place_setup(point, color)
    except IllegalMoveError as error:
        raise SgfError(f"impossible setup position: {error}") from error
    if any(state.color_at(point) != color for color, point in record.setup):
        raise SgfError("impossible setup position: a setup stone has no liberty")
    state.handicap = record.handicap if record.setup else 0
    state.to_move = record.first_to_move
    return state


def replay(record: SgfRecord, rules: Rules | None = None, move_number: int | None = None,
           snapshot_every: int = 1) -> list[GameState]:
    """Positions of ``record``: snapshots after 0, ``snapshot_every``, 2 * ``snapshot_every``, ... moves, then
    always the last position (so ``[-1]`` is the game's end; ``snapshot_every=0`` gives only that).

    Every snapshot costs a copy of the history, O(moves): the default (every position) is for short games, and
    ``snapshot_every`` keeps a long game's replay O(moves). ``rules`` supplies the superko rule; komi comes from
    the file. With ``move_number`` the replay stops at the position just before move ``move_number`` (1 = the
    first move), as GTP ``loadsgf`` asks. Raises SgfError naming the move number of an illegal move.
    """
    state = start_position(record, rules)
    limit = len(record.moves) if move_number is None else max(0, min(len(record.moves), move_number - 1))
    positions = [state.copy()] if snapshot_every and limit > 0 else []
    for number, (color, move) in enumerate(record.moves[:limit], start=1):
        try:
            state.play(move, color)
        except IllegalMoveError as error:
            raise SgfError(f"illegal move {number}: {error.reason}") from error
        if snapshot_every and number % snapshot_every == 0 and number < limit:
            positions.append(state.copy())
    positions.append(state)
    return positions


def load_state(data: bytes, rules: Rules | None = None, move_number: int | None = None) -> GameState:
    """The position at the end of an SGF file's main line (or just before ``move_number``)."""
    return replay(read_sgf(data), rules, move_number, snapshot_every=0)[-1]


def write_sgf(state: GameState, black_name: str = "", white_name: str = "", result: str = "",
              application: str = "Tabula") -> bytes:
    """The game that led to ``state``: size, komi, handicap, setup stones, moves, players and result."""
    root: dict[str, object] = {}
    if black_name:
        root["PB"] = black_name
    if white_name:
        root["PW"] = white_name
    if result:
        root["RE"] = result
    first = state.moves[0][0] if state.moves else state.to_move
    return write_game(state.size, state.moves, state.rules.komi, state.rules.superko, setup=state.setup,
                      handicap=state.handicap, first_to_move=first, root=root, application=(application, "0.1"),
                      ruleset=sgf_ruleset(state.rules))


def write_game(size: int, moves: Sequence[tuple[int, int]], komi: float, superko: str,
               setup: Sequence[tuple[int, int]] = (), handicap: int = 0, first_to_move: int | None = None,
               root: dict[str, object] | None = None, per_move: Sequence[dict[str, object]] | None = None,
               final_comment: str = "", application: tuple[str, str] = ("Tabula", "0.1"), ruleset: str = "") -> bytes:
    """One SGF writer for every game Tabula saves (``printsgf``, self-play, ``tabula match``).

    ``moves``: (colour, flat move or PASS). ``setup``: (colour, flat point) before the first move; ``PL`` is
    written where the first mover is not the usual one (white after a handicap). ``root``: further root properties
    (PB, PW, RE, GN, DT, TM, OT, C ...). ``per_move``: properties of each move's node (BL/WL, OB/OW, C), aligned
    with ``moves``. ``final_comment`` is added to the last node's comment (the root's when there are no moves).
    ``ruleset``: RU (game.sgf_ruleset); "" writes Chinese, or Japanese for simple ko, as games of area scoring."""
    game = sgf.Sgf_game(size)
    node = game.get_root()
    node.set("KM", float(komi))
    node.set("RU", ruleset or ("Chinese" if superko != "simple" else "Japanese"))
    node.set("AP", application)
    if handicap:
        node.set("HA", handicap)
    if setup:
        node.set_setup_stones({to_rowcol(p, size) for c, p in setup if c == BLACK},
                              {to_rowcol(p, size) for c, p in setup if c == WHITE})
        if first_to_move is not None and not (handicap and first_to_move == WHITE):
            node.set("PL", _LETTERS[first_to_move])
    for key, value in (root or {}).items():
        node.set(key, value)
    # new_child, not extend_main_sequence(), which walks from the root on every call: quadratic in the moves
    for number, (color, move) in enumerate(moves):
        node = node.new_child()
        node.set_move(_LETTERS[color], None if move == PASS else to_rowcol(move, size))
        for key, value in (per_move[number] if per_move is not None else {}).items():
            node.set(key, value)
    if final_comment:
        node.set("C", (node.get("C") + "\n" if node.has_property("C") else "") + final_comment)
    return game.serialise()


__all__ = ["SgfError", "SgfSizeError", "SgfSetupError", "SgfRecord", "MAX_MOVES", "MAX_NODES", "read_sgf",
           "start_position", "replay", "load_state", "write_game", "write_sgf"]

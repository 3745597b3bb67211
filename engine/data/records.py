"""Game records for supervised learning: SGF files read in place from archives and folders, checked, counted and split.

Layer: above game (reads with ``engine.rules.sgf.read_sgf``, replays every game through ``GameState``). Nothing here
raises on a bad record: each one is dropped with a reason that ``FilterReport`` counts. Policy for odd results:

* ``B+T``/``W+T`` (time) and ``B+F``/``W+F`` (forfeit, the opponent left) keep their moves for the policy target but
  carry no value target (``value_weight`` 0): who ran out of time says little about the position.
* Handicap games are dropped by default (``handicap="drop"``); with ``handicap="policy"`` they are kept for the policy
  target only, for the same reason: their result says who played better than the handicap expected, a gap of
  strength the position does not show. ``handicap="value"`` keeps their results as value (and score) targets too,
  for a network that sees the stones and the komi (leelaz-18+komi) and is meant to learn what a handicap is worth
  between such players; self-play's handicap games, between equals, are the cleaner source of that.
* Draws (``0``, ``Draw``, ``Jigo``) keep a value target of 0. ``Void``, ``?`` and a missing ``RE`` are "no result".
"""
from __future__ import annotations

import hashlib
import math
import os
import random
import re
import tarfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np

from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, WHITE
from tabula.engine.rules.game import SIMPLE_KO, GameState, Rules
from tabula.engine.rules.sgf import SgfError, SgfSetupError, SgfSizeError, read_sgf

SGF_SUFFIXES = (".sgf",)

# Result kinds, stored as small integers in shards.
SCORE, RESIGN, TIME, FORFEIT, DRAW, OTHER = range(6)
RESULT_KIND_NAMES = ("score", "resign", "time", "forfeit", "draw", "other")

# Drop reasons, in the order the report prints them.
REASON_UNREADABLE = "unreadable SGF"
REASON_SIZE = "other board size"
REASON_NO_RESULT = "no result"
REASON_BAD_RESULT = "unparseable result"
REASON_HANDICAP = "handicap or setup stones"
REASON_SHORT = "too short"
REASON_ILLEGAL = "illegal move"
REASON_DUPLICATE = "duplicate"
REASONS = (REASON_UNREADABLE, REASON_SIZE, REASON_NO_RESULT, REASON_BAD_RESULT, REASON_HANDICAP, REASON_SHORT,
           REASON_ILLEGAL, REASON_DUPLICATE)


class RecordError(ValueError):
    """A record unfit for training; ``reason`` is one of ``REASONS``."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class RecordFilter:
    """What a record must be to be kept."""

    size: int = 19  # only this board size
    min_moves: int = 30  # games with fewer moves (passes included) are "too short"
    handicap: str = "drop"  # drop | policy (keep moves, no value target) | value (keep the result as well)
    require_result: bool = True  # drop games whose result is missing or "Void"/"?"
    superko: str = SIMPLE_KO  # replay rule: records come from Japanese/Korean-rule servers with no superko

    def __post_init__(self) -> None:
        if self.handicap not in ("drop", "policy", "value"):
            raise ValueError(f"handicap must be 'drop', 'policy' or 'value', not {self.handicap!r}")


@dataclass
class Record:
    """One game, checked by a full replay.

    ``moves`` are (colour, move) with move a flat point or ``PASS``; ``setup`` are (colour, point) placed before
    play (handicap or AB/AW). ``winner`` is BLACK, WHITE, or 0 for a draw or an unknown result.
    """

    name: str
    size: int
    komi: float
    moves: list[tuple[int, int]]
    setup: list[tuple[int, int]] = field(default_factory=list)
    handicap: int = 0
    winner: int = 0
    result_kind: int = OTHER
    value_weight: float = 1.0  # 0: the result is no value target (time, forfeit, handicap, unknown)
    margin: float = math.nan  # black's winning margin in points for games decided by counting (RE[B+3.5]: 3.5)
    # The final position's owner of each point (int8 [N*N], black +1, white -1, 0 dame or seki), black's view, for
    # games counted to the end whose owners agree with the recorded margin; None for all others.
    ownership: "np.ndarray | None" = None

    def key(self) -> bytes:
        """16-byte identity of the game for deduplication and the train/validation split: size, setup and moves."""
        digest = hashlib.blake2b(digest_size=16)
        digest.update(bytes([self.size]))
        for color, point in sorted(self.setup):
            digest.update(b"s%d,%d;" % (color, point))
        for color, move in self.moves:
            digest.update(b"%d,%d;" % (color, move))
        return digest.digest()

    def replay(self, rules: Rules | None = None, upto: int | None = None) -> GameState:
        """The position before move ``upto`` (default: after the last move)."""
        state = GameState(self.size, rules or Rules(komi=self.komi, superko=SIMPLE_KO))
        if self.setup:
            for color, point in self.setup:
                state.place_setup(point, color)
            if self.handicap:
                state.handicap = self.handicap
            state.to_move = self.moves[0][0] if self.moves else WHITE
        for color, move in self.moves[:upto]:
            state.play(move, color)
        return state


_RESULT = re.compile(r"^\s*([BW])\s*\+\s*(.*?)\s*$", re.I)


def parse_result(text: str | None) -> tuple[int, int]:
    """SGF ``RE`` → (winner, kind). Raises RecordError "no result" or "unparseable result"."""
    if text is None or not text.strip() or text.strip().lower() in ("?", "void", "unknown"):
        raise RecordError(REASON_NO_RESULT)
    word = text.strip()
    if word.lower() in ("0", "draw", "jigo", "d") or word.lower().startswith("draw"):
        return 0, DRAW
    match = _RESULT.match(word)
    if not match:
        raise RecordError(REASON_BAD_RESULT, word)
    winner = BLACK if match.group(1).upper() == "B" else WHITE
    margin = match.group(2).lower()
    if margin in ("r", "res", "resign", "resignation"):
        return winner, RESIGN
    if margin in ("t", "time"):
        return winner, TIME
    if margin in ("f", "forfeit"):
        return winner, FORFEIT
    if margin == "":
        return winner, OTHER
    try:
        float(margin)
    except ValueError:
        raise RecordError(REASON_BAD_RESULT, word) from None
    return winner, SCORE


def result_margin(text: str | None) -> float:
    """Black's margin from an SGF ``RE`` decided by counting (``B+3.5`` → 3.5, ``W+0.5`` → -0.5, a draw 0); NaN for
    every other result (resignation, time, forfeit, none)."""
    try:
        winner, kind = parse_result(text)
    except RecordError:
        return math.nan
    if kind == DRAW:
        return 0.0
    if kind != SCORE:
        return math.nan
    margin = float(_RESULT.match(text.strip()).group(2))
    return margin if winner == BLACK else -margin


def area_labels(board) -> np.ndarray:
    """The Tromp-Taylor owner of each point of ``board`` as an ownership target: int8 [N*N], black +1, white -1, 0
    neither."""
    owners = np.asarray(board.area_owners(), dtype=np.int8)[np.asarray(board.geometry.padded)]
    return np.select([owners == BLACK, owners == WHITE], [1, -1], 0).astype(np.int8)


def final_ownership(record: Record, rng: random.Random, playouts: int = 8,
                    tolerance: float = 3.0) -> np.ndarray | None:
    """The owners of the points at the end of a counted game (int8 [N*N], black +1, white -1, 0 neither), or None
    when they cannot be trusted.

    Dead stones are the strings that random playouts from the final position give to the opponent (as
    ``final_status_list`` judges them); the rest is counted by area. The labels are kept only when that count agrees
    with the recorded margin within ``tolerance`` points, so a game stopped before its dead stones were settled, or
    a seki the playouts misjudge, gives no ownership target. Area and territory counting differ by a point or two
    (prisoners, dame parity), hence the tolerance.
    """
    from tabula.engine.rules.playout import dead_stones, ownership  # playout sits above records' other needs

    if math.isnan(record.margin):
        return None
    state = record.replay()
    owned = ownership(state, rng, playouts)
    board = state.board.copy()
    for point in dead_stones(state, owned):
        board.color[board.geometry.padded[point]] = EMPTY  # area_owners reads only the colours
    labels = area_labels(board)
    area_margin = float(labels.sum()) - record.komi
    if abs(area_margin - record.margin) > tolerance:
        return None
    return labels


def parse_record(name: str, data: bytes, rules: RecordFilter = RecordFilter()) -> Record:
    """Read, check and replay one SGF game; raises RecordError (never anything else) for an unfit record.

    Duplicates are not detected here: see ``RecordReader``.
    """
    try:
        return _parse_record(name, data, rules)
    except RecordError:
        raise
    except IllegalMoveError as error:
        raise RecordError(REASON_ILLEGAL, str(error)) from None
    except Exception as error:  # sgfmill raises ValueError, KeyError, IndexError... on garbage
        raise RecordError(REASON_UNREADABLE, f"{type(error).__name__}: {error}") from None


def _parse_record(name: str, data: bytes, rules: RecordFilter) -> Record:
    try:
        game = read_sgf(data)
    except SgfSizeError as error:
        raise RecordError(REASON_SIZE, str(error)) from None
    except SgfSetupError as error:
        raise RecordError(REASON_HANDICAP, str(error)) from None
    except SgfError as error:
        raise RecordError(REASON_UNREADABLE, str(error)) from None
    if game.size != rules.size:
        raise RecordError(REASON_SIZE, str(game.size))
    result_text = game.result or None
    value_weight = 1.0
    try:
        winner, kind = parse_result(result_text)
    except RecordError:
        if rules.require_result:
            raise
        winner, kind, value_weight = 0, OTHER, 0.0
    if kind in (TIME, FORFEIT, OTHER):
        value_weight = 0.0
    if game.setup or game.handicap:
        if rules.handicap == "drop":
            raise RecordError(REASON_HANDICAP, f"HA[{game.handicap}] {len(game.setup)} setup stones")
        if rules.handicap == "policy":
            value_weight = 0.0
    if len(game.moves) < rules.min_moves:
        raise RecordError(REASON_SHORT, f"{len(game.moves)} moves")
    record = Record(name=name, size=game.size, komi=game.komi, moves=game.moves, setup=game.setup,
                    handicap=game.handicap or len(game.setup), winner=winner, result_kind=kind,
                    value_weight=value_weight, margin=result_margin(result_text) if value_weight > 0 else math.nan)
    record.replay(Rules(komi=game.komi, superko=rules.superko))  # raises IllegalMoveError
    return record


# -- sources -----------------------------------------------------------------------------------------------------


def _is_sgf(name: str) -> bool:
    return name.lower().endswith(SGF_SUFFIXES)


def iter_sgf_files(path: str) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of every SGF file in a tar (any compression, streamed), zip, folder (recursive) or SGF file."""
    if os.path.isdir(path):
        for directory, subdirs, files in os.walk(path):
            subdirs.sort()
            for file in sorted(files):
                if _is_sgf(file):
                    full = os.path.join(directory, file)
                    with open(full, "rb") as handle:
                        yield full, handle.read()
    elif zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.is_dir() and _is_sgf(info.filename):
                    yield f"{path}:{info.filename}", archive.read(info)
    elif _is_sgf(path):
        with open(path, "rb") as handle:
            yield path, handle.read()
    else:
        # "r|*" streams: members are read in order and never extracted to disk.
        with tarfile.open(path, "r|*") as archive:
            for member in archive:
                if member.isfile() and _is_sgf(member.name):
                    handle = archive.extractfile(member)
                    if handle is not None:
                        yield f"{path}:{member.name}", handle.read()


@dataclass
class FilterReport:
    """Counts of games read, kept and dropped (by reason), and of kept games without a value target."""

    read: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    no_value: Counter = field(default_factory=Counter)  # kept for the policy only, by result kind
    moves: int = 0  # moves of the kept games

    def to_dict(self) -> dict:
        return {"read": self.read, "kept": self.kept, "moves": self.moves,
                "dropped": {reason: self.dropped[reason] for reason in REASONS},
                "kept_without_value_target": dict(sorted(self.no_value.items()))}

    def format(self) -> str:
        rows = [("games read", self.read)]
        rows += [(f"  dropped: {reason}", self.dropped[reason]) for reason in REASONS]
        rows.append(("games kept", self.kept))
        rows += [(f"  kept, no value target: {kind}", count) for kind, count in sorted(self.no_value.items())]
        rows.append(("moves in kept games", self.moves))
        width = max(len(label) for label, _ in rows)
        return "\n".join(f"{label:<{width}} {count:>10}" for label, count in rows)


class RecordReader:
    """Reads games from sources, checks each, drops duplicates, and counts everything in ``report``.

    Duplicates are games whose setup and move sequence are identical (``Record.key``); the first one read is kept.
    """

    def __init__(self, rules: RecordFilter = RecordFilter()):
        self.rules = rules
        self.report = FilterReport()
        self._seen: set[bytes] = set()

    def read(self, sources: Iterable[tuple[str, bytes]], max_games: int | None = None) -> Iterator[Record]:
        for name, data in sources:
            if max_games is not None and self.report.kept >= max_games:
                return
            self.report.read += 1
            try:
                record = parse_record(name, data, self.rules)
            except RecordError as error:
                self.report.dropped[error.reason] += 1
                continue
            key = record.key()
            if key in self._seen:
                self.report.dropped[REASON_DUPLICATE] += 1
                continue
            self._seen.add(key)
            self.report.kept += 1
            self.report.moves += len(record.moves)
            if record.value_weight == 0:
                self.report.no_value[RESULT_KIND_NAMES[record.result_kind] if not record.setup
                                     else "handicap"] += 1
            yield record


def iter_records(paths: Iterable[str], rules: RecordFilter = RecordFilter(),
                 max_games: int | None = None) -> tuple[RecordReader, Iterator[Record]]:
    """A reader over every SGF in ``paths`` and the iterator of its kept records (the report fills as it runs)."""
    reader = RecordReader(rules)

    def sources() -> Iterator[tuple[str, bytes]]:
        for path in paths:
            yield from iter_sgf_files(path)

    return reader, reader.read(sources(), max_games)


def is_validation(key: bytes, fraction: float) -> bool:
    """Deterministic split by game: the same game lands on the same side whatever order it is read in."""
    return int.from_bytes(key[:8], "little") < fraction * 2.0 ** 64


__all__ = ["Record", "RecordError", "RecordFilter", "RecordReader", "FilterReport", "REASONS", "RESULT_KIND_NAMES",
           "iter_sgf_files", "iter_records", "parse_record", "parse_result", "result_margin", "final_ownership",
           "is_validation",
           "SCORE", "RESIGN", "TIME", "FORFEIT", "DRAW", "OTHER"]

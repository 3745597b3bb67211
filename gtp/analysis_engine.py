"""KataGo's JSON analysis engine protocol (``katago analysis``): one JSON query a line on stdin, one JSON answer a line
on stdout per analysed turn, in completion order; errors and warnings in KataGo's forms.

Layer: gtp (a protocol front end, like GTP). Queries are parsed here into ``Query`` objects (``parse_query``) and
their turns searched by a pool of workers (``AnalysisEngine``), a fresh ``Search`` a turn. The searches share one
``BatchingEvaluator``, so that the leaves of every position searched at once go to the network together, and one
table of network results per ruleset (``SharedTables``). Values are reported as KataGo reports them: win rates in
[0, 1], scores in points, from the player ``reportAnalysisWinratesAs`` names (BLACK, WHITE or SIDETOMOVE).
"""
from __future__ import annotations

import dataclasses
import heapq
import itertools
import json
import logging
import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

from tabula.engine.config import ConfigError, SearchConfig
from tabula.engine.net.batching import BatchingEvaluator
from tabula.engine.play.result import Candidate
from tabula.engine.play.search import Search
from tabula.engine.play.tree import TranspositionTable
from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import BLACK, COLUMNS, MAX_SIZE, MIN_SIZE, PASS, WHITE, CoordinateError, parse_vertex
from tabula.engine.rules.game import (
    HANDICAP_BONUSES,
    TERRITORY,
    GameState,
    UnsupportedRulesError,
    parse_rules,
)

log = logging.getLogger("tabula.analysis")

VERSION = "1.17.2"  # the KataGo release whose analysis protocol this speaks (query_version's ``version``)
SIDE_TO_MOVE, REPORT_AS = "SIDETOMOVE", ("BLACK", "WHITE", "SIDETOMOVE")
DEFAULT_PV_LEN = 15  # KataGo's analysisPVLen: moves of a PV after its first
MAX_KOMI = 400.0

# Every field a query may have (KataGo's list); any other gets a warning.
EXPECTED_KEYS = frozenset([
    "id", "action", "terminateId", "turnNumbers", "boardXSize", "boardYSize", "initialStones", "moves",
    "initialPlayer", "analyzeTurns", "priorities", "rules", "komi", "whiteHandicapBonus", "overrideSettings",
    "maxVisits", "analysisPVLen", "rootFpuReductionMax", "rootPolicyTemperature", "includeMovesOwnership",
    "includeMovesOwnershipStdev", "includeOwnership", "includeOwnershipStdev", "includePolicy", "includePVVisits",
    "includeNoResultValue", "reportDuringSearchEvery", "firstReportDuringSearchAfter", "priority", "allowMoves",
    "avoidMoves",
])
# Fields KataGo has that Tabula reads and cannot honour: a warning when one asks for something
UNSUPPORTED_FLAGS = {
    "includeOwnershipStdev": "ownership spreads are not reported by Tabula",
    "includeMovesOwnershipStdev": "per-move ownership spreads are not reported by Tabula",
}

# overrideSettings: KataGo's parameter names -> SearchConfig fields with the same meaning. SearchConfig's own field
# names are taken as well; maxVisits, maxTime and reportAnalysisWinratesAs are the query's, not the search's.
KATAGO_SETTINGS = {
    "cpuctExploration": "c_puct",
    "cpuctExplorationLog": "cpuct_log",
    "cpuctExplorationBase": "cpuct_log_base",
    "fpuReductionMax": "fpu_reduction",
    "fpuParentWeightByVisitedPolicy": "fpu_search_mean",
    "subtreeValueBiasFactor": "subtree_value_bias",
    "subtreeValueBiasWeightExponent": "subtree_value_bias_exponent",
    "rootFpuReductionMax": "fpu_root_reduction",
    "rootPolicyTemperature": "root_policy_temperature",
    "staticScoreUtilityFactor": "static_score_utility",
    "dynamicScoreUtilityFactor": "dynamic_score_utility",
    "dynamicScoreCenterScale": "dynamic_score_scale",
    "dynamicScoreCenterZeroWeight": "dynamic_score_zero_weight",
    "cpuctUtilityStdevScale": "cpuct_utility_stdev_scale",
    "cpuctUtilityStdevPrior": "cpuct_utility_stdev_prior",
    "cpuctUtilityStdevPriorWeight": "cpuct_utility_stdev_prior_weight",
    "useLcbForSelection": "lcb",
    "numSearchThreads": "threads",
    "nnCacheSizePowerOfTwo": None,  # accepted and ignored: one table per worker, sized at start
}
_QUERY_SETTINGS = ("maxVisits", "maxTime", "reportAnalysisWinratesAs", "rootNumSymmetriesToSample")

_UNUSED_FIELD = "Unexpected or unused field, do you have a typo? (tabula analysis --no-warn-unused-fields " \
                "disables this warning)"
_MOVES_FORM = 'Must be an array of pairs of the form: ["b" or "w", GTP board vertex]'
_RULES_FORM = ('Must specify rules string, such as "chinese" or "tromp-taylor", or a JSON object with detailed '
               'rules parameters.')
_KOMI_FORM = "Must be a integer or half-integer from -400.0 to 400.0"
_TERMINATE_TURNS = "If provided, must be an array of integers indicating turns to terminate"
_AVOID_FORM = "Must be a list of dicts with subfields 'player', 'moves', 'untilDepth'"


@dataclass(frozen=True)
class AnalysisConfig:
    """What ``tabula analysis`` runs with beside the engine's configuration (built at its entry point)."""

    # Positions searched at once, each by one Search (KataGo's numAnalysisThreads); their leaves share the network.
    # 0: ANALYSIS_THREADS_CPU or ANALYSIS_THREADS_GPU, for where the network runs (``threads_for``).
    analysis_threads: int = 0
    report_as: str = "BLACK"  # KataGo's reportAnalysisWinratesAs: BLACK, WHITE or SIDETOMOVE
    # Turns waiting for a worker at most: past it, stdin is not read until one starts (memory stays bounded)
    max_queued_turns: int = 1000
    pv_len: int = DEFAULT_PV_LEN  # moves of each PV after its first, unless a query says (analysisPVLen)
    warn_unused_fields: bool = True  # a warning for each query field KataGo does not know
    max_batch: int = 256  # positions per network call at most, over all the searches
    # At the end of input, stop what is searching and drop what is queued (KataGo's -quit-without-waiting) rather
    # than answer it all
    quit_without_waiting: bool = False

    def __post_init__(self) -> None:
        for name, least in (("analysis_threads", 0), ("max_queued_turns", 1), ("pv_len", 1), ("max_batch", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < least:
                raise ConfigError(type(self).__name__, name, f"must be {least} or more, not {value!r}")
        if self.report_as not in REPORT_AS:
            raise ConfigError(type(self).__name__, "report_as", f"must be one of {', '.join(REPORT_AS)}")


    def threads_for(self, on_gpu: bool) -> int:
        """``analysis_threads``, 0 resolved for where the network runs."""
        return self.analysis_threads or (ANALYSIS_THREADS_GPU if on_gpu else ANALYSIS_THREADS_CPU)


# Positions searched at once by default. On the CPU the Python tree work of many searches queues for the GIL: past a
# few at once more searches gain nothing and then cost time (docs/BENCHMARKS.md, "Analysis engine"). A GPU wants
# bigger batches from more searches.
ANALYSIS_THREADS_CPU = 4
ANALYSIS_THREADS_GPU = 16


class SharedTable(TranspositionTable):
    """A table of network results that several searches use at once (each method under its own lock): the
    analysis engine's workers share one per ruleset, as KataGo's analysis threads share one cache."""

    def __init__(self, capacity: int, rules: tuple):
        super().__init__(capacity)
        self.rules = rules
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            return super().get(key)

    def put(self, key, entry) -> None:
        with self._lock:
            super().put(key, entry)

    def clear(self) -> None:
        with self._lock:
            super().clear()


class SharedTables:
    """The workers' tables by ruleset (the game's class and its rules, komi included: the tables' keys have no
    komi), the ``MAX_RULESETS`` most recently used kept; each holds ``capacity`` results at most."""

    MAX_RULESETS = 2

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._tables: dict[tuple, SharedTable] = {}
        self._lock = threading.Lock()

    def for_state(self, state) -> SharedTable:
        rules = (type(state), getattr(state, "rules", None))
        with self._lock:
            table = self._tables.pop(rules, None)
            if table is None:  # not ``or``: an empty table is falsy
                table = SharedTable(self.capacity, rules)
            self._tables[rules] = table  # the most recent last
            while len(self._tables) > self.MAX_RULESETS:
                del self._tables[next(iter(self._tables))]
            return table

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()


class QueryError(ValueError):
    """A query refused: KataGo's error line for ``field`` (None: a general error, with no id)."""

    def __init__(self, field_name: str | None, message: str):
        super().__init__(message)
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class Query:
    """One analysis query, checked: its positions and how to search and report them."""

    id: str
    states: dict[int, GameState]  # turn number -> the position to analyse, side to move set
    priorities: dict[int, int]  # turn number -> priority (higher first)
    search: SearchConfig
    visits: int | None  # None: the search configuration's
    time_s: float | None  # maxTime: seconds a turn may search (None: no limit)
    report_as: str
    pv_len: int
    include_ownership: bool = False
    include_policy: bool = False
    include_pv_visits: bool = False
    include_no_result: bool = False
    include_moves_ownership: bool = False
    # KataGo's reportDuringSearchEvery and firstReportDuringSearchAfter: reports during the search, the first after
    # ``first_report_s``, the next every ``report_every_s`` (inf: none after the first); None: no reports
    report_every_s: float | None = None
    first_report_s: float | None = None
    # Root moves a turn's side to move may choose: (colour, flat points or PASS, allowed) with allowed True for
    # allowMoves (only these), False for avoidMoves (all but these)
    restrictions: tuple[tuple[int, frozenset[int], bool], ...] = ()
    warnings: tuple[tuple[str, str], ...] = ()  # (field, message)


# -- parsing --------------------------------------------------------------------------------------------------------

def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_player(value: Any, field_name: str) -> int:
    if isinstance(value, str) and value.strip().lower() in ("b", "black"):
        return BLACK
    if isinstance(value, str) and value.strip().lower() in ("w", "white"):
        return WHITE
    raise QueryError(field_name, 'Must be "b" or "w"')


_XY = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def parse_location(text: str, size: int) -> int:
    """A KataGo board location: a GTP vertex (``D4``, ``pass``; columns past Z as ``AA``, ``AB``... are off every
    board Tabula plays), or ``(x,y)`` with (0,0) the top left corner. CoordinateError where it is not one."""
    match = _XY.match(text.strip())
    if match:
        x, y = int(match.group(1)), int(match.group(2))
        if x < size and y < size:
            return (size - 1 - y) * size + x
        raise CoordinateError(f"{text!r} is off the board")
    move = parse_vertex(text, size)
    if move < PASS:
        raise CoordinateError("resign is not a location")
    return move


def format_location(move: int, size: int) -> str:
    if move == PASS:
        return "pass"
    y, x = divmod(move, size)
    return f"{COLUMNS[x]}{y + 1}"


def _locations(value: Any, field_name: str, size: int, allow_pass: bool) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise QueryError(field_name, "Must be an array of GTP board vertices")
    found = []
    for item in value:
        try:
            move = parse_location(item, size)
        except CoordinateError:
            move = None
        if move is None or (move == PASS and not allow_pass):
            raise QueryError(field_name, f"Could not parse board location: {item}")
        found.append(move)
    return found


def _moves(value: Any, field_name: str, size: int, allow_pass: bool) -> list[tuple[int, int]]:
    if not isinstance(value, list):
        raise QueryError(field_name, _MOVES_FORM)
    moves = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(part, str) for part in item)):
            raise QueryError(field_name, _MOVES_FORM)
        try:
            color = parse_player(item[0], field_name)
        except QueryError:
            raise QueryError(field_name, f"Could not parse player: {item[0]}") from None
        move = _locations([item[1]], field_name, size, allow_pass)[0]
        moves.append((color, move))
    return moves


def _integer(query: dict, name: str, low: int, high: int, message: str) -> int:
    value = query[name]
    if not _is_int(value) or not low <= value <= high:
        raise QueryError(name, message)
    return value


def _number(query: dict, name: str, low: float, high: float, message: str) -> float:
    value = query[name]
    if not _is_number(value) or not low <= value <= high:
        raise QueryError(name, message)
    return float(value)


def _boolean(query: dict, name: str) -> bool:
    if not isinstance(query[name], bool):
        raise QueryError(name, "Must be a boolean")
    return query[name]


def _board_size(query: dict, board_sizes: Iterable[int] | None) -> int:
    message = f"Must provide an integer from {MIN_SIZE} to {MAX_SIZE}"
    for name in ("boardXSize", "boardYSize"):
        if name not in query:
            raise QueryError(name, message)
        _integer(query, name, MIN_SIZE, MAX_SIZE, message)
    size = query["boardXSize"]
    if query["boardYSize"] != size:
        raise QueryError("boardYSize", f"Tabula plays square boards only: boardYSize {query['boardYSize']} and "
                                       f"boardXSize {size} differ")
    if board_sizes is not None and size not in board_sizes:
        playable = ", ".join(f"{s}x{s}" for s in sorted(board_sizes))
        raise QueryError("boardXSize", f"The network plays {playable}, not {size}x{size}")
    return size


def _rules(query: dict):
    if "rules" not in query or not isinstance(query["rules"], (str, dict)):
        raise QueryError("rules", _RULES_FORM)
    given = query["rules"]
    komi_in_rules = None
    shown = given if isinstance(given, str) else json.dumps(given, separators=(",", ":"))
    if isinstance(given, dict):
        given = dict(given)
        komi_in_rules = given.pop("komi", None)
        # As KataGo's rules parser: a komi in the object that is not a number, or not a half-integer within
        # bounds, makes the whole object unreadable (even where the query's own komi overrides it)
        if "komi" in query["rules"] and not (_is_number(komi_in_rules) and abs(komi_in_rules) <= MAX_KOMI
                                             and komi_in_rules * 2 == round(komi_in_rules * 2)):
            raise QueryError("rules", f"Could not parse rules: {shown} (komi {komi_in_rules!r} is not an integer or "
                                      f"half-integer from -400.0 to 400.0)")
        text = json.dumps(given)
    else:
        text = given
    try:
        rules = parse_rules(text)
    except UnsupportedRulesError as error:
        raise QueryError("rules", f"Could not parse rules: {shown} ({error})") from None
    if "komi" in query:
        komi = _number(query, "komi", -MAX_KOMI, MAX_KOMI, _KOMI_FORM)
    elif _is_number(komi_in_rules) and abs(komi_in_rules) <= MAX_KOMI:
        komi = float(komi_in_rules)
    else:
        komi = 6.5 if rules.scoring == TERRITORY else 7.5  # KataGo's guess without one
    if komi * 2 != round(komi * 2):
        raise QueryError("komi", _KOMI_FORM)
    rules = dataclasses.replace(rules, komi=komi)
    if "whiteHandicapBonus" in query:
        bonus = query["whiteHandicapBonus"]
        if not isinstance(bonus, str):
            raise QueryError("whiteHandicapBonus", "Must be a string")
        if bonus not in HANDICAP_BONUSES:
            raise QueryError("whiteHandicapBonus", f"Could not parse whiteHandicapBonus rule: {bonus}")
        rules = dataclasses.replace(rules, white_handicap_bonus=bonus)
    return rules


def _setting_value(field_type: type, value: Any) -> Any:
    """An overrideSettings value (JSON, or a string as KataGo's config files write it) as ``field_type``."""
    if isinstance(value, str):
        text = value.strip().lower()
        if field_type is bool and text in ("true", "false"):
            return text == "true"
        value = float(text) if field_type is not bool else value
    if field_type is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{value!r} is not a boolean")
        return value
    if not _is_number(value):
        raise ValueError(f"{value!r} is not a number")
    if field_type is int:
        if value != int(value):
            raise ValueError(f"{value!r} is not an integer")
        return int(value)
    return float(value)


def _overrides(settings: Any, search: SearchConfig, report_as: str
               ) -> tuple[SearchConfig, dict[str, Any], str, list[str]]:
    """(the search configuration, the query-level settings found, the perspective, unknown keys)."""
    if not isinstance(settings, dict):
        raise QueryError("overrideSettings", "Must be an object")
    types = {f.name: type(getattr(search, f.name)) for f in dataclasses.fields(search)}
    changes: dict[str, Any] = {}
    query_level: dict[str, Any] = {}
    unknown: list[str] = []
    try:
        for key, value in settings.items():
            if key == "reportAnalysisWinratesAs":
                word = str(value).strip().upper()
                if word not in REPORT_AS:
                    raise ValueError(f"reportAnalysisWinratesAs must be one of {', '.join(REPORT_AS)}")
                report_as = word
            elif key in _QUERY_SETTINGS:
                query_level[key] = _setting_value(float, value)
            elif key in KATAGO_SETTINGS or key in types:
                name = KATAGO_SETTINGS.get(key, key)
                if name is not None:
                    changes[name] = _setting_value(types[name], value)
            else:
                unknown.append(key)
        if "rootNumSymmetriesToSample" in query_level:
            changes["root_symmetries"] = query_level.pop("rootNumSymmetriesToSample") > 1
        search = dataclasses.replace(search, **changes)
    except (ValueError, TypeError) as error:  # ConfigError is a ValueError
        raise QueryError("overrideSettings", f"Could not set settings: {error}") from None
    return search, query_level, report_as, unknown


def _restrictions(query: dict, size: int) -> tuple[tuple[tuple[int, frozenset[int], bool], ...], bool]:
    """(colour, moves, allowing) entries of allowMoves or avoidMoves, and whether one asked for more than the
    root (untilDepth above 1)."""
    allowing, avoiding = "allowMoves" in query, "avoidMoves" in query
    if allowing and avoiding:
        raise QueryError("allowMoves", "Cannot specify both allowMoves and avoidMoves")
    name = "allowMoves" if allowing else "avoidMoves"
    entries = query[name]
    if not isinstance(entries, list):
        raise QueryError(name, _AVOID_FORM)
    if allowing and len(entries) > 2:
        raise QueryError(name, "Currently allowMoves only allows at most one entry per player")
    found: list[tuple[int, frozenset[int], bool]] = []
    deep = False
    for entry in entries:
        if not isinstance(entry, dict) or not {"moves", "untilDepth", "player"} <= entry.keys():
            raise QueryError(name, _AVOID_FORM)
        color = parse_player(entry["player"], "player")
        moves = _locations(entry["moves"], "moves", size, allow_pass=True)
        deep |= _integer(entry, "untilDepth", 1, 1_000_000_000, "Must be a positive integer") > 1
        if allowing and any(c == color for c, _, _ in found):
            raise QueryError(name, "Cannot specify allowMoves more than once for the same player")
        found.append((color, frozenset(moves), allowing))
    return tuple(found), deep


def parse_query(query: dict, config: AnalysisConfig, search: SearchConfig,
                board_sizes: Iterable[int] | None) -> Query:
    """A checked ``Query`` from a JSON object that has a string ``id`` and no ``action``; QueryError (with its
    field) for the first thing wrong, in the order KataGo checks them."""
    query_id = query["id"]
    warnings: list[tuple[str, str]] = []
    size = _board_size(query, board_sizes)
    setup = _moves(query["initialStones"], "initialStones", size, False) if "initialStones" in query else []
    if "moves" not in query:
        raise QueryError("moves", "Must specify an array of [player,location] pairs")
    moves = _moves(query["moves"], "moves", size, True)
    initial_player = parse_player(query["initialPlayer"], "initialPlayer") if "initialPlayer" in query else None

    if "analyzeTurns" in query:
        turns = query["analyzeTurns"]
        if not isinstance(turns, list) or not all(_is_int(t) for t in turns):
            raise QueryError("analyzeTurns", "Must specify an array of integers indicating turns to analyze")
        for turn in turns:
            if not 0 <= turn <= len(moves):
                raise QueryError("analyzeTurns", f"Invalid turn number: {turn}")
    else:
        turns = [len(moves)]
    priorities: dict[int, int] = {}
    if "priorities" in query:
        given = query["priorities"]
        if not isinstance(given, list) or not all(_is_int(p) for p in given):
            raise QueryError("priorities", "Must specify an array of integers indicating priorities")
        if "analyzeTurns" not in query:
            raise QueryError("priorities", "Can only specify when also specifying analyzeTurns")
        if len(given) != len(turns):
            raise QueryError("priorities", "Must be of matching length to analyzeTurns")
        for priority in given:
            if abs(priority) > 2 ** 62:
                raise QueryError("priorities", f"Invalid priority: {priority}")
        priorities = dict(zip(turns, given))

    rules = _rules(query)
    report_as = config.report_as
    query_level: dict[str, Any] = {}
    if "overrideSettings" in query:
        search, query_level, report_as, unknown = _overrides(query["overrideSettings"], search, report_as)
        if unknown:
            warnings.append(("overrideSettings", f"Unknown config params: {','.join(unknown)}"))
    visits = None
    if "maxVisits" in query_level:
        visits = max(1, int(query_level["maxVisits"]))
    if "maxVisits" in query:
        visits = _integer(query, "maxVisits", 1, 1 << 50, "Must be an integer from 1 to 2^50")
    time_s = query_level.get("maxTime")
    time_s = time_s if time_s is not None and time_s > 0 else None
    pv_len = config.pv_len
    if "analysisPVLen" in query:
        pv_len = _integer(query, "analysisPVLen", 1, 1000, "Must be an integer from 1 to 1000")
    changes: dict[str, Any] = {}
    if "rootFpuReductionMax" in query:
        changes["fpu_root_reduction"] = _number(query, "rootFpuReductionMax", 0.0, 2.0,
                                                "Must be a number from 0.0 to 2.0")
    if "rootPolicyTemperature" in query:
        changes["root_policy_temperature"] = _number(query, "rootPolicyTemperature", 0.01, 100.0,
                                                     "Must be a number from 0.01 to 100.0")
    search = dataclasses.replace(search, **changes)
    flags = {}
    for name in ("includeOwnership", "includePolicy", "includePVVisits", "includeNoResultValue",
                 "includeMovesOwnership", *UNSUPPORTED_FLAGS):
        flags[name] = _boolean(query, name) if name in query else False
        if flags[name] and name in UNSUPPORTED_FLAGS:
            warnings.append((name, UNSUPPORTED_FLAGS[name]))
    # As KataGo: reportDuringSearchEvery sets both the interval and the first report's time, which
    # firstReportDuringSearchAfter overrides; given alone, the latter asks for that one report only.
    report_every = first_report = None
    if "reportDuringSearchEvery" in query:
        report_every = first_report = _number(query, "reportDuringSearchEvery", 0.001, 1_000_000.0,
                                              "Must be number of seconds from 0.001 to 1000000.0")
    if "firstReportDuringSearchAfter" in query:
        first_report = _number(query, "firstReportDuringSearchAfter", 0.001, 1_000_000.0,
                               "Must be number of seconds from 0.001 to 1000000.0")
        if report_every is None:
            report_every = math.inf
    priority = 0
    if "priority" in query:
        if "priorities" in query:
            raise QueryError("priority", "Cannot specify both priority and priorities")
        priority = _integer(query, "priority", -2 ** 62, 2 ** 62, "Must be a number between -2^62 and 2^62")
    restrictions: tuple = ()
    if "allowMoves" in query or "avoidMoves" in query:
        restrictions, deep = _restrictions(query, size)
        if deep:
            warnings.append(("allowMoves" if "allowMoves" in query else "avoidMoves",
                             "Tabula restricts the root's moves only: untilDepth above 1 is taken as 1"))
    if config.warn_unused_fields:
        warnings += [(key, _UNUSED_FIELD) for key in query if key not in EXPECTED_KEYS]

    states = _positions(size, rules, setup, moves, initial_player, set(turns))
    return Query(id=query_id, states=states, priorities={t: priorities.get(t, priority) for t in states},
                 search=search, visits=visits, time_s=time_s, report_as=report_as, pv_len=pv_len,
                 include_ownership=flags["includeOwnership"], include_policy=flags["includePolicy"],
                 include_pv_visits=flags["includePVVisits"], include_no_result=flags["includeNoResultValue"],
                 include_moves_ownership=flags["includeMovesOwnership"],
                 report_every_s=report_every, first_report_s=first_report, restrictions=restrictions,
                 warnings=tuple(warnings))


def _positions(size: int, rules, setup: list[tuple[int, int]], moves: list[tuple[int, int]],
               initial_player: int | None, turns: set[int]) -> dict[int, GameState]:
    """The position before each move of ``turns`` (turn t: after t moves), with its side to move."""
    black = sum(1 for color, _ in setup if color == BLACK)
    handicap = black if setup and black == len(setup) and black >= 2 else 0  # black stones alone: a handicap
    if initial_player is None:
        initial_player = moves[0][0] if moves else (WHITE if handicap else BLACK)
    state = GameState(size, rules)
    state.to_move = initial_player  # before the stones: each placement starts the superko history for this side
    try:
        for color, point in setup:
            if state.color_at(point) != 0:
                raise IllegalMoveError("occupied")
            state.place_setup(point, color)
    except (IllegalMoveError, ValueError) as error:
        raise QueryError("initialStones", f"Could not place the initial stones: {error}") from None
    state.handicap = handicap
    states: dict[int, GameState] = {}
    for turn in range(len(moves) + 1):
        if turn in turns:
            states[turn] = state.copy()
        if turn == len(moves):
            break
        color, move = moves[turn]
        try:
            state.play(move, color)
        except IllegalMoveError:
            raise QueryError("moves", f"Illegal move {turn}: {format_location(move, size)}") from None
    return states


# -- reporting ------------------------------------------------------------------------------------------------------

def _round(x: float) -> float:
    """KataGo's output precision: 8 significant digits."""
    return float(f"{x:.8g}")


def _sign(report_as: str, to_move: int) -> float:
    """+1 where the reported player is the side to move, -1 where it is the opponent."""
    if report_as == SIDE_TO_MOVE:
        return 1.0
    return 1.0 if (report_as == "BLACK") == (to_move == BLACK) else -1.0


def _rows_from_top(values: np.ndarray, size: int) -> list[float]:
    """Per-point values (flat, y = 0 the bottom row) in KataGo's order: rows from the top, left to right."""
    rows = np.asarray(values, dtype=np.float64).reshape(size, size)[::-1].reshape(-1)
    return [_round(float(v)) for v in rows]


def move_info(candidate: Candidate, size: int, sign: float, pv_len: int,
              pv_visits: list[int] | None = None, no_result: bool = False) -> dict[str, Any]:
    """One ``moveInfos`` entry: the search's numbers for a root move in KataGo's fields and perspective."""
    winrate = candidate.winrate if sign > 0 else 1.0 - candidate.winrate
    lcb = candidate.lcb_winrate if sign > 0 else 1.0 - candidate.lcb_winrate  # as KataGo flips it
    score = sign * candidate.score
    info: dict[str, Any] = {
        "move": format_location(candidate.move, size),
        "visits": candidate.visits,
        "edgeVisits": candidate.visits,
        "utility": _round(sign * candidate.utility),
        "winrate": _round(winrate),
        "scoreMean": _round(score),  # KataGo reports the lead here too, for older tools
        "scoreSelfplay": _round(score),
        "scoreLead": _round(score),
        "scoreStdev": _round(candidate.score_stdev),
        "prior": _round(candidate.prior),
        "lcb": _round(lcb),
        "utilityLcb": _round(sign * candidate.utility_lcb),
        "order": candidate.order,
        "pv": [format_location(m, size) for m in candidate.pv[:pv_len + 1]],
    }
    if no_result:
        info["noResultValue"] = 0.0  # positional and situational superko end no game without a result
    if pv_visits is not None:
        info["pvVisits"] = pv_visits[:len(info["pv"])]
        info["pvEdgeVisits"] = info["pvVisits"]
    return info


def state_hash(state: GameState) -> str:
    """``thisHash``: the position, side to move and ko point (``GameState.hash``), as 32 hex digits."""
    return f"{state.hash & ((1 << 128) - 1):032X}"


def analysis_response(query: Query, turn: int, search: Search, candidates: list[Candidate],
                      during: bool) -> dict[str, Any]:
    """The answer for one turn, from its search (during it or after)."""
    state = query.states[turn]
    size = state.size
    sign = _sign(query.report_as, state.to_move)
    # ownership is black's view in the search: +1 for black from BLACK's view (and SIDETOMOVE's with black to move)
    owner_sign = 1.0 if query.report_as == "BLACK" or (query.report_as == SIDE_TO_MOVE
                                                        and state.to_move == BLACK) else -1.0
    infos = []
    for candidate in candidates:
        visits = search.pv_visits(candidate.move) if query.include_pv_visits else None
        info = move_info(candidate, size, sign, query.pv_len, visits, query.include_no_result)
        if query.include_moves_ownership:
            owned = search.move_ownership(candidate.move)
            if owned is not None:
                info["ownership"] = _rows_from_top(owner_sign * owned, size)
        infos.append(info)
    stats = search.root_stats()
    root: dict[str, Any] = {
        "currentPlayer": "B" if state.to_move == BLACK else "W",
        "visits": stats.visits,
        "winrate": _round(0.5 + 0.5 * sign * stats.value),
        "scoreLead": _round(sign * stats.score),
        "scoreSelfplay": _round(sign * stats.score),
        "scoreStdev": _round(stats.score_stdev),
        "utility": _round(sign * stats.utility),
        "rawWinrate": _round(0.5 + 0.5 * sign * stats.raw_value),
        "rawLead": _round(sign * stats.raw_score),
        "rawScoreSelfplay": _round(sign * stats.raw_score),
        "thisHash": state_hash(state),
    }
    response: dict[str, Any] = {"id": query.id, "isDuringSearch": during, "turnNumber": turn, "moveInfos": infos,
                                "rootInfo": root}
    if query.include_ownership:
        owned = search.ownership()
        if owned is not None:
            response["ownership"] = _rows_from_top(owner_sign * owned, size)
    if query.include_policy:
        response["policy"] = root_policy(state, search.root_priors())
    return response


def root_policy(state: GameState, priors: dict[int, float]) -> list[float]:
    """KataGo's ``policy``: the root's priors over the points (rows from the top) then pass, -1 on illegal ones.
    The priors are those the search used: the network's, averaged over the symmetries where the search averages
    the root, with own-eye fills at 0."""
    size = state.size
    legal = state.legal_mask()  # bool [N*N+1], pass last
    values = np.array([priors.get(point, 0.0) if legal[point] else -1.0 for point in range(size * size)])
    return _rows_from_top(values, size) + [_round(priors.get(PASS, 0.0))]


# -- the engine -----------------------------------------------------------------------------------------------------

QUEUED, RUNNING, TERMINATED, DONE = "queued", "running", "terminated", "done"


@dataclass
class _Turn:
    """One turn of a query on its way through the engine; ``status`` changes under the engine's lock."""

    query: Query
    number: int
    seq: int  # arrival order, which breaks ties of priority
    status: str = QUEUED
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def order(self) -> tuple[int, int]:
        return -self.query.priorities[self.number], self.seq


class AnalysisEngine:
    """Serves the analysis protocol: ``handle_line`` for each input line, ``finish`` at the end of input.

    ``write`` receives each output line (a JSON object, no newline) and must be thread-safe; workers call it as
    turns finish. ``evaluator`` is wrapped in a ``BatchingEvaluator`` shared by the workers' searches; ``search``
    is the configuration every turn starts from (a query's settings replace parts of it); ``seed`` seeds the
    workers' random generators.
    """

    def __init__(self, evaluator, search: SearchConfig, config: AnalysisConfig, write: Callable[[str], None],
                 seed: int | None = None):
        self.config = config
        self.batcher = BatchingEvaluator(evaluator, config.max_batch)
        self.board_sizes = getattr(evaluator, "board_sizes", None)
        # The search's shape for the network: threads, batch and batches in flight left at 0 are resolved here.
        self.search = search.for_network(on_gpu=self.batcher.on_gpu)
        self._write = write
        self._lock = threading.Condition()
        self._heap: list[tuple[tuple[int, int], _Turn]] = []
        self._open: dict[int, _Turn] = {}  # seq -> turn, queued or running
        self._queued = 0
        self._closing = False
        self._seq = itertools.count()
        self.threads = config.threads_for(self.batcher.on_gpu)
        seeds = np.random.SeedSequence(seed).spawn(self.threads)
        # The network results every worker's searches share, by ruleset (SearchConfig.cache_entries each).
        self.tables = SharedTables(self.search.cache_entries)
        self._workers = [threading.Thread(target=self._work, args=(np.random.default_rng(s),),
                                          name=f"analysis-{i}", daemon=True) for i, s in enumerate(seeds)]
        for worker in self._workers:
            worker.start()

    # -- input ----------------------------------------------------------------------------------------------------

    def handle_line(self, line: str) -> None:
        """One input line: an action, or a query whose turns are queued (waiting while the queue is full)."""
        line = line.strip()
        if not line:
            return
        try:
            query = json.loads(line)
        except ValueError as error:
            self._error(None, None, f"{error} - could not parse input line as json request: {line}")
            return
        if not isinstance(query, dict):
            self._error(None, None, f"Request line was valid json but was not an object, ignoring: {line}")
            return
        if not isinstance(query.get("id"), str):
            self._error(None, None, 'Request must have a string "id" field')
            return
        try:
            if isinstance(query.get("action"), str):
                self._action(query)
            else:
                self._enqueue(parse_query(query, self.config, self.search, self.board_sizes))
        except QueryError as error:
            self._error(query["id"] if error.field else None, error.field, error.message)
        except Exception as error:  # a bug here must not end the engine: the query gets an error, and we go on
            log.exception("internal error on query %s", query.get("id"))
            self._error(query["id"], "id", f"internal error: {error}")

    def _action(self, query: dict) -> None:
        action = query["action"]
        if action == "query_version":
            self._emit({**query, "version": VERSION, "git_hash": "<omitted>"})
        elif action == "query_models":
            self._emit({**query, "models": [{"name": "tabula", "internalName": "tabula",
                                             "maxBatchSize": self.config.max_batch, "usesHumanSLProfile": False,
                                             "version": 0, "usingFP16": "auto"}]})
        elif action == "clear_cache":
            self.tables.clear()  # the searches running keep theirs to their end; every later one starts afresh
            self._emit(query)
        elif action in ("terminate", "terminate_all"):
            target = None
            if action == "terminate":
                target = query.get("terminateId")
                if not isinstance(target, str):
                    raise QueryError("terminateId",
                                     'Requests for a terminate action must have a string "terminateId" field')
            turns = None
            if "turnNumbers" in query:
                turns = query["turnNumbers"]
                if not isinstance(turns, list) or not all(_is_int(t) for t in turns):
                    raise QueryError("turnNumbers", _TERMINATE_TURNS)
            self.terminate(target, turns)
            self._emit(query)
        else:
            raise QueryError(None, "'action' field must be 'query_version' or 'query_models' or 'clear_cache' or "
                                   "'terminate' or 'terminate_all'")

    def _enqueue(self, query: Query) -> None:
        for field_name, message in query.warnings:
            self._emit({"id": query.id, "field": field_name, "warning": message})
        with self._lock:
            # Back-pressure: while the queue is full, the reader waits here and stdin is not read further.
            while self._queued >= self.config.max_queued_turns and not self._closing:
                self._lock.wait()
            for number in sorted(query.states):
                turn = _Turn(query, number, next(self._seq))
                heapq.heappush(self._heap, (turn.order, turn))
                self._open[turn.seq] = turn
                self._queued += 1
            self._lock.notify_all()

    def terminate(self, query_id: str | None, turns: list[int] | None = None) -> None:
        """Stop the open turns of ``query_id`` (None: of every query), only ``turns`` where given: a queued one is
        answered at once with ``noResults``, a running one stops and reports what it found."""
        unanswered = []
        with self._lock:
            for turn in list(self._open.values()):
                if query_id is not None and turn.query.id != query_id:
                    continue
                if turns is not None and turn.number not in turns:
                    continue
                if turn.status == QUEUED:
                    turn.status = TERMINATED
                    self._queued -= 1
                    del self._open[turn.seq]
                    unanswered.append(turn)
                elif turn.status == RUNNING:
                    turn.stop.set()
            self._lock.notify_all()
        for turn in unanswered:
            self._emit({"id": turn.query.id, "isDuringSearch": False, "noResults": True, "turnNumber": turn.number})

    def finish(self) -> None:
        """The end of input: answer every queued turn (or, with ``quit_without_waiting``, stop them all), then stop
        the workers and the network thread."""
        if self.config.quit_without_waiting:
            self.terminate(None)
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        for worker in self._workers:
            worker.join()
        self.batcher.close()

    # -- output ---------------------------------------------------------------------------------------------------

    def _emit(self, response: dict[str, Any]) -> None:
        self._write(json.dumps(response, separators=(",", ":")))

    def _error(self, query_id: str | None, field_name: str | None, message: str) -> None:
        response: dict[str, Any] = {"error": message}
        if query_id is not None:
            response = {"id": query_id, "field": field_name, "error": message}
        log.info("error: %s", response)
        self._emit(response)

    # -- workers --------------------------------------------------------------------------------------------------

    def _next_turn(self) -> _Turn | None:
        with self._lock:
            while True:
                while self._heap:
                    _, turn = heapq.heappop(self._heap)
                    if turn.status == QUEUED:
                        turn.status = RUNNING
                        self._queued -= 1
                        self._lock.notify_all()  # room in the queue: the reader may go on
                        return turn
                if self._closing:
                    return None
                self._lock.wait()

    def _work(self, rng: np.random.Generator) -> None:
        while True:
            turn = self._next_turn()
            if turn is None:
                return
            try:
                self._analyse(turn, rng, self.tables.for_state(turn.query.states[turn.number]))
            except Exception as error:  # the turn gets an error line; the worker serves on
                log.exception("analysis of %s turn %d failed", turn.query.id, turn.number)
                self._error(turn.query.id, "id", f"internal error on turn {turn.number}: {error}")
            finally:
                with self._lock:
                    turn.status = DONE
                    self._open.pop(turn.seq, None)

    def _analyse(self, turn: _Turn, rng: np.random.Generator, cache: TranspositionTable) -> None:
        query = turn.query
        state = query.states[turn.number]
        search = Search(self.batcher, query.search, rng, cache=cache)
        allowed = _allowed(state, query.restrictions)
        progress = None
        if query.report_every_s is not None:
            def progress(candidates: list[Candidate]) -> None:
                self._emit(analysis_response(query, turn.number, search, candidates, during=True))
        result = search.run(state, visits=query.visits, playouts=0, time_s=query.time_s, allowed=allowed,
                            early_stop=False, stop=turn.stop, on_progress=progress,
                            progress_interval_s=query.report_every_s or 1.0, first_progress_s=query.first_report_s)
        self._emit(analysis_response(query, turn.number, search, result.candidates, during=False))


def _allowed(state: GameState, restrictions) -> list[int] | None:
    """The root moves the side to move may choose under allowMoves/avoidMoves (None: all). Only the root's are
    restricted, whatever untilDepth says."""
    for color, moves, allowing in restrictions:
        if color != state.to_move:
            continue
        if allowing:
            return sorted(moves)
        return [m for m in state.legal_moves() + [PASS] if m not in moves]
    return None


# -- the loop -------------------------------------------------------------------------------------------------------

def serve(engine: AnalysisEngine, lines: Iterable[str]) -> None:
    """Feed ``lines`` to ``engine`` until they end, then answer what is queued."""
    try:
        for line in lines:
            engine.handle_line(line)
    finally:
        engine.finish()


def line_writer(stream) -> Callable[[str], None]:
    """A thread-safe ``write`` for ``AnalysisEngine``: each line whole, flushed. Once the client has closed its end,
    lines are dropped (the searches left finish quietly)."""
    lock = threading.Lock()
    closed = []

    def write(line: str) -> None:
        with lock:
            if closed:
                return
            try:
                stream.write(line + "\n")
                stream.flush()
            except (OSError, ValueError):  # a broken pipe, or a closed stream
                closed.append(True)
    return write


__all__ = ["AnalysisConfig", "AnalysisEngine", "Query", "QueryError", "parse_query", "parse_location",
           "analysis_response", "serve", "line_writer", "VERSION"]

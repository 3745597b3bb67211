"""`tabula match`'s settings: what a match is (MatchConfig, saved as config.json), its time control, and the
names its files and faults go by."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from tabula.engine.play.timecontrol import TimeSettings
from tabula.engine.rules.game import POSITIONAL

RESULTS_FILE = "results.jsonl"
CONFIG_FILE = "config.json"

NO_TIME, ABSOLUTE, CANADIAN, BYOYOMI = "none", "absolute", "canadian", "byoyomi"
SCORING_METHODS = ("engines", "referee", "tromp-taylor")

# Fault kinds, one per way an engine can lose a game other than on the board.
ILLEGAL, CRASH, HANG, MALFORMED, REFUSED, TIME_LOSS = "illegal", "crash", "hang", "malformed", "refused", "time"
FAULT_KINDS = (ILLEGAL, CRASH, HANG, MALFORMED, REFUSED, TIME_LOSS)

# Settings that define what a game is: a rerun in the same directory must agree on all of these to resume.
IDENTITY_FIELDS = ("engines", "names", "size", "komi", "handicap", "handicap_mode", "max_moves", "time", "scoring",
                   "referee", "superko", "gauntlet", "fixed_colors", "untimed", "openings")


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
    # Engines (by index) that play without a clock: no time_settings, no time_left, never lost on time (a hang
    # still is). GNU Go plays its --level whatever the clock says, so a clock only makes it lose on time.
    untimed: tuple[int, ...] = ()
    # Opening lines, each the GTP vertices of the first moves in order (black first, white after handicap
    # stones): each line is played out before the engines move, once with each colour assignment.
    openings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def move_limit(self) -> int:
        return self.max_moves or 3 * self.size * self.size


def config_name(config: MatchConfig, index: int) -> str:
    return config.names[index] if index < len(config.names) else f"engine {index}"

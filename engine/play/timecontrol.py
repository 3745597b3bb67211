"""Clocks: the time settings of a game, what is left on each player's clock, and the budget of one move.

Layer: above config, below player. Nothing here reads the time: the player passes elapsed seconds in, and
``budget_s`` receives the lag buffer explicitly [KataGo ``TimeControls``]. Every duration is in seconds.

Overtime kinds: ``byoyomi`` is Japanese byo-yomi (``periods`` periods of ``period_s`` each; a move that fits in
a period keeps it), ``canadian`` is ``stones`` stones to play in ``period_s``, ``fischer`` adds ``period_s``
after every move.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

NONE, ABSOLUTE, BYOYOMI, CANADIAN, FISCHER = "none", "absolute", "byoyomi", "canadian", "fischer"
KINDS = (NONE, ABSOLUTE, BYOYOMI, CANADIAN, FISCHER)

MAX_SECONDS = 1e7  # about four months: anything longer is a mistake, not a time control
MAX_COUNT = 10_000  # periods or stones


class TimeSettingsError(ValueError):
    """Time settings that make no sense (negative, not finite, unknown kind)."""


def _seconds(value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value < 0 or value > MAX_SECONDS:
        raise TimeSettingsError(f"invalid time {value!r}")
    return value


def _count(value: int) -> int:
    if isinstance(value, float) and not value.is_integer():
        raise TimeSettingsError(f"invalid count {value!r}")
    value = int(value)
    if value < 0 or value > MAX_COUNT:
        raise TimeSettingsError(f"invalid count {value!r}")
    return value


@dataclass(frozen=True)
class TimeSettings:
    """How much time a game gives each player. ``none`` means no limit."""

    kind: str = NONE
    main_s: float = 0.0  # main time
    period_s: float = 0.0  # byoyomi period, canadian period, or fischer increment
    periods: int = 0  # byoyomi: number of periods
    stones: int = 0  # canadian: stones per period

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TimeSettingsError(f"unknown time control {self.kind!r}")
        _seconds(self.main_s)
        _seconds(self.period_s)
        _count(self.periods)
        _count(self.stones)
        if self.kind == CANADIAN and (self.stones < 1 or self.period_s <= 0):
            raise TimeSettingsError("canadian overtime needs stones > 0 and time > 0")
        if self.kind == BYOYOMI and (self.periods < 1 or self.period_s <= 0):
            raise TimeSettingsError("byoyomi needs periods > 0 and time > 0")

    @classmethod
    def none(cls) -> "TimeSettings":
        return cls(NONE)

    @classmethod
    def absolute(cls, main_s: float) -> "TimeSettings":
        return cls(ABSOLUTE, main_s=_seconds(main_s))

    @classmethod
    def byoyomi(cls, main_s: float, period_s: float, periods: int) -> "TimeSettings":
        period_s, periods = _seconds(period_s), _count(periods)
        if periods == 0 or period_s == 0:
            return cls.absolute(main_s)
        return cls(BYOYOMI, main_s=_seconds(main_s), period_s=period_s, periods=periods)

    @classmethod
    def canadian(cls, main_s: float, period_s: float, stones: int) -> "TimeSettings":
        period_s, stones = _seconds(period_s), _count(stones)
        if stones == 0 or period_s == 0:
            return cls.absolute(main_s)
        return cls(CANADIAN, main_s=_seconds(main_s), period_s=period_s, stones=stones)

    @classmethod
    def fischer(cls, main_s: float, increment_s: float) -> "TimeSettings":
        return cls(FISCHER, main_s=_seconds(main_s), period_s=_seconds(increment_s))

    @classmethod
    def from_gtp(cls, main_s: float, byo_yomi_s: float, byo_yomi_stones: int) -> "TimeSettings":
        """GTP ``time_settings``: canadian overtime. Per the spec, byo-yomi time > 0 with 0 stones means no
        limit; byo-yomi time 0 means absolute."""
        main_s, byo_yomi_s, stones = _seconds(main_s), _seconds(byo_yomi_s), _count(byo_yomi_stones)
        if byo_yomi_s > 0 and stones == 0:
            return cls.none()
        if byo_yomi_s == 0:
            return cls.absolute(main_s)
        return cls.canadian(main_s, byo_yomi_s, stones)

    @classmethod
    def from_kgs(cls, args: list[str]) -> "TimeSettings":
        """KGS ``kgs-time_settings`` / KataGo ``kata-time_settings`` arguments: ``none``, ``absolute MAIN``,
        ``byoyomi MAIN PERIOD PERIODS``, ``canadian MAIN PERIOD STONES``, ``fischer MAIN INCREMENT``."""
        if not args:
            raise TimeSettingsError("missing time control kind")
        kind, numbers = args[0].lower(), args[1:]
        arity = {NONE: 0, ABSOLUTE: 1, BYOYOMI: 3, CANADIAN: 3, FISCHER: 2}
        if kind not in arity or len(numbers) != arity[kind]:
            raise TimeSettingsError("wrong time control arguments")
        try:
            values = [float(x) for x in numbers]
        except ValueError as error:
            raise TimeSettingsError("time is not a number") from error
        if kind == NONE:
            return cls.none()
        if kind == ABSOLUTE:
            return cls.absolute(values[0])
        if kind == BYOYOMI:
            return cls.byoyomi(values[0], values[1], _count(values[2]))
        if kind == CANADIAN:
            return cls.canadian(values[0], values[1], _count(values[2]))
        return cls.fischer(values[0], values[1])


@dataclass
class ClockState:
    """What is left on one player's clock. Changed only by ``charge`` and ``set_left``."""

    main_left_s: float = 0.0
    period_left_s: float = 0.0  # time left in the current overtime period (canadian: for its remaining stones)
    periods_left: int = 0  # byoyomi periods left
    stones_left: int = 0  # canadian stones still to play in the current period
    flagged: bool = False  # ran out of time

    @classmethod
    def start(cls, settings: TimeSettings) -> "ClockState":
        return cls(main_left_s=settings.main_s, period_left_s=settings.period_s, periods_left=settings.periods,
                   stones_left=settings.stones)

    def in_overtime(self, settings: TimeSettings) -> bool:
        return settings.kind in (BYOYOMI, CANADIAN) and self.main_left_s <= 0

    def charge(self, settings: TimeSettings, elapsed_s: float, grace_s: float = 0.0) -> None:
        """Take ``elapsed_s`` seconds spent on one move off the clock, by the rules of ``settings``. ``grace_s``: an
        overrun a referee forgives (transport, process start-up) before the flag falls; it is forgiven once, not on
        every move, since the clock keeps the overrun (absolute time, a Canadian period) or spends the last period
        on it (byo-yomi)."""
        elapsed_s = max(0.0, elapsed_s)
        grace_s = max(0.0, grace_s)
        kind = settings.kind
        if kind == NONE:
            return
        if kind in (ABSOLUTE, FISCHER):
            self.main_left_s -= elapsed_s
            if self.main_left_s < -grace_s:
                self.flagged = True
            elif kind == FISCHER:
                self.main_left_s += settings.period_s
            return
        if self.main_left_s > 0:
            used = min(elapsed_s, self.main_left_s)
            self.main_left_s -= used
            elapsed_s -= used
            if self.main_left_s > 0:
                return  # still in main time
        if kind == BYOYOMI:
            # A move that overruns its period loses it and goes on in the next one.
            while elapsed_s > self.period_left_s and self.periods_left > 0:
                elapsed_s -= self.period_left_s
                self.periods_left -= 1
                self.period_left_s = settings.period_s
            if self.periods_left <= 0:
                if elapsed_s <= grace_s:
                    self.periods_left = 1  # the last period, overrun by less than the grace
                else:
                    self.flagged = True
            self.period_left_s = settings.period_s
            return
        # canadian
        self.period_left_s -= elapsed_s
        if self.period_left_s < -grace_s:
            self.flagged = True
            return
        self.stones_left -= 1
        if self.stones_left <= 0:
            self.stones_left = settings.stones
            self.period_left_s = settings.period_s

    def limit_s(self, settings: TimeSettings) -> float:
        """How long the next move may take before the flag falls (a referee's grace not included)."""
        kind = settings.kind
        if kind == NONE:
            return math.inf
        if kind in (ABSOLUTE, FISCHER):
            return self.main_left_s
        if kind == CANADIAN:
            return self.period_left_s if self.in_overtime(settings) else self.main_left_s + settings.period_s
        return max(self.main_left_s, 0.0) + self.periods_left * settings.period_s

    def time_left_args(self, settings: TimeSettings) -> tuple[int, int]:
        """GTP ``time_left`` arguments for this clock: whole seconds, and the stones (Canadian) or periods
        (byo-yomi, as KGS counts them) left in overtime; 0 stones means main time."""
        if not self.in_overtime(settings):
            return int(max(self.main_left_s, 0.0)), 0
        if settings.kind == CANADIAN:
            return int(max(self.period_left_s, 0.0)), self.stones_left
        return int(settings.period_s), self.periods_left

    def set_left(self, settings: TimeSettings, seconds: float, stones: int) -> None:
        """GTP ``time_left``. ``stones`` 0 means main time. Under byoyomi, as KGS sends it, ``stones`` counts the
        periods left and ``seconds`` the time left in the current period; under canadian, the stones left to
        play in the current period and the time for them."""
        seconds, stones = _seconds(seconds), _count(stones)
        self.flagged = False
        if stones == 0 or settings.kind not in (BYOYOMI, CANADIAN):
            self.main_left_s = seconds
            self.period_left_s = settings.period_s
            self.periods_left = settings.periods
            self.stones_left = settings.stones
            return
        self.main_left_s = 0.0
        self.period_left_s = seconds
        if settings.kind == BYOYOMI:
            self.periods_left = stones
        else:
            self.stones_left = stones


def expected_game_moves(board_size: int) -> float:
    """Moves (both colours) a game on this board usually lasts: about 0.7 per point, 250 on 19x19."""
    return max(10.0, 0.7 * board_size * board_size)


def _main_time_share(main_left_s: float, move_number: int, board_size: int, lag_buffer_s: float,
                     overhead_s: float = 0.0, least_search_s: float = 0.0) -> float:
    """A share of the main time for one move (its search and its overhead): the time left over our expected
    remaining moves, with more in the middle game than in the opening or the endgame.

    A reserve is kept for the cost of every move still to come (a tenth of the lag buffer plus the measured
    overhead each: a move at zero budget still costs its overhead; and the least search each move keeps) and for
    one more lag buffer, so that a game much longer than expected still does not run the clock out.
    """
    expected = expected_game_moves(board_size)
    # Plan for at least half a game more, so that long games never starve.
    remaining_own_moves = max(expected - move_number, 0.5 * expected) / 2.0
    reserve_s = 2.0 * lag_buffer_s + remaining_own_moves * (0.1 * lag_buffer_s + overhead_s + least_search_s)
    progress = move_number / expected
    weight = 1.0 + 0.6 * math.exp(-((progress - 0.35) / 0.2) ** 2)  # bump around 35% of the game
    return max(0.0, main_left_s - reserve_s) / remaining_own_moves * weight


MIN_OVERHEAD_SHARE = 0.1  # of the lag buffer: what budget_s assumes a move costs before any overrun is measured
# The lag buffer keeps back at most this share of a move's typical time (``typical_move_s``), so that on a short
# clock it never takes the whole budget: the rest is the search's.
LAG_MAX_SHARE = 0.25
# In main time every move searches at least this share of a move's typical time while the clock holds it (the
# share of the main time planned for each move can fall to 0 in a long game).
LEAST_SEARCH_SHARE = 0.1


def typical_move_s(settings: TimeSettings, board_size: int) -> float:
    """The time the clock gives one move on average: the main time over our expected moves (plus the Fischer
    increment); under byo-yomi and Canadian overtime, a period's time per move. Infinite without a limit."""
    kind = settings.kind
    if kind == NONE:
        return math.inf
    if kind == BYOYOMI:
        return settings.period_s
    if kind == CANADIAN:
        return settings.period_s / settings.stones
    per_move = settings.main_s / (expected_game_moves(board_size) / 2.0)
    return per_move + settings.period_s if kind == FISCHER else per_move


def effective_lag_s(settings: TimeSettings, board_size: int, lag_buffer_s: float) -> float:
    """The lag buffer as the budget keeps it back: the configured one, at most ``LAG_MAX_SHARE`` of a move's
    typical time (a 1 s buffer would leave nothing to search in 10 s of absolute time on 9x9)."""
    return min(max(0.0, lag_buffer_s), LAG_MAX_SHARE * typical_move_s(settings, board_size))


def budget_s(settings: TimeSettings, clock: ClockState, move_number: int, board_size: int,
             lag_buffer_s: float, overhead_s: float = 0.0) -> float | None:
    """Seconds the coming move's search may take without ever losing on time; None means no limit.

    Args:
        move_number: moves played so far in the game (both colours).
        lag_buffer_s: kept back on every move for transport and start-up delays.
        overhead_s: what a move costs beyond its search budget, as measured on recent moves (the pass check,
            stopping the search, a loaded machine), at least a tenth of the lag buffer; taken off every budget and
            reserved for the moves to come.
    Returns 0.0 when the clock is (nearly) spent: play at once.
    """
    kind = settings.kind
    if kind == NONE:
        return None
    lag = effective_lag_s(settings, board_size, lag_buffer_s)
    # Before any overrun has been measured a move still costs something past its budget (the search stops
    # starting playouts at the deadline, then waits for the network calls in flight): a tenth of the lag buffer is
    # kept for it, so that the lag buffer itself stays whole.
    overhead = max(overhead_s, MIN_OVERHEAD_SHARE * lag)
    least = 0.0
    if kind in (ABSOLUTE, FISCHER):
        # No more than what the clock holds beyond the cost of the moves to come, spread over a whole game's moves,
        # so that it too tapers off as the clock runs down.
        own_moves = expected_game_moves(board_size) / 2.0
        remaining = max(2.0 * own_moves - move_number, own_moves) / 2.0
        spare_s = clock.main_left_s - 2.0 * lag - remaining * (0.1 * lag + overhead)
        spread_s = max(0.0, spare_s) / own_moves
        least = min(LEAST_SEARCH_SHARE * typical_move_s(settings, board_size), spread_s)

    def share() -> float:
        planned = _main_time_share(clock.main_left_s, move_number, board_size, lag, overhead, least) - overhead
        return max(planned, least)

    def within_main_time() -> float:
        return clock.main_left_s - lag - overhead

    if kind == ABSOLUTE:
        return max(0.0, min(share(), within_main_time()))
    if kind == FISCHER:
        return max(0.0, min(share() + 0.8 * settings.period_s, within_main_time()))
    if kind == BYOYOMI:
        period = settings.period_s - lag - overhead
        if clock.in_overtime(settings):
            if clock.periods_left <= 0:
                return 0.0
            return max(0.0, clock.period_left_s - lag - overhead)
        # In main time a whole period is ours anyway: running past main time only starts the first period.
        return max(0.0, min(share(), within_main_time()), period)
    # canadian
    if clock.in_overtime(settings):
        stones = max(1, clock.stones_left)
        return max(0.0, clock.period_left_s / stones - lag - overhead)
    return max(0.0, min(share(), within_main_time()), settings.period_s / settings.stones - lag - overhead)


def unspent_time_is_lost(settings: TimeSettings, clock: ClockState) -> bool:
    """Whether the time the coming move leaves unspent is lost to the player, so that its search should run to the
    end of its budget rather than stop once its best move is settled: a byo-yomi period (a move played within it
    keeps it whole, so what it leaves over is never used), or the last stone of a Canadian period. Elsewhere (main
    time, absolute time, Fischer, the earlier stones of a Canadian period) what is saved stays on the clock."""
    if not clock.in_overtime(settings):
        return False
    return settings.kind == BYOYOMI or clock.stones_left <= 1


def nearly_out_of_time(settings: TimeSettings, clock: ClockState, lag_buffer_s: float, overhead_s: float,
                       board_size: int = 19) -> bool:
    """Absolute time with the clock down to the cost of two more moves: every further move risks the flag, so a
    player should end the game (pass after a pass) rather than play on. Overtime and increments never run out
    this way."""
    if settings.kind != ABSOLUTE:
        return False
    lag = effective_lag_s(settings, board_size, lag_buffer_s)
    return clock.main_left_s < lag + 2.0 * (0.1 * lag + max(0.0, overhead_s))


__all__ = ["TimeSettings", "ClockState", "TimeSettingsError", "budget_s", "expected_game_moves", "nearly_out_of_time",
           "unspent_time_is_lost", "typical_move_s", "effective_lag_s", "MIN_OVERHEAD_SHARE", "LAG_MAX_SHARE",
           "LEAST_SEARCH_SHARE", "NONE", "ABSOLUTE", "BYOYOMI", "CANADIAN", "FISCHER"]

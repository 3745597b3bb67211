"""Clocks and budgets per control type, with a fake clock: parsing, charging, KGS conventions, never flagging."""
from __future__ import annotations

import gc
import math
import random
import weakref

import pytest

from tabula.engine.config import EngineConfig, TimeConfig
from tabula.engine.play.player import Player, RandomGoPicker
from tabula.engine.play.timecontrol import (
    ABSOLUTE,
    BYOYOMI,
    CANADIAN,
    FISCHER,
    MIN_OVERHEAD_SHARE,
    NONE,
    ClockState,
    TimeSettings,
    TimeSettingsError,
    budget_s,
    effective_lag_s,
    unspent_time_is_lost,
)
from tabula.engine.rules.coords import BLACK, PASS
from tests.conftest import FakeClock

LAG = 0.5
MIN_OVERHEAD = MIN_OVERHEAD_SHARE * LAG  # what a move is assumed to cost past its budget before one is measured


def test_gtp_time_settings_forms() -> None:
    assert TimeSettings.from_gtp(300, 30, 5) == TimeSettings(CANADIAN, 300, 30, 0, 5)
    assert TimeSettings.from_gtp(300, 0, 0).kind == ABSOLUTE
    assert TimeSettings.from_gtp(300, 0, 5).kind == ABSOLUTE  # no byo-yomi time: absolute
    assert TimeSettings.from_gtp(0, 30, 0).kind == NONE  # the spec's "no time limit"
    assert TimeSettings.from_gtp(300, 30, 0).kind == NONE
    for bad in ((-1, 30, 5), (math.nan, 30, 5), (300, math.inf, 5), (300, 30, -1), (1e12, 0, 0)):
        with pytest.raises(TimeSettingsError):
            TimeSettings.from_gtp(*bad)


def test_kgs_time_settings_forms() -> None:
    assert TimeSettings.from_kgs(["none"]).kind == NONE
    assert TimeSettings.from_kgs(["absolute", "600"]) == TimeSettings.absolute(600)
    assert TimeSettings.from_kgs(["byoyomi", "600", "30", "5"]) == TimeSettings(BYOYOMI, 600, 30, 5, 0)
    assert TimeSettings.from_kgs(["canadian", "600", "30", "25"]) == TimeSettings(CANADIAN, 600, 30, 0, 25)
    assert TimeSettings.from_kgs(["fischer", "600", "10"]) == TimeSettings(FISCHER, 600, 10)
    for bad in ([], ["sudden", "1"], ["byoyomi", "600", "30"], ["absolute", "x"], ["byoyomi", "1", "2", "2.5"]):
        with pytest.raises(TimeSettingsError):
            TimeSettings.from_kgs(bad)


def test_no_time_limit_has_no_budget() -> None:
    assert budget_s(TimeSettings.none(), ClockState(), 10, 19, LAG) is None


def test_absolute_charges_and_spends_more_in_the_middle_game() -> None:
    settings = TimeSettings.absolute(600)
    clock = ClockState.start(settings)
    opening, middle = (budget_s(settings, clock, n, 19, LAG) for n in (0, 90))
    assert middle > opening
    assert 0 < opening < 600 / 50
    clock.charge(settings, 100)
    assert clock.main_left_s == 500
    clock.charge(settings, 501)
    assert clock.flagged


def test_budget_keeps_the_lag_buffer_when_nearly_out() -> None:
    settings = TimeSettings.absolute(600)
    clock = ClockState(main_left_s=0.4)
    assert budget_s(settings, clock, 100, 19, LAG) == 0.0
    clock = ClockState(main_left_s=2.0)
    assert budget_s(settings, clock, 300, 19, LAG) <= 1.5


def test_byoyomi_periods_and_kgs_time_left() -> None:
    settings = TimeSettings.byoyomi(10, 30, 3)
    clock = ClockState.start(settings)
    assert budget_s(settings, clock, 0, 19, LAG) >= 30 - LAG - MIN_OVERHEAD  # a whole period is ours anyway
    clock.charge(settings, 15)  # 10 s of main time, then 5 s of the first period: the period is kept
    assert clock.in_overtime(settings) and clock.periods_left == 3 and not clock.flagged
    assert budget_s(settings, clock, 1, 19, LAG) == pytest.approx(30 - LAG - MIN_OVERHEAD)
    clock.charge(settings, 45)  # overran one period
    assert clock.periods_left == 2 and not clock.flagged
    clock.charge(settings, 61)
    assert clock.flagged
    # KGS: under byoyomi, "stones" counts the periods left and "seconds" the time left in this period
    clock.set_left(settings, 12.0, 2)
    assert (clock.main_left_s, clock.period_left_s, clock.periods_left) == (0.0, 12.0, 2)
    assert budget_s(settings, clock, 50, 19, LAG) == pytest.approx(12.0 - LAG - MIN_OVERHEAD)
    clock.set_left(settings, 5.0, 0)  # stones 0: still in main time
    assert clock.main_left_s == 5.0 and not clock.in_overtime(settings)


def test_canadian_stones_in_a_period() -> None:
    settings = TimeSettings.canadian(0, 60, 10)
    clock = ClockState.start(settings)
    assert clock.in_overtime(settings)
    assert budget_s(settings, clock, 0, 19, LAG) == pytest.approx(6 - LAG - MIN_OVERHEAD)
    for _ in range(9):
        clock.charge(settings, 5)
    assert clock.stones_left == 1 and clock.period_left_s == pytest.approx(15)
    assert budget_s(settings, clock, 9, 19, LAG) == pytest.approx(15 - LAG - MIN_OVERHEAD)
    clock.charge(settings, 14)
    assert clock.stones_left == 10 and clock.period_left_s == 60  # a fresh period
    clock.set_left(settings, 20, 4)  # GTP time_left in overtime: 4 stones in 20 s
    assert budget_s(settings, clock, 30, 19, LAG) == pytest.approx(5 - LAG - MIN_OVERHEAD)
    clock.charge(settings, 21)
    assert clock.flagged


def test_fischer_adds_the_increment() -> None:
    settings = TimeSettings.fischer(60, 5)
    clock = ClockState.start(settings)
    budget = budget_s(settings, clock, 0, 9, LAG)
    assert 4 < budget < 60
    clock.charge(settings, 10)
    assert clock.main_left_s == 55


@pytest.mark.parametrize("settings, overhead_s", [
    (TimeSettings.absolute(60), 0.05), (TimeSettings.byoyomi(20, 5, 1), 0.9 * LAG),
    (TimeSettings.canadian(20, 10, 5), 0.9 * LAG), (TimeSettings.fischer(10, 1), 0.9 * LAG),
    (TimeSettings.absolute(60), 0.02),
], ids=["absolute", "byoyomi", "canadian", "fischer", "blitz"])
@pytest.mark.parametrize("size", [9, 19])
def test_a_long_game_never_loses_on_time(settings: TimeSettings, overhead_s: float, size: int) -> None:
    """Spend every budget in full plus an overhead (at most the lag buffer the budget keeps per move; in absolute
    time, where overheads add up over the game, a realistic one), for a game twice as long as expected. (No budget
    can save absolute time from an endless game: every move costs its overhead.)"""
    overhead_s = min(overhead_s, 0.9 * effective_lag_s(settings, size, LAG))
    clock = ClockState.start(settings)
    for move in range(0, int(1.4 * size * size), 2):
        budget = budget_s(settings, clock, move, size, LAG)
        assert budget is not None and budget >= 0
        clock.charge(settings, budget + overhead_s)
        assert not clock.flagged, (move, clock)


def test_player_charges_its_clock_with_the_injected_time_source(fake_clock: FakeClock) -> None:
    class Slow(RandomGoPicker):
        def pick(self, state, budget_s=None, on_progress=None, progress_interval_s=1.0, spend_all=False):
            self.seen_budget = budget_s
            fake_clock.advance(budget_s)
            return PASS

    picker = Slow(random.Random(1))
    player = Player(picker, size=9, time_config=TimeConfig(lag_buffer_s=LAG), clock=fake_clock)
    player.set_time_settings(TimeSettings.byoyomi(0, 10, 2))
    player.genmove(BLACK)
    assert picker.seen_budget == pytest.approx(10 - LAG - MIN_OVERHEAD)
    assert player.clocks[BLACK].periods_left == 2 and not player.clocks[BLACK].flagged
    player.time_left(BLACK, 3.0, 1)
    assert player.budget_s(BLACK) == pytest.approx(3.0 - LAG - MIN_OVERHEAD)
    capped = Player(picker, size=9, time_config=TimeConfig(max_time_per_move_s=1.0), clock=fake_clock)
    assert capped.budget_s(BLACK) == 1.0
    assert Player.from_config(EngineConfig(seed=1, player="random"), clock=fake_clock).budget_s(BLACK) is None


def test_a_loaded_machine_survives_a_long_absolute_game() -> None:
    """Every move costs 0.25 s beyond its budget (a 9x9 match under load 12 measured that at zero budget) and the
    budget is told so: 20 s of absolute time last a 9x9 game of 100 moves, about twice the expected length."""
    settings = TimeSettings.absolute(20)
    clock = ClockState.start(settings)
    for move in range(0, 100, 2):
        budget = budget_s(settings, clock, move, 9, LAG, overhead_s=0.25)
        clock.charge(settings, budget + 0.25)
        assert not clock.flagged, (move, clock)
    untold = ClockState.start(settings)
    for move in range(0, 100, 2):  # the same game, with the overhead left out of the budget: the flag falls
        untold.charge(settings, budget_s(settings, untold, move, 9, LAG) + 0.25)
    assert untold.flagged


def test_the_player_learns_its_overhead_and_passes_after_a_pass_when_nearly_out_of_time(
        fake_clock: FakeClock) -> None:
    class Slow(RandomGoPicker):
        """Spends its whole budget, then 0.3 s more (the pass check, a loaded machine)."""

        def pick(self, state, budget_s=None, on_progress=None, progress_interval_s=1.0, spend_all=False):
            fake_clock.advance(budget_s + 0.3)
            return super().pick(state, budget_s)

    player = Player(Slow(random.Random(1)), size=9, time_config=TimeConfig(lag_buffer_s=LAG), clock=fake_clock)
    player.set_time_settings(TimeSettings.absolute(20))
    for _ in range(6):
        player.genmove(BLACK)
        player.play(2, PASS)
    assert 0.25 < player.move_overhead_s <= 0.3
    player.time_left(BLACK, 0.7, 0)  # the clock nearly spent, and white passed: end the game, do not play on
    assert player.genmove(BLACK) == PASS
    player.play(2, PASS)
    player.time_left(BLACK, 1.0, 0)
    player.time_settings = TimeSettings.byoyomi(0, 1, 1)  # overtime never runs out this way: play on
    player.clocks[BLACK] = ClockState.start(player.time_settings)
    assert player.genmove(BLACK) != PASS or player.state.legal_moves() == []


def test_one_clock_for_engine_and_referee_with_the_referees_grace_on_top() -> None:
    """tabula match's referee keeps the engine's ClockState; the grace forgives an overrun once, never per move."""
    settings = TimeSettings.byoyomi(0, 5, 1)
    clock = ClockState.start(settings)
    clock.charge(settings, 5.3, grace_s=0.5)  # the last period, 0.3 s over: forgiven
    assert not clock.flagged and clock.periods_left == 1 and clock.limit_s(settings) == 5
    clock.charge(settings, 5.6, grace_s=0.5)
    assert clock.flagged
    strict = ClockState.start(settings)
    strict.charge(settings, 5.3)  # the engine's own clock has no grace
    assert strict.flagged
    canadian = TimeSettings.canadian(10, 20, 5)
    clock = ClockState.start(canadian)
    assert clock.limit_s(canadian) == 30 and clock.time_left_args(canadian) == (10, 0)
    clock.charge(canadian, 14)
    assert clock.in_overtime(canadian) and clock.time_left_args(canadian) == (16, 4)


def test_a_short_absolute_clock_leaves_every_move_a_search(fake_clock: FakeClock) -> None:
    """`time_settings 10 0 0` on 9x9 with the default 1 s lag buffer: the buffer never takes a move's whole budget.
    A game as long as the longest against GNU Go (100 moves), each move costing 20 ms past its budget as measured
    by the player, keeps 10 ms or more for every search (50 playouts at the CPU's 9x9 rate) and never flags."""

    class Spender(RandomGoPicker):
        def pick(self, state, budget_s=None, on_progress=None, progress_interval_s=1.0, spend_all=False):
            self.budgets.append(budget_s)
            fake_clock.advance(budget_s + 0.02)
            return PASS

    picker = Spender(random.Random(1))
    picker.budgets = []
    player = Player(picker, size=9, time_config=TimeConfig(), clock=fake_clock)
    assert player.time_config.lag_buffer_s == 1.0
    player.set_time_settings(TimeSettings.from_gtp(10, 0, 0))
    assert not player.warned_short_clock
    for _ in range(50):
        player.genmove(BLACK)
        player.play(2, PASS)  # stands in for the opponent's move: passes keep the game going on the fake board
    assert not player.clocks[BLACK].flagged
    assert picker.budgets[0] > 0.1 and min(picker.budgets) >= 0.01, picker.budgets


def test_the_lag_buffer_keeps_back_at_most_a_share_of_a_moves_time() -> None:
    one_second_byoyomi = TimeSettings.byoyomi(0, 1, 5)
    assert budget_s(one_second_byoyomi, ClockState.start(one_second_byoyomi), 0, 19, 1.0) >= 0.7
    long_periods = TimeSettings.byoyomi(0, 30, 5)
    assert effective_lag_s(long_periods, 19, 1.0) == 1.0  # a clock with room keeps the whole buffer


def test_a_clock_with_almost_no_search_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    player = Player(RandomGoPicker(random.Random(1)), size=19, time_config=TimeConfig())
    with caplog.at_level("WARNING", logger="tabula.play"):
        player.set_time_settings(TimeSettings.absolute(1))
        player.set_time_settings(TimeSettings.absolute(1))
        player.set_time_settings(TimeSettings.absolute(600))
    warnings = [r for r in caplog.records if r.name == "tabula.play"]
    assert len(warnings) == 1  # once, and not for the long clock
    assert "to search a move" in warnings[0].getMessage()


def test_only_time_a_period_would_lose_is_searched_to_the_end(fake_clock: FakeClock) -> None:
    byoyomi = TimeSettings.byoyomi(5, 2, 3)
    clock = ClockState.start(byoyomi)
    assert not unspent_time_is_lost(byoyomi, clock)  # main time: what is saved is kept
    clock.charge(byoyomi, 6)
    assert clock.in_overtime(byoyomi) and unspent_time_is_lost(byoyomi, clock)
    canadian = TimeSettings.canadian(0, 30, 3)
    clock = ClockState.start(canadian)
    assert not unspent_time_is_lost(canadian, clock)  # two more stones can use what this one saves
    clock.charge(canadian, 5)
    clock.charge(canadian, 5)
    assert clock.stones_left == 1 and unspent_time_is_lost(canadian, clock)
    for settings in (TimeSettings.none(), TimeSettings.absolute(60), TimeSettings.fischer(60, 5)):
        assert not unspent_time_is_lost(settings, ClockState.start(settings))

    class Recording(RandomGoPicker):
        def pick(self, state, budget_s=None, on_progress=None, progress_interval_s=1.0, spend_all=False):
            self.seen.append(spend_all)
            fake_clock.advance(1.0)
            return super().pick(state, budget_s)

    picker = Recording(random.Random(1))
    picker.seen = []
    player = Player(picker, size=9, time_config=TimeConfig(lag_buffer_s=LAG), clock=fake_clock)
    player.set_time_settings(TimeSettings.byoyomi(0.6, 2, 3))
    player.genmove(BLACK)  # from main time
    player.genmove(2)  # white's main time is untouched
    player.genmove(BLACK)  # black's main time is spent: a period now
    assert picker.seen == [False, False, True]


class _Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_what_a_move_leaves_alive_is_kept_from_the_collector_until_the_next_game() -> None:
    # A full collection of the search's tree pauses every thread; landing as a move's search stops, it makes the
    # reply late. So genmove freezes what is alive after the move, and a new game (clear_board, loadsgf) gives it
    # back to one collection, off the clock, then freezes what is still alive.
    player = Player(RandomGoPicker(random.Random(1)), size=9)
    for new_game in (player.clear, lambda: player.load_sgf(b"(;GM[1]SZ[9];B[ee])")):
        alive = _Cycle()
        player.genmove(BLACK)
        assert gc.get_freeze_count() > 0
        watch = weakref.ref(alive)
        del alive
        gc.collect()
        assert watch() is not None  # frozen: the collector does not look at it during the game
        new_game()
        assert watch() is None  # the new game's collection freed it: nothing leaks past a game
        assert gc.get_freeze_count() > 0  # and what is alive is frozen again
    gc.unfreeze()

"""SearchPicker: pass rules, resignation, cleanup, temperature, ownership and pondering."""
from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time

import numpy as np
import pytest

from tabula.engine.config import EngineConfig, NetConfig, PlayConfig, SearchConfig
from tabula.engine.net import evaluator as evaluator_module
from tabula.engine.net import onnx_evaluator
from tabula.engine.net.evaluator import Evaluation, UniformEvaluator
from tabula.engine.play import search_player
from tabula.engine.play.search_player import SearchPicker
from tabula.engine.rules import playout
from tabula.engine.rules.coords import BLACK, PASS, RESIGN, WHITE, format_vertex, parse_vertex
from tabula.engine.rules.game import GameState
from tests.conftest import board_from_ascii
from tests.test_search import ClockedEvaluator, RiggedEvaluator, ScoreEvaluator


class BlackLosesEvaluator:
    """Uniform priors; black's winrate is always ``black_winrate``, whoever is to move."""

    def __init__(self, black_winrate: float):
        self.black_value = 2.0 * black_winrate - 1.0

    def evaluate(self, states):
        base = UniformEvaluator().evaluate(states)
        values = np.array([self.black_value if s.to_move == BLACK else -self.black_value for s in states],
                          dtype=np.float32)
        return Evaluation(base.policy, values)


def picker(evaluator, clock=time.monotonic, **config) -> SearchPicker:
    """A search player over ``evaluator`` timed by ``clock``; ``config`` names fields of SearchConfig and of
    PlayConfig alike."""
    play_fields = {f.name for f in dataclasses.fields(PlayConfig)}
    search = dict(threads=1, visits=60)
    search.update({k: v for k, v in config.items() if k not in play_fields})
    play = PlayConfig(**{k: v for k, v in config.items() if k in play_fields})
    return SearchPicker(evaluator, SearchConfig(**search), rng=np.random.default_rng(0), play=play, clock=clock)


def played(size: int, moves: list[str]) -> GameState:
    state = GameState(size)
    for vertex in moves:
        state.play(parse_vertex(vertex, size))
    return state


def test_pass_after_the_opponents_pass_when_the_count_wins():
    state = board_from_ascii("""
        . X . X .
        X X X X X
        . . . . .
        O O O O O
        . O . O .""", to_move=WHITE, komi=0.5)
    state.to_move = BLACK
    state.play(parse_vertex("C3", 5))  # black takes the neutral row: black leads by the count
    state.play(PASS)  # white passes
    assert state.area_score() > 0
    # A network that loves some other point does not matter: passing now wins.
    player = picker(RiggedEvaluator(parse_vertex("A3", 5), 0.99))
    assert player.pick(state.with_to_move(BLACK)) == PASS


def test_never_pass_into_a_lost_count():
    state = board_from_ascii("""
        . O . O .
        O O O O O
        . . . . .
        X X X X X
        . X . X .""", to_move=BLACK, komi=7.5)
    assert state.area_score() < 0
    player = picker(RiggedEvaluator(PASS, 0.99), visits=2)  # too few visits to see the count
    assert player.search.run(state).move == PASS  # what the search alone would do
    move = player.pick(state.with_to_move(BLACK))
    assert move not in (PASS, RESIGN)
    assert state.legal(move)


DEAD_WHITE_STONES_IN_BLACKS_WALL = """
        . . . . . . .
        . . . . . . .
        . X X X X X .
        . X . O . X .
        . X . . O X .
        . X X X X X .
        . . . . . . ."""


def test_no_pass_while_the_lead_rests_on_dead_stones():
    # White's lone stones inside black's wall are dead, but Tromp-Taylor counts them and the points beside them
    # (white leads by that count); any referee that removes dead stones gives black the board.
    state = board_from_ascii(DEAD_WHITE_STONES_IN_BLACKS_WALL, to_move=WHITE, komi=42.5)
    assert state.area_score() < 0  # white "leads"
    player = picker(RiggedEvaluator(PASS, 0.99), visits=2)
    assert player.search.run(state).move == PASS  # what the search alone would do
    assert player.pick(state.with_to_move(WHITE)) not in (PASS, RESIGN)


class PassFavouriteBlackWins(RiggedEvaluator):
    """Nearly all the prior on a pass; black wins every position (``black_winrate``) whoever is to move."""

    def __init__(self, black_winrate: float):
        super().__init__(PASS, 0.99)
        self.black_value = 2.0 * black_winrate - 1.0

    def evaluate(self, states):
        evaluation = super().evaluate(states)
        values = [self.black_value if s.to_move == BLACK else -self.black_value for s in states]
        return Evaluation(evaluation.policy, np.array(values, dtype=np.float32))


def test_after_the_opponents_pass_a_hopeless_game_ends_with_a_pass():
    """White's stones inside black's wall are dead; black has passed. The search would pass, since Tromp-Taylor
    counts white's dead stones; the referee-aware count says white has lost; and no other move gives white a
    chance. Playing on would change nothing under area counting and give away a point a stone under territory
    counting (GNU Go's count differed from ours by 10 points in a 9x9 game for this reason): pass, or resign."""
    state = board_from_ascii(DEAD_WHITE_STONES_IN_BLACKS_WALL, to_move=BLACK, komi=42.5)
    state.play(PASS)
    assert state.area_score() < 0  # white "leads" by Tromp-Taylor
    player = picker(PassFavouriteBlackWins(0.97), visits=40, resign_winrate=0.0)
    assert player.search.run(state).move == PASS  # what the search alone would do
    assert player.pick(state.with_to_move(WHITE)) == PASS
    resigning = picker(PassFavouriteBlackWins(0.97), visits=40, resign_winrate=0.1, resign_after=0.0)
    assert resigning.pick(state.with_to_move(WHITE)) == RESIGN


def test_after_the_opponents_pass_a_move_with_a_chance_is_played():
    """Black trails by every count after white's pass, and the top of the board is still open: a value head that
    sees a chance there (or sees nothing: 50%) plays on; one that sees none passes."""
    from tabula.engine.play.decision import MoveDecider
    from tabula.engine.play.result import Candidate, SearchResult
    state = board_from_ascii(OPEN_TOP_SETTLED_CORNER, to_move=WHITE, komi=30.5)
    state.play(PASS)
    open_point = parse_vertex("E6", 7)
    for winrate, expected in ((0.5, open_point), (0.2, open_point), (0.05, PASS)):
        candidates = [Candidate(open_point, 36, 2 * winrate - 1, 0.5, -1.0, [open_point]),
                      Candidate(PASS, 4, -1.0, 0.01, -1.0, [PASS])]
        result = SearchResult(open_point, candidates, 40, 40, 0.1, 40, 40, 0, 0, 0, False)
        decider = MoveDecider(PlayConfig(resign_winrate=0.0), np.random.default_rng(0))
        assert decider.decide(state, result).move == expected


LOST_AFTER_WHITES_PASS = """
        . . . . . . .
        . . . . . . .
        O O O O O O O
        X X X X X X X
        . . . . . . .
        . . . . . . .
        . . . . . . ."""


def test_after_the_opponents_pass_a_lost_game_gets_no_stones_in_settled_territory():
    """Under territory counting (KGS, OGS Japanese rules, GNU Go as referee) every stone played inside the
    opponent's territory after its pass is a point lost, and it changes nothing."""
    state = board_from_ascii(LOST_AFTER_WHITES_PASS, to_move=WHITE, komi=7.5)
    state.play(PASS)  # white passes; black trails by 0.5
    invasion = parse_vertex("D7", 7)  # deep in white's area: the network's favourite
    player = picker(RiggedEvaluator(invasion, 0.9), resign_winrate=0.0)
    assert player.search.run(state).move == invasion  # what the search alone would do
    assert player.pick(state.with_to_move(BLACK)) == PASS
    # resigning is on, but not in the first quarter of the game: a pass
    assert picker(RiggedEvaluator(invasion, 0.9), resign_winrate=0.1).pick(state.with_to_move(BLACK)) == PASS
    # and past it, a pass too: the search does not call the game lost (50%), and a pass ends it at the referee's
    # count, which may be kinder than ours; a search under 50% resigns (the test of a hopeless game above)
    resigning = picker(RiggedEvaluator(invasion, 0.9), resign_winrate=0.1, resign_after=0.0)
    assert resigning.pick(state.with_to_move(BLACK)) == PASS


def test_after_the_opponents_pass_territory_with_our_dead_stones_in_it_is_still_settled(monkeypatch):
    """Black's lone stone at B6 is dead inside white's area (the ownership says so), so Tromp-Taylor calls the top
    of the board nobody's (and black ahead); a referee removes it and gives white the top. Every black stone played
    there after white's pass is a point lost under territory counting, and changes nothing: black passes."""
    state = board_from_ascii("""
        . . . . . . .
        . X . . . . .
        . . . . . . .
        O O O O O O O
        X X X X X X X
        . . . . . . .
        . . . . . . .""", to_move=WHITE, komi=7.5)
    state.play(PASS)
    assert state.area_score() > 0  # black "leads" by Tromp-Taylor
    owned = np.ones(49, dtype=np.float32)  # black's view: white owns the top four rows, B6 included
    owned[3 * 7:] = -1.0
    monkeypatch.setattr(playout, "ownership", lambda *args, **kwargs: owned)
    invasion = parse_vertex("D6", 7)  # beside the dead stone: its region touches both colours
    player = picker(RiggedEvaluator(invasion, 0.9), resign_winrate=0.0)
    assert player.search.run(state).move == invasion  # what the search alone would do
    assert player.pick(state.with_to_move(BLACK)) == PASS


OPEN_TOP_SETTLED_CORNER = """
        . . . . . . .
        . . . . . . .
        . . . . . . .
        X X X . . . .
        . . X . . . .
        . . X O O O O
        . . X O . . ."""


def test_after_the_opponents_pass_an_open_point_comes_before_settled_territory():
    """The search's favourite A1 is inside black's settled corner; the top of the board is still open. After
    white's pass, black (behind by the count and by the playouts' estimate) plays one of its open moves instead."""
    state = board_from_ascii(OPEN_TOP_SETTLED_CORNER, to_move=WHITE, komi=30.5)
    state.play(PASS)
    corner = [parse_vertex(v, 7) for v in ("A1", "B1", "A2", "B2", "A3", "B3")]

    class TwoFavourites(RiggedEvaluator):
        """A1 first, E6 (open) second."""

        def evaluate(self, states):
            evaluation = super().evaluate(states)
            evaluation.policy[:, parse_vertex("E6", 7)] += 0.3
            evaluation.policy /= evaluation.policy.sum(axis=1, keepdims=True)
            return evaluation

    player = picker(TwoFavourites(parse_vertex("A1", 7), 0.6), resign_winrate=0.0, visits=120)
    assert player.search.run(state).move == parse_vertex("A1", 7)  # what the search alone would do
    move = player.pick(state.with_to_move(BLACK))
    assert move not in corner + [PASS, RESIGN] and state.legal(move)


def test_after_the_opponents_pass_an_open_point_the_search_rejected_is_not_played():
    """As above, but the open point is one the search rates far below its favourite in the settled corner (in a
    13x13 game against GNU Go it was a self-atari of 13 stones, 0.71 against 0.98): not that, a pass."""
    from tabula.engine.play.decision import OPEN_MOVE_MARGIN, MoveDecider
    from tabula.engine.play.result import Candidate, SearchResult
    state = board_from_ascii(OPEN_TOP_SETTLED_CORNER, to_move=WHITE, komi=30.5)
    state.play(PASS)
    corner, open_point = parse_vertex("A1", 7), parse_vertex("E6", 7)
    for open_winrate, expected in ((0.3, PASS), (0.6 - OPEN_MOVE_MARGIN, open_point), (0.7, open_point)):
        candidates = [Candidate(corner, 30, 0.2, 0.5, -1.0, [corner]),
                      Candidate(open_point, 10, 2 * open_winrate - 1, 0.3, -1.0, [open_point]),
                      Candidate(PASS, 2, -1.0, 0.01, -1.0, [PASS])]
        result = SearchResult(corner, candidates, 42, 42, 0.1, 42, 42, 0, 0, 0, False)
        decider = MoveDecider(PlayConfig(resign_winrate=0.0), np.random.default_rng(0))
        assert decider.decide(state, result).move == expected


def test_after_the_opponents_pass_the_deciders_count_decides_over_the_quick_estimate(monkeypatch):
    """Black leads by Tromp-Taylor after white's pass, and the quick random-playout estimate (made to say white
    owns the top and nobody the bottom) says black is lost: without a count black plays on; with the full count
    (the picker's ``referee_count``, here a stand-in) saying black leads, black passes and wins (a 13x13 game
    against GNU Go was lost from W+15.5 when 24 playouts killed a living group)."""
    from tabula.engine.play.decision import MoveDecider
    from tabula.engine.play.result import Candidate, SearchResult
    state = board_from_ascii(LOST_AFTER_WHITES_PASS, to_move=WHITE, komi=0.5)
    state.play(PASS)
    assert state.area_score() > 0
    owned = np.zeros(49, dtype=np.float32)  # black's view: the bottom four rows nobody's, the top three white's
    owned[4 * 7:] = -1.0
    monkeypatch.setattr(playout, "ownership", lambda *args, **kwargs: owned)
    move = parse_vertex("D2", 7)
    candidates = [Candidate(move, 36, 0.6, 0.5, -1.0, [move]), Candidate(PASS, 4, 0.5, 0.01, -1.0, [PASS])]
    result = SearchResult(move, candidates, 40, 40, 0.1, 40, 40, 0, 0, 0, False)
    quick = MoveDecider(PlayConfig(resign_winrate=0.0), np.random.default_rng(0))
    assert quick.decide(state, result).move == move
    counted = MoveDecider(PlayConfig(resign_winrate=0.0), np.random.default_rng(0))
    assert counted.decide(state, result, count=6.5).move == PASS
    doubting = MoveDecider(PlayConfig(resign_winrate=0.0), np.random.default_rng(0))
    assert doubting.decide(state, result, count=-3.5).move == move


def test_the_count_after_a_pass_is_charged_to_the_budget(fake_clock, monkeypatch):
    """After the opponent's pass the picker makes the referee's count before its search and takes the count's
    time from the budget (here a count that takes 0.5 s of a 2 s budget: the search is given 1.5 s); where the count
    would take over half the budget (it took 0.5 s last time, 0.6 s to move) the decider gets none and estimates
    quickly, and a move with no time limit always gets it. No count where the opponent did not pass."""
    player = picker(ScoreEvaluator(), visits=30, clock=fake_clock)
    counts, budgets, given = [], [], []

    def slow_count(state):
        fake_clock.advance(0.5)
        counts.append(state)
        return 3.5

    monkeypatch.setattr(player, "referee_count", slow_count)
    search = player._search  # searches by visits; the budget it was given is recorded
    monkeypatch.setattr(player, "_search", lambda state, budget_s, **kwargs: budgets.append(budget_s)
                        or search(state, None, **kwargs))
    decide = player.decider.decide
    monkeypatch.setattr(player.decider, "decide", lambda *args, **kwargs: given.append(kwargs["count"])
                        or decide(*args, **kwargs))
    after_pass = played(7, ["D4", "pass"])
    player.pick(after_pass.with_to_move(BLACK), 2.0)
    assert len(counts) == 1 and given == [3.5] and budgets == [1.5]
    player.pick(after_pass.with_to_move(BLACK), 0.6)
    assert len(counts) == 1 and given[-1] is None and budgets[-1] == 0.6
    player.pick(played(7, ["D4", "E5"]).with_to_move(BLACK), 2.0)
    assert len(counts) == 1 and given[-1] is None and budgets[-1] == 2.0
    player.pick(after_pass.with_to_move(BLACK))
    assert len(counts) == 2 and given[-1] == 3.5 and budgets[-1] is None


def test_the_pickers_count_is_final_scores():
    from tabula.engine.play.player import Player
    from tabula.engine.rules.game import Rules, format_result
    state = board_from_ascii(LOST_AFTER_WHITES_PASS, to_move=BLACK, komi=0.5)
    player = picker(UniformEvaluator(), visits=10)
    game = Player(player, size=7, rules=Rules(komi=0.5))
    for color, point in state.setup:
        game.state.place_setup(point, color)
    assert format_result(player.referee_count(game.state)) == game.final_score() == "B+6.5"


def test_temperature_zero_plays_the_search_move():
    from tabula.engine.config import PlayConfig
    from tabula.engine.play.decision import MoveDecider
    player = picker(UniformEvaluator(), visits=40)
    result = player.search.run(GameState(5))
    decider = MoveDecider(PlayConfig(temperature_moves=10, temperature=0.0), np.random.default_rng(0))
    assert decider.decide(GameState(5), result).move == result.move
    cold = MoveDecider(PlayConfig(temperature_moves=10, temperature=1e-4), np.random.default_rng(0))
    assert cold.decide(GameState(5), result).move in [c.move for c in result.candidates]


def test_after_the_opponents_pass_dead_stones_are_still_removed():
    """Where only the opponent's dead stones make the plain count a loss, the moves that capture them are played:
    a Tromp-Taylor referee counts stones left on the board."""
    state = board_from_ascii(DEAD_WHITE_STONES_IN_BLACKS_WALL, to_move=WHITE, komi=42.5)
    state.play(PASS)
    assert state.area_score() < 0  # white "leads" by the plain count, which counts its dead stones
    capture = parse_vertex("C4", 7)  # inside black's wall, beside the dead white stone
    player = picker(RiggedEvaluator(capture, 0.9), resign_winrate=0.1)
    move = player.pick(state.with_to_move(BLACK))
    assert move not in (PASS, RESIGN) and state.legal(move)


def test_passing_is_fine_when_it_does_not_lose():
    state = board_from_ascii("""
        . X . X .
        X X X X X
        X X X X X
        O O O O O
        . O . O .""", to_move=BLACK, komi=0.5)
    player = picker(RiggedEvaluator(PASS, 0.99))
    assert player.pick(state.with_to_move(BLACK)) == PASS


def test_resigns_after_consecutive_hopeless_moves_only_after_the_opening():
    player = picker(BlackLosesEvaluator(0.03), resign_consecutive=3)
    opening = played(5, ["C3", "B2"])  # move 3 of 25 points: too early
    assert all(player.pick(opening.with_to_move(BLACK)) != RESIGN for _ in range(4))
    late = played(5, ["C3", "B2", "D4", "B4", "D2", "B3", "D3", "A1"])
    moves = [player.pick(late.with_to_move(BLACK)) for _ in range(3)]
    assert moves[:2] != [RESIGN, RESIGN] and RESIGN not in moves[:2]
    assert moves[2] == RESIGN


def test_resignation_can_be_switched_off():
    player = picker(BlackLosesEvaluator(0.01), resign_winrate=0.0, resign_consecutive=1)
    late = played(5, ["C3", "B2", "D4", "B4", "D2", "B3", "D3", "A1"])
    assert all(player.pick(late.with_to_move(BLACK)) != RESIGN for _ in range(3))


def test_white_is_more_patient_in_handicap_games():
    state = GameState(7)
    state.place_handicap([parse_vertex("C3", 7), parse_vertex("E5", 7)])
    for vertex in ["D4", "C5", "E3", "B4", "F4", "C4", "B2", "D5", "D3", "E4", "F5", "F3", "G3", "A1"]:
        state.play(parse_vertex(vertex, 7))
    assert state.to_move == WHITE
    # White's winrate is 8%: under the 10% threshold, but over the handicap-blended one.
    white = picker(BlackLosesEvaluator(0.92), resign_consecutive=1)
    assert white.pick(state.with_to_move(WHITE)) != RESIGN
    even = state.copy()
    even.handicap = 0
    assert picker(BlackLosesEvaluator(0.92), resign_consecutive=1).pick(even.with_to_move(WHITE)) == RESIGN


def test_cleanup_captures_dead_stones_before_passing():
    state = board_from_ascii("""
        . . X O .
        . O X O O
        X X X O .
        . . X O .
        . . X O .""", to_move=BLACK, komi=0.5)
    player = picker(ScoreEvaluator(), ownership_playouts=48)
    move = player.pick_cleanup(state.with_to_move(BLACK))
    assert move == parse_vertex("A4", 5) or move == parse_vertex("B5", 5) or move == parse_vertex("A5", 5) \
        or move == parse_vertex("C4", 5) or move == parse_vertex("B3", 5)
    assert move != PASS
    done = board_from_ascii("""
        . . X O .
        . . X O O
        X X X O .
        . . X O .
        . . X O .""", to_move=BLACK, komi=0.5)
    assert player.pick_cleanup(done.with_to_move(BLACK)) == PASS


def test_temperature_samples_opening_moves():
    moves = set()
    for seed in range(6):
        player = SearchPicker(UniformEvaluator(), SearchConfig(threads=1, visits=40),
                                 rng=np.random.default_rng(seed), play=PlayConfig(temperature_moves=4))
        moves.add(player.pick(GameState(5)))
    assert len(moves) > 1


def test_ownership_is_black_view_in_range():
    state = board_from_ascii("""
        . X O . .
        X X O . .
        . X O . .
        X X O . .
        . X O . .""", to_move=BLACK, komi=0.5)
    owned = picker(UniformEvaluator(), ownership_playouts=16).ownership(state)
    assert owned.shape == (25,) and owned.dtype == np.float32
    assert owned[0] > 0.9 and np.all(np.abs(owned) <= 1.0)


def test_time_budget_is_respected(fake_clock):
    """The move's budget on the search's clock (a fake one that each network call moves 1/128 s on): the search
    ends once it is spent, with no more than the batch at the network to finish."""
    step_s = 1 / 128
    evaluator = ClockedEvaluator(ScoreEvaluator(), fake_clock, step_s=step_s)
    player = picker(evaluator, visits=0, clock=fake_clock)
    player.pick(GameState(7), 0.25)
    assert player.last_search.elapsed_s <= 0.25 + step_s
    assert player.last_search.playouts > 10


def test_pondering_stops_on_interrupt_and_keeps_the_tree():
    """Pondering runs until the interrupt (set here by the 60th network call) and stops within the batch at the
    network; the next move reuses every visit it made."""
    interrupt = threading.Event()
    evaluator = ClockedEvaluator(ScoreEvaluator(), after=lambda calls: calls >= 60 and interrupt.set())
    player = picker(evaluator, visits=30)
    state = played(7, ["D4"])
    player.ponder(state, interrupt)
    assert evaluator.calls == 60
    pondered = player.search.tree.root.visits
    assert pondered > 30
    player.pick(state.with_to_move(WHITE))
    assert player.last_search.reused_visits == pondered and player.last_search.playouts == 0


def test_the_network_calls_of_several_search_threads_share_the_cores():
    """Each search thread runs its own network calls: with onnxruntime's default each call took every core, and two
    threads oversubscribed them (about 20 % fewer playouts/s on 2 cores, docs/BENCHMARKS.md)."""
    def resolved(cores, net_threads=0, **search):
        return NetConfig(threads=net_threads).for_search(SearchConfig(**search), cores).threads

    assert resolved(2, threads=2) == 1 and resolved(16, threads=2) == 8 and resolved(16, threads=3) == 5
    assert resolved(1, threads=4) == 1  # never 0, which would mean onnxruntime's default again
    assert resolved(16, threads=1) == 0  # one call at a time: onnxruntime's own choice
    assert resolved(16, threads=2, batches_in_flight=2) == 0  # the evaluator's one thread runs the calls in turn
    assert resolved(16, net_threads=3, threads=2) == 3  # asked for: kept


def test_the_cores_counted_are_no_more_than_a_containers_cpu_quota(tmp_path):
    cpu_max = tmp_path / "cpu.max"
    mine = evaluator_module.available_cores(str(tmp_path / "none"))  # no cgroup file: the affinity
    assert mine >= 1
    cpu_max.write_text("max 100000\n")
    assert evaluator_module.available_cores(str(cpu_max)) == mine
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs
    assert evaluator_module.available_cores(str(cpu_max)) == min(mine, 2)
    cpu_max.write_text("50000 100000\n")
    assert evaluator_module.available_cores(str(cpu_max)) == 1
    cpu_max.write_text("garbage\n")
    assert evaluator_module.available_cores(str(cpu_max)) == mine


def test_the_engine_says_how_many_threads_each_network_call_has(tiny_onnx, monkeypatch, capsys):
    monkeypatch.setattr(evaluator_module, "available_cores", lambda: 4)
    monkeypatch.setattr(onnx_evaluator, "nvidia_gpu_present", lambda: False)
    for search, expected in [(SearchConfig(threads=2), "2 threads per network call"),
                             (SearchConfig(threads=4), "1 thread per network call"),
                             (SearchConfig(threads=1), "default threads")]:
        search_player.from_config(EngineConfig(net=NetConfig(weights=(str(tiny_onnx),)), search=search))
        assert capsys.readouterr().err.strip().endswith(f"on CPUExecutionProvider, {expected}")


class RiggedRollouts:
    """A stand-in rollout policy for dead-stone judgement: white owns every point, it says."""

    def __init__(self):
        self.calls = []

    def ownership(self, state, rng, count):
        self.calls.append(count)
        return np.full(state.size * state.size, -1.0, dtype=np.float32)


def test_dead_stones_are_judged_by_random_playouts_and_the_rollout_policy_not_the_network():
    """Random playouts call the lone white stones inside black's wall dead; the rollout policy (rigged: white owns
    everything) has an equal voice, and a network with an ownership head (rigged: black owns everything) none:
    mixed in, the shipped network's lowered the agreement with GNU Go's dead stones."""
    from tests.test_search import LeadEvaluator
    state = board_from_ascii(DEAD_WHITE_STONES_IN_BLACKS_WALL, to_move=BLACK, komi=0.5)
    by_playouts = picker(LeadEvaluator(-10.0, -1.0)).ownership(state)  # no rollout policy: playouts alone
    assert len(search_player.playout.dead_stones(state, by_playouts)) == 2
    rigged = RiggedRollouts()
    # The network says black owns everything: mixed in, it would move the mean away from the rollouts' -1.
    judged = SearchPicker(LeadEvaluator(10.0, 1.0), SearchConfig(threads=1), rng=np.random.default_rng(0),
                             judging_rollouts=lambda: rigged)
    assert np.allclose(judged.ownership(state), 0.5 * (by_playouts - 1.0))  # the same seed, so the same playouts
    judged.ownership(state)
    assert rigged.calls == [PlayConfig().ownership_rollouts] * 2 and judged.search.tree.root.visits == 0


def test_ownership_network_mixes_the_networks_ownership_head_into_the_judgement_from_blacks_view():
    """--ownership-network F: that share of the map is the network's ownership (black's view whoever is to move),
    the rest the playouts and rollouts as before; a network without an ownership head leaves the map as it was."""
    from tests.test_search import LeadEvaluator
    for to_move in (BLACK, WHITE):
        state = board_from_ascii(DEAD_WHITE_STONES_IN_BLACKS_WALL, to_move=to_move, komi=0.5)
        mixed = [SearchPicker(evaluator, SearchConfig(threads=1), rng=np.random.default_rng(0),
                              playout_rng=random.Random(5), play=PlayConfig(ownership_network=share),
                              judging_rollouts=RiggedRollouts).ownership(state)
                 for evaluator, share in ((LeadEvaluator(10.0, 0.5), 0.0), (LeadEvaluator(10.0, 0.5), 0.25),
                                          (UniformEvaluator(), 0.25))]
        assert np.allclose(mixed[1], 0.75 * mixed[0] + 0.25 * 0.5)
        assert np.array_equal(mixed[2], mixed[0])
    with pytest.raises(ValueError, match="ownership_network"):
        PlayConfig(ownership_network=1.5)


def test_a_rollout_policy_that_cannot_be_read_leaves_dead_stones_to_random_playouts(caplog):
    state = board_from_ascii(DEAD_WHITE_STONES_IN_BLACKS_WALL, to_move=BLACK, komi=0.5)
    loads = []

    def unreadable():
        loads.append(1)
        raise FileNotFoundError("rollout-patterns.npz")

    player = SearchPicker(UniformEvaluator(), SearchConfig(threads=1), rng=np.random.default_rng(0),
                             judging_rollouts=unreadable)
    with caplog.at_level(logging.WARNING, logger="tabula.search"):
        owned = player.ownership(state)
        player.ownership(state)
    assert np.allclose(owned, picker(UniformEvaluator()).ownership(state)) and loads == [1]
    assert "random playouts alone" in caplog.text


def test_the_engine_judges_dead_stones_with_the_shipped_rollout_policy(tiny_onnx):
    """From the entry point: the shipped rollout policy is read when dead stones are first judged (not at start-up
    with λ = 0), and it agrees that the lone white stones are dead."""
    player = search_player.from_config(EngineConfig(net=NetConfig(weights=(str(tiny_onnx),)),
                                                    search=SearchConfig(threads=1)))
    assert player._judging_rollouts is None
    state = board_from_ascii(DEAD_WHITE_STONES_IN_BLACKS_WALL, to_move=BLACK, komi=0.5)
    assert len(search_player.playout.dead_stones(state, player.ownership(state))) == 2
    policy = player._judging_rollouts
    assert policy is not None
    by_policy = policy.ownership(state, np.random.default_rng(0), 64)  # the policy's own map, playouts aside
    assert [p for p in range(49) if state.color_at(p) == WHITE and by_policy[p] > 0.5] == \
        [p for p in range(49) if state.color_at(p) == WHITE]


def test_the_engine_resigns_with_its_networks_calibrated_threshold_and_never_without_one(tiny_onnx, tmp_path):
    """`tabula export --resign-winrate` writes the threshold measured for a network; an engine built from its entry
    point resigns with it, and never with a network that has none (a value nobody measured)."""
    from tabula.engine.config import CALIBRATED
    from tabula.tools.learn import export

    calibrated = tmp_path / "calibrated.onnx"
    assert export.main([str(tiny_onnx), str(calibrated), "--resign-winrate", "0.07"]) == 0
    assert EngineConfig().play.resign_winrate == CALIBRATED
    for weights, threshold in ((calibrated, 0.07), (tiny_onnx, 0.0)):
        config = EngineConfig(net=NetConfig(weights=(str(weights),)), seed=1,
                              search=SearchConfig(threads=1, visits=8))
        picker = search_player.from_config(config)
        assert {size: t.for_game(size) for size, t in picker.resign_by_size.items()} == {19: threshold}
    for bad in ("1.5", "9:0.2,x", "h9:2", "30:0.1", ""):
        with pytest.raises(SystemExit):
            export.main([str(tiny_onnx), str(tmp_path / "bad.onnx"), "--resign-winrate", bad])
    assert not (tmp_path / "bad.onnx").exists()


def test_the_ownership_share_measured_for_a_network_is_written_into_it_and_taken_by_default(tiny_pooled_onnx,
                                                                                             tmp_path, capsys):
    """`tabula export --ownership-network F NET.onnx` writes the share measured for its ownership head (and nothing
    else); an engine built from its entry point takes it, a network without one judges by playouts alone, an
    explicit --ownership-network wins over the file's, and a share out of [0, 1] is refused or ignored, never
    fatal."""
    import shutil

    import onnx

    from tabula.engine.config import CALIBRATED
    from tabula.tools.learn import export

    net = tmp_path / "net.onnx"
    shutil.copy(tiny_pooled_onnx, net)
    before = onnx.load(str(net))
    assert export.main(["--ownership-network", "0.5", "--resign-winrate", "0.2", str(net)]) == 0
    after = onnx.load(str(net))
    assert after.graph == before.graph
    metadata = {p.key: p.value for p in after.metadata_props}
    assert (metadata["ownership_network"], metadata["resign_winrate"]) == ("0.5", "*:0.2")
    assert EngineConfig().play.ownership_network == CALIBRATED

    def picker(weights, **play):
        return search_player.from_config(EngineConfig(net=NetConfig(weights=(str(weights),)), seed=1,
                                                      search=SearchConfig(threads=1, visits=4),
                                                      play=PlayConfig(resign_winrate=CALIBRATED, **play)))

    assert picker(net, ownership_network=CALIBRATED).ownership_share(9) == 0.5
    assert picker(tiny_pooled_onnx, ownership_network=CALIBRATED).ownership_share(9) == 0.0
    assert picker(net, ownership_network=0.0).ownership_share(9) == 0.0
    for bad in ("1.5", "-0.1", "nan", "x"):
        with pytest.raises(SystemExit):
            export.main(["--ownership-network", bad, str(net)])
    assert {p.key: p.value for p in onnx.load(str(net)).metadata_props}["ownership_network"] == "0.5"
    from tabula.tools.learn.export import _set_metadata_value
    _set_metadata_value(str(net), "ownership_network", "2")
    capsys.readouterr()
    assert picker(net, ownership_network=CALIBRATED).ownership_share(9) == 0.0
    assert "ownership_network '2' is ignored" in capsys.readouterr().err
    with pytest.raises(ValueError, match="ownership_network"):
        PlayConfig(ownership_network=-0.5)


def test_resignation_thresholds_per_size_and_for_handicap_games_are_written_in_place_and_used(tiny_pooled_onnx,
                                                                                                tmp_path):
    """`tabula export --resign-winrate SPEC NET.onnx` changes the file's metadata and nothing else; the engine then
    resigns on each size with that size's threshold, in handicap games with the handicap one, and never on a size
    nobody calibrated."""
    import shutil

    import onnx

    from tabula.engine.config import ResignThresholds
    from tabula.tools.learn import export

    net = tmp_path / "net.onnx"
    shutil.copy(tiny_pooled_onnx, net)
    before = onnx.load(str(net))
    assert export.main(["--resign-winrate", "9:0.2,13:0.15,h9:0.05", str(net)]) == 0
    after = onnx.load(str(net))
    assert after.graph == before.graph
    assert {p.key: p.value for p in after.metadata_props}["resign_winrate"] == "9:0.2,13:0.15,h9:0.05"
    picker = search_player.from_config(EngineConfig(net=NetConfig(weights=(str(net),)), seed=1,
                                                       search=SearchConfig(threads=1, visits=4)))
    thresholds = picker.resign_by_size[9]
    assert (thresholds.for_game(9), thresholds.for_game(9, handicap=3), thresholds.for_game(13, 2),
            thresholds.for_game(19)) == (0.2, 0.05, 0.15, 0.0)
    # the decider is handed the threshold of the game it decides in
    seen = []
    decide = picker.decider.decide

    def recording(state, result, priors=None, resign_winrate=None, **rest):
        seen.append(resign_winrate)
        return decide(state, result, priors, resign_winrate=resign_winrate, **rest)

    picker.decider.decide = recording
    handicap = GameState(9)
    handicap.place_handicap([parse_vertex(v, 9) for v in ("C3", "G7")])
    for state in (GameState(9), handicap, GameState(13)):
        picker.pick(state)
    assert seen == [0.2, 0.05, 0.15]
    for garbage in (b"not a network", b""):  # refused with one line, the file left as it was
        (tmp_path / "garbage.onnx").write_bytes(garbage)
        with pytest.raises(SystemExit, match="garbage.onnx"):
            export.main(["--resign-winrate", "0.2", str(tmp_path / "garbage.onnx")])
        assert (tmp_path / "garbage.onnx").read_bytes() == garbage
    assert str(ResignThresholds.parse(" 0.1 ")) == "*:0.1" and ResignThresholds.parse("0.1").for_game(25) == 0.1
    assert str(ResignThresholds.parse("19:0.1,h19:0.04,*:0.2")) == "19:0.1,h19:0.04,*:0.2"
    for bad in ("", "9:", "9:1.0", "h:0.1", "1:0.1", "nan"):
        with pytest.raises(ValueError):
            ResignThresholds.parse(bad)


def test_the_rollout_policy_loads_only_when_the_search_mixes_it_in(tiny_onnx, monkeypatch):
    """λ = 0 (the default) does not read the shipped rollout weights at start-up, since their tables take a second
    to build; λ > 0 reads the configured file, or the shipped one, and a file the user names is read at once."""
    from tabula.engine.rollout import rollout as rollout_module

    loaded = []
    monkeypatch.setattr(rollout_module.PolicyRollouts, "load", classmethod(lambda cls, path: loaded.append(path)
                                                                          or (lambda states, rng, over: None)))
    net = NetConfig(weights=(str(tiny_onnx),))
    search_player.from_config(EngineConfig(net=net, search=SearchConfig(threads=1)))
    assert loaded == []
    picker = search_player.from_config(EngineConfig(net=net, search=SearchConfig(threads=1, rollout_mix=0.5)))
    assert loaded == [str(search_player.WEIGHTS_DIR / "rollout-patterns.npz")] and picker.search._rollout
    search_player.from_config(EngineConfig(net=dataclasses.replace(net, rollout_weights="mine.npz"),
                                           search=SearchConfig(threads=1, rollout_mix=1.0)))
    assert loaded[-1] == "mine.npz"
    named = search_player.from_config(EngineConfig(net=dataclasses.replace(net, rollout_weights="yours.npz"),
                                                   search=SearchConfig(threads=1)))
    assert loaded[-1] == "yours.npz" and named.search._rollout is None  # judges dead stones, mixes nothing in


def test_analysis_runs_the_mixed_search():
    """lz-analyze and kata-analyze search through SearchPicker.analyze: with λ > 0 its leaves get rollouts."""
    from tests.test_search import CountingRollout

    rollout = CountingRollout(z=1.0)
    player = SearchPicker(UniformEvaluator(), SearchConfig(threads=2, rollout_mix=0.5),
                             rng=np.random.default_rng(0), rollout=rollout)
    stop = threading.Event()
    reports = []

    def on_progress(candidates):
        reports.append(candidates)
        if len(reports) >= 2:
            stop.set()

    result = player.analyze(GameState(7), stop, on_progress, 0.05)
    assert result.playouts > 0 and rollout.positions >= result.evaluated > 0


def test_analysis_reports_once_after_a_stall_not_a_burst(fake_clock):
    """An evaluation that takes ten intervals (a stalled machine) gives one report on the next beat, not ten in a
    row showing the same candidates."""
    stop = threading.Event()
    evaluator = ClockedEvaluator(ScoreEvaluator(delay_s=0.01), fake_clock, step_s=1.0,
                                 after=lambda calls: calls >= 20 and stop.set())
    player = SearchPicker(evaluator, SearchConfig(threads=1), rng=np.random.default_rng(0), clock=fake_clock)
    reports = []
    player.analyze(GameState(7), stop, reports.append, 0.1)
    assert 0 < len(reports) <= evaluator.calls


def test_final_status_list_and_final_score_judge_a_position_once():
    """The judgement of dead stones draws random playouts; a GUI that asks final_status_list dead and then
    final_score sees the same stones in both, and a new position is judged afresh."""
    from tabula.engine.play.player import Player, RandomGoPicker

    class Flipping(RandomGoPicker):
        """Calls the lone white stones dead on every other judgement."""

        calls = 0

        def ownership(self, state):
            Flipping.calls += 1
            owned = np.ones(state.size * state.size, dtype=np.float32)
            if Flipping.calls % 2 == 0:
                owned[[p for p in range(49) if state.color_at(p) == WHITE]] = -1.0
            return owned

    player = Player(Flipping(random.Random(1)), size=7)
    player.state = board_from_ascii(DEAD_WHITE_STONES_IN_BLACKS_WALL, to_move=BLACK, komi=0.5)
    dead = [p for string in player.final_status("dead") for p in string]
    assert len(dead) == 2  # the first judgement: the two white stones are dead
    assert player.final_score() == "B+48.5" and player.final_status("dead") == [[p] for p in sorted(dead)]
    assert Flipping.calls == 1
    player.play(BLACK, parse_vertex("A1", 7))
    assert player.final_status("dead") == [] and Flipping.calls == 2  # a new position: judged again


class FavouritePointsEvaluator:
    """A policy that ranks the points in ``order`` first (most likely first), every other point below them."""

    def __init__(self, size: int, order: list[str]):
        self.prior = np.full(size * size + 1, 1e-3, dtype=np.float32)
        for rank, vertex in enumerate(order):
            self.prior[parse_vertex(vertex, size)] = 1.0 - 0.01 * rank
        self.prior[-1] = 2.0  # the pass is never a handicap stone, however likely

    def evaluate(self, states):
        return Evaluation(np.tile(self.prior, (len(states), 1)), np.zeros(len(states), dtype=np.float32))


def test_free_handicap_stones_are_the_networks_choice_one_at_a_time_and_never_touch():
    # C3 is most likely, then C4 (touching C3: passed over), then G7, C7.
    search = picker(FavouritePointsEvaluator(9, ["C3", "C4", "G7", "C7", "G3"]))
    stones = search.handicap_stones(GameState(9), 4)
    assert [format_vertex(p, 9) for p in stones] == ["C3", "G7", "C7", "G3"]
    # Each stone is chosen with the ones before it on the board and black to move.
    seen = []

    class Recording(FavouritePointsEvaluator):
        def evaluate(self, states):
            seen.append((states[0].to_move, len(states[0].setup)))
            return super().evaluate(states)

    picker(Recording(9, ["C3"])).handicap_stones(GameState(9), 3)
    assert seen == [(BLACK, 0), (BLACK, 1), (BLACK, 2)]


def test_free_handicap_stones_touch_only_when_nothing_else_is_legal_and_stop_when_the_board_is_full():
    search = picker(FavouritePointsEvaluator(2, ["A1"]))
    stones = search.handicap_stones(GameState(2), 4)
    assert [format_vertex(p, 2) for p in stones][:2] == ["A1", "B2"]  # B2 is the one point apart from A1
    assert len(stones) == 3  # the fourth point would fill the board: suicide, so not legal


def test_place_free_handicap_asks_the_picker_and_falls_back_to_the_table():
    from tabula.engine.play.player import Player, RandomGoPicker

    player = Player(picker(FavouritePointsEvaluator(9, ["E5", "C3"])), size=9)
    assert [format_vertex(p, 9) for p in player.free_handicap(2)] == ["E5", "C3"]
    assert player.state.to_move == WHITE and player.state.handicap == 2
    table = Player(RandomGoPicker(random.Random(1)), size=9)
    assert [format_vertex(p, 9) for p in table.free_handicap(2)] == ["G7", "C3"]


def test_a_move_whose_unspent_time_is_lost_searches_its_whole_budget(fake_clock):
    """On a fake clock that each network call moves 1/128 s on, so that no machine's load decides the outcome."""
    state = played(5, ["B2", "D4"])
    step_s = 1 / 128
    settled = ClockedEvaluator(RiggedEvaluator(parse_vertex("C3", 5), 0.95), fake_clock, step_s=step_s)
    player = picker(settled, visits=0, temperature_moves=0, clock=fake_clock)
    player.pick(state, budget_s=0.4)  # one move so clearly best that a search stops early
    assert player.last_search.stopped_early and player.last_search.elapsed_s < 0.35
    player.pick(state, budget_s=0.4, spend_all=True)  # a byo-yomi period: what is left over is lost
    assert not player.last_search.stopped_early and player.last_search.elapsed_s >= 0.4
    player.pick_cleanup(state, budget_s=0.3, spend_all=True)
    assert player.last_search is None or not player.last_search.stopped_early

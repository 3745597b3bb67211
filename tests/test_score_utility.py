"""The score utility: the search ranks moves by value + KataGo's saturating score utility, so that where
every move's value is the same it still prefers the moves that gain points; what it reports stays the value alone."""
from __future__ import annotations

import math

import numpy as np
import pytest

import tests.test_search_golden as golden
from tabula.engine.config import ConfigError, SearchConfig
from tabula.engine.net.evaluator import Evaluation, UniformEvaluator, legal_mask
from tabula.engine.play.search import Search
from tabula.engine.play.tree import EXPANDED, Node, ScoreUtility, Tree
from tabula.engine.rules.coords import BLACK, PASS, parse_vertex
from tabula.engine.rules.game import GameState, Rules
from tests.conftest import board_from_ascii
from tests.test_search import ScoreEvaluator, check_tree, walk

OFF = {"static_score_utility": 0.0, "dynamic_score_utility": 0.0}

# Black to move, its 7 stones around white's 3 in atari at F4; black loses by far whatever happens (komi 100), but
# capturing there loses by 51 points (Tromp-Taylor: the rest of the board is black's) where any other move loses by 95.
CAPTURE = """
    . . . . . . .
    . . . . . . .
    . . X X X . .
    . X O O O . .
    . . X X X . .
    . . . . . . .
    . . . . . . .
"""


class FlatValueEvaluator:
    """Every position lost for black (value -0.99 from black's view, side to move's view as always), with the
    Tromp-Taylor margin as the score, as a finished game counts it; priors from ``prior_of`` (point -> weight) over
    the legal moves. The value tells no move apart, the score does."""

    def __init__(self, prior_of: dict[int, float] | None = None, score: bool = True):
        self.prior_of = prior_of or {}
        self.score = score

    def evaluate(self, states):
        size = states[0].size
        policy = np.zeros((len(states), size * size + 1), dtype=np.float32)
        values = np.zeros(len(states), dtype=np.float32)
        scores = np.zeros(len(states), dtype=np.float32)
        for i, state in enumerate(states):
            weights = legal_mask(state).astype(np.float32)
            for point, weight in self.prior_of.items():
                weights[point] *= weight
            policy[i] = weights / weights.sum()
            side = 1.0 if state.to_move == BLACK else -1.0
            values[i] = -0.99 * side
            scores[i] = state.area_score() * side
        if not self.score:
            return Evaluation(policy, values)
        return Evaluation(policy, values, scores, np.zeros((len(states), size * size), dtype=np.float32))


def capture_position() -> tuple[GameState, int, int]:
    """The position, the capturing move, and the move the policy favours."""
    state = board_from_ascii(CAPTURE, komi=100.0)
    return state, parse_vertex("F4", 7), parse_vertex("B6", 7)


def search_capture(seed: int = 0, score: bool = True, **changes):
    state, capture, favourite = capture_position()
    evaluator = FlatValueEvaluator({favourite: 10.0, capture: 3.0}, score=score)
    # the priors as the evaluator gives them: the atari floor would lift the capture's too, and the tests here are
    # about what the score utility alone does
    config = SearchConfig(threads=1, visits=300, atari_prior=0.0, **changes)
    search = Search(evaluator, config, rng=np.random.default_rng(seed))
    return search, search.run(state), capture, favourite


def test_the_score_utility_prefers_the_move_that_loses_by_less():
    search, result, capture, favourite = search_capture()
    assert result.move == capture
    by_move = {c.move: c for c in result.candidates}
    assert by_move[capture].score > by_move[favourite].score  # white plays into the space it leaves, yet less lost
    check_tree(search)


def test_without_it_the_search_plays_what_the_policy_says():
    _, result, capture, favourite = search_capture(**OFF)
    assert result.move == favourite


def test_the_reported_values_stay_the_win_loss_value():
    """Every position is worth -0.99 to black: so are its moves, whatever their utility; the utility ranks them."""
    search, result, capture, _ = search_capture()
    for candidate in result.candidates:
        assert candidate.value == pytest.approx(-0.99, abs=1e-5)
        assert candidate.winrate == pytest.approx(0.005, abs=1e-5)
        assert candidate.lcb <= candidate.value + 1e-9
    by_move = {c.move: c for c in result.candidates}
    others = [c.utility for c in result.candidates if c.move != capture]
    assert by_move[capture].utility > max(others) + 0.05
    assert all(c.utility < c.value for c in result.candidates)  # losing by 51 or more counts against black
    assert search.root_value() == pytest.approx(-0.99, abs=1e-5)


def test_tree_statistics_keep_values_and_utilities_apart():
    """Each edge: ``v`` sums the values (no virtual loss), ``w`` the utilities, ``q`` is w / n where visited."""
    search, _, _, _ = search_capture()
    for node in walk(search.tree.root):
        if node.status != EXPANDED:
            continue
        visited = node.n > 0
        assert np.allclose(np.abs(node.v[visited]), 0.99 * node.n[visited], atol=1e-3)  # ±0.99 every visit
        assert np.allclose(node.q[visited], node.w[visited] / node.n[visited], atol=1e-5)


def test_a_finished_game_scores_by_its_count():
    """White passed; black's pass ends the game lost by 4 points, every other move leads to positions the network
    counts lost by about 60. The pass's exact count is what its utility sees."""
    state = GameState(7, Rules(komi=5.0))
    for vertex in ("D4", "C3", "E5", "pass"):
        state.play(PASS if vertex == "pass" else parse_vertex(vertex, 7))

    class Behind(FlatValueEvaluator):
        def evaluate(self, states):
            evaluation = super().evaluate(states)
            sides = np.array([1.0 if s.to_move == BLACK else -1.0 for s in states], dtype=np.float32)
            return Evaluation(evaluation.policy, evaluation.value, -60.0 * sides, evaluation.ownership)

    priors = {parse_vertex("B6", 7): 10.0, 7 * 7: 5.0}  # the pass second
    on = Search(Behind(priors), SearchConfig(threads=1, visits=200), rng=np.random.default_rng(0))
    off = Search(Behind(priors), SearchConfig(threads=1, visits=200, **OFF), rng=np.random.default_rng(0))
    chosen = on.run(state)
    assert chosen.move == PASS
    assert chosen.candidates[0].value == pytest.approx(-1.0) and chosen.candidates[0].score == pytest.approx(-4.0)
    assert off.run(state).move != PASS  # a sure loss (-1) against -0.99


def test_a_network_without_a_score_head_ranks_by_its_value_alone():
    """The same search, move for move and digit for digit, with the utility's weights or without them."""
    _, with_weights, _, favourite = search_capture(score=False)
    _, without, _, _ = search_capture(score=False, **OFF)
    assert with_weights.move == favourite
    assert with_weights.candidates == without.candidates
    for evaluator in (UniformEvaluator(), ScoreEvaluator()):
        state = golden.position(7, "D4 C3 C5 E3 E5")
        results = [Search(evaluator, SearchConfig(threads=1, visits=120, **changes), rng=np.random.default_rng(4))
                   .run(state) for changes in ({}, OFF)]
        assert results[0].candidates == results[1].candidates


@pytest.mark.slow
def test_weight_zero_gives_the_stored_output_of_the_search_without_it():
    """Byte for byte the stored search output the search gave before it had a score utility
    (tests/golden/search-no-score-utility.txt: tests/golden/search.txt as it was)."""
    assert golden.dump_without_score_utility() == golden.NO_SCORE_UTILITY.read_text()


def test_the_centre_moves_towards_zero_within_a_cap():
    config = SearchConfig()
    far = ScoreUtility.for_root(config, 19, -100.0)  # 20% of the way to 0 would be 20 points: capped at 0.75·19
    assert far.centre == pytest.approx(-100.0 + 0.75 * 19)
    near = ScoreUtility.for_root(config, 19, -10.0)
    assert near.centre == pytest.approx(-8.0)
    assert near.static == pytest.approx(0.1 * 2 / math.pi) and near.static_scale == 38.0
    assert near.dynamic == pytest.approx(0.3 * 2 / math.pi) and near.dynamic_scale == pytest.approx(14.25)


@pytest.mark.parametrize("score", [-80.0, -8.0, 0.0, 3.5, 40.0])
def test_the_utility_is_odd_bounded_and_increasing(score):
    """The other side's view of a utility is its negative; it stays within the weights and grows with the score."""
    utility = ScoreUtility.for_root(SearchConfig(), 9, -12.0)
    for sign in (1.0, -1.0):
        assert utility.term(score, sign) == pytest.approx(-utility.term(-score, -sign))
        assert abs(utility.term(score, sign)) < 0.4
        assert utility.term(score + 1.0, sign) > utility.term(score, sign)
        assert utility.terms(np.array([score]), sign)[0] == pytest.approx(utility.term(score, sign))


def test_a_kept_tree_is_moved_to_the_next_runs_centre():
    """Searching on from a kept subtree: the new root's centre is its own expected score, and the kept edges'
    utilities become their values plus the utility of their mean score at the new centre, the root's at once and
    the others' when a run first reaches them."""
    state, capture, favourite = capture_position()
    search = Search(FlatValueEvaluator({favourite: 10.0, capture: 3.0}),
                    SearchConfig(threads=1, visits=300), rng=np.random.default_rng(0))
    result = search.run(state)
    state.play(result.move)
    state.play(result.candidates[0].pv[1])
    assert search.set_position(state)
    tree = search.tree
    root = tree.root
    expected = (root.score + float(root.s.sum())) / root.visits
    epoch = tree.epoch
    tree.start_run(True)
    scorer = tree.score_utility
    assert scorer.centre == pytest.approx(ScoreUtility.for_root(search.config, 7, expected).centre)
    assert root.epoch == tree.epoch == epoch + 1
    assert root.utility == pytest.approx(root.value + scorer.term(root.score, 1.0))
    visited = root.n > 0
    n = root.n[visited]
    moved = root.v[visited] + n * scorer.terms(root.s[visited] / n, 1.0)
    assert np.allclose(root.w[visited], moved, atol=1e-4)
    assert np.allclose(root.q[visited], moved / n, atol=1e-5)
    assert all(child.epoch < tree.epoch for child in root.children.values() if child.status == EXPANDED)
    later = search.run(state, visits=root.visits + 100)
    assert later.reused_visits > 1
    check_tree(search)
    for candidate in later.candidates:
        assert candidate.value == pytest.approx(-0.99, abs=1e-5)


def test_the_weights_are_range_checked_and_offered_as_flags():
    from tabula.gtp.__main__ import build_config, parse_args

    for field, bad in [("static_score_utility", 1.5), ("dynamic_score_utility", -0.1),
                       ("dynamic_score_scale", 0.0), ("dynamic_score_zero_weight", float("nan"))]:
        with pytest.raises(ConfigError):
            SearchConfig(**{field: bad})
    config = build_config(parse_args(["--static-score-utility", "0", "--dynamic-score-utility", "0.5"])).search
    assert (config.static_score_utility, config.dynamic_score_utility) == (0.0, 0.5) and config.score_utility
    assert not SearchConfig(**OFF).score_utility
    with pytest.raises(SystemExit):
        parse_args(["--dynamic-score-utility", "2"])


def test_the_ownership_score_takes_its_share_of_the_score_from_the_area_count():
    """``ownership_score`` w: each expansion's score is (1 - w)·head + w·(Σ ownership + the side to move's komi),
    for either side to move; 0 leaves the head's; the setting is range-checked and a flag."""
    from tabula.engine.play.tree import expansions, ownership_margins
    from tabula.gtp.__main__ import build_config, parse_args

    black = GameState(5, Rules(komi=6.5))
    white = black.copy()
    white.play(parse_vertex("C3", 5))
    states = [black, white]
    ownership = np.zeros((2, 25), dtype=np.float32)
    ownership[0, :15] = 1.0  # black to move owns 15 points, the opponent 10: +5 on the board, -6.5 komi
    ownership[1, :20] = 1.0  # white to move owns 20, black 5: +15, +6.5 komi
    ownership[1, 20:] = -1.0
    ownership[0, 15:] = -1.0
    evaluation = Evaluation(policy=np.full((2, 26), 1 / 26, dtype=np.float32), value=np.zeros(2, dtype=np.float32),
                            score=np.array([-3.0, 4.0], dtype=np.float32), ownership=ownership)
    assert ownership_margins(states, ownership) == pytest.approx([-1.5, 21.5])
    assert [e.score for e in expansions(states, evaluation, False)] == pytest.approx([-3.0, 4.0])
    assert [e.score for e in expansions(states, evaluation, False, 1.0)] == pytest.approx([-1.5, 21.5])
    assert [e.score for e in expansions(states, evaluation, False, 0.5)] == pytest.approx([-2.25, 12.75])
    with pytest.raises(ConfigError):
        SearchConfig(ownership_score=1.5)
    assert build_config(parse_args(["--ownership-score", "0.5"])).search.ownership_score == 0.5


# -- KataGo's variance-scaled exploration ---------------------------------------------------------------------------

def spread_node(utilities: list[float]) -> Node:
    node = Node()
    node.visits = len(utilities)
    node.u_sum = float(sum(utilities))
    node.u_sq = float(sum(u * u for u in utilities))
    return node


def test_the_exploration_factor_follows_the_spread_of_a_nodes_utilities():
    """1 + scale·(σ/prior - 1), σ shrunk towards the prior by its weight: below 1 where the utilities agree, above
    where they spread wider than the prior, 1 before a node has two visits."""
    tree = Tree(SearchConfig(cpuct_utility_stdev_scale=0.85))
    assert tree._spread_factor(spread_node([-0.99])) == 1.0
    quiet = tree._spread_factor(spread_node([-0.99] * 500))

    def kata_go(mean: float, square_mean: float, n: int) -> float:  # KataGo's σ, the prior 0.4 counted twice
        return math.sqrt(((mean ** 2 + 0.4 ** 2) * 2 + square_mean * n) / (2 + n - 1) - mean ** 2)

    assert quiet == pytest.approx(1 + 0.85 * (kata_go(-0.99, 0.99 ** 2, 500) / 0.4 - 1), rel=1e-6)
    assert quiet < 0.3
    wild = tree._spread_factor(spread_node([1.0, -1.0] * 250))
    assert wild == pytest.approx(1 + 0.85 * (kata_go(0.0, 1.0, 500) / 0.4 - 1), rel=1e-6)
    assert wild > 2.0
    # few visits: the prior still counts (σ near the prior's, the factor near 1)
    assert quiet < 0.8 < tree._spread_factor(spread_node([-0.99] * 3)) < 1.5


def test_where_every_move_is_lost_the_scaled_exploration_spends_less_on_the_worse_moves():
    """The capture position (every move's value the same, the capture 44 points better): with the exploration
    scaled by the spread, the search gives the policy's favourite fewer of its visits, and still captures."""
    shares = {}
    for scale in (0.0, 0.85):
        search, result, capture, favourite = search_capture(early_stop=False, cpuct_utility_stdev_scale=scale)
        assert result.move == capture
        by_move = {c.move: c.visits for c in result.candidates}
        shares[scale] = by_move[favourite] / sum(by_move.values())
        check_tree(search)
    assert shares[0.85] < 0.7 * shares[0.0]


def test_the_scaled_exploration_is_katagos_by_default_and_range_checked():
    assert SearchConfig().cpuct_utility_stdev_scale == 0.85
    assert SearchConfig().cpuct_utility_stdev_prior == 0.4 and SearchConfig().cpuct_utility_stdev_prior_weight == 2.0
    for bad in ({"cpuct_utility_stdev_scale": 1.5}, {"cpuct_utility_stdev_scale": -0.1},
                {"cpuct_utility_stdev_prior": 0.0}, {"cpuct_utility_stdev_prior_weight": -1.0}):
        with pytest.raises(ConfigError):
            SearchConfig(**bad)
    from tabula.gtp.__main__ import build_config, parse_args
    args = parse_args(["--cpuct-utility-stdev-scale", "0.85"])
    assert build_config(args).search.cpuct_utility_stdev_scale == 0.85

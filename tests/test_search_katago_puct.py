"""KataGo's exploration terms as options of the PUCT search, off by default: c_puct growing with a node's visits
(``cpuct_log``), and the first-play urgency starting from the search's mean rather than the network's utility
(``fpu_search_mean``). Small trees whose statistics are set by hand show each one changing the move selection
the way it should; a whole search with them on keeps the tree's invariants."""
from __future__ import annotations

import math

import numpy as np
import pytest

from tabula.engine.config import ConfigError, SearchConfig
from tabula.engine.play.search import Search
from tabula.engine.play.tree import EXPANDED, TERMINAL, Expansion, Tree
from tabula.engine.rules.game import GameState
from tests.test_search import SEVERAL_LEAVES, ScoreEvaluator, check_tree, walk

A, B = 0, 12  # two points of a 5×5 board: the root's only moves besides the pass
PLAIN = {"cpuct_utility_stdev_scale": 0.0, "static_score_utility": 0.0, "dynamic_score_utility": 0.0}


def root_of(config: SearchConfig, priors: tuple[float, float], utility: float = 0.0) -> Tree:
    """A tree at an empty 5×5 board whose root is expanded with moves A and B (and a pass of prior 0) and the
    network's utility ``utility``."""
    tree = Tree(config)
    tree.set_position(GameState(5))
    moves = np.array([A, B, 25], dtype=np.int16)
    prior = np.array([priors[0], priors[1], 0.0], dtype=np.float32)
    tree.expand(tree.root, Expansion(moves, prior, utility))
    tree.root.visits = 1
    tree.root.u_sum, tree.root.u_sq = utility, utility * utility
    tree.root_pending = np.zeros(3, dtype=np.int32)
    tree.refresh(tree.root)
    return tree


def visit(tree: Tree, idx: int, visits: int, mean: float) -> None:
    """Give the root's edge ``idx`` ``visits`` visits of mean utility ``mean`` (the root's view)."""
    root = tree.root
    tree.update(root, idx, visits, visits * mean)
    root.w2[idx] += visits * mean * mean
    root.visits += visits
    root.u_sum += visits * mean
    root.u_sq += visits * mean * mean


def chosen(tree: Tree) -> int:
    """The root move the next descent takes."""
    _, path, _ = tree.descend(None)
    tree.undo(path)
    return int(tree.root.moves[path[0][1]])


# -- cpuct_log -----------------------------------------------------------------------------------------------------

def well_visited_a(**changes) -> Tree:
    """A: 400 visits at 0.5; B (as likely by the policy): 30 visits at 0.1."""
    tree = root_of(SearchConfig(c_puct=1.0, **PLAIN, **changes), (0.5, 0.5))
    visit(tree, 0, 400, 0.5)
    visit(tree, 1, 30, 0.1)
    return tree


def test_a_constant_cpuct_keeps_to_the_better_move():
    # A: 0.5 + 0.5·√430/401 ≈ 0.53; B: 0.1 + 0.5·√430/31 ≈ 0.43
    assert chosen(well_visited_a()) == A


def test_a_cpuct_growing_with_the_visits_explores_the_other_move():
    # c = 1 + ln((430 + 100) / 100) ≈ 2.67: B ≈ 0.1 + 2.67·0.33 ≈ 0.99 is above A ≈ 0.57
    assert chosen(well_visited_a(cpuct_log=1.0, cpuct_log_base=100.0)) == B
    # KataGo's own terms barely move c at 430 visits (1.0 → 1.27): A stays
    assert chosen(well_visited_a(cpuct_log=0.45, cpuct_log_base=500.0)) == A


def test_the_growing_cpuct_is_katagos_formula():
    """The exploration term of B is c·P·√N/(1+n) with KataGo's c = c_puct + log·ln((N + base) / base)."""
    tree = well_visited_a(cpuct_log=0.45, cpuct_log_base=500.0)
    root = tree.root
    n = root.n_sum
    c = 1.0 + 0.45 * math.log((n + 500.0) / 500.0)
    expected = c * 0.5 * math.sqrt(n) / 31.0 + 0.1
    assert float(root.pu[1] * c * math.sqrt(n) + root.q[1]) == pytest.approx(expected, rel=1e-5)


# -- fpu_search_mean -----------------------------------------------------------------------------------------------

def searched_a(**changes) -> Tree:
    """The network rates the root 0.0; A (prior 0.9) has 50 visits at 0.8: the search found the position better
    than the network thought. B (prior 0.1) is unvisited."""
    tree = root_of(SearchConfig(**PLAIN, **changes), (0.9, 0.1))
    visit(tree, 0, 50, 0.8)
    return tree


def test_the_first_play_urgency_starts_from_the_networks_utility_by_default():
    tree = searched_a()
    # 0.0 - 0.5·√0.9: B ≈ -0.47 + 1.5·0.1·√50 ≈ 0.59 below A ≈ 0.8 + 0.19
    assert float(tree.root.q[1]) == pytest.approx(-0.5 * math.sqrt(0.9), rel=1e-5)
    assert chosen(tree) == A


def test_with_the_search_mean_an_unvisited_move_starts_from_what_the_search_found():
    tree = searched_a(fpu_search_mean=True)
    root = tree.root
    assert chosen(tree) == B  # B ≈ 0.16 + 1.06 is above A ≈ 0.99
    mean = root.u_sum / root.visits  # (0 + 50·0.8) / 51
    # what descend saw: the network's 0.0 moved 0.9² of the way to the mean, less the reduction
    assert float(root.q[1]) == pytest.approx(0.81 * mean - 0.5 * math.sqrt(0.9), rel=1e-5)


def test_the_search_mean_counts_by_the_square_of_the_prior_mass_visited():
    """With little of the policy visited the network's utility still dominates: A of prior 0.1 visited, mass²
    0.01."""
    tree = root_of(SearchConfig(**PLAIN, fpu_search_mean=True), (0.1, 0.9))
    visit(tree, 0, 50, 0.8)
    tree._refresh_urgency(tree.root)
    mean = tree.root.u_sum / tree.root.visits
    assert float(tree.root.q[1]) == pytest.approx(0.01 * mean - 0.5 * math.sqrt(0.1), rel=1e-5)


# -- the options -------------------------------------------------------------------------------------------------

def test_the_options_are_off_by_default_range_checked_and_flags():
    config = SearchConfig()
    assert (config.c_puct, config.fpu_reduction, config.fpu_root_reduction) == (1.5, 0.5, 0.5)
    assert config.cpuct_log == 0.0 and not config.fpu_search_mean
    for bad in ({"cpuct_log": -0.1}, {"cpuct_log_base": 0.5}, {"cpuct_log_base": math.inf}, {"c_puct": -1.0}):
        with pytest.raises(ConfigError):
            SearchConfig(**bad)
    from tabula.gtp.__main__ import build_config, parse_args

    katago = build_config(parse_args(["--c-puct", "1.0", "--cpuct-log", "0.45", "--cpuct-log-base", "500",
                                      "--fpu-reduction", "0.2", "--fpu-root-reduction", "0.1",
                                      "--fpu-search-mean"])).search
    assert (katago.c_puct, katago.cpuct_log, katago.cpuct_log_base) == (1.0, 0.45, 500.0)
    assert (katago.fpu_reduction, katago.fpu_root_reduction, katago.fpu_search_mean) == (0.2, 0.1, True)
    with pytest.raises(SystemExit):
        parse_args(["--cpuct-log", "-1"])


@pytest.mark.parametrize("threads, batch", [(1, 1), (2, 4)])
def test_a_search_with_katagos_terms_keeps_the_trees_invariants(threads, batch):
    config = SearchConfig(playouts_per_leaf=SEVERAL_LEAVES,
                          threads=threads, batch_size=batch, visits=200, early_stop=False, c_puct=1.0,
                          cpuct_log=0.45, fpu_reduction=0.2, fpu_root_reduction=0.1, fpu_search_mean=True)
    search = Search(ScoreEvaluator(), config, rng=np.random.default_rng(5))
    result = search.run(GameState(5))
    assert result.root_visits == 200
    check_tree(search)


# -- subtree_value_bias ------------------------------------------------------------------------------------------

def test_a_bucket_is_the_local_sequence_and_pattern_not_the_whole_board():
    from tabula.engine.play.value_bias import bucket
    from tabula.engine.rules.coords import parse_vertex

    def after(*vertices: str) -> GameState:
        state = GameState(9)
        for vertex in vertices:
            state.play(parse_vertex(vertex, 9))
        return state

    move = parse_vertex("C4", 9)
    here = bucket(after("C3", "G7", "D3"), move)
    assert here is not None
    assert bucket(after("C3", "H8", "D3"), move) == here  # a stone far from the move changes nothing
    assert bucket(after("C3", "D5", "D3"), move) != here  # one inside its 5×5 pattern does
    assert bucket(after("C3", "G7", "E3"), move) != here  # ... and so does the move before it
    assert bucket(after("C3", "G7", "D3"), parse_vertex("C5", 9)) != here
    # the same stones, C3 now in atari: a different bucket
    assert bucket(after("C3", "G7", "D3", "B3", "C2"), move) != bucket(after("C3", "G7", "D3", "B3", "A1"), move)
    assert bucket(after("C3"), PASS_MOVE) is None and bucket(GameState(9), move) is None


PASS_MOVE = -1  # tabula.engine.rules.coords.PASS
assert PASS_MOVE == __import__("tabula.engine.rules.coords", fromlist=["PASS"]).PASS


def biased_root(bias: float, entry_mean: float | None) -> Tree:
    """A root with moves A and B of equal prior, each visited once: A's position in a bucket whose table says the
    search ends ``entry_mean`` above the network's utility there (its side to move's view), B's in none. Both
    positions are worth -0.1 to their side to move by the network."""
    tree = root_of(SearchConfig(**PLAIN, subtree_value_bias=bias, fpu_root_reduction=0.0), (0.5, 0.5))
    if entry_mean is not None:
        tree.bias_table[("A",)] = [entry_mean * 10.0, 10.0]
    for expected, key in ((A, ("A",)), (B, None)):
        node, path, _ = tree.descend(None)
        assert int(tree.root.moves[path[0][1]]) == expected  # equal priors: A first, then the unvisited B
        node.bias_key = key
        tree.expand(node, Expansion(np.array([25], dtype=np.int16), np.array([1.0], dtype=np.float32), -0.1), 1)
        tree.backup(path, node, -0.1)
    return tree


def test_a_new_evaluation_carries_its_buckets_correction():
    plain = biased_root(0.0, 0.4)
    assert float(plain.root.q[0]) == pytest.approx(0.1) and float(plain.root.q[1]) == pytest.approx(0.1)
    corrected = biased_root(0.5, 0.4)
    # A's side to move does 0.4 better than its network says in that bucket: A is worth 0.1 - 0.5·0.4 to the root
    assert float(corrected.root.q[0]) == pytest.approx(-0.1, abs=1e-6)
    assert float(corrected.root.q[1]) == pytest.approx(0.1)
    assert corrected.root.children[0].bias == pytest.approx(0.2)


def test_the_correction_moves_the_next_visit_to_the_other_move():
    assert chosen(biased_root(0.0, 0.4)) == A  # a tie: the first
    assert chosen(biased_root(0.5, 0.4)) == B
    assert chosen(biased_root(0.5, -0.4)) == A  # the bucket's positions turn out worse for their side: A better


def check_biased_sums(search: Search) -> None:
    """Every edge sums the utilities of the playouts through it, corrections included: an edge's sum is its
    child's (negated), a node's own term is the network's utility plus its correction, and the table holds exactly
    what the nodes say they added to it."""
    tree = search.tree
    totals: dict[tuple, list[float]] = {}
    for node in walk(tree.root):
        if node.status != EXPANDED:
            continue
        tolerance = 1e-3 * max(1, node.visits)
        own = node.u_sum - float(node.w.sum())
        assert own == pytest.approx(node.utility + node.bias, abs=tolerance)
        assert node.u_sq - float(node.w2.sum()) == pytest.approx(own * own, abs=10 * tolerance)
        assert node.visits == 1 + round(float(node.n.sum()))
        for idx, child in node.children.items():
            if child.status in (EXPANDED, TERMINAL):
                assert float(node.w[idx]) == pytest.approx(-child.u_sum, abs=tolerance)
        if node.bias_weight:
            total = totals.setdefault(node.bias_key, [0.0, 0.0])
            total[0] += node.bias_delta
            total[1] += node.bias_weight
    assert totals, "no node added to the table"
    for key, (delta, weight) in totals.items():
        assert tree.bias_table[key] == pytest.approx([delta, weight], abs=1e-6)


@pytest.mark.parametrize("threads, batch", [(1, 1), (2, 4)])
def test_a_search_with_the_correction_keeps_every_sum_consistent(threads, batch):
    config = SearchConfig(playouts_per_leaf=SEVERAL_LEAVES,
                          threads=threads, batch_size=batch, visits=300, early_stop=False, subtree_value_bias=0.45)
    search = Search(ScoreEvaluator(), config, rng=np.random.default_rng(2))
    state = GameState(7)
    state.play(24)
    result = search.run(state)
    assert result.root_visits == 300
    check_biased_sums(search)
    assert any(abs(node.bias) > 0 for node in walk(search.tree.root))
    # the reported values stay the network's alone: the root's is the mean of the value sums, corrections left out
    root = search.tree.root
    assert search.root_value() == pytest.approx((root.value + float(root.v.sum())) / root.visits, abs=1e-6)
    # the next move: a new run starts its table afresh, and kept nodes drop their corrections when reached
    state.play(result.move)
    state.play(10)
    search.run(state, visits=0, playouts=100)
    check_biased_sums(search)


def test_with_a_score_utility_the_correction_keeps_the_sums_and_the_reported_values_apart():
    from tests.test_score_utility import FlatValueEvaluator

    config = SearchConfig(threads=1, visits=200, early_stop=False, subtree_value_bias=0.45)
    search = Search(FlatValueEvaluator(), config, rng=np.random.default_rng(4))
    state = GameState(5)
    state.play(12)
    search.run(state)
    check_biased_sums(search)
    for candidate in search.candidates():
        assert candidate.value == pytest.approx(-0.99 * -1.0, abs=1e-5)  # white to move: every value the same


# -- the optimistic policy of a converted KataGo network -----------------------------------------------------------

@pytest.mark.slow
def test_export_from_katago_writes_the_policy_optimism_asked_for(tmp_path, capsys):
    """KataGo's search uses its optimistic policy in full below the root (0.2 at the root, what the converted file
    has by default): a file converted at 1.0 lets a match measure that, and says so in its metadata."""
    pytest.importorskip("torch")
    import os

    import onnxruntime as ort

    from tabula.engine.net import katago_network
    from tabula.tools.learn import export

    model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "katago", "random-v15.bin.gz")
    policies = {}
    for optimism in ("0.2", "1"):
        out = tmp_path / f"net-{optimism}.onnx"
        arguments = ["--from-katago", model, str(out), "--no-int8"]
        if optimism != "0.2":
            arguments += ["--policy-optimism", optimism]
        assert export.main(arguments) == 0
        session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        assert session.get_modelmeta().custom_metadata_map["policy_optimism"] == optimism
        planes = katago_network.random_planes(9, 4, seed=3)
        policies[optimism] = session.run(["policy"], {"planes": planes})[0]
    assert not np.allclose(policies["0.2"], policies["1"], atol=1e-4)
    with pytest.raises(SystemExit, match="policy-optimism must be in"):
        export.main(["--from-katago", model, str(tmp_path / "x.onnx"), "--no-int8", "--policy-optimism", "1.5"])


class OptimisticEvaluator:
    """Uniform priors over the legal moves as the policy; the optimistic policy all on the lowest legal point but a
    little on every other legal move; a value of 0."""

    def __init__(self):
        self.inner = ScoreEvaluator()

    def evaluate(self, states):
        evaluation = self.inner.evaluate(states)
        legal = np.stack([state.legal_mask() for state in states]).astype(np.float32)
        optimistic = legal * 0.01
        optimistic[np.arange(len(states)), legal[:, :-1].argmax(axis=1)] = 1.0
        evaluation.policy = legal / legal.sum(axis=1, keepdims=True)
        evaluation.policy_optimistic = optimistic / optimistic.sum(axis=1, keepdims=True)
        evaluation.value = np.zeros(len(states), dtype=np.float32)
        return evaluation


def priors_by_move(node) -> dict[int, float]:
    return dict(zip(node.moves.tolist(), node.prior.tolist()))


@pytest.mark.parametrize("root_symmetries", [True, False])
def test_with_the_optimistic_policy_the_root_keeps_the_policy_and_every_other_node_takes_the_optimistic(
        root_symmetries):
    # (without the eye filter, which would take the optimistic policy's move away where it fills an eye)
    config = SearchConfig(visits=60, threads=1, batch_size=1, early_stop=False, optimistic_policy=True,
                          root_symmetries=root_symmetries, eye_filter=False, **PLAIN)
    search = Search(OptimisticEvaluator(), config, rng=np.random.default_rng(2))
    state = GameState(5)
    search.run(state)
    root = search.tree.root
    assert np.allclose(root.prior, 1.0 / len(root.prior), atol=1e-6)  # the plain policy: uniform
    inner = [node for node in walk(root) if node is not root and node.status == EXPANDED]
    assert inner
    for node in inner:
        priors = priors_by_move(node)
        assert max(priors.values()) > 0.2 and min(priors.values()) < 0.02  # the optimistic policy's shape
    # the next move's root is a node of this tree, expanded with the optimistic policy: as the root it takes the
    # plain policy again
    child = max(root.children.items(), key=lambda item: item[1].visits)[0]
    state.play(child if child != 25 else -1)
    search.run(state)
    assert np.allclose(search.tree.root.prior, 1.0 / len(search.tree.root.prior), atol=1e-6)
    check_tree(search)


def test_without_the_option_or_the_output_every_node_takes_the_policy():
    for evaluator, option in ((OptimisticEvaluator(), False), (ScoreEvaluator(), True)):
        config = SearchConfig(visits=40, threads=1, batch_size=1, early_stop=False, optimistic_policy=option,
                              atari_prior=0.0, **PLAIN)
        search = Search(evaluator, config, rng=np.random.default_rng(2))
        search.run(GameState(5))
        for node in walk(search.tree.root):
            if node.status == EXPANDED:
                assert np.allclose(node.prior, 1.0 / len(node.prior), atol=1e-6)


def test_the_optimistic_policy_is_a_flag_off_by_default():
    from tabula.gtp.__main__ import build_config, parse_args

    assert not SearchConfig().optimistic_policy
    assert build_config(parse_args(["--optimistic-policy"])).search.optimistic_policy


def test_the_analysis_engine_takes_katagos_names_for_them():
    from tabula.gtp.analysis_engine import _overrides

    search, _, _, unknown = _overrides({"cpuctExploration": 1.0, "cpuctExplorationLog": 0.45,
                                        "cpuctExplorationBase": 500, "fpuReductionMax": 0.2,
                                        "rootFpuReductionMax": 0.1, "fpuParentWeightByVisitedPolicy": "true",
                                        "subtreeValueBiasFactor": 0.45, "subtreeValueBiasWeightExponent": 0.85},
                                       SearchConfig(), "BLACK")
    assert unknown == []
    assert (search.c_puct, search.cpuct_log, search.cpuct_log_base) == (1.0, 0.45, 500.0)
    assert (search.fpu_reduction, search.fpu_root_reduction, search.fpu_search_mean) == (0.2, 0.1, True)
    assert (search.subtree_value_bias, search.subtree_value_bias_exponent) == (0.45, 0.85)

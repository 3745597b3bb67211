"""The PUCT search: tree invariants under threads, determinism, tactics found by search, superko, tree reuse."""
from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pytest

from tabula.engine.config import ON_CPU, SearchConfig
from tabula.engine.net.evaluator import Evaluation, PendingEvaluation, UniformEvaluator, legal_mask
from tabula.engine.play.result import Candidate, lcb_order
from tabula.engine.play.search import Search, terminal_outcome
from tabula.engine.play.tree import EXPANDED, PENDING, TERMINAL, Node
from tabula.engine.rules.board import own_eye_masks
from tabula.engine.rules.coords import BLACK, PASS, WHITE, parse_vertex
from tabula.engine.rules.game import GameState, Rules
from tests.conftest import board_from_ascii

# -- stand-in evaluators -------------------------------------------------------------------------------------------

class ScoreEvaluator:
    """Priors from ``prior_of`` (uniform by default) times ``capture_bonus`` on capturing moves, masked to legal
    moves; value = tanh(Tromp-Taylor lead / scale) from the side to move's view. Counts calls and positions."""

    def __init__(self, scale: float = 4.0, prior_of=None, delay_s: float = 0.0, capture_bonus: float = 1.0):
        self.scale = scale
        self.prior_of = prior_of
        self.capture_bonus = capture_bonus
        self.delay_s = delay_s
        self.calls = 0
        self.positions = 0
        self.lock = threading.Lock()

    def evaluate(self, states):
        with self.lock:
            self.calls += 1
            self.positions += len(states)
        if self.delay_s:
            time.sleep(self.delay_s)  # releases the GIL, as onnxruntime does
        size = states[0].size
        policy = np.zeros((len(states), size * size + 1), dtype=np.float32)
        values = np.zeros(len(states), dtype=np.float32)
        for i, state in enumerate(states):
            mask = legal_mask(state)
            weights = mask.astype(np.float32)
            if self.prior_of is not None:
                weights = weights * self.prior_of(state)
            if self.capture_bonus != 1.0:
                board = state.board
                for move in np.flatnonzero(mask[:-1]):
                    if board.try_play(board.geometry.padded[move], state.to_move)[1]:
                        weights[move] *= self.capture_bonus
            policy[i] = weights / weights.sum()
            lead = state.area_score() * (1 if state.to_move == BLACK else -1)
            values[i] = math.tanh(lead / self.scale)
        return Evaluation(policy, values)


class RandomValueEvaluator:
    """Uniform priors, values drawn from a seeded generator per position hash (so repeatable)."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s

    def evaluate(self, states):
        if self.delay_s:
            time.sleep(self.delay_s)
        base = UniformEvaluator().evaluate(states)
        values = np.array([np.random.default_rng(s.hash & 0xFFFFFFFF).uniform(-0.9, 0.9) for s in states],
                          dtype=np.float32)
        return Evaluation(base.policy, values)


# playouts_per_leaf for the tests of batches: small searches that still send batches of several leaves (the CPU's
# default sends one leaf a thread at these visits).
SEVERAL_LEAVES = 32


class ClockedEvaluator:
    """Wraps an evaluator: each call moves ``clock`` (a ``tests.conftest.FakeClock``, or None) on by ``step_s``, as
    if the network took that long, then runs ``after(calls)`` (which may set a stop event, say). Counts calls."""

    def __init__(self, inner, clock=None, step_s: float = 0.0, after=None):
        self.inner = inner
        self.clock = clock
        self.step_s = step_s
        self.after = after
        self.calls = 0
        self.lock = threading.Lock()

    def evaluate(self, states):
        with self.lock:
            self.calls += 1
            if self.clock is not None:
                self.clock.advance(self.step_s)
            if self.after is not None:
                self.after(self.calls)
        return self.inner.evaluate(states)


class RiggedEvaluator:
    """Ignores superko (only the board's own legality) and puts ``weight`` of the prior on ``favourite``."""

    def __init__(self, favourite: int, weight: float = 0.9):
        self.favourite = favourite
        self.weight = weight

    def evaluate(self, states):
        size = states[0].size
        policy = np.zeros((len(states), size * size + 1), dtype=np.float32)
        for i, state in enumerate(states):
            board = state.board
            for move in range(size * size):
                try:
                    board.try_play(board.geometry.padded[move], state.to_move)
                except ValueError:
                    continue
                policy[i, move] = 1.0
            policy[i, -1] = 1.0
            policy[i] /= policy[i].sum()
            if policy[i, self.favourite] > 0:
                policy[i] *= 1.0 - self.weight
                policy[i, self.favourite] += self.weight
        return Evaluation(policy, np.zeros(len(states), dtype=np.float32))


def walk(node: Node):
    yield node
    for child in node.children.values():
        yield from walk(child)


def check_tree(search: Search) -> None:
    """Every expanded node: visits = 1 + its edges' visits, each child's visits = its edge's, no virtual loss, and
    its utility sums are its own evaluation's plus its edges'."""
    config = search.config
    bound = 1.0 + config.static_score_utility + config.dynamic_score_utility  # of a utility: value + score utility
    for node in walk(search.tree.root):
        assert node.status != PENDING
        if node.status == EXPANDED:
            assert node.visits == 1 + round(float(node.n.sum())), "visits = 1 + sum of children's"
            assert node.n_sum == pytest.approx(float(node.n.sum()), abs=1e-3)
            assert np.all(node.n == np.round(node.n)), "virtual visits left behind"
            assert np.all(np.abs(node.w) <= bound * node.n + 1e-3)
            assert node.v is None or np.all(np.abs(node.v) <= node.n + 1e-3)
            assert np.allclose(node.pu, node.prior / (1.0 + node.n), atol=1e-6)
            visited = node.n > 0
            assert np.allclose(node.q[visited], node.w[visited] / node.n[visited], atol=1e-5)
            assert node.visited_prior == pytest.approx(float(node.prior[visited].sum()), abs=1e-4)
            for idx, child in node.children.items():
                assert child.visits == int(node.n[idx])
            # the utilities it has seen: its own evaluation's and its edges' (the spread that scales exploration)
            own = node.u_sum - float(node.w.sum())
            assert abs(own) <= bound + 1e-3
            assert node.u_sq - float(node.w2.sum()) == pytest.approx(own * own, abs=1e-2)
        elif node.status != TERMINAL:
            assert node.visits == 0
    assert search.tree.root_pending is None or not search.tree.root_pending.any()


# -- tests -------------------------------------------------------------------------------------------------------

def test_tree_invariants_under_many_threads():
    config = SearchConfig(playouts_per_leaf=SEVERAL_LEAVES, threads=6, batch_size=4, visits=600, early_stop=False)
    search = Search(RandomValueEvaluator(delay_s=0.0005), config, rng=np.random.default_rng(1))
    result = search.run(GameState(7))
    assert result.root_visits == 600
    assert result.playouts == 600
    check_tree(search)
    assert result.batches > 0 and 1.0 <= result.mean_batch <= 4.0
    assert sum(c.visits for c in result.candidates) == 599


def test_visit_limit_counts_reused_visits_and_playout_limit_counts_new():
    search = Search(UniformEvaluator(), SearchConfig(threads=2, visits=100, early_stop=False),
                    rng=np.random.default_rng(0))
    state = GameState(5)
    assert search.run(state).root_visits == 100
    assert search.run(state).playouts == 0  # the tree already holds 100 visits
    result = search.run(state, visits=0, playouts=50)
    assert result.playouts == 50 and result.root_visits == 150
    check_tree(search)


def test_one_thread_with_a_seed_is_deterministic():
    def once():
        config = SearchConfig(threads=1, visits=300, early_stop=False)
        search = Search(ScoreEvaluator(), config, rng=np.random.default_rng(7))
        state = GameState(7)
        state.play(parse_vertex("D4", 7))
        result = search.run(state, noise=True)
        return [(c.move, c.visits, round(c.value, 6), c.pv) for c in result.candidates]

    assert once() == once()


def test_search_finds_a_capture_the_policy_misses():
    state = board_from_ascii("""
        . . . . . . .
        . . . . . . .
        . . X O X . .
        . . . X . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""", to_move=BLACK, komi=0.5)
    capture = parse_vertex("D6", 7)
    decoy = parse_vertex("G1", 7)

    def prior_of(position):
        weights = np.ones(50, dtype=np.float32)
        weights[decoy] = 40.0  # the raw policy's favourite by far
        weights[capture] = 4.0  # second, ten times less likely
        return weights

    evaluator = ScoreEvaluator(scale=10.0, prior_of=prior_of)
    raw = evaluator.evaluate([state]).policy[0]
    assert int(raw.argmax()) == decoy
    # the search alone, on the priors as given (the atari floor, which lifts captures deeper in the tree, is the
    # next tests'; in this stand-in's near-flat values it moves the visits by noise)
    search = Search(evaluator, SearchConfig(threads=1, visits=400, atari_prior=0.0), rng=np.random.default_rng(3))
    assert search.run(state).move == capture


def test_search_finds_an_escape():
    # White's D5 stone is in atari; extending to D6 saves it. The policy likes captures (so black's reply is
    # found) but knows nothing of escapes: white's raw policy is flat.
    state = board_from_ascii("""
        . . . . . . .
        . . . . . . .
        . . X O X . .
        . . . X . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .""", to_move=WHITE, komi=0.5)
    evaluator = ScoreEvaluator(scale=10.0, capture_bonus=20.0)
    raw = evaluator.evaluate([state]).policy[0]
    escape = parse_vertex("D6", 7)
    assert raw[escape] == pytest.approx(raw[0])
    search = Search(evaluator, SearchConfig(threads=1, visits=600), rng=np.random.default_rng(3))
    assert search.run(state).move == escape


def test_superko_moves_are_never_chosen_at_the_root():
    state = GameState(5)
    state.play(parse_vertex("C3", 5))
    forbidden = parse_vertex("B2", 5)
    after = state.copy()
    after.play(forbidden)
    state.seen.add(after.board.hash)  # as if that position had occurred before: positional superko
    state.peak_stones = after.stones  # (it would have had that many stones)
    assert forbidden not in state.legal_moves()
    search = Search(RiggedEvaluator(forbidden, 0.99), SearchConfig(threads=2, visits=200),
                    rng=np.random.default_rng(0))
    result = search.run(state)
    assert result.move != forbidden
    assert all(c.move != forbidden for c in result.candidates)
    check_tree(search)


def test_superko_moves_are_never_searched_inside_the_tree():
    state = GameState(5)
    first, second = parse_vertex("C3", 5), parse_vertex("B2", 5)
    after = state.copy()
    after.play(first)
    after.play(second)
    state.seen.add(after.board.hash)  # B2 after C3 would repeat a position
    search = Search(RiggedEvaluator(second, 0.9), SearchConfig(threads=1, visits=300, early_stop=False),
                    rng=np.random.default_rng(0))
    search.run(state, allowed=[first])
    child = search.tree.root.child(first)
    assert child is not None and child.expanded
    idx = int(np.flatnonzero(child.moves == second)[0])
    assert child.n[idx] == 0 and child.blocked is not None and child.blocked[idx]
    check_tree(search)


def test_tree_reuse_after_our_move_and_the_reply_undo_and_a_resent_game():
    config = SearchConfig(threads=2, visits=400, early_stop=False)
    evaluator = ScoreEvaluator()
    search = Search(evaluator, config, rng=np.random.default_rng(5))
    state = GameState(7)
    first = search.run(state)
    ours = first.move
    reply = first.candidates[0].pv[1]
    grandchild = search.tree.root.child(ours).child(reply)
    kept = grandchild.visits
    assert kept > 0

    after = state.copy()
    after.play(ours)
    after.play(reply)
    second = search.run(after)
    assert second.reused_visits == kept
    assert second.root_visits == 400
    check_tree(search)

    # Undo both moves: the old root comes back with the new visits added along the way.
    third = search.run(state, visits=500)
    assert third.reused_visits == 400 + (400 - kept)
    check_tree(search)

    # A GUI sends clear_board and the moves again: a fresh GameState with the same moves.
    replayed = GameState(7)
    replayed.play(ours)
    replayed.play(reply)
    fourth = search.run(replayed, visits=1)
    assert fourth.reused_visits > kept
    check_tree(search)

    # A different game: nothing reused.
    other = GameState(7, Rules(komi=0.5))
    other.play(parse_vertex("A1", 7))
    assert search.run(other, visits=10).reused_visits == 0


def test_transposition_table_serves_repeated_positions():
    evaluator = ScoreEvaluator()
    search = Search(evaluator, SearchConfig(threads=1, visits=200, reuse_tree=False), rng=np.random.default_rng(0))
    state = GameState(5)
    search.run(state)
    first = evaluator.positions
    search.run(state)  # a fresh tree (no reuse), its positions mostly in the table
    assert evaluator.positions - first < first / 3
    assert len(search.tree.cache) <= search.tree.cache.capacity


def test_transposition_table_is_bounded():
    search = Search(UniformEvaluator(), SearchConfig(threads=1, visits=300, cache_entries=50),
                    rng=np.random.default_rng(0))
    search.run(GameState(5))
    assert len(search.tree.cache) == 50


def test_time_limit_and_stop(fake_clock):
    """A time limit, on the search's clock (a fake one that each network call moves 1/128 s on: sums exact in
    binary): the run ends once the time is up, with only the batches already at the network to finish. Then a stop
    event ends a run that has no limit, within those batches too."""
    threads, step_s = 2, 1 / 128
    evaluator = ClockedEvaluator(ScoreEvaluator(), fake_clock, step_s=step_s)
    search = Search(evaluator, SearchConfig(threads=threads, visits=0), rng=np.random.default_rng(0),
                    clock=fake_clock)
    result = search.run(GameState(7), time_s=0.25, early_stop=False)  # the time alone ends it
    assert 0.25 <= result.elapsed_s <= 0.25 + step_s * threads
    assert result.playouts > 10
    check_tree(search)
    stop = threading.Event()
    stopping = ClockedEvaluator(ScoreEvaluator(), after=lambda calls: calls >= 20 and stop.set())
    search = Search(stopping, SearchConfig(threads=threads, visits=0), rng=np.random.default_rng(0),
                    clock=fake_clock)
    result = search.run(GameState(7), visits=0, stop=stop)
    assert result.playouts > 10 and 20 <= stopping.calls <= 20 + threads
    check_tree(search)


def test_early_stop_when_the_best_move_cannot_be_overtaken():
    state = GameState(5)
    evaluator = RiggedEvaluator(parse_vertex("C3", 5), 0.95)
    search = Search(evaluator, SearchConfig(threads=1, visits=400), rng=np.random.default_rng(0))
    result = search.run(state)
    assert result.stopped_early and result.root_visits < 400
    assert result.move == parse_vertex("C3", 5)


def test_a_timed_run_makes_its_least_playouts_before_it_stops_early():
    """Under a clock a settled best move still gets a search: early stop waits for EARLY_STOP_MIN_PLAYOUTS_TIMED
    new playouts (a reused tree whose leader cannot be caught would otherwise stop after a handful)."""
    from tabula.engine.play.search import EARLY_STOP_MIN_PLAYOUTS, EARLY_STOP_MIN_PLAYOUTS_TIMED

    state = GameState(5)
    evaluator = RiggedEvaluator(parse_vertex("C3", 5), 0.95)
    search = Search(evaluator, SearchConfig(threads=1, visits=0), rng=np.random.default_rng(0))
    search.run(state, playouts=300, early_stop=False)  # a reused tree with a clear leader
    untimed = search.run(state, playouts=100, early_stop=True)
    assert untimed.stopped_early and EARLY_STOP_MIN_PLAYOUTS <= untimed.playouts < EARLY_STOP_MIN_PLAYOUTS_TIMED
    timed = search.run(state, playouts=100, time_s=60.0, early_stop=True)
    assert timed.stopped_early and timed.playouts >= EARLY_STOP_MIN_PLAYOUTS_TIMED


def test_a_worker_stopped_early_waits_for_leaves_in_flight_elsewhere_and_goes_on_if_the_lead_can_be_caught():
    """With several workers, the lead can become catchable again when another worker's leaves come back (under a time
    limit, their visits raise the rate, and so the playouts left). A worker that saw it uncatchable used to exit for
    good; it now waits while leaves are in flight. Driven by hand: another worker's leaf is held at the network."""
    from tabula.engine.play.search import _Leaf, _Run

    # The plain exploration: scaled by the spread of the rigged values it dives down the leader's line, whose next
    # leaf is then often a position already in the table, not one to hold at the network.
    search = Search(RiggedEvaluator(parse_vertex("C3", 5), 0.95),
                    SearchConfig(threads=2, batch_size=1, visits=0, cpuct_utility_stdev_scale=0.0),
                    rng=np.random.default_rng(0))
    state = GameState(5)
    search.run(state, playouts=60, early_stop=False)  # a tree with a clear leader
    # A run 20 playouts in (early stop looks from 16 on)
    run = _Run(target=0, deadline=math.inf, stop=threading.Event(), early_stop=True, start=time.monotonic(),
               started=20, finished=20)
    search.set_position(state)
    search._prepare_root(run, noise=False, allowed=None)
    with search._lock:
        held = search._descend(run)  # "another worker's" leaf, at the network
        assert isinstance(held, _Leaf)
        run.started += 1
        run.target = run.started + 1  # one playout left: the lead cannot be caught
    worker = threading.Thread(target=search._worker, args=(run, None))
    worker.start()
    worker.join(0.2)
    assert worker.is_alive() and run.stopped_early  # waiting for the held leaf, not gone
    with search._lock:
        run.target += 200  # as a higher visit rate would: plenty left, the lead can be caught
    search._evaluate_batch([held], run, None)
    worker.join(5.0)
    assert not worker.is_alive() and run.started == run.finished > 22 + 16  # it went on searching
    assert run.finished == run.target or run.stopped_early  # until the target, or the lead was safe again
    check_tree(search)


def test_evaluator_failure_leaves_no_virtual_loss():
    class Failing:
        calls = 0

        def evaluate(self, states):
            Failing.calls += 1
            if Failing.calls > 3:
                raise RuntimeError("network gone")
            return UniformEvaluator().evaluate(states)

    search = Search(Failing(), SearchConfig(threads=1, visits=200), rng=np.random.default_rng(0))
    with pytest.raises(RuntimeError):
        search.run(GameState(5))
    check_tree(search)


class PipelinedEvaluator:
    """Answers from its own network thread after up to ``delay_s`` (as a GPU would, without the GIL), through
    ``evaluate_async``, with uneven random priors and values from ``seed``; records how many batches were at the
    network at once, and fails from call ``fail_at``."""

    def __init__(self, delay_s: float = 0.002, fail_at: int = 0, seed: int = 0):
        self.delay_s = delay_s
        self.fail_at = fail_at
        self.rng = np.random.default_rng(seed)
        self.calls = 0
        self.at_network = 0
        self.most_at_network = 0
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=1)  # one GPU: batches queue for it

    def evaluate(self, states):
        return self.evaluate_async(states).result()

    def evaluate_async(self, states):
        with self.lock:
            self.calls += 1
            call = self.calls
            self.at_network += 1
            self.most_at_network = max(self.most_at_network, self.at_network)
            delay = self.rng.uniform(0.0, 1.0) * self.delay_s
            noise = self.rng.random((len(states), states[0].size ** 2 + 1)).astype(np.float32) + 0.01
            values = self.rng.uniform(-1.0, 1.0, len(states)).astype(np.float32)

        def network():
            time.sleep(delay)
            with self.lock:
                self.at_network -= 1
            if self.fail_at and call >= self.fail_at:
                raise RuntimeError("network gone")
            policy = UniformEvaluator().evaluate(states).policy * noise
            return Evaluation(policy / policy.sum(axis=1, keepdims=True), values)

        future = self.pool.submit(network)
        return PendingEvaluation(future.result)


def test_batches_in_flight_keep_the_network_busy_while_the_tree_grows():
    evaluator = PipelinedEvaluator()
    config = SearchConfig(playouts_per_leaf=SEVERAL_LEAVES,
                          threads=1, batch_size=4, batches_in_flight=3, visits=300, early_stop=False)
    search = Search(evaluator, config, rng=np.random.default_rng(2))
    result = search.run(GameState(7))
    assert result.root_visits == 300 and result.playouts == 300
    assert evaluator.most_at_network == 3  # one search thread, three batches at the network
    check_tree(search)
    assert search.run(GameState(7), visits=0, playouts=100).playouts == 100  # the reused tree goes on growing
    check_tree(search)


@pytest.mark.slow  # 40 timed searches
def test_early_stop_counts_a_leaf_in_flight_as_one_visit_not_its_virtual_loss():
    stopped = 0
    for seed in range(40):  # before the fix, 6 of these 40 said they stopped early and yet ran every playout
        config = SearchConfig(threads=1, batch_size=8, batches_in_flight=3, visits=0, early_stop=True)
        search = Search(PipelinedEvaluator(delay_s=0.003, seed=seed), config, rng=np.random.default_rng(seed))
        result = search.run(GameState(7), playouts=300)
        assert not (result.stopped_early and result.playouts == 300), f"seed {seed}: says it stopped early, ran all"
        stopped += result.stopped_early
        check_tree(search)
    assert stopped > 0


def test_batches_in_flight_work_with_an_evaluator_that_only_evaluates():
    config = SearchConfig(playouts_per_leaf=SEVERAL_LEAVES,
                          threads=2, batch_size=4, batches_in_flight=2, visits=200, early_stop=False)
    search = Search(UniformEvaluator(), config, rng=np.random.default_rng(3))
    assert search.run(GameState(5)).root_visits == 200
    check_tree(search)


def test_a_network_failure_with_batches_in_flight_leaves_no_virtual_loss():
    evaluator = PipelinedEvaluator(fail_at=6)
    config = SearchConfig(playouts_per_leaf=SEVERAL_LEAVES, threads=1, batch_size=4, batches_in_flight=3, visits=300)
    search = Search(evaluator, config, rng=np.random.default_rng(4))
    with pytest.raises(RuntimeError, match="network gone"):
        search.run(GameState(7))
    check_tree(search)


def test_a_malformed_network_answer_is_a_clear_error_and_leaves_no_virtual_loss():
    class Malformed:
        calls = 0

        def evaluate(self, states):
            Malformed.calls += 1
            answer = UniformEvaluator().evaluate(states)
            return answer if Malformed.calls < 4 else Evaluation(answer.policy[:, :-1], answer.value)

    for in_flight in (1, 2):
        Malformed.calls = 0
        search = Search(Malformed(), SearchConfig(playouts_per_leaf=SEVERAL_LEAVES,
                                                  threads=1, batch_size=4, batches_in_flight=in_flight, visits=200),
                        rng=np.random.default_rng(0))
        with pytest.raises(ValueError, match="expected"):
            search.run(GameState(5))
        check_tree(search)


def test_terminal_nodes_score_by_tromp_taylor():
    state = board_from_ascii("""
        . X O . .
        X X O . .
        . X O . .
        X X O . .
        . X O O O""", to_move=BLACK, komi=0.5)
    assert terminal_outcome(state)[0] < 0  # white has more area
    state.play(PASS)
    state.play(PASS)
    assert state.is_game_over()
    white_view = state.copy()
    white_view.to_move = WHITE
    value, score = terminal_outcome(white_view)
    assert value == 1.0 and score == -white_view.area_score() > 0  # the margin too, from white's view


def test_noise_changes_root_priors_for_one_run_only():
    search = Search(UniformEvaluator(), SearchConfig(threads=1, visits=50), rng=np.random.default_rng(0))
    state = GameState(5)
    search.run(state)
    clean = search.tree.root.prior.copy()
    search.run(state, visits=60, noise=True)
    assert not np.allclose(search.tree.root.prior, clean)
    search.run(state, visits=70)
    assert np.allclose(search.tree.root.prior, clean)


def test_lcb_bounds_stay_below_the_means():
    config = SearchConfig(threads=1, visits=300, lcb=True, early_stop=False)
    search = Search(ScoreEvaluator(), config, rng=np.random.default_rng(2))
    result = search.run(GameState(5))
    assert all(-1.0 <= c.lcb <= c.value + 1e-9 for c in result.candidates)


def candidate(move: int, visits: int, value: float, lcb: float, prior: float = 0.3) -> Candidate:
    return Candidate(move=move, visits=visits, value=value, prior=prior, lcb=lcb, pv=[move])


@pytest.mark.parametrize("other, promoted", [
    (candidate(2, 80, 0.51, 0.42), False),  # means 0.01 apart: the bound does not separate them, most visits wins
    (candidate(2, 60, 0.75, 0.55), True),  # its lower bound is above the top move's mean: clearly better
    (candidate(2, 30, 0.75, 0.55, prior=0.01), False),  # network and visits both rate it far below: never
    (candidate(2, 5, 0.90, 0.60), False),  # too few visits (under a tenth of the top move's)
])
def test_lcb_changes_the_move_only_where_the_bound_separates_the_moves(other, promoted):
    top = candidate(1, 100, 0.50, 0.40, prior=0.5)
    third = candidate(3, 20, 0.30, 0.10)
    order = lcb_order([top, other, third], SearchConfig())
    assert order[0] is (other if promoted else top)
    assert sorted(c.move for c in order) == [1, 2, 3]


def test_own_eyes_are_never_searched_and_a_board_of_eyes_is_passed():
    # Black has two eyes at A1 and C1 and a big territory; the network (RiggedEvaluator) loves filling A1.
    state = board_from_ascii("""
        . . . . .
        . . . . .
        X X X X X
        X X X X X
        . X . X X""", to_move=BLACK, komi=0.5)
    eye = parse_vertex("A1", 5)
    assert state.board.own_eye_mask(BLACK)[eye] and state.board.is_own_eye(state.board.geometry.padded[eye], BLACK)
    search = Search(RiggedEvaluator(eye, 0.99), SearchConfig(threads=1, visits=200), rng=np.random.default_rng(0))
    result = search.run(state)
    assert result.move != eye and all(c.move != eye for c in result.candidates)
    unfiltered = Search(RiggedEvaluator(eye, 0.99), SearchConfig(threads=1, visits=200, eye_filter=False),
                        rng=np.random.default_rng(0))
    assert any(c.move == eye for c in unfiltered.run(state).candidates)  # the filter, not the evaluator, did it

    only_eyes = board_from_ascii("""
        X X X
        X . X
        . X X""", to_move=BLACK, komi=0.5)  # A1 and B2 are black's eyes: nothing left but pass
    result = Search(UniformEvaluator(), SearchConfig(threads=1, visits=50),
                    rng=np.random.default_rng(0)).run(only_eyes)
    assert result.move == PASS


def test_vectorised_eye_mask_matches_is_own_eye():
    from tests.conftest_network import random_game

    for size in (5, 9, 19):
        states = random_game(size, 3 * size * size, seed=size)[::7]
        colors = [BLACK if i % 3 else WHITE for i in range(len(states))]
        batch = own_eye_masks([state.board for state in states], colors)  # as the search asks for its leaves
        for row, state in enumerate(states):
            board = state.board
            for color in (BLACK, WHITE):
                expected = [state.color_at(p) == 0 and board.is_own_eye(board.geometry.padded[p], color)
                            for p in range(size * size)]  # is_own_eye assumes an empty point
                assert board.own_eye_mask(color).tolist() == expected
                if color == colors[row]:
                    assert batch[row].tolist() == expected


def test_empty_boards_of_two_sizes_do_not_share_a_cache_entry():
    # Every empty board hashes to 0: the table must tell 9x9 from 19x19 (an engine switching sizes crashed here).
    search = Search(UniformEvaluator(), SearchConfig(threads=1, visits=20), rng=np.random.default_rng(0))
    assert GameState(19).hash == GameState(9).hash
    search.run(GameState(19))
    result = search.run(GameState(9))
    assert all(0 <= c.move <= 81 for c in result.candidates)


class SymmetryAwareEvaluator:
    """Uniform priors one position at a time; its mean over the 8 symmetries prefers one move and a value."""

    def __init__(self, favourite: int, value: float):
        self.favourite, self.value = favourite, value
        self.averaged_calls = 0
        self.batch_sizes: list[int] = []

    def evaluate(self, states):
        self.batch_sizes.append(len(states))
        return UniformEvaluator().evaluate(states)

    def evaluate_averaged(self, states):
        self.averaged_calls += 1
        evaluation = UniformEvaluator().evaluate(states)
        policy = evaluation.policy * 0.1
        policy[:, self.favourite] += 0.9
        return Evaluation(policy / policy.sum(axis=1, keepdims=True), np.full(len(states), self.value, np.float32))


def test_the_root_takes_its_priors_and_value_from_all_eight_symmetries():
    favourite = parse_vertex("C3", 5)
    evaluator = SymmetryAwareEvaluator(favourite, 0.25)
    search = Search(evaluator, SearchConfig(threads=1, visits=40), rng=np.random.default_rng(0))
    result = search.run(GameState(5))
    root = search.tree.root
    assert root.averaged and root.value == pytest.approx(0.25)
    assert root.prior[list(root.moves).index(favourite)] > 0.8
    assert root.prior.sum() == pytest.approx(1.0)
    assert result.move == favourite
    # the next move's root comes from the reused tree and is averaged in its turn, once
    state = GameState(5)
    state.play(favourite)
    search.run(state)
    assert evaluator.averaged_calls == 2 and search.tree.root.averaged
    search.run(state, visits=80)
    assert evaluator.averaged_calls == 2


def test_without_root_symmetries_the_root_keeps_its_one_evaluation():
    evaluator = SymmetryAwareEvaluator(parse_vertex("C3", 5), 0.25)
    search = Search(evaluator, SearchConfig(threads=1, visits=40, root_symmetries=False))
    search.run(GameState(5))
    assert evaluator.averaged_calls == 0 and not search.tree.root.averaged


# per_leaf 0: the CPU's 1,024 playouts a leaf in flight
@pytest.mark.parametrize("visits, threads, per_leaf, largest, loss", [
    (400, 2, 0, 1, 1),
    pytest.param(1600, 2, 0, 1, 1, marks=pytest.mark.slow), pytest.param(4096, 1, 0, 4, 1, marks=pytest.mark.slow),
    (100, 1, 32, 3, 1), (400, 2, 32, 6, 3), (400, 1, 32, 8, 3)])
def test_searches_bounded_by_visits_keep_few_leaves_in_flight(visits, threads, per_leaf, largest, loss):
    """Batches of one leaf per ``playouts_per_leaf`` playouts per thread, never fewer than one, and a virtual loss of
    1 with 4 leaves a batch or fewer: on the CPU one leaf a thread at the default visits, which played better than
    batches (docs/STRENGTH.md, "Visits at 7 stones"). A search bounded by time alone keeps the configured batches."""
    assert ON_CPU["playouts_per_leaf"] == 1024  # the cases of 0 are worked out for it
    evaluator = SymmetryAwareEvaluator(0, 0.0)
    config = SearchConfig(threads=threads, batch_size=8, visits=visits, early_stop=False, playouts_per_leaf=per_leaf)
    search = Search(evaluator, config, rng=np.random.default_rng(1))
    search.run(GameState(9))
    assert max(evaluator.batch_sizes) == largest and search.tree.virtual_loss == loss
    fixed = SymmetryAwareEvaluator(0, 0.0)
    Search(fixed, replace(config, adaptive_batch=False, visits=100), rng=np.random.default_rng(1)).run(GameState(9))
    assert max(fixed.batch_sizes) == 8
    stop = threading.Event()
    timed = SymmetryAwareEvaluator(0, 0.0)
    stopping = ClockedEvaluator(timed, after=lambda calls: calls >= 20 and stop.set())
    Search(stopping, replace(config, visits=0), rng=np.random.default_rng(1)).run(GameState(9), stop=stop)
    assert max(timed.batch_sizes) == 8  # bounded by time (here a stop event) alone: the configured batches


class LeadEvaluator:
    """Uniform priors, value 0; black always leads by ``lead`` points and owns every point by ``owned`` (black's
    view), reported from the side to move's view as a network with score and ownership heads does."""

    def __init__(self, lead: float, owned: float):
        self.lead, self.owned = lead, owned

    def evaluate(self, states):
        base = UniformEvaluator().evaluate(states)
        sign = np.array([1.0 if s.to_move == BLACK else -1.0 for s in states], dtype=np.float32)
        points = states[0].size ** 2
        return Evaluation(base.policy, np.zeros(len(states), np.float32), score=self.lead * sign,
                          ownership=np.full((len(states), points), self.owned, np.float32) * sign[:, None])


def test_scores_are_backed_up_from_the_movers_view():
    for to_move, sign in ((BLACK, 1.0), (WHITE, -1.0)):
        state = GameState(7)
        state.to_move = to_move
        search = Search(LeadEvaluator(3.5, 0.25), SearchConfig(threads=1, visits=120, early_stop=False),
                        rng=np.random.default_rng(0))
        result = search.run(state)
        assert search.has_score
        for c in result.candidates:
            assert c.score == pytest.approx(sign * 3.5, abs=1e-4) and c.score_stdev == pytest.approx(0, abs=1e-2)
        assert np.allclose(search.ownership(), 0.25, atol=1e-3)  # black's view, whoever is to move


def test_a_reused_tree_keeps_its_scores_consistent():
    search = Search(LeadEvaluator(-2.0, -0.5), SearchConfig(threads=2, visits=200, early_stop=False),
                    rng=np.random.default_rng(3))
    state = GameState(7)
    search.run(state)
    state.play(search.run(state).move)
    result = search.run(state, visits=300)
    assert all(c.score == pytest.approx(2.0, abs=1e-4) for c in result.candidates)  # white to move leads by 2
    assert np.allclose(search.ownership(), -0.5, atol=1e-3)


def test_without_score_heads_there_is_no_ownership():
    search = Search(UniformEvaluator(), SearchConfig(threads=1, visits=30))
    result = search.run(GameState(5))
    assert not search.has_score and search.ownership() is None
    assert all(c.score == 0.0 for c in result.candidates)


# -- AlphaGo's mixed evaluation: (1 - λ)·v + λ·z ----------------------------------------------------------------

class ConstantValueEvaluator:
    """Uniform priors over legal moves and the same value ``value`` for every position (side to move's view)."""

    def __init__(self, value: float):
        self.value = value

    def evaluate(self, states):
        base = UniformEvaluator().evaluate(states)
        return Evaluation(base.policy, np.full(len(states), self.value, dtype=np.float32))


class CountingRollout:
    """A stand-in rollout: ``z`` for every position (side to move's view), counting the positions it plays out."""

    def __init__(self, z: float = 1.0):
        self.z = z
        self.positions = 0
        self.batches: list[int] = []

    def __call__(self, states, rng, over):
        assert isinstance(rng, np.random.Generator) and callable(over)
        self.positions += len(states)
        self.batches.append(len(states))
        return np.full(len(states), self.z, dtype=np.float32)


def refusing_rollout(states, rng, over):
    raise AssertionError("λ = 0 must not run a rollout")


def dump(search: Search, states: list[GameState], **limits) -> list:
    """Every candidate of a search of each state in turn: moves, visits, values, LCBs, PVs and scores."""
    out = []
    for state in states:
        result = search.run(state, **limits)
        out.append((result.move, result.root_visits, result.playouts, result.batches, result.evaluated,
                    [(c.move, c.visits, c.value, c.lcb, c.pv, c.score) for c in result.candidates]))
    return out


@pytest.mark.parametrize("batch, in_flight", [(1, 1), (4, 1), (4, 2)])
def test_rollout_mix_zero_is_the_search_without_rollouts(batch, in_flight):
    """λ = 0 runs no rollout code: the same seed gives the same candidates, visits, values and PVs as a search
    built without a rollout at all, over a game of several moves with tree reuse and the table."""
    states = [GameState(7, Rules(komi=7.5))]
    for vertex in ("D4", "C3", "E5"):
        states.append(states[-1].copy())
        states[-1].play(parse_vertex(vertex, 7))
    config = SearchConfig(threads=1, visits=120, batch_size=batch, batches_in_flight=in_flight,
                          adaptive_batch=False)
    plain = dump(Search(ScoreEvaluator(), config, rng=np.random.default_rng(3)), states)
    mixed = Search(ScoreEvaluator(), replace(config, rollout_mix=0.0), rng=np.random.default_rng(3),
                   rollout=refusing_rollout)
    assert dump(mixed, states) == plain


@pytest.mark.parametrize("mix", [0.0, 0.5, 1.0])
def test_a_leaf_backs_up_the_mix_of_its_network_value_and_its_rollout(mix):
    """Two visits: the root's evaluation, then one child's, whose value from the root's view is
    -((1 - λ)·v + λ·z) with v = 0.2 and z = 1 from the child's side to move."""
    rollout = CountingRollout(z=1.0)
    config = SearchConfig(threads=1, visits=2, rollout_mix=mix, root_symmetries=False, early_stop=False)
    search = Search(ConstantValueEvaluator(0.2), config, rng=np.random.default_rng(0), rollout=rollout)
    result = search.run(GameState(5))
    (child,) = [c for c in result.candidates if c.visits]
    assert child.value == pytest.approx(-((1 - mix) * 0.2 + mix * 1.0), abs=1e-6)
    assert search.tree.root.value == pytest.approx(0.2)  # the node keeps the network's value (first-play urgency)
    assert rollout.positions == (2 if mix > 0 else 0)
    check_tree(search)


def test_positions_from_the_table_get_their_own_rollout_and_no_network_call():
    rollout = CountingRollout(z=-1.0)
    evaluator = ScoreEvaluator()
    config = SearchConfig(threads=1, visits=200, batch_size=4, adaptive_batch=False, reuse_tree=False,
                          rollout_mix=0.5, root_symmetries=False)
    search = Search(evaluator, config, rng=np.random.default_rng(0), rollout=rollout)
    state = GameState(5)
    search.run(state)
    positions, rolled, hits = evaluator.positions, rollout.positions, search.tree.cache.hits
    result = search.run(state)  # a fresh tree (no reuse), its positions mostly in the table
    served = search.tree.cache.hits - hits
    assert served > result.playouts / 2
    assert evaluator.positions - positions == result.evaluated  # only the table's misses go to the network
    # every leaf but a finished game's, one rollout
    assert rollout.positions - rolled == result.evaluated + served <= result.playouts
    assert max(rollout.batches) <= 4  # one rollout call a batch
    check_tree(search)


@pytest.mark.parametrize("threads, in_flight", [(1, 1), (3, 1), (2, 2)])
def test_rollouts_keep_the_tree_consistent_under_threads_and_batches_in_flight(threads, in_flight):
    rollout = CountingRollout(z=0.5)
    config = SearchConfig(playouts_per_leaf=SEVERAL_LEAVES,
                          threads=threads, visits=300, batch_size=4, batches_in_flight=in_flight,
                          early_stop=False, rollout_mix=0.5)
    search = Search(RandomValueEvaluator(delay_s=0.0005), config, rng=np.random.default_rng(1), rollout=rollout)
    result = search.run(GameState(7))
    assert result.root_visits == 300 and rollout.positions > 0
    check_tree(search)


def test_a_rollout_the_run_cut_short_leaves_the_network_value_alone():
    """The move's time runs out (a stop) during the second batch's rollouts: the rollout sees that the run is over
    and answers NaN, and that leaf backs up the network's v alone, not a mix with NaN."""
    seen = []

    def stopped_midway(states, rng, over):
        seen.append(over())
        if len(seen) == 2:
            search.stop()
            seen.append(over())
        return np.full(len(states), np.nan, dtype=np.float32)

    config = SearchConfig(threads=1, visits=10, rollout_mix=0.5, root_symmetries=False, early_stop=False)
    search = Search(ConstantValueEvaluator(0.2), config, rng=np.random.default_rng(0), rollout=stopped_midway)
    result = search.run(GameState(5))
    assert seen == [False, False, True]
    (child,) = [c for c in result.candidates if c.visits]
    assert result.root_visits == 2 and child.value == pytest.approx(-0.2, abs=1e-6)
    check_tree(search)


def test_a_timed_run_tells_its_rollouts_when_time_is_up(fake_clock):
    """The rollouts' third argument reads the run's clock (a fake one here): false while the move has time, true
    once its deadline has passed. The batch that outlasted the time answers NaN, its leaves back up the network's
    value alone, and the search ends there."""
    answers = []

    def slow_second_batch(states, rng, over):
        answers.append(over())
        if len(answers) == 1:
            return np.ones(len(states), dtype=np.float32)  # the root's: within the time
        fake_clock.advance(1.0)
        answers.append(over())
        return np.full(len(states), np.nan, dtype=np.float32)

    config = SearchConfig(threads=1, rollout_mix=1.0, root_symmetries=False, early_stop=False)
    search = Search(ConstantValueEvaluator(-0.3), config, rng=np.random.default_rng(0), rollout=slow_second_batch,
                    clock=fake_clock)
    result = search.run(GameState(5), visits=0, playouts=0, time_s=0.5)
    assert answers == [False, False, True]
    visited = [c for c in result.candidates if c.visits]
    assert visited and all(c.value == pytest.approx(0.3, abs=1e-6) for c in visited)  # v alone, from the root


def test_a_rollout_failure_leaves_no_virtual_loss():
    def failing(states, rng, over):
        raise RuntimeError("rollout failed")

    config = SearchConfig(threads=2, visits=100, batch_size=4, rollout_mix=0.5)
    search = Search(UniformEvaluator(), config, rng=np.random.default_rng(0), rollout=failing)
    with pytest.raises(RuntimeError, match="rollout failed"):
        search.run(GameState(5))
    assert all(node.status != PENDING for node in walk(search.tree.root))
    assert all(not node.expanded or np.all(node.n == np.round(node.n)) for node in walk(search.tree.root))


@pytest.mark.parametrize("mix", [-0.1, 1.5, float("nan")])
def test_a_rollout_mix_outside_zero_to_one_is_refused(mix):
    with pytest.raises(ValueError, match="rollout_mix"):
        Search(UniformEvaluator(), SearchConfig(rollout_mix=mix), rollout=CountingRollout())


def test_a_rollout_mix_without_a_rollout_is_refused():
    with pytest.raises(ValueError, match="rollout policy"):
        Search(UniformEvaluator(), SearchConfig(rollout_mix=0.5))


@pytest.fixture(scope="module")
def shipped_rollouts():
    from pathlib import Path

    from tabula.engine.rollout.rollout import PolicyRollouts

    return PolicyRollouts.load(str(Path(__file__).resolve().parent.parent / "weights" / "rollout-patterns.npz"))


@pytest.mark.parametrize("to_move", [BLACK, WHITE])
def test_rollouts_alone_find_the_winner_where_the_network_value_says_nothing(to_move, shipped_rollouts):
    """Both groups live, black wins by any play of the dame with a komi of -7.5; the network's value is 0 everywhere.
    λ = 1 backs up the rollouts' results alone: the root's value is near +1 for black to move, -1 for white; λ = 0
    knows only what the finished games among the leaves say, and λ = 0.5 goes half way."""
    from tests.test_rollout import SETTLED

    state = board_from_ascii(SETTLED, to_move=to_move, komi=-7.5)
    sign = 1.0 if to_move == BLACK else -1.0
    values = {}
    for mix in (0.0, 0.5, 1.0):
        config = SearchConfig(threads=1, visits=60, batch_size=4, rollout_mix=mix, early_stop=False)
        search = Search(UniformEvaluator(), config, rng=np.random.default_rng(0), rollout=shipped_rollouts)
        search.run(state)
        values[mix] = search.root_value()
        check_tree(search)
    assert sign * values[1.0] > 0.9
    assert abs(values[0.0]) < sign * values[1.0] - 0.3
    assert values[0.5] == pytest.approx(values[1.0] / 2, abs=0.1)


def test_a_rollout_answer_of_the_wrong_shape_is_a_clear_error_and_leaves_no_virtual_loss():
    config = SearchConfig(threads=1, visits=50, batch_size=4, rollout_mix=0.5)
    search = Search(UniformEvaluator(), config, rng=np.random.default_rng(0),
                    rollout=lambda states, rng, over: np.zeros(len(states) + 1, dtype=np.float32))
    with pytest.raises(ValueError, match="rollout answered"):
        search.run(GameState(5))
    assert all(node.status != PENDING for node in walk(search.tree.root))


def test_atari_stakes_are_the_stones_of_the_strings_in_atari_at_their_liberty():
    from tests.conftest_network import random_game

    for size in (5, 9, 13):
        states = random_game(size, 3 * size * size, seed=size + 1)[::5]
        batch = GameState.atari_stakes(states)  # as the search asks for its leaves
        for row, state in enumerate(states):
            board = state.board
            expected = [0] * (size * size)
            for flat in range(size * size):
                pad = board.geometry.padded[flat]
                if state.color_at(flat) == 0 or board.root[pad] != pad:
                    continue  # each string once, at its root
                liberties = board.string_liberties(pad)
                if len(liberties) == 1:
                    expected[board.geometry.flat[next(iter(liberties))]] += len(board.string_stones(pad))
            assert batch[row].tolist() == expected


# White's four stones C5 D5 E5 C4 are in atari at D4, the one move that captures them; the test's policy gives it
# exactly 0.
BIG_GROUP_IN_ATARI = """
    . . . . . . .
    . X X X X . .
    . X O O O X .
    . X O . X . .
    . . X . . . .
    . . . . . . .
    . . . . . . ."""


def test_the_atari_floor_lets_the_search_capture_a_group_the_policy_rates_zero():
    state = board_from_ascii(BIG_GROUP_IN_ATARI, to_move=BLACK, komi=0.5)
    capture = parse_vertex("D4", 7)
    assert GameState.atari_stakes([state])[0, capture] == 4

    def prior_of(position):
        weights = np.ones(50, dtype=np.float32)
        weights[capture] = 0.0
        return weights

    blind = Search(ScoreEvaluator(scale=10.0, prior_of=prior_of), SearchConfig(threads=1, visits=300, atari_prior=0.0),
                   rng=np.random.default_rng(0)).run(state)
    assert all(c.move != capture for c in blind.candidates)  # a zero prior: never a child
    floored = Search(ScoreEvaluator(scale=10.0, prior_of=prior_of),
                     SearchConfig(threads=1, visits=300, atari_prior=0.1), rng=np.random.default_rng(0)).run(state)
    assert floored.move == capture
    too_small = Search(ScoreEvaluator(scale=10.0, prior_of=prior_of),
                       SearchConfig(threads=1, visits=300, atari_prior=0.1, atari_min_stones=5),
                       rng=np.random.default_rng(0)).run(state)
    assert all(c.move != capture for c in too_small.candidates)


def test_the_atari_floor_lifts_legal_points_only_and_renormalises():
    from tabula.engine.play.tree import expansions

    # White's A2 and B1 stones are both in atari at A1: black captures both there; for white A1 is suicide.
    rows = """
        . . . . .
        . . . . .
        X . . . .
        O X . . .
        . O X . ."""
    point = parse_vertex("A1", 5)
    white = board_from_ascii(rows, to_move=WHITE, komi=0.5)
    assert GameState.atari_stakes([white])[0, point] == 2
    assert not white.legal(point)
    uniform = UniformEvaluator().evaluate([white])
    (found,) = expansions([white], uniform, eye_filter=False, atari_prior=0.5, atari_min_stones=1)
    assert point not in found.moves.tolist()
    np.testing.assert_allclose(found.prior, uniform.policy[0][found.moves], rtol=1e-6)  # nothing changed

    black = board_from_ascii(rows, to_move=BLACK, komi=0.5)
    uniform = UniformEvaluator().evaluate([black])
    (found,) = expansions([black], uniform, eye_filter=False, atari_prior=0.5, atari_min_stones=1)
    prior = dict(zip(found.moves.tolist(), found.prior.tolist()))
    share = float(uniform.policy[0][point])
    assert prior[point] == pytest.approx(0.5 / (1.0 - share + 0.5), rel=1e-5)
    assert sum(prior.values()) == pytest.approx(1.0, rel=1e-5)
    (unchanged,) = expansions([black], uniform, eye_filter=False, atari_prior=0.5, atari_min_stones=3)
    np.testing.assert_allclose(unchanged.prior, uniform.policy[0][unchanged.moves], rtol=1e-6)

"""The PUCT search's driver: worker threads descend one shared tree (``engine.play.tree``) under virtual loss, leaves
are evaluated in batches, a run stops on visits, playouts, time, a stop event or a move that can no longer be
overtaken, and the result is read from the tree (``engine.play.result``).

Layer: above the tree and the evaluator protocol; the search calls the evaluator from one place per mode
(``Search._evaluate_batch``, or ``_start_batch`` with batches in flight) and never imports a network. A leaf's
value comes from one of three places (``Search._descend``): a finished game's count, the table of network results,
or the network; the last two enter the tree through ``Search._expand_leaf``, which with ``rollout_mix`` λ > 0 mixes
in one rollout's result as AlphaGo did: (1 − λ)·v + λ·z. The rollouts of a batch run in one call in the worker's
thread while the network runs the batch on its own thread (``_start_batch``); a leaf served from the table gets its
rollout too, in the next batch, with no network call for it. The tree ranks moves by that value plus the score
utility of the leaf's score (``engine.play.tree.ScoreUtility``), centred anew at each run's root (``_prepare_root``).

Threads: every worker collects up to ``batch_size`` leaves under the tree lock (adding virtual loss on the way
down), releases the lock while the evaluator runs, then expands and backs up under the lock. No leaf ever waits for
a batch to fill. With ``batches_in_flight`` > 1 a worker hands a batch to the evaluator's network thread
(``evaluate_async``) and goes on descending, taking results back in order: only the network call runs without the
GIL, so this is how the tree work overlaps a GPU; workers that each wait for their own whole ``evaluate`` mostly
queue for the GIL instead (docs/BENCHMARKS.md).
"""
from __future__ import annotations

import functools
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Collection, Sequence

import numpy as np

from tabula.engine.config import SearchConfig
from tabula.engine.net.evaluator import (
    Evaluation,
    Evaluator,
    PendingEvaluation,
    evaluate_all_symmetries,
    evaluate_async,
)
from tabula.engine.play import result as readout
from tabula.engine.play.result import Candidate, SearchResult
from tabula.engine.play.tree import (
    EXPANDED,
    PENDING,
    TERMINAL,
    UNEXPANDED,
    Expansion,
    Node,
    Path,
    TranspositionTable,
    Tree,
    expansions,
)
from tabula.engine.rules.coords import BLACK, PASS
from tabula.engine.rules.game import GameState
from tabula.engine.rules.interface import Game

# Outcomes of one descent that needed no network call, or could not proceed.
_DONE, _COLLISION, _RETRY = "done", "collision", "retry"
_UNBOUNDED = 1 << 62  # a run's playout target when only time or a stop event ends it
# New playouts a run makes before it may stop early: a few to read the root's visits by; under a clock more, so that
# a short budget whose best move already looks settled still searches the move (a search never turned off by time).
EARLY_STOP_MIN_PLAYOUTS = 16
EARLY_STOP_MIN_PLAYOUTS_TIMED = 50

# A leaf's rollout (AlphaGo's fast rollout policy, ``engine.rollout.rollout.PolicyRollouts``): float32 [B], the result
# z in [-1, 1] of one game played out to the end from each position, side to move's view. The generator is the
# calling worker's own; the call holds the GIL, and may take milliseconds a position. Its third argument says when
# the run is over (its time is up or it was stopped): the rollouts still being played end there with NaN, and those
# leaves back up the network's value alone, so that a 19×19 batch of rollouts does not make the move late.
Rollout = Callable[[Sequence[Game], np.random.Generator, Callable[[], bool]], np.ndarray]


@dataclass
class _Leaf:
    """A leaf on its way to the network: its node (PENDING), the path to it under virtual loss, its position and
    its key in the table; ``expansion`` when the table already holds its network result and only its rollout is
    wanted."""

    node: Node
    path: Path
    state: Game
    key: tuple  # table_key(state)
    expansion: Expansion | None = None


@dataclass
class _Run:
    """The limits and counters of one ``Search.run``; counters change under the tree lock."""

    target: int  # playouts to start (_UNBOUNDED: no limit)
    deadline: float  # a limit on the Search's clock (inf: none)
    stop: threading.Event
    early_stop: bool
    start: float
    started: int = 0
    finished: int = 0
    batches: int = 0
    evaluated: int = 0
    collisions: int = 0
    stopped_early: bool = False
    error: BaseException | None = None
    root_mask: np.ndarray | None = None  # bool [k]: root edges this run may choose (None: all)
    batch_size: int = 1  # leaves per network call (Search._batching)
    rollout_rngs: list[np.random.Generator] | None = None  # the rollouts' generator of each worker, then the caller's


@dataclass
class _InFlight:
    """A batch handed to the network (None: every leaf came from the table) and its leaves' rollout results
    (float64 [B], None without rollouts)."""

    evaluation: PendingEvaluation | None
    rollout_z: np.ndarray | None


def terminal_outcome(state: GameState) -> tuple[float, float]:
    """The value and score of a Go game counted now by Tromp-Taylor: +1, -1 or 0, and the margin in points, both
    from the side to move's view (what ``GameState.terminal_value`` and ``terminal_score`` give a finished game)."""
    score = state.area_score() * (1.0 if state.to_move == BLACK else -1.0)
    return (1.0 if score > 0 else -1.0 if score < 0 else 0.0), score


def _terminal_score(state: Game) -> float:
    """The final margin of a finished game, side to move's view, where the game has a score (the optional
    ``terminal_score`` hook, Go's count); else 0."""
    score = getattr(state, "terminal_score", None)
    return score() if score is not None else 0.0


def table_key(state: Game) -> tuple:
    """A position's key in the table of network results: its board size (empty boards of every size share hash 0)
    and ``hash`` (stones, side to move, ko point), then what its encoding reads beyond them (``Encoding.table_key``:
    Go's passes and superko bans). The rules are not in it: a table holds the results of one ruleset."""
    key = (state.size, state.hash)
    extra = _extra_key(type(state))
    return key if extra is None else key + extra(state)


@functools.lru_cache(maxsize=None)
def _extra_key(kind: type) -> Callable[[Game], tuple] | None:
    """The ``table_key`` of a state class's encoding (None: a game without a known encoding, as tests have)."""
    from tabula.engine.net.encodings import encoding_named

    try:
        return encoding_named(kind.INPUT_ENCODING).table_key
    except (AttributeError, ValueError):
        return None


class Search:
    """A PUCT search over one game, reusable from move to move.

    ``run`` searches a position (reusing the matching part of the previous tree) and returns a ``SearchResult``;
    ``stop`` ends a running search from another thread. The evaluator, configuration, random generator and clock
    are passed in; nothing is read from globals. ``rollout`` is needed when ``config.rollout_mix`` > 0, and not
    called otherwise. ``clock`` (seconds, monotonic) times the runs: their deadlines, progress reports and
    ``elapsed_s``; tests pass a fake one. ``cache``: a table of network results that outlives this Search (the
    analysis engine's, one per worker); by default the tree makes its own.
    """

    def __init__(self, evaluator: Evaluator, config: SearchConfig | None = None,
                 rng: np.random.Generator | None = None, rollout: Rollout | None = None,
                 clock: Callable[[], float] = time.monotonic, cache: TranspositionTable | None = None):
        # Fixed for the Search's life.
        self.evaluator = evaluator
        # threads, batch size and batches in flight left at 0 are chosen for where the network runs (the engine's
        # entry point resolves them already; a search built directly, in tools and tests, gets the same)
        self.config = (config or SearchConfig()).for_network(on_gpu=bool(getattr(evaluator, "on_gpu", False)))
        self.rng = rng if rng is not None else np.random.default_rng()
        self.clock = clock
        mix = self.config.rollout_mix  # in [0, 1]: SearchConfig checks it
        if mix > 0.0 and rollout is None:
            raise ValueError(f"rollout_mix {mix} needs a rollout policy")
        self._rollout = rollout if mix > 0.0 else None  # None: the network's value alone, no rollout code runs
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._run_lock = threading.Lock()  # one run at a time
        # The tree and its table, changed under _lock by workers and by set_position between runs.
        self.tree = Tree(self.config, cache)
        self._current: _Run | None = None
        self.has_score = False  # the network gives a score and ownership (set by its first such answer)
        self._scores = False  # the network gives a score: the score utility applies (set by every answer)

    # -- positioning ---------------------------------------------------------------------------------------------

    def set_position(self, state: Game) -> bool:
        """Make ``state`` the root, reusing the subtree that matches its move sequence. Returns whether it did
        (``Tree.set_position``)."""
        with self._lock:
            return self.tree.set_position(state)

    def clear(self) -> None:
        """Forget the tree and the cached network results."""
        with self._lock:
            self.tree.clear()

    # -- running -------------------------------------------------------------------------------------------------

    def run(self, state: Game, *, visits: int | None = None, playouts: int | None = None,
            time_s: float | None = None, noise: bool = False, allowed: Collection[int] | None = None,
            early_stop: bool | None = None, stop: threading.Event | None = None,
            on_progress: Callable[[list[Candidate]], None] | None = None,
            progress_interval_s: float = 1.0, first_progress_s: float | None = None) -> SearchResult:
        """Search ``state`` until a limit is reached or ``stop`` is set (or ``Search.stop()`` is called).

        Args:
            visits: stop when the root has this many visits, reused ones included (None: config; 0: no limit).
            playouts: stop after this many new playouts (None: config; 0: no limit).
            time_s: budget in seconds on the search's clock, wall-clock time unless a test gives another (None: none).
            noise: mix Dirichlet noise into the root priors (self-play).
            allowed: root moves this run may choose (flat points or PASS); None allows every legal move.
            early_stop: stop once the most visited move cannot be overtaken (None: config).
            on_progress: called with the candidates about every ``progress_interval_s`` seconds (the first time
                after ``first_progress_s``, default the interval; ``math.inf``: never), from the calling thread,
                outside the tree lock.
        """
        config = self.config
        visits = config.visits_for(state) if visits is None else visits
        playouts = config.playouts if playouts is None else playouts
        early_stop = config.early_stop if early_stop is None else early_stop
        if not visits and not playouts and time_s is None and stop is None:
            raise ValueError("a search needs a visit, playout or time limit, or a stop event")
        with self._run_lock:
            start = self.clock()
            self.set_position(state)
            stop = stop or threading.Event()
            reused = self.tree.root.visits
            limits = ([max(0, visits - reused)] if visits else []) + ([playouts] if playouts else [])
            run = _Run(target=min(limits) if limits else _UNBOUNDED,
                       deadline=start + time_s if time_s is not None else math.inf,
                       stop=stop, early_stop=early_stop, start=start)
            run.batch_size, self.tree.virtual_loss = self._batching(run.target)
            workers = max(1, self.config.threads) + 1
            run.rollout_rngs = [None] * workers if self._rollout is None else \
                [np.random.default_rng(seed) for seed in self.rng.integers(1 << 62, size=workers).tolist()]
            self._current = run  # before the root's first evaluation: a stop (or its rollouts) must see this run
            try:
                self._prepare_root(run, noise, allowed)
                self._work_all(run, on_progress, progress_interval_s,
                               progress_interval_s if first_progress_s is None else first_progress_s)
            finally:
                self._current = None
            if run.error is not None:
                raise run.error
            with self._lock:
                candidates = readout.candidates(self.tree, self.config, run.root_mask)
                hits = self.tree.cache.hits
            return SearchResult(
                move=candidates[0].move if candidates else PASS, candidates=candidates,
                root_visits=self.tree.root.visits, playouts=run.finished, elapsed_s=self.clock() - start,
                batches=run.batches, evaluated=run.evaluated, cache_hits=hits, collisions=run.collisions,
                reused_visits=reused, stopped_early=run.stopped_early)

    def stop(self) -> None:
        """Ask the running search, if any, to finish its current batches and return. Thread-safe."""
        run = self._current
        if run is not None:
            run.stop.set()

    @property
    def running(self) -> bool:
        return self._current is not None

    def _prepare_root(self, run: _Run, noise: bool, allowed: Collection[int] | None) -> None:
        """Expand the root if needed, block superko-illegal edges, mix in noise and restrict the root's moves."""
        tree = self.tree
        root, state = tree.root, tree.root_state
        legal = state.legal_mask()  # bool [policy_size], in policy order
        if not legal.any():  # never in Go, whose pass is always legal
            raise ValueError("no legal move to search: the game is over")
        if root.status != EXPANDED:
            # The first evaluation of the root is a visit like any other (and may come from the cache).
            leaf = self._descend(run)
            if isinstance(leaf, _Leaf):
                self._evaluate_batch([leaf], run, self._rollout_rng(run, -1))
            run.started = run.finished = 1
            tree.root_pending = np.zeros(len(root.moves), dtype=np.int32)
        if (self.config.root_symmetries or self.config.optimistic_policy) and not root.averaged \
                and root.status == EXPANDED:
            self._average_root()
        pass_index = state.size * state.size  # in a game with a pass (Go's), its policy index
        with self._lock:
            tree.start_run(self._scores)  # the score utility's centre: the root's expected score now
            illegal = ~legal[root.moves]
            if illegal.any():
                root.blocked = illegal if root.blocked is None else root.blocked | illegal
            if allowed is not None:
                wanted = np.zeros(len(legal), dtype=bool)
                for move in allowed:
                    index = pass_index if move == PASS else move
                    if 0 <= index < len(wanted):
                        wanted[index] = True
                run.root_mask = wanted[root.moves] & legal[root.moves]
                if not run.root_mask.any():
                    run.root_mask = None  # nothing allowed is legal: fall back to everything
            mix = None
            if noise and len(root.moves) > 1:
                alpha = self.config.dirichlet_alpha * 361.0 / (state.size * state.size)
                mix = self.rng.dirichlet(np.full(len(root.moves), alpha))
            tree.mix_root_noise(mix, self.config.noise_weight, self.config.root_policy_temperature)

    def _average_root(self) -> None:
        """The root's priors and value from the mean of its evaluations under the 8 symmetries (``root_symmetries``),
        or from one evaluation, as a root takes it: a root expanded as a leaf, or kept from the last move's tree,
        may have the optimistic policy's priors.

        One random symmetry per evaluation makes the root's priors jump between searches of the same position (a
        move's prior 0.49 in one, 0.17 in another); the mean is steadier and predicts better (docs/STRENGTH.md),
        for 8 network evaluations a move."""
        state = self.tree.root_state
        evaluation = evaluate_all_symmetries(self.evaluator, [state]) if self.config.root_symmetries \
            else self.evaluator.evaluate([state])
        averaged = self._expansions([state], evaluation, root=True)[0]
        with self._lock:
            self.tree.average_root(averaged)

    def _work_all(self, run: _Run, on_progress, interval_s: float, first_s: float) -> None:
        if self.config.threads <= 1 and on_progress is None:
            self._worker(run, self._rollout_rng(run, 0))  # in the caller's thread: no hand-over, and profilers see it
            return
        threads = [threading.Thread(target=self._worker, args=(run, self._rollout_rng(run, i)), name=f"search-{i}",
                                    daemon=True)
                   for i in range(max(1, self.config.threads))]
        for thread in threads:
            thread.start()
        next_report = self.clock() + first_s
        for thread in threads:
            while thread.is_alive():
                wait = 0.05 if on_progress is None else max(0.0, min(0.05, next_report - self.clock()))
                thread.join(wait)
                if on_progress is None:
                    continue
                now = self.clock()
                if now >= next_report:
                    # on the interval's beat, the beats missed while this thread waited for the CPU skipped: a burst
                    # of reports in a row would show a GUI the same candidates several times
                    while next_report <= now:
                        next_report += interval_s
                    on_progress(self.candidates())

    @staticmethod
    def _rollout_rng(run: _Run, worker: int) -> np.random.Generator | None:
        """The rollouts' generator of a worker (-1: the caller's, for the root); None without rollouts."""
        return run.rollout_rngs[worker] if run.rollout_rngs else None

    def _finished(self, run: _Run) -> bool:
        """Whether no new descents should start (called under the lock)."""
        if run.stop.is_set() or run.error is not None or run.started >= run.target:
            return True
        now = self.clock()
        if now >= run.deadline or self.tree.nodes >= self.config.max_nodes:
            return True
        least = EARLY_STOP_MIN_PLAYOUTS if run.deadline == math.inf else EARLY_STOP_MIN_PLAYOUTS_TIMED
        if run.early_stop and run.finished >= least:
            remaining = run.target - run.started
            if run.deadline != math.inf:
                rate = run.finished / max(now - run.start, 1e-3)
                remaining = min(remaining, rate * (run.deadline - now))
            # Set each time, so that a worker that stops on this and later sees the move overtaken clears it.
            run.stopped_early = self._cannot_overtake(remaining, run.root_mask)
            if run.stopped_early:
                return True
        return False

    def _may_reopen(self, run: _Run) -> bool:
        """Whether a search stopped early could start again: only while some leaf is still in flight."""
        return (run.stopped_early and not run.stop.is_set() and run.error is None
                and self.tree.root_pending is not None and bool(self.tree.root_pending.any()))

    def _cannot_overtake(self, remaining: float, mask: np.ndarray | None) -> bool:
        tree = self.tree
        root = tree.root
        n = root.n
        if tree.root_pending is not None and tree.virtual_loss:
            # A leaf in flight holds virtual_loss visits on its root edge and will leave exactly one.
            n = n - (tree.virtual_loss - 1) * tree.root_pending
        if mask is not None:
            n = np.where(mask, n, 0.0)
        if root.blocked is not None:
            n = np.where(root.blocked, 0.0, n)
        if len(n) < 2:
            return True
        second, first = np.partition(n, len(n) - 2)[-2:]
        return bool(first - second > remaining)

    def _batching(self, target: int) -> tuple[int, int]:
        """(leaves per network call, virtual loss) for a run of ``target`` playouts: the configured ones, or for a
        search bounded by visits or playouts batches of one leaf per ``playouts_per_leaf`` of its playouts per
        thread and batch in flight, never fewer than one (each leaf in flight is a visit chosen without the results
        still to come), and a virtual loss of 1 once a batch holds 4 leaves or fewer. Why: such a search is judged
        by its strength per visit, and more leaves in flight or a heavier loss push visits off the best move, most
        of all where every move's value is the same (a decided handicap game): `tabula bench visits` measures how far
        batches move the visit shares from where one leaf at a time puts them (docs/BENCHMARKS.md). A search
        bounded by time alone keeps the configured batches, which make more playouts a second."""
        config = self.config
        size, loss = max(1, config.batch_size), config.virtual_loss
        if config.adaptive_batch and target != _UNBOUNDED:
            in_flight = max(1, config.playouts_per_leaf) * max(1, config.threads) * max(1, config.batches_in_flight)
            size = max(1, min(size, target // in_flight))
            if size <= 4:
                loss = min(loss, 1)
        return size, loss

    def _worker(self, run: _Run, rollout_rng: np.random.Generator | None) -> None:
        batch_size = run.batch_size
        depth = max(1, self.config.batches_in_flight)
        in_flight: deque[tuple[list[_Leaf], _InFlight]] = deque()
        leaves: list[_Leaf] = []  # collected and not yet handed to the evaluator
        try:
            while True:
                leaves = []
                collided = False
                with self._lock:
                    finished = self._finished(run)
                    if finished and not in_flight:
                        if not self._may_reopen(run):
                            return
                        # Stopped early while other workers' leaves are at the network: their results (and the
                        # visit rate they bring under a time limit) can make the best move catchable again.
                        self._wake.wait(0.005)
                        continue
                    attempts = 0
                    while (not finished and len(leaves) < batch_size and attempts < 4 * batch_size
                           and not self._finished(run)):
                        attempts += 1
                        outcome = self._descend(run)
                        if outcome is _RETRY:
                            continue
                        if outcome is _COLLISION:
                            run.collisions += 1
                            collided = True
                            break
                        run.started += 1
                        if outcome is _DONE:
                            run.finished += 1
                        else:
                            leaves.append(outcome)
                    if not leaves and collided and not in_flight:
                        # Everything left to look at is in another worker's batch: wait for its backup.
                        self._wake.wait(0.005)
                        continue
                batch, leaves = leaves, []  # from here on the evaluation paths abandon them if they fail
                if depth == 1:
                    if batch:
                        self._evaluate_batch(batch, run, rollout_rng)
                    continue
                # Several batches in flight: this thread goes on descending while the network thread runs the
                # earlier ones, and takes a result back when the pipeline is full or it has nothing else to do.
                if batch:
                    in_flight.append((batch, self._start_batch(batch, run, rollout_rng)))
                if in_flight and (len(in_flight) >= depth or not batch):
                    done, pending = in_flight.popleft()
                    self._finish_batch(done, pending, run)
        except BaseException as error:  # handed to run(), which re-raises it in the caller's thread
            if leaves or in_flight:
                with self._lock:
                    for batch in [leaves] + [batch for batch, _ in in_flight]:
                        self._abandon(batch)
                    self._wake.notify_all()
            run.error = error
            run.stop.set()

    # -- one playout: descend, evaluate, back up -----------------------------------------------------------------

    def _descend(self, run: _Run) -> object:
        """Walk from the root to a leaf under virtual loss and find its value where no network call is needed
        (caller holds the lock, except for the first root evaluation). Returns a _Leaf to evaluate, or _DONE (backed
        up already: a finished game, or a position in the table), _COLLISION (the leaf is in flight elsewhere;
        virtual loss undone) or _RETRY (an edge proved illegal)."""
        tree = self.tree
        reached = tree.descend(run.root_mask)
        if reached is None:
            return _RETRY
        node, path, state = reached
        if node.status == TERMINAL:
            tree.backup(path, node, node.value, node.score)
            return _DONE
        if node.status == PENDING:
            tree.undo(path)
            return _COLLISION
        if path:
            value = state.terminal_value()  # Go: two passes, counted; gomoku: a row, or a full board
            if value is not None:
                node.status = TERMINAL
                node.value, node.score = value, _terminal_score(state)
                tree.backup(path, node, node.value, node.score)
                return _DONE
        key = table_key(state)
        expansion = tree.cache.get(key)
        if expansion is not None and self._rollout is None:
            self._expand_leaf(node, path, expansion)
            return _DONE
        node.status = PENDING  # with rollouts, a position in the table still waits for its own rollout
        return _Leaf(node, path, state, key, expansion)

    def _expand_leaf(self, node: Node, path: Path, expansion: Expansion, rollout_z: float | None = None) -> None:
        """Expand a leaf with its network result (fresh, or from the table) and back its value up ``path``: where
        a leaf's value enters the tree (under the lock). With ``rollout_z``, the result of the leaf's rollout, the
        value backed up is AlphaGo's mix (1 − λ)·v + λ·z; the node keeps the network's v (first-play urgency of
        its children), and the score is the network's alone."""
        self.tree.expand(node, expansion, len(path))
        value = expansion.value
        if rollout_z is not None:
            mix = self.config.rollout_mix
            value = (1.0 - mix) * value + mix * rollout_z
        self.tree.backup(path, node, value, expansion.score)

    def _evaluate_batch(self, leaves: list[_Leaf], run: _Run, rollout_rng: np.random.Generator | None) -> None:
        """The one place the search calls the network (or, with rollouts, hands it a batch and waits); expands and
        backs up every leaf."""
        if self._rollout is not None:
            self._finish_batch(leaves, self._start_batch(leaves, run, rollout_rng), run)
            return
        evaluation = self._or_abandon(leaves, lambda: self.evaluator.evaluate([leaf.state for leaf in leaves]))
        self._expand_batch(leaves, evaluation, run)

    def _start_batch(self, leaves: list[_Leaf], run: _Run, rollout_rng: np.random.Generator | None) -> _InFlight:
        """Hand a batch to the network without waiting for it (``batches_in_flight`` > 1, or rollouts), then, with
        rollouts, play every leaf out in this thread while the network runs without the GIL."""
        asked = [leaf.state for leaf in leaves if leaf.expansion is None]  # the table's leaves need no network
        pending = self._or_abandon(leaves, lambda: evaluate_async(self.evaluator, asked)) if asked else None
        rollout_z = None
        if self._rollout is not None:
            rollout_z = self._or_abandon(leaves, lambda: self._rollouts(leaves, run, rollout_rng))
        return _InFlight(pending, rollout_z)

    def _rollouts(self, leaves: list[_Leaf], run: _Run, rng: np.random.Generator) -> np.ndarray:
        """float64 [len(leaves)]: one rollout's result from each leaf, NaN where the run ended first; ValueError for
        an answer of the wrong shape."""
        def over() -> bool:
            return run.stop.is_set() or self.clock() >= run.deadline

        results = np.asarray(self._rollout([leaf.state for leaf in leaves], rng, over), dtype=np.float64)
        if results.shape != (len(leaves),):
            raise ValueError(f"the rollout answered {len(leaves)} positions with shape {results.shape}")
        return results

    def _finish_batch(self, leaves: list[_Leaf], in_flight: _InFlight, run: _Run) -> None:
        pending = in_flight.evaluation
        evaluation = self._or_abandon(leaves, pending.result) if pending is not None else None
        self._expand_batch(leaves, evaluation, run, in_flight.rollout_z)

    def _or_abandon(self, leaves: list[_Leaf], call: Callable[[], object]):
        """``call()``; if it raises, the leaves are abandoned (virtual loss undone even if the evaluator throws)."""
        try:
            return call()
        except BaseException:
            with self._lock:
                self._abandon(leaves)
                self._wake.notify_all()
            raise

    def _abandon(self, leaves: list[_Leaf]) -> None:
        """Take back the virtual loss of leaves that will not be evaluated (under the lock)."""
        for leaf in leaves:
            leaf.node.status = UNEXPANDED
            self.tree.undo(leaf.path)

    def _expand_batch(self, leaves: list[_Leaf], evaluation: Evaluation | None, run: _Run,
                      rollout_z: np.ndarray | None = None) -> None:
        """Expand and back up ``leaves``: those without an expansion from the answer ``evaluation`` (in order), with
        the results ``rollout_z`` (float64 [len(leaves)]) of their rollouts where there are any."""
        fresh = [leaf for leaf in leaves if leaf.expansion is None]
        found = iter(self._or_abandon(leaves, lambda: self._expansions([leaf.state for leaf in fresh], evaluation))
                     if fresh else ())
        # A rollout cut short by the end of the run (NaN) leaves the network's value alone.
        results = [None] * len(leaves) if rollout_z is None else [None if math.isnan(z) else z
                                                                   for z in rollout_z.tolist()]
        with self._lock:
            for leaf, z in zip(leaves, results):
                expansion = leaf.expansion
                if expansion is None:
                    expansion = next(found)
                    self.tree.cache.put(leaf.key, expansion)
                self._expand_leaf(leaf.node, leaf.path, expansion, z)
            run.finished += len(leaves)
            if fresh:
                run.batches += 1
                run.evaluated += len(fresh)
            self._wake.notify_all()

    def _expansions(self, states: list[Game], evaluation: Evaluation, root: bool = False) -> list[Expansion]:
        """The network's answer for ``states`` as the tree expands it (``tree.expansions``); ``root``: as the root
        takes it (never the optimistic policy)."""
        config = self.config
        found = expansions(states, evaluation, config.eye_filter, config.ownership_score, config.atari_prior,
                           config.atari_min_stones, optimistic_policy=config.optimistic_policy and not root)
        self.has_score = evaluation.ownership is not None  # networks of a set may differ, so every answer says
        self._scores = evaluation.score is not None
        return found

    # -- reading the tree (thread-safe, usable mid-search) -------------------------------------------------------

    def candidates(self) -> list[Candidate]:
        """The root's visited moves in the order the search would choose them."""
        with self._lock:
            run = self._current
            return readout.candidates(self.tree, self.config, run.root_mask if run is not None else None)

    def ownership(self) -> np.ndarray | None:
        """The final owner of each point averaged over the search tree (float32 [N*N] in [-1, 1], black's view); None
        when the network has no ownership head. The weights are read under the tree lock and the arrays summed
        outside it, so a GUI asking often does not stall the workers."""
        with self._lock:
            terms = readout.ownership_terms(self.tree)
        return None if terms is None else readout.sum_ownership(terms)

    def move_ownership(self, move: int) -> np.ndarray | None:
        """The ownership after the root's ``move`` averaged over its subtree (float32 [N*N], black's view), as
        ``ownership`` averages the root's; None before that move's position is evaluated or without an ownership
        head."""
        with self._lock:
            terms = readout.move_ownership_terms(self.tree, move)
        return None if terms is None else readout.sum_ownership(terms)

    def root_value(self) -> float:
        """Mean value of the root's visits, side to move's view (the net's value if unvisited)."""
        with self._lock:
            return readout.root_value(self.tree)

    def root_priors(self) -> dict[int, float]:
        """The root's priors by move (flat point or PASS); empty before the root is expanded."""
        with self._lock:
            return readout.root_priors(self.tree)

    def root_stats(self) -> readout.RootStats:
        """The root's statistics over its visits, side to move's view (``result.root_stats``)."""
        with self._lock:
            return readout.root_stats(self.tree)

    def pv_visits(self, move: int) -> list[int]:
        """The visits along ``move``'s principal variation (``result.principal_variation_visits``)."""
        with self._lock:
            return readout.principal_variation_visits(self.tree, move)

    def tree_nodes(self) -> int:
        """Upper bound on the expanded nodes alive in the tree (expansions since the tree was started afresh)."""
        return self.tree.nodes


__all__ = ["Search", "Rollout", "terminal_outcome"]

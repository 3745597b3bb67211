"""PUCT tree search: one shared tree descended by worker threads under virtual loss, leaves evaluated in batches,
network results cached by position hash, and the tree reused between moves.

Layer: above game and the evaluator protocol; the search calls the evaluator from one place per mode
(``Search._evaluate_batch``, or ``_start_batch`` with batches in flight) and never imports a network. Values are in
[-1, 1]; an edge's statistics are kept in its parent's arrays from the parent's side-to-move view, so selection is
a handful of numpy operations per level.

Threads: every worker collects up to ``batch_size`` leaves under the tree lock (adding virtual loss on the way
down), releases the lock while the evaluator runs, then expands and backs up under the lock. No leaf ever waits for
a batch to fill. With ``batches_in_flight`` > 1 a worker hands a batch to the evaluator's network thread
(``evaluate_async``) and goes on descending, taking results back in order: only the network call runs without the
GIL, so this is how the tree work overlaps a GPU; workers that each wait for their own whole ``evaluate`` mostly
queue for the GIL instead (docs/BENCHMARKS.md).
"""
from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable, Collection

import numpy as np

from engine.rules.board import IllegalMoveError, own_eye_masks
from engine.config import SearchConfig
from engine.rules.coords import BLACK, PASS
from engine.net.evaluator import Evaluation, Evaluator, PendingEvaluation, evaluate_all_symmetries, evaluate_async
from engine.rules.game import GameState

_UNEXPANDED, _PENDING, _EXPANDED, _TERMINAL = range(4)
# Outcomes of one descent that needed no network call, or could not proceed.
_DONE, _COLLISION, _RETRY = "done", "collision", "retry"
_PV_DEPTH = 24  # longest principal variation reported
_OWNERSHIP_DEPTH = 4  # plies of the tree averaged into the ownership; deeper nodes count through their ancestor
_OWNERSHIP_MIN_VISITS = 2  # a child with fewer visits adds nothing its parent's evaluation does not


def _without_own_eyes(policy: np.ndarray, states: list[GameState]) -> np.ndarray:
    """``policy`` (float32 [B, N*N+1]) with the moves that fill the mover's own single-point eyes removed, and the
    rows that lost one renormalised.

    A network that has not learned the endgame fills its own eyes and dies; no strong move does it (an eye point
    touches no opponent stone, so filling it never captures). Pass keeps its prior, and takes everything when
    nothing else is left, as the random player passes."""
    eyes = own_eye_masks([state.board for state in states], [state.to_move for state in states])
    changed = (eyes & (policy[:, :-1] > 0)).any(axis=1)
    if not changed.any():
        return policy
    rows = policy[changed]  # a copy: the evaluator's array is left alone
    rows[:, :-1][eyes[changed]] = 0.0
    totals = rows.sum(axis=1)
    nothing_left = totals <= 0.0
    rows[nothing_left, -1] = 1.0
    totals[nothing_left] = 1.0
    rows /= totals[:, None]
    policy = policy.copy()
    policy[changed] = rows
    return policy


class Node:
    """One position in the tree. The statistics of the edge leading here live in the parent's arrays.

    Set once at expansion: ``moves`` (int16 [k] policy indices of the children, pass = N*N), ``prior`` (float32 [k],
    shared with the transposition table until changed), ``value`` (the net's value, side to move's view).
    Changed under the search lock: ``n``/``w``/``w2`` (float32 [k]: visits, value sum and sum of squares of each
    edge, this node's side-to-move view; ``n`` and ``w`` include virtual visits counted as losses),
    ``n_sum`` (sum of ``n``), ``visits`` (real visits of this node: 1 for its own evaluation plus its children's),
    ``visited_prior`` (prior mass of children with ``n > 0``, for first-play urgency), ``children``
    (edge index -> Node, created on first descent), ``blocked`` (bool [k] of edges found illegal by superko).
    Kept in step with ``n``/``w`` so that selection is two array operations: ``q`` (float32 [k]: ``w / n``, or
    the first-play urgency where ``n == 0``) and ``pu`` (float32 [k]: ``prior / (1 + n)``).
    """

    __slots__ = ("status", "moves", "prior", "n", "w", "w2", "s", "s2", "q", "pu", "n_sum", "visits", "value",
                 "score", "ownership", "visited_prior", "children", "blocked", "averaged")

    def __init__(self) -> None:
        self.status = _UNEXPANDED
        self.moves: np.ndarray | None = None
        self.prior: np.ndarray | None = None
        self.n: np.ndarray | None = None
        self.w: np.ndarray | None = None
        self.w2: np.ndarray | None = None
        self.s: np.ndarray | None = None  # score sums of each edge (points, this node's side-to-move view)
        self.s2: np.ndarray | None = None  # ... and sums of squares
        self.q: np.ndarray | None = None
        self.pu: np.ndarray | None = None
        self.n_sum = 0.0
        self.visits = 0
        self.value = 0.0
        self.score = 0.0  # the net's final margin (points, side to move's view); the count at a finished game
        self.ownership: np.ndarray | None = None  # the net's ownership, black's view (float16 [N*N]), if it has one
        self.visited_prior = 0.0
        self.children: dict[int, Node] = {}
        self.blocked: np.ndarray | None = None
        self.averaged = False  # priors and value are the mean over the 8 symmetries (the root's)

    @property
    def expanded(self) -> bool:
        return self.status == _EXPANDED

    def child(self, move_index: int) -> "Node | None":
        """The child reached by policy index ``move_index``, if it exists."""
        if self.moves is None:
            return None
        where = np.flatnonzero(self.moves == move_index)
        return self.children.get(int(where[0])) if where.size else None


@dataclass(frozen=True)
class _Entry:
    """A cached network result: the children a position gets and their priors, and its value."""

    moves: np.ndarray  # int16 [k] policy indices with nonzero prior, pass always included
    prior: np.ndarray  # float32 [k]
    value: float  # side to move's view
    score: float = 0.0  # side to move's view, points (0 from networks without a score head)
    ownership: np.ndarray | None = None  # float16 [N*N], black's view


class TranspositionTable:
    """Network results by board size and position hash (stones, side to move, ko point), least recently used
    evicted first.

    Not thread-safe on its own: the search only touches it under its tree lock.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._entries: OrderedDict[tuple[int, int], _Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[int, int]) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(self, key: tuple[int, int], entry: _Entry) -> None:
        if self.capacity <= 0:
            return
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class Candidate:
    """One root move as the search sees it. ``value`` and ``lcb`` are in [-1, 1], the root side to move's view."""

    move: int  # flat point or PASS
    visits: int
    value: float
    prior: float
    lcb: float
    pv: list[int]  # starts with ``move``
    order: int = 0  # rank in the order the search would choose (0: its move)
    score: float = 0.0  # mean final margin after this move, points, the root side to move's view
    score_stdev: float = 0.0  # spread of that margin over the move's visits

    @property
    def winrate(self) -> float:
        return (self.value + 1.0) / 2.0

    @property
    def lcb_winrate(self) -> float:
        return (self.lcb + 1.0) / 2.0


@dataclass
class SearchResult:
    """What one ``Search.run`` did and found."""

    move: int  # the chosen move (most visits, or best LCB), PASS if nothing else
    candidates: list[Candidate]  # ordered as chosen, visited moves only
    root_visits: int  # visits of the root, reused ones included
    playouts: int  # new playouts this run
    elapsed_s: float
    batches: int  # network calls
    evaluated: int  # positions sent to the network
    cache_hits: int
    collisions: int
    reused_visits: int  # root visits kept from earlier searches
    stopped_early: bool  # the best move could no longer be overtaken

    @property
    def value(self) -> float:
        """The chosen move's value, side to move's view; 0 without candidates."""
        for candidate in self.candidates:
            if candidate.move == self.move:
                return candidate.value
        return 0.0

    @property
    def playouts_per_s(self) -> float:
        return self.playouts / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def mean_batch(self) -> float:
        return self.evaluated / self.batches if self.batches else 0.0


@dataclass
class _Leaf:
    node: Node
    path: list[tuple[Node, int]]
    state: GameState
    key: tuple[int, int]


@dataclass
class _Run:
    """The limits and counters of one ``Search.run``; counters change under the tree lock."""

    target: int  # playouts to start (sys.maxsize: unbounded)
    deadline: float  # time.monotonic() limit (inf: none)
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


@dataclass
class _Link:
    """A kept ancestor of the root: its position and the edges from it to the next kept root (or the root)."""

    state: GameState
    node: Node
    edges: list[tuple[Node, int]] = field(default_factory=list)


def _t_quantile(dof: int, z: float = 4.265) -> float:
    """Student-t quantile for ``dof`` degrees of freedom at the normal quantile ``z`` (one-sided 1e-5 by default),
    by the Cornish-Fisher expansion: Leela Zero's confidence for its lower bound."""
    if dof <= 0:
        return math.inf
    z3, z5 = z ** 3, z ** 5
    return z + (z3 + z) / (4 * dof) + (5 * z5 + 16 * z3 + 3 * z) / (96 * dof * dof)


def terminal_value(state: GameState) -> float:
    """The Tromp-Taylor result of a finished game: +1, -1 or 0 from the side to move's view."""
    score = state.area_score()
    if state.to_move != BLACK:
        score = -score
    return 1.0 if score > 0 else -1.0 if score < 0 else 0.0


class Search:
    """A PUCT search over one game, reusable from move to move.

    ``run`` searches a position (reusing the matching part of the previous tree) and returns a ``SearchResult``;
    ``stop`` ends a running search from another thread. The evaluator, configuration and random generator are
    passed in; nothing is read from globals.
    """

    def __init__(self, evaluator: Evaluator, config: SearchConfig | None = None,
                 rng: np.random.Generator | None = None):
        # Fixed for the Search's life.
        self.evaluator = evaluator
        self.config = config or SearchConfig()
        self.rng = rng if rng is not None else np.random.default_rng()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._run_lock = threading.Lock()  # one run at a time
        # The tree, changed under _lock by workers and by set_position between runs.
        self.cache = TranspositionTable(self.config.cache_entries)
        self.root = Node()
        self.root_state: GameState | None = None
        self._ancestors: list[_Link] = []  # kept earlier roots, oldest first, for undo
        # visits, value sum, square sum, score sum, score square sum backed up through the root since it became root
        self._gain = [0, 0.0, 0.0, 0.0, 0.0]
        self._root_pending: np.ndarray | None = None  # int32 [k]: leaves in flight below each root edge
        self._clean_root_prior: np.ndarray | None = None  # the root's priors before noise
        self._rules = None
        self._nodes = 0  # expansions since the tree was last started afresh: bounds the live nodes
        self._current: _Run | None = None
        self.has_score = False  # the network gives a score and ownership (set by its first such answer)
        self._virtual_loss = self.config.virtual_loss  # this run's (Search._batching); no leaf is in flight between

    # -- positioning and reuse -----------------------------------------------------------------------------------

    def set_position(self, state: GameState) -> bool:
        """Make ``state`` the root, reusing the subtree that matches its move sequence. Returns whether it did.

        Matches the current root or a kept ancestor (undo, or a GUI re-sending the game) whose moves are a prefix
        of ``state.moves``, with the same size, rules, setup stones and side to move along the way.
        """
        with self._lock:
            self._restore_root_prior()
            self._flush_gain()
            if state.rules != self._rules:
                self.cache.clear()  # test evaluators score with komi; the network's cache stays valid otherwise
                self._rules = state.rules
            chain = self._ancestors + ([_Link(self.root_state, self.root)] if self.root_state is not None else [])
            if not self.config.reuse_tree:
                chain = []
            for depth in range(len(chain) - 1, -1, -1):
                link = chain[depth]
                edges = self._walk(link, state)
                if edges is None:
                    continue
                new_root = edges[-1][0].children[edges[-1][1]] if edges else link.node
                if new_root.status not in (_EXPANDED, _UNEXPANDED):
                    continue
                kept = chain[:depth + 1]
                kept[-1] = _Link(link.state, link.node, edges)
                if not edges:
                    kept.pop()
                self._ancestors = self._trim(kept, len(state.moves))
                self._set_root(new_root, state)
                return True
            self._ancestors = []
            self._nodes = 0
            self._set_root(Node(), state)
            return False

    def _walk(self, link: _Link, state: GameState) -> list[tuple[Node, int]] | None:
        """Edges from ``link``'s node to ``state``'s position, or None when the tree cannot reach it."""
        old = link.state
        if (old.size != state.size or old.rules != state.rules or old.setup != state.setup
                or old.handicap != state.handicap or len(old.moves) > len(state.moves)
                or state.moves[:len(old.moves)] != old.moves):
            return None
        node, to_move, edges = link.node, old.to_move, []
        pass_index = state.size * state.size
        for color, move in state.moves[len(old.moves):]:
            if color != to_move or node.status != _EXPANDED:
                return None
            where = np.flatnonzero(node.moves == (pass_index if move == PASS else move))
            if not where.size:
                return None
            idx = int(where[0])
            if idx not in node.children:
                node.children[idx] = Node()
            edges.append((node, idx))
            node = node.children[idx]
            to_move = 3 - to_move
        return edges if to_move == state.to_move else None

    def _trim(self, chain: list[_Link], root_moves: int) -> list[_Link]:
        """Drop ancestors further than ``reuse_undo_plies`` above the root, which free their other subtrees."""
        limit = self.config.reuse_undo_plies
        return [link for link in chain if root_moves - len(link.state.moves) <= limit]

    def _set_root(self, node: Node, state: GameState) -> None:
        previous, self.root = self.root, node
        self._refresh(previous)  # its unvisited children lose the root's first-play reduction
        self.root_state = state.copy()
        self._gain = [0, 0.0, 0.0, 0.0, 0.0]
        self._root_pending = None if node.moves is None else np.zeros(len(node.moves), dtype=np.int32)
        self._clean_root_prior = None

    def _restore_root_prior(self) -> None:
        """Take the noise back out of the root's priors: noise belongs to one run at one root."""
        if self._clean_root_prior is not None:
            self.root.prior = self._clean_root_prior
            self._clean_root_prior = None
            self._refresh(self.root)

    def _flush_gain(self) -> None:
        """Add what was backed up through the root to the edges above it, so kept ancestors stay consistent."""
        visits, value, squares, score, score_squares = self._gain
        self._gain = [0, 0.0, 0.0, 0.0, 0.0]
        if not visits or not self._ancestors:
            return
        edges = [edge for link in self._ancestors for edge in link.edges]
        for node, idx in reversed(edges):
            value = -value  # the parent's view
            score = -score
            self._update(node, idx, visits, value)
            node.w2[idx] += squares
            node.s[idx] += score
            node.s2[idx] += score_squares
            node.visits += visits

    def clear(self) -> None:
        """Forget the tree and the cached network results."""
        with self._lock:
            self.cache.clear()
            self.root = Node()
            self.root_state = None
            self._ancestors = []
            self._gain = [0, 0.0, 0.0, 0.0, 0.0]
            self._nodes = 0

    # -- running -------------------------------------------------------------------------------------------------

    def run(self, state: GameState, *, visits: int | None = None, playouts: int | None = None,
            time_s: float | None = None, noise: bool = False, allowed: Collection[int] | None = None,
            early_stop: bool | None = None, stop: threading.Event | None = None,
            on_progress: Callable[[list[Candidate]], None] | None = None,
            progress_interval_s: float = 1.0) -> SearchResult:
        """Search ``state`` until a limit is reached or ``stop`` is set (or ``Search.stop()`` is called).

        Args:
            visits: stop when the root has this many visits, reused ones included (None: config; 0: no limit).
            playouts: stop after this many new playouts (None: config; 0: no limit).
            time_s: wall-clock budget in seconds (None: none).
            noise: mix Dirichlet noise into the root priors (self-play).
            allowed: root moves this run may choose (flat points or PASS); None allows every legal move.
            early_stop: stop once the most visited move cannot be overtaken (None: config).
            on_progress: called with the candidates about every ``progress_interval_s`` seconds, from the
                calling thread, outside the tree lock.
        """
        config = self.config
        visits = config.visits if visits is None else visits
        playouts = config.playouts if playouts is None else playouts
        early_stop = config.early_stop if early_stop is None else early_stop
        if not visits and not playouts and time_s is None and stop is None:
            raise ValueError("a search needs a visit, playout or time limit, or a stop event")
        with self._run_lock:
            start = time.monotonic()
            self.set_position(state)
            stop = stop or threading.Event()
            reused = self.root.visits
            limits = ([max(0, visits - reused)] if visits else []) + ([playouts] if playouts else [])
            run = _Run(target=min(limits) if limits else _UNBOUNDED,
                       deadline=start + time_s if time_s is not None else math.inf,
                       stop=stop, early_stop=early_stop, start=start)
            run.batch_size, self._virtual_loss = self._batching(run.target)
            self._prepare_root(run, noise, allowed)
            self._current = run
            try:
                self._work_all(run, on_progress, progress_interval_s)
            finally:
                self._current = None
            if run.error is not None:
                raise run.error
            with self._lock:
                candidates = self._candidates(run.root_mask)
                hits = self.cache.hits
            return SearchResult(
                move=candidates[0].move if candidates else PASS, candidates=candidates,
                root_visits=self.root.visits, playouts=run.finished, elapsed_s=time.monotonic() - start,
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
        root, state = self.root, self.root_state
        if root.status != _EXPANDED:
            # The first evaluation of the root is a visit like any other (and may come from the cache).
            leaf = self._descend(run)
            if isinstance(leaf, _Leaf):
                self._evaluate_batch([leaf], run)
            run.started = run.finished = 1
            self._root_pending = np.zeros(len(root.moves), dtype=np.int32)
        if self.config.root_symmetries and not root.averaged and root.status == _EXPANDED:
            self._average_root()
        pass_index = state.size * state.size
        legal = np.zeros(pass_index + 1, dtype=bool)
        legal[state.legal_moves()] = True
        legal[pass_index] = True
        with self._lock:
            illegal = ~legal[root.moves]
            if illegal.any():
                root.blocked = illegal if root.blocked is None else root.blocked | illegal
            if allowed is not None:
                wanted = np.zeros(pass_index + 1, dtype=bool)
                for move in allowed:
                    wanted[pass_index if move == PASS else move] = True
                run.root_mask = wanted[root.moves] & legal[root.moves]
                if not run.root_mask.any():
                    run.root_mask = None  # nothing allowed is legal: fall back to everything
            self._restore_root_prior()
            if noise and len(root.moves) > 1:
                config = self.config
                alpha = config.dirichlet_alpha * 361.0 / (state.size * state.size)
                self._clean_root_prior = root.prior
                mix = self.rng.dirichlet(np.full(len(root.moves), alpha))
                root.prior = ((1.0 - config.noise_weight) * root.prior + config.noise_weight * mix).astype(np.float32)
            self._refresh(root)  # new priors, and the root's own first-play reduction

    def _average_root(self) -> None:
        """The root's priors and value from the mean of its evaluations under the 8 symmetries.

        One random symmetry per evaluation makes the root's priors jump between searches of the same position (a
        move's prior 0.49 in one, 0.17 in another); the mean is steadier and predicts better (docs/STRENGTH.md),
        for 8 network evaluations a move."""
        root, state = self.root, self.root_state
        evaluation = evaluate_all_symmetries(self.evaluator, [state])
        entry = self._entries_for([state], evaluation)[0]
        with self._lock:
            # The averaged policy has the same support (legal non-eye moves and pass); keep the root's edges.
            lookup = np.zeros(state.size * state.size + 1, dtype=np.float32)
            lookup[entry.moves] = entry.prior
            prior = lookup[root.moves]
            total = float(prior.sum())
            if total > 0:
                root.prior = (prior / total).astype(np.float32)
            root.value = entry.value
            root.score, root.ownership = entry.score, entry.ownership
            root.averaged = True

    def _work_all(self, run: _Run, on_progress, interval_s: float) -> None:
        if self.config.threads <= 1 and on_progress is None:
            self._worker(run)  # in the caller's thread: no hand-over, and profilers see it
            return
        threads = [threading.Thread(target=self._worker, args=(run,), name=f"search-{i}", daemon=True)
                   for i in range(max(1, self.config.threads))]
        for thread in threads:
            thread.start()
        next_report = time.monotonic() + interval_s
        for thread in threads:
            while thread.is_alive():
                wait = 0.05 if on_progress is None else max(0.0, min(0.05, next_report - time.monotonic()))
                thread.join(wait)
                if on_progress is not None and time.monotonic() >= next_report:
                    next_report += interval_s
                    on_progress(self.candidates())

    def _finished(self, run: _Run) -> bool:
        """Whether no new descents should start (called under the lock)."""
        if run.stop.is_set() or run.error is not None or run.started >= run.target:
            return True
        now = time.monotonic()
        if now >= run.deadline or self._nodes >= self.config.max_nodes:
            return True
        if run.early_stop and run.finished >= 16:
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
                and self._root_pending is not None and bool(self._root_pending.any()))

    def _cannot_overtake(self, remaining: float, mask: np.ndarray | None) -> bool:
        n = self.root.n
        if self._root_pending is not None and self._virtual_loss:
            # A leaf in flight holds virtual_loss visits on its root edge and will leave exactly one.
            n = n - (self._virtual_loss - 1) * self._root_pending
        if mask is not None:
            n = np.where(mask, n, 0.0)
        if self.root.blocked is not None:
            n = np.where(self.root.blocked, 0.0, n)
        if len(n) < 2:
            return True
        second, first = np.partition(n, len(n) - 2)[-2:]
        return bool(first - second > remaining)

    def _batching(self, target: int) -> tuple[int, int]:
        """(leaves per network call, virtual loss) for a run of ``target`` playouts: the configured ones, or for a
        small search at most 1/32 of its playouts in flight at once across threads and batches (each one a visit
        chosen without the results still to come), and a virtual loss of 1 once a batch holds 4 leaves or fewer:
        so few leaves barely collide, and a heavier loss only pushes visits off the best move. Measured with
        `tabula bench visits` (docs/BENCHMARKS.md): at 100 visits, batches of 8 moved 35% of the visit shares from
        where one leaf at a time puts them, batches of 3 with a virtual loss of 1 moved 2.5%."""
        config = self.config
        size, loss = max(1, config.batch_size), config.virtual_loss
        if config.adaptive_batch and target != _UNBOUNDED:
            in_flight = 32 * max(1, config.threads) * max(1, config.batches_in_flight)
            size = max(1, min(size, target // in_flight))
            if size <= 4:
                loss = min(loss, 1)
        return size, loss

    def _worker(self, run: _Run) -> None:
        batch_size = run.batch_size
        depth = max(1, self.config.batches_in_flight)
        in_flight: deque[tuple[list[_Leaf], PendingEvaluation]] = deque()
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
                        self._evaluate_batch(batch, run)
                    continue
                # Several batches in flight: this thread goes on descending while the network thread runs the
                # earlier ones, and takes a result back when the pipeline is full or it has nothing else to do.
                if batch:
                    in_flight.append((batch, self._start_batch(batch)))
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
        """Walk from the root to a leaf under virtual loss (caller holds the lock, except for the first root
        evaluation). Returns a _Leaf to evaluate, or _DONE (backed up already: terminal or cached), _COLLISION
        (the leaf is in flight elsewhere; virtual loss undone) or _RETRY (an edge proved illegal)."""
        config = self.config
        vl = self._virtual_loss
        root = node = self.root
        state = self.root_state.copy()
        pass_index = state.size * state.size
        path: list[tuple[Node, int]] = []
        c_puct = config.c_puct
        update = self._update
        while node.status == _EXPANDED:
            at_root = node is root
            # Q + c·P·√N/(1+n): q and pu are kept up to date by _update.
            score = node.pu * (c_puct * math.sqrt(node.n_sum if node.n_sum > 1.0 else 1.0))
            score += node.q
            if node.blocked is not None:
                score[node.blocked] = -np.inf
            if at_root and run.root_mask is not None:
                score[~run.root_mask] = -np.inf
            idx = int(score.argmax())
            move = node.moves.item(idx)
            try:
                state.play(PASS if move == pass_index else move)
            except IllegalMoveError:
                # Superko along this line (or a cached policy from another history): never choose it again here.
                blocked = np.zeros(len(node.n), dtype=bool) if node.blocked is None else node.blocked
                blocked[idx] = True
                node.blocked = blocked
                self._undo(path)
                return _RETRY
            if vl:
                update(node, idx, vl, -vl)
            if at_root:
                self._root_pending[idx] += 1
            path.append((node, idx))
            child = node.children.get(idx)
            if child is None:
                child = node.children[idx] = Node()
            node = child
        if node.status == _TERMINAL:
            self._backup(path, node, node.value, node.score)
            return _DONE
        if node.status == _PENDING:
            self._undo(path)
            return _COLLISION
        if state.passes >= 2 and path:
            node.status = _TERMINAL
            node.score = state.area_score() * (1.0 if state.to_move == BLACK else -1.0)
            node.value = 1.0 if node.score > 0 else -1.0 if node.score < 0 else 0.0
            self._backup(path, node, node.value, node.score)
            return _DONE
        key = (state.size, state.hash)  # empty boards of every size share hash 0
        entry = self.cache.get(key)
        if entry is not None:
            self._expand(node, entry)
            self._backup(path, node, entry.value, entry.score)
            return _DONE
        node.status = _PENDING
        return _Leaf(node, path, state, key)

    def _evaluate_batch(self, leaves: list[_Leaf], run: _Run) -> None:
        """The one place the search calls the network; expands and backs up every leaf."""
        evaluation = self._or_abandon(leaves, lambda: self.evaluator.evaluate([leaf.state for leaf in leaves]))
        self._expand_batch(leaves, evaluation, run)

    def _start_batch(self, leaves: list[_Leaf]) -> PendingEvaluation:
        """Hand a batch to the network without waiting for it (``batches_in_flight`` > 1)."""
        return self._or_abandon(leaves, lambda: evaluate_async(self.evaluator, [leaf.state for leaf in leaves]))

    def _finish_batch(self, leaves: list[_Leaf], pending: PendingEvaluation, run: _Run) -> None:
        self._expand_batch(leaves, self._or_abandon(leaves, pending.result), run)

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
            leaf.node.status = _UNEXPANDED
            self._undo(leaf.path)

    def _expand_batch(self, leaves: list[_Leaf], evaluation: Evaluation, run: _Run) -> None:
        entries = self._or_abandon(leaves, lambda: self._entries(leaves, evaluation))
        with self._lock:
            for leaf, entry in zip(leaves, entries):
                self.cache.put(leaf.key, entry)
                self._expand(leaf.node, entry)
                self._backup(leaf.path, leaf.node, entry.value, entry.score)
            run.finished += len(leaves)
            run.batches += 1
            run.evaluated += len(leaves)
            self._wake.notify_all()

    def _entries(self, leaves: list[_Leaf], evaluation: Evaluation) -> list[_Entry]:
        """The network's answer for each leaf as it is cached and expanded: its children and their priors."""
        return self._entries_for([leaf.state for leaf in leaves], evaluation)

    def _entries_for(self, states: list[GameState], evaluation: Evaluation) -> list[_Entry]:
        policy = np.asarray(evaluation.policy, dtype=np.float32)
        values = np.asarray(evaluation.value, dtype=np.float32)
        points = states[0].size ** 2
        if policy.shape != (len(states), points + 1) or values.shape != (len(states),):
            raise ValueError(f"the evaluator answered {len(states)} positions with policy {policy.shape} and value "
                             f"{values.shape}, expected ({len(states)}, {points + 1}) and ({len(states)},)")
        if self.config.eye_filter:
            policy = _without_own_eyes(policy, states)
        # Each leaf's children are its moves with a nonzero prior, and pass: found for the whole batch at once.
        present = policy > 0.0
        present[:, -1] = True
        rows, columns = np.nonzero(present)
        priors = policy[rows, columns]
        columns = columns.astype(np.int16)
        ends = np.cumsum(np.count_nonzero(present, axis=1)).tolist()
        entries = []
        start = 0
        scores = [0.0] * len(states) if evaluation.score is None else np.asarray(evaluation.score).tolist()
        owners: list[np.ndarray | None] = [None] * len(states)
        self.has_score = evaluation.ownership is not None  # networks of a set may differ, so every answer says
        if evaluation.ownership is not None:
            black = np.array([1.0 if state.to_move == BLACK else -1.0 for state in states], dtype=np.float32)
            owners = list((np.asarray(evaluation.ownership, dtype=np.float32) * black[:, None]).astype(np.float16))
        for end, value, score, owner in zip(ends, values.tolist(), scores, owners):
            entries.append(_Entry(columns[start:end], priors[start:end], value, score, owner))
            start = end
        return entries

    def _expand(self, node: Node, entry: _Entry) -> None:
        k = len(entry.moves)
        node.moves = entry.moves
        node.prior = entry.prior
        node.n, node.w, node.w2, node.s, node.s2 = np.zeros((5, k), dtype=np.float32)  # one allocation a leaf
        node.value = entry.value
        node.score = entry.score
        node.ownership = entry.ownership
        node.pu = entry.prior.copy()
        node.q = np.full(k, entry.value, dtype=np.float32)  # no child visited: the urgency is the node's value
        node.status = _EXPANDED
        self._nodes += 1

    def _update(self, node: Node, idx: int, dn: float, dw: float) -> None:
        """Add ``dn`` visits and ``dw`` value to edge ``idx`` of ``node``, keeping ``q``, ``pu``, ``n_sum`` and
        ``visited_prior`` in step."""
        # .item() reads a Python float without making a numpy scalar: this runs twice per edge per playout.
        n = node.n
        before = n.item(idx)
        after = before + dn
        n[idx] = after
        values = node.w
        w = values.item(idx) + dw
        values[idx] = w
        node.n_sum += dn
        prior = node.prior.item(idx)
        node.pu[idx] = prior / (1.0 + after)
        if after > 0:
            node.q[idx] = w / after
            if before == 0:
                node.visited_prior += prior
                self._refresh_urgency(node)
        elif before > 0:
            node.visited_prior -= prior
            self._refresh_urgency(node)

    def _refresh_urgency(self, node: Node) -> None:
        """First-play urgency of the unvisited children: the node's value less a reduction that grows with the
        prior mass already visited (Leela Zero's FPU)."""
        config = self.config
        reduction = config.fpu_root_reduction if node is self.root else config.fpu_reduction
        node.q[node.n == 0] = node.value - reduction * math.sqrt(max(node.visited_prior, 0.0))

    def _refresh(self, node: Node) -> None:
        """Recompute what depends on the priors or on being the root (after noise, or a new root)."""
        if node.status != _EXPANDED:
            return
        node.pu = (node.prior / (1.0 + node.n)).astype(np.float32)
        node.visited_prior = float(node.prior[node.n > 0].sum())
        visited = node.n > 0
        node.q = np.where(visited, node.w / np.maximum(node.n, 1.0), 0.0).astype(np.float32)
        self._refresh_urgency(node)

    def _undo(self, path: list[tuple[Node, int]]) -> None:
        vl = self._virtual_loss
        root = self.root
        for node, idx in path:
            if vl:
                self._update(node, idx, -vl, vl)
            if node is root:
                self._root_pending[idx] -= 1

    def _backup(self, path: list[tuple[Node, int]], leaf: Node, value: float, score: float = 0.0) -> None:
        """Replace the virtual loss along ``path`` by ``value`` and add ``score`` (both the leaf's side-to-move
        view)."""
        vl = self._virtual_loss
        leaf.visits += 1
        gain = self._gain
        sign = 1.0 if len(path) % 2 == 0 else -1.0  # the root's view of the leaf
        gain[0] += 1
        gain[1] += sign * value
        gain[2] += value * value
        gain[3] += sign * score
        gain[4] += score * score
        root = self.root
        update = self._update
        for node, idx in reversed(path):
            value = -value  # the parent's view of its child's outcome
            score = -score
            update(node, idx, 1 - vl, value + vl)
            squares = node.w2
            squares[idx] = squares.item(idx) + value * value
            scores = node.s
            scores[idx] = scores.item(idx) + score
            squares = node.s2
            squares[idx] = squares.item(idx) + score * score
            node.visits += 1
            if node is root:
                self._root_pending[idx] -= 1

    # -- reading the tree ----------------------------------------------------------------------------------------

    def candidates(self) -> list[Candidate]:
        """The root's visited moves in the order the search would choose them. Thread-safe, usable mid-search."""
        with self._lock:
            run = self._current
            return self._candidates(run.root_mask if run is not None else None)

    def _candidates(self, mask: np.ndarray | None) -> list[Candidate]:
        root = self.root
        if root.status != _EXPANDED:
            return []
        vl = self._virtual_loss
        pending = self._root_pending if self._root_pending is not None else 0
        n = root.n - vl * pending  # real visits: in-flight leaves removed
        w = root.w + vl * pending
        size = self.root_state.size
        result = []
        for idx in np.flatnonzero(n >= 1):
            if root.blocked is not None and root.blocked[idx]:
                continue
            if mask is not None and not mask[idx]:
                continue
            count = float(n[idx])
            mean = float(w[idx]) / count
            if count >= 2:
                variance = max(0.0, float(root.w2[idx]) / count - mean * mean) * count / (count - 1)
                lcb = mean - _t_quantile(int(count) - 1) * math.sqrt(variance / count)
            else:
                lcb = -1.0  # one visit says nothing
            move = int(root.moves[idx])
            move = PASS if move == size * size else move
            score = float(root.s[idx]) / count
            spread = math.sqrt(max(0.0, float(root.s2[idx]) / count - score * score))
            result.append(Candidate(move=move, visits=int(round(count)), value=mean,
                                    prior=float(root.prior[idx]), lcb=max(-1.0, lcb),
                                    pv=[move] + self._pv(root.children.get(int(idx))), score=score,
                                    score_stdev=spread))
        result.sort(key=lambda c: (-c.visits, -c.value))
        if self.config.lcb and len(result) > 1:
            result = self._lcb_order(result)
        for order, candidate in enumerate(result):
            candidate.order = order
        return result

    def _lcb_order(self, result: list[Candidate]) -> list[Candidate]:
        """Most visits first, except that a move whose lower confidence bound is above the most visited move's
        mean goes first: the bound then separates the two, where LCB over close means ranks noise (a 100-visit
        search choosing by LCB among moves 0.01 apart predicted 26.5% of 9-dan moves, most visits 35.8%). A move
        that both the network and the visits rate well below the top one (under ``lcb_veto_ratio`` of its prior
        and of its visits) is never promoted."""
        config = self.config
        top = result[0]
        floor = max(2, config.lcb_min_visit_ratio * top.visits)
        veto = config.lcb_veto_ratio
        promoted = [c for c in result[1:] if c.visits >= floor and c.lcb > top.value
                    and not (c.prior < veto * top.prior and c.visits < veto * top.visits)]
        if not promoted:
            return result
        best = max(promoted, key=lambda c: c.lcb)
        return [best] + [c for c in result if c is not best]

    def ownership(self) -> np.ndarray | None:
        """The final owner of each point averaged over the search tree (float32 [N*N] in [-1, 1], black's view), as
        KataGo averages it: each node's own ownership weighs one visit and each child's average as many as the
        child has. None when the network has no ownership head. Thread-safe, usable mid-search: the weights are
        read under the tree lock (scalars only) and the arrays summed outside it, so a GUI asking often does not
        stall the workers."""
        with self._lock:
            if self.root.ownership is None:
                return None
            terms: list[tuple[float, np.ndarray]] = []
            self._ownership_terms(self.root, 1.0, _OWNERSHIP_DEPTH, terms)
        total = np.zeros(len(terms[0][1]), dtype=np.float64)
        for weight, owned in terms:
            total += weight * owned.astype(np.float64)  # float16 times a Python float stays float16 in numpy 2
        return np.clip(total, -1.0, 1.0).astype(np.float32)  # the weights sum to 1 up to rounding

    def _ownership_terms(self, node: Node, weight: float, depth: int, terms: list) -> None:
        """``weight`` times ``node``'s tree average, as (weight, ownership) terms; children with fewer than
        ``_OWNERSHIP_MIN_VISITS`` visits, and plies past ``depth``, count through their parent's own ownership."""
        children = [c for c in node.children.values()
                    if c.ownership is not None and c.visits >= _OWNERSHIP_MIN_VISITS] if depth > 0 else []
        total = 1.0 + sum(c.visits for c in children)
        terms.append((weight / total, node.ownership))
        for child in children:
            self._ownership_terms(child, weight * child.visits / total, depth - 1, terms)

    def _pv(self, node: Node | None) -> list[int]:
        """The most visited line below ``node``."""
        pv: list[int] = []
        size = self.root_state.size
        while node is not None and node.status == _EXPANDED and len(pv) < _PV_DEPTH:
            if node.n_sum <= 0:
                break
            idx = int(node.n.argmax())
            if node.n[idx] < 1:
                break
            move = int(node.moves[idx])
            pv.append(PASS if move == size * size else move)
            node = node.children.get(idx)
        return pv

    def root_value(self) -> float:
        """Mean value of the root's visits, side to move's view (the net's value if unvisited)."""
        with self._lock:
            root = self.root
            if root.status != _EXPANDED or root.visits <= 1:
                return root.value
            total = float(np.sum(root.w)) + self._virtual_loss * float(np.sum(self._root_pending))
            return (root.value + total) / root.visits

    def root_priors(self) -> dict[int, float]:
        """The root's priors by move (flat point or PASS); empty before the root is expanded."""
        with self._lock:
            root = self.root
            if root.status != _EXPANDED:
                return {}
            size = self.root_state.size
            return {PASS if int(m) == size * size else int(m): float(p) for m, p in zip(root.moves, root.prior)}

    def tree_nodes(self) -> int:
        """Upper bound on the expanded nodes alive in the tree (expansions since the tree was started afresh)."""
        return self._nodes


_UNBOUNDED = 1 << 62

__all__ = ["Search", "SearchResult", "Candidate", "Node", "TranspositionTable", "terminal_value"]

"""The search tree: nodes and their edge statistics, the table of network results by position, PUCT selection under
virtual loss, backup, and reuse of the tree from move to move.

Layer: above game; knows nothing of threads, and of the network only the shape of its answer (``expansions``):
``engine.play.search`` drives it. Values are in [-1, 1]; an edge's statistics are kept in its parent's arrays from
the parent's side-to-move view, so selection is a handful of numpy operations per level.

With a score utility (``SearchConfig.score_utility``) the tree ranks moves by a leaf's utility, its value plus
KataGo's saturating function of its score (``ScoreUtility``), and keeps the pure values beside it for what is
reported: ``w`` then sums utilities and ``v`` values. The dynamic part is centred on the root's expected score, set
anew each run (``Tree.start_run``); a kept node's sums are moved to the new centre when a run first reaches it.
KataGo's subtree value bias correction (``SearchConfig.subtree_value_bias``, ``Tree._backup_biased``) changes a
node's own utility after the fact; the change is carried up the path, so that each edge still sums its playouts'.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from tabula.engine.config import SearchConfig
from tabula.engine.net.evaluator import Evaluation
from tabula.engine.net.features import komi_points
from tabula.engine.play import value_bias
from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import BLACK, PASS
from tabula.engine.rules.interface import Game, game_key

# A node's status: not yet evaluated, at the network, expanded, or a finished game.
UNEXPANDED, PENDING, EXPANDED, TERMINAL = range(4)


class Node:
    """One position in the tree. The statistics of the edge leading here live in the parent's arrays.

    Set once at expansion: ``moves`` (int16 [k] policy indices of the children, pass = N*N), ``prior`` (float32 [k],
    shared with the transposition table until changed), ``value`` (the net's value, side to move's view).
    Changed under the search lock: ``n``/``w``/``w2`` (float32 [k]: visits, value sum and sum of squares of each
    edge, this node's side-to-move view; ``n`` and ``w`` include virtual visits counted as losses; with a score
    utility ``w``/``w2`` sum utilities, and ``v`` (float32 [k], None without one) the values alone, no virtual loss),
    ``utility`` (the net's value plus the score utility of its score at the current centre: first-play urgency),
    ``n_sum`` (sum of ``n``), ``visits`` (real visits of this node: 1 for its own evaluation plus its children's),
    ``u_sum``/``u_sq`` (the sum and sum of squares of the utilities those ``visits`` brought, this node's view: the
    spread that scales its exploration),
    ``visited_prior`` (prior mass of children with ``n > 0``, for first-play urgency), ``children``
    (edge index -> Node, created on first descent), ``blocked`` (bool [k] of edges found illegal by superko).
    Kept in step with ``n``/``w`` so that selection is two array operations: ``q`` (float32 [k]: ``w / n``, or
    the first-play urgency where ``n == 0``) and ``pu`` (float32 [k]: ``prior / (1 + n)``).
    """

    __slots__ = ("status", "moves", "prior", "n", "w", "w2", "s", "s2", "v", "q", "pu", "n_sum", "visits", "u_sum",
                 "u_sq", "value", "utility", "epoch", "score", "ownership", "visited_prior", "children", "blocked",
                 "averaged", "bias_key", "bias", "bias_delta", "bias_weight")

    def __init__(self) -> None:
        self.status = UNEXPANDED
        self.moves: np.ndarray | None = None
        self.prior: np.ndarray | None = None
        self.n: np.ndarray | None = None
        self.w: np.ndarray | None = None
        self.w2: np.ndarray | None = None
        self.s: np.ndarray | None = None  # score sums of each edge (points, this node's side-to-move view)
        self.s2: np.ndarray | None = None  # ... and sums of squares
        self.v: np.ndarray | None = None  # value sums of each edge where w sums utilities (None: w is the value)
        self.q: np.ndarray | None = None
        self.pu: np.ndarray | None = None
        self.n_sum = 0.0
        self.visits = 0
        self.u_sum = 0.0
        self.u_sq = 0.0
        self.value = 0.0
        self.utility = 0.0  # value + score utility of ``score``, for first-play urgency (== value without one)
        self.epoch = 0  # the Tree.epoch whose score centre ``utility`` and ``w`` are reckoned at
        self.score = 0.0  # the net's final margin (points, side to move's view); the count at a finished game
        self.ownership: np.ndarray | None = None  # the net's ownership, black's view (float16 [N*N]), if it has one
        self.visited_prior = 0.0
        self.children: dict[int, Node] = {}
        self.blocked: np.ndarray | None = None
        self.averaged = False  # priors and value are the root's own evaluation (Search._average_root)
        # The subtree value bias (Tree._rebias): the node's bucket (None: none), the correction its own evaluation
        # carries in the sums above it, and what it last added to its bucket's table entry.
        self.bias_key: tuple | None = None
        self.bias = 0.0
        self.bias_delta = 0.0
        self.bias_weight = 0.0

    @property
    def expanded(self) -> bool:
        return self.status == EXPANDED

    def child(self, move_index: int) -> "Node | None":
        """The child reached by policy index ``move_index``, if it exists."""
        if self.moves is None:
            return None
        where = np.flatnonzero(self.moves == move_index)
        return self.children.get(int(where[0])) if where.size else None


@dataclass(frozen=True)
class Expansion:
    """What a network evaluation gives a position's node, as the table keeps it: its children and their priors,
    and its value."""

    moves: np.ndarray  # int16 [k] policy indices with nonzero prior, a pass always included where the game has one
    prior: np.ndarray  # float32 [k]
    value: float  # side to move's view
    score: float = 0.0  # side to move's view, points (0 from networks without a score head)
    ownership: np.ndarray | None = None  # float16 [N*N], black's view


_TWO_OVER_PI = 2.0 / math.pi


@dataclass(frozen=True)
class ScoreUtility:
    """KataGo's score utility for one run: ``static``·atan(s / ``static_scale``) + ``dynamic``·atan((s − c) /
    ``dynamic_scale``) of a final margin s (points), where c is ``centre`` (points, the root's side-to-move view)
    seen from the same side as s. Odd in (s, c): the other side's view of a utility is its negative."""

    static: float  # the configured weight times 2/π: each part is within ± its weight
    static_scale: float
    dynamic: float  # likewise
    dynamic_scale: float
    centre: float

    @classmethod
    def for_root(cls, config: SearchConfig, size: int, expected_score: float) -> "ScoreUtility":
        """The utility of a run at a root whose expected score is ``expected_score`` (points, its side to move's
        view) on a board of ``size``: the centre is moved ``dynamic_score_zero_weight`` of the way to 0, by at most
        ``dynamic_score_scale``·N points (KataGo's recentScoreCenter)."""
        cap = config.dynamic_score_scale * size
        centre = expected_score * (1.0 - config.dynamic_score_zero_weight)
        centre = min(max(centre, expected_score - cap), expected_score + cap)
        return cls(static=config.static_score_utility * _TWO_OVER_PI, static_scale=2.0 * size,
                   dynamic=config.dynamic_score_utility * _TWO_OVER_PI, dynamic_scale=cap, centre=centre)

    def term(self, score: float, sign: float) -> float:
        """The utility of final margin ``score`` in the view of a node whose side to move is the root's (``sign``
        +1.0) or the other one (-1.0)."""
        return (self.static * math.atan(score / self.static_scale)
                + self.dynamic * math.atan((score - sign * self.centre) / self.dynamic_scale))

    def terms(self, scores: np.ndarray, sign: float) -> np.ndarray:
        """``term`` of each of ``scores`` (float [k])."""
        return (self.static * np.arctan(scores / self.static_scale)
                + self.dynamic * np.arctan((scores - sign * self.centre) / self.dynamic_scale))


def expansions(states: list[Game], evaluation: Evaluation, eye_filter: bool,
               ownership_score: float = 0.0, atari_prior: float = 0.0, atari_min_stones: int = 1,
               optimistic_policy: bool = False) -> list[Expansion]:
    """The network's answer for each of ``states`` as the tree expands it: the children are the moves with a
    nonzero prior, and the pass in a game that has one. ``eye_filter``: without the moves that fill the mover's own
    single-point eyes, in a game that has them (the state class's ``own_eye_masks``). ``ownership_score``: the
    share of each score taken from the ownership (``SearchConfig.ownership_score``). ``atari_prior``: the least
    prior of a legal move at the only liberty of strings in atari of ``atari_min_stones`` stones or more, in a game
    that has them (the state class's ``atari_stakes``; ``SearchConfig.atari_prior``). ``optimistic_policy``: the
    priors from the evaluation's optimistic policy where it has one (``SearchConfig.optimistic_policy``). Raises
    ValueError for an answer of the wrong shape."""
    chosen = evaluation.policy_optimistic if optimistic_policy else None
    policy = np.asarray(evaluation.policy if chosen is None else chosen, dtype=np.float32)
    values = np.asarray(evaluation.value, dtype=np.float32)
    first = states[0]
    width = first.policy_size
    if policy.shape != (len(states), width) or values.shape != (len(states),):
        raise ValueError(f"the evaluator answered {len(states)} positions with policy {policy.shape} and value "
                         f"{values.shape}, expected ({len(states)}, {width}) and ({len(states)},)")
    own_eyes = getattr(type(first), "own_eye_masks", None) if eye_filter else None
    if own_eyes is not None:
        policy = _without_own_eyes(policy, own_eyes(states))
    stakes = getattr(type(first), "atari_stakes", None) if atari_prior > 0 else None
    if stakes is not None:
        policy = _with_atari_floor(policy, states, stakes(states) >= atari_min_stones, atari_prior)
    # Found for the whole batch at once.
    present = policy > 0.0
    if width > first.size * first.size:
        present[:, -1] = True  # the pass
    rows, columns = np.nonzero(present)
    priors = policy[rows, columns]
    columns = columns.astype(np.int16)
    ends = np.cumsum(np.count_nonzero(present, axis=1)).tolist()
    found = []
    start = 0
    scores = [0.0] * len(states) if evaluation.score is None else np.asarray(evaluation.score).tolist()
    if ownership_score > 0 and evaluation.score is not None and evaluation.ownership is not None:
        counted = ownership_margins(states, evaluation.ownership)
        scores = [(1.0 - ownership_score) * head + ownership_score * area for head, area in zip(scores, counted)]
    owners: list[np.ndarray | None] = [None] * len(states)
    if evaluation.ownership is not None:
        black = np.array([1.0 if state.to_move == BLACK else -1.0 for state in states], dtype=np.float32)
        owners = list((np.asarray(evaluation.ownership, dtype=np.float32) * black[:, None]).astype(np.float16))
    for end, value, score, owner in zip(ends, values.tolist(), scores, owners):
        found.append(Expansion(columns[start:end], priors[start:end], value, score, owner))
        start = end
    return found


def ownership_margins(states: list[Game], ownership: np.ndarray) -> list[float]:
    """The final margin (points, side to move's view) that ``ownership`` (float [B, N*N], side to move's view,
    in [-1, 1]) predicts for each of ``states`` under area counting: the points it owns less the opponent's, plus
    its komi (the handicap bonus in it)."""
    owned = np.asarray(ownership, dtype=np.float64).sum(axis=1)
    return [float(points) + komi_points(state) for points, state in zip(owned, states)]


def _without_own_eyes(policy: np.ndarray, eyes: np.ndarray) -> np.ndarray:
    """``policy`` (float32 [B, N*N+1], Go's) with the moves that fill the mover's own single-point eyes (``eyes``,
    bool [B, N*N]) removed, and the rows that lost one renormalised.

    A network that has not learned the endgame fills its own eyes and dies; no strong move does it (an eye point
    touches no opponent stone, so filling it never captures). Pass keeps its prior, and takes everything when
    nothing else is left, as the random player passes."""
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


def _with_atari_floor(policy: np.ndarray, states: list[Game], at_stake: np.ndarray, floor: float) -> np.ndarray:
    """``policy`` (float32 [B, N*N+1], Go's) with each legal move of ``at_stake`` (bool [B, N*N]: the points that
    capture or give a liberty to a string in atari) given at least ``floor`` of prior, and the rows that changed
    renormalised.

    Why: the network's prior for taking a big group it never expected to be in atari can be about 0 (13×13, GNU Go
    captured 13 stones at a point of prior 0.000), so the search never plays it out and rates a lost position as
    won; at a floor the search tries such a move within its first visits and keeps it only on its value."""
    rows = np.flatnonzero(at_stake.any(axis=1))
    if rows.size == 0:
        return policy
    policy = policy.copy()  # the evaluator's array is left alone
    for row in rows.tolist():
        state = states[row]
        changed = False
        for point in np.flatnonzero(at_stake[row]).tolist():
            if policy[row, point] < floor and state.legal(point):
                policy[row, point] = floor
                changed = True
        if changed:
            policy[row] /= policy[row].sum()
    return policy


class TranspositionTable:
    """Network results by ``search.table_key`` (board size, position hash: stones, side to move, ko point; then
    what the encoding reads beyond those, Go's passes and superko bans), least recently used evicted first.

    Not thread-safe on its own: the search only touches it under its tree lock.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._entries: OrderedDict[tuple, Expansion] = OrderedDict()
        self.hits = 0
        self.misses = 0
        # The game and rules of the entries (the state's class, and its ``rules``): the key has no komi, so a tree
        # that meets other rules clears the table first (Tree.set_position). None: no entries yet.
        self.rules: tuple | None = None

    def get(self, key: tuple) -> Expansion | None:
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry

    def put(self, key: tuple, entry: Expansion) -> None:
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
class _Link:
    """A kept ancestor of the root: its position and the edges from it to the next kept root (or the root)."""

    state: Game
    node: Node
    edges: list[tuple[Node, int]] = field(default_factory=list)


Path = list[tuple[Node, int]]  # the edges from the root to a node: (parent, edge index)


class Tree:
    """The tree of one game's search, its table of network results, and the kept ancestors of its root.

    Not thread-safe: the search calls it only under its lock. ``virtual_loss`` is set by the search for each run
    (no leaf is in flight between runs); ``root_pending`` (int32 [k]) counts the leaves in flight below each root
    edge, so that readers can take their virtual loss back out.
    """

    def __init__(self, config: SearchConfig, cache: TranspositionTable | None = None):
        self.config = config
        # ``cache``: a table kept from tree to tree (the analysis engine's searches, one at a time per table)
        self.cache = cache if cache is not None else TranspositionTable(config.cache_entries)
        self.root = Node()
        self.root_state: Game | None = None
        self.virtual_loss = config.virtual_loss
        self.root_pending: np.ndarray | None = None
        self.nodes = 0  # expansions since the tree was last started afresh: bounds the live nodes
        # KataGo's subtree value bias correction (``_rebias``): its share, and its table, bucket -> [sum of the
        # weighted differences between the search below a node and the network's utility of it, sum of weights]
        self.value_bias = config.subtree_value_bias
        self.bias_table: dict[tuple, list[float]] = {}
        # With a score utility or the bias correction (fixed for the tree's life): every node keeps its values beside
        # its utilities (``v``), which those change.
        self.keeps_values = config.score_utility or self.value_bias > 0
        self.score_utility: ScoreUtility | None = None  # this run's (start_run); None: utility = value
        self.scored = False  # some utility in the tree had a score term: values are read from ``v``, not ``w``
        self.epoch = 0  # counts the runs' score centres: a node reckoned at another one is moved to this one's
        self._ancestors: list[_Link] = []  # kept earlier roots, oldest first, for undo
        # visits, utility sum, utility square sum, score sum, score square sum, value sum backed up through the root
        # since it became root
        self._gain = [0, 0.0, 0.0, 0.0, 0.0, 0.0]
        self._clean_root_prior: np.ndarray | None = None  # the root's priors before noise

    # -- positioning and reuse -----------------------------------------------------------------------------------

    def set_position(self, state: Game) -> bool:
        """Make ``state`` the root, reusing the subtree that matches its move sequence. Returns whether it did.

        Matches the current root or a kept ancestor (undo, or a GUI re-sending the game) whose moves are a prefix
        of ``state.moves``, with the same size, rules, setup stones and side to move along the way.
        """
        self.restore_root_prior()
        self._flush_gain()
        rules = (type(state), getattr(state, "rules", None))
        if rules != self.cache.rules:
            # A network of leelaz-18+komi reads the komi (and handicap bonus), and test evaluators score with it: the
            # table's key, (size, position hash), has no komi, so results under other rules never meet in it.
            self.cache.clear()
            self.cache.rules = rules
        chain = self._ancestors + ([_Link(self.root_state, self.root)] if self.root_state is not None else [])
        if not self.config.reuse_tree:
            chain = []
        for depth in range(len(chain) - 1, -1, -1):
            link = chain[depth]
            edges = self._walk(link, state)
            if edges is None:
                continue
            new_root = edges[-1][0].children[edges[-1][1]] if edges else link.node
            if new_root.status not in (EXPANDED, UNEXPANDED):
                continue
            kept = chain[:depth + 1]
            kept[-1] = _Link(link.state, link.node, edges)
            if not edges:
                kept.pop()
            self._ancestors = self._trim(kept, len(state.moves))
            self._set_root(new_root, state)
            return True
        self._ancestors = []
        self.nodes = 0
        self.scored = False
        self._set_root(Node(), state)
        return False

    def _walk(self, link: _Link, state: Game) -> Path | None:
        """Edges from ``link``'s node to ``state``'s position, or None when the tree cannot reach it."""
        old = link.state
        if (len(old.moves) > len(state.moves) or game_key(old) != game_key(state)
                or state.moves[:len(old.moves)] != old.moves):
            return None
        node, to_move, edges = link.node, old.to_move, []
        pass_index = state.size * state.size
        for color, move in state.moves[len(old.moves):]:
            if color != to_move or node.status != EXPANDED:
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

    def _set_root(self, node: Node, state: Game) -> None:
        previous, self.root = self.root, node
        self.refresh(previous)  # its unvisited children lose the root's first-play reduction
        self.root_state = state.copy()
        self._gain = [0, 0.0, 0.0, 0.0, 0.0, 0.0]
        self.root_pending = None if node.moves is None else np.zeros(len(node.moves), dtype=np.int32)
        self._clean_root_prior = None

    def _flush_gain(self) -> None:
        """Add what was backed up through the root to the edges above it, so kept ancestors stay consistent."""
        visits, utility, squares, score, score_squares, value = self._gain
        self._gain = [0, 0.0, 0.0, 0.0, 0.0, 0.0]
        if not visits or not self._ancestors:
            return
        edges = [edge for link in self._ancestors for edge in link.edges]
        for node, idx in reversed(edges):
            utility = -utility  # the parent's view
            value = -value
            score = -score
            self.update(node, idx, visits, utility)
            node.w2[idx] += squares
            node.s[idx] += score
            node.s2[idx] += score_squares
            if node.v is not None:
                node.v[idx] += value
            node.visits += visits
            node.u_sum += utility
            node.u_sq += squares

    def clear(self) -> None:
        """Forget the tree and the cached network results."""
        self.cache.clear()
        self.root = Node()
        self.root_state = None
        self._ancestors = []
        self._gain = [0, 0.0, 0.0, 0.0, 0.0, 0.0]
        self.nodes = 0
        self.scored = False
        self.bias_table = {}

    # -- the root's priors ---------------------------------------------------------------------------------------

    def mix_root_noise(self, noise: np.ndarray | None, weight: float, temperature: float = 1.0) -> None:
        """The root's priors for one run: its clean ones, or those raised to the power 1/``temperature`` and
        renormalised (KataGo's rootPolicyTemperature: above 1 a wider search), then mixed with ``noise`` (float
        [k], summing to 1) at ``weight``. Both belong to one run at one root: the next run or new root takes them
        back out."""
        self.restore_root_prior()
        root = self.root
        if noise is not None or temperature != 1.0:
            self._clean_root_prior = prior = root.prior
            if temperature != 1.0:
                prior = np.power(prior.astype(np.float64), 1.0 / temperature)
                prior = prior / max(float(prior.sum()), 1e-30)
            if noise is not None:
                prior = (1.0 - weight) * prior + weight * noise
            root.prior = prior.astype(np.float32)
        self.refresh(root)  # new priors, and the root's own first-play reduction

    def restore_root_prior(self) -> None:
        """Take the noise back out of the root's priors."""
        if self._clean_root_prior is not None:
            self.root.prior = self._clean_root_prior
            self._clean_root_prior = None
            self.refresh(self.root)

    def average_root(self, averaged: Expansion) -> None:
        """Give the expanded root the priors, value, score and ownership of ``averaged``, an evaluation of the
        same position as a root takes it (over the 8 symmetries, by default; never the optimistic policy)."""
        root, state = self.root, self.root_state
        # The averaged policy has the same support (legal non-eye moves and pass); keep the root's edges.
        lookup = np.zeros(state.policy_size, dtype=np.float32)
        lookup[averaged.moves] = averaged.prior
        prior = lookup[root.moves]
        total = float(prior.sum())
        if total > 0:
            root.prior = (prior / total).astype(np.float32)
        # The root's own evaluation among the utilities it has seen becomes the mean (no leaf is in flight here).
        root.u_sum += averaged.value - root.utility
        root.u_sq += averaged.value * averaged.value - root.utility * root.utility
        root.value = root.utility = averaged.value  # start_run adds the score utility to the urgency
        root.score, root.ownership = averaged.score, averaged.ownership
        root.averaged = True

    # -- the score utility ---------------------------------------------------------------------------------------

    def start_run(self, has_score: bool) -> None:
        """Set the score utility of a run at the expanded root, centred on the root's expected score; ``has_score``:
        whether the network gives scores (without, utility = value). Kept nodes are moved to the new centre when
        the run first reaches them (``descend``), the root now."""
        root = self.root
        if not self.keeps_values or root.status != EXPANDED:
            return
        self.epoch += 1
        self.score_utility = None
        if has_score:
            expected = (root.score + float(root.s.sum())) / max(1, root.visits)
            self.score_utility = ScoreUtility.for_root(self.config, self.root_state.size, expected)
            self.scored = True
        if self.value_bias:
            # each run learns its table afresh; kept nodes drop their corrections as they are rescored
            self.bias_table = {}
            self.scored = True
        self._rescore(root, 1.0)

    def _rescore(self, node: Node, sign: float) -> None:
        """Move ``node``'s utilities to this run's score utility: its own (first-play urgency), and each visited
        edge's sum, from its values and its mean score, the spread of its utilities kept. ``sign``: +1.0 where the
        node's side to move is the root's. Called where no leaf below it is in flight (its first descent in a run),
        so that ``n`` counts real visits."""
        node.epoch = self.epoch
        node.bias = node.bias_delta = node.bias_weight = 0.0  # the sums are rebuilt from values and scores alone
        scorer = self.score_utility
        node.utility = node.value + (scorer.term(node.score, sign) if scorer is not None else 0.0)
        visited = node.n > 0
        if visited.any():
            n = node.n[visited]
            before = node.w[visited]
            after = node.v[visited]
            if scorer is not None:
                after = after + n * scorer.terms(node.s[visited] / n, sign)
            node.w[visited] = after
            node.w2[visited] += (after * after - before * before) / n  # the same variance about the new mean
        node.u_sum = node.utility + float(node.w[visited].sum())
        node.u_sq = node.utility * node.utility + float(node.w2[visited].sum())
        self.refresh(node)

    # -- one playout: select, expand, back up --------------------------------------------------------------------

    def descend(self, root_mask: np.ndarray | None) -> tuple[Node, Path, Game] | None:
        """Walk from the root by PUCT to a node that is not expanded, adding virtual loss along the way: that node,
        the path to it and its position. ``root_mask`` (bool [k]): the root edges that may be chosen (None: all).
        None when an edge proved illegal (superko): it is blocked and the virtual loss taken back; try again."""
        config = self.config
        vl = self.virtual_loss
        root = node = self.root
        state = self.root_state.copy()
        pass_index = state.size * state.size  # never a child in a game without a pass
        path: Path = []
        c_puct = config.c_puct
        c_log, c_base = config.cpuct_log, config.cpuct_log_base
        stdev_scale = config.cpuct_utility_stdev_scale
        fpu_mean = config.fpu_search_mean
        buckets = self.value_bias > 0
        update = self.update
        rescore, epoch = self.keeps_values, self.epoch
        while node.status == EXPANDED:
            if rescore and node.epoch != epoch:
                self._rescore(node, 1.0 if len(path) % 2 == 0 else -1.0)
            if fpu_mean and node.visits > 1:
                self._refresh_urgency(node)  # the mean it starts from moves with every visit
            at_root = node is root
            # Q + c·P·√N/(1+n): q and pu are kept up to date by update.
            explore = c_puct + c_log * math.log((node.n_sum + c_base) / c_base) if c_log else c_puct
            if stdev_scale:
                explore *= self._spread_factor(node)
            score = node.pu * (explore * math.sqrt(node.n_sum if node.n_sum > 1.0 else 1.0))
            score += node.q
            if node.blocked is not None:
                score[node.blocked] = -np.inf
            if at_root and root_mask is not None:
                score[~root_mask] = -np.inf
            idx = int(score.argmax())
            move = node.moves.item(idx)
            key = None
            if buckets and idx not in node.children:
                key = value_bias.bucket(state, PASS if move == pass_index else move)  # read before the move
            try:
                state.play(PASS if move == pass_index else move)
            except IllegalMoveError:
                # Superko along this line (or a cached policy from another history): never choose it again here.
                blocked = np.zeros(len(node.n), dtype=bool) if node.blocked is None else node.blocked
                blocked[idx] = True
                node.blocked = blocked
                self.undo(path)
                return None
            if vl:
                update(node, idx, vl, -vl)
            if at_root:
                self.root_pending[idx] += 1
            path.append((node, idx))
            child = node.children.get(idx)
            if child is None:
                child = node.children[idx] = Node()
                child.bias_key = key
            node = child
        return node, path, state

    def _spread_factor(self, node: Node) -> float:
        """KataGo's variance-scaled cPUCT: 1 + scale·(σ/σ₀ - 1), where σ is the spread of the utilities backed up
        through ``node`` (shrunk towards the prior σ₀ by a prior weight of visits). Why: where every move's value is
        the same (a handicap game, a decided one), the utilities differ by fractions of a point of score, and a
        constant exploration weight spreads the visits by prior alone; a small spread explores less, so the search
        still ranks those moves. A wild position (a big fight) explores more."""
        config = self.config
        prior = config.cpuct_utility_stdev_prior
        visits = node.visits
        if visits <= 1:
            return 1.0
        mean = node.u_sum / visits
        mean_sq = mean * mean
        square_mean = max(node.u_sq / visits, mean_sq)  # float sums can dip below the mean's square
        weight = config.cpuct_utility_stdev_prior_weight
        variance = ((mean_sq + prior * prior) * weight + square_mean * visits) / (weight + visits - 1.0) - mean_sq
        spread = math.sqrt(variance) if variance > 0.0 else 0.0
        return 1.0 + config.cpuct_utility_stdev_scale * (spread / prior - 1.0)

    def expand(self, node: Node, expansion: Expansion, depth: int = 0) -> None:
        """Give ``node``, ``depth`` plies below the root, its network result."""
        k = len(expansion.moves)
        node.moves = expansion.moves
        node.prior = expansion.prior
        if self.keeps_values:
            node.n, node.w, node.w2, node.s, node.s2, node.v = np.zeros((6, k), dtype=np.float32)
        else:
            node.n, node.w, node.w2, node.s, node.s2 = np.zeros((5, k), dtype=np.float32)  # one allocation a leaf
        node.value = node.utility = expansion.value
        node.score = expansion.score
        node.ownership = expansion.ownership
        scorer = self.score_utility
        if scorer is not None:
            node.utility += scorer.term(expansion.score, 1.0 if depth % 2 == 0 else -1.0)
        node.epoch = self.epoch
        node.pu = expansion.prior.copy()
        node.q = np.full(k, node.utility, dtype=np.float32)  # no child visited: the urgency is the node's utility
        node.status = EXPANDED
        self.nodes += 1

    def update(self, node: Node, idx: int, dn: float, dw: float) -> None:
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
        prior mass already visited (Leela Zero's FPU); with ``fpu_search_mean`` the value moves towards the mean
        utility of the node's visits by the square of that mass (KataGo's)."""
        config = self.config
        reduction = config.fpu_root_reduction if node is self.root else config.fpu_reduction
        visited = max(node.visited_prior, 0.0)
        base = node.utility
        if config.fpu_search_mean and node.visits > 1:
            base += min(1.0, visited * visited) * (node.u_sum / node.visits - node.utility)
        node.q[node.n == 0] = base - reduction * math.sqrt(visited)

    def refresh(self, node: Node) -> None:
        """Recompute what depends on the priors or on being the root (after noise, or a new root)."""
        if node.status != EXPANDED:
            return
        node.pu = (node.prior / (1.0 + node.n)).astype(np.float32)
        node.visited_prior = float(node.prior[node.n > 0].sum())
        visited = node.n > 0
        node.q = np.where(visited, node.w / np.maximum(node.n, 1.0), 0.0).astype(np.float32)
        self._refresh_urgency(node)

    def undo(self, path: Path) -> None:
        """Take back the virtual loss of a descent whose leaf will not be backed up."""
        vl = self.virtual_loss
        root = self.root
        for node, idx in path:
            if vl:
                self.update(node, idx, -vl, vl)
            if node is root:
                self.root_pending[idx] -= 1

    def backup(self, path: Path, leaf: Node, value: float, score: float = 0.0) -> None:
        """Replace the virtual loss along ``path`` by the leaf's utility (``value`` plus the score utility of
        ``score``, the final margin; both the leaf's side-to-move view), and add ``value`` and ``score``."""
        if self.value_bias:
            self._backup_biased(path, leaf, value, score)
            return
        vl = self.virtual_loss
        leaf.visits += 1
        gain = self._gain
        sign = 1.0 if len(path) % 2 == 0 else -1.0  # the root's view of the leaf
        utility = value
        scorer = self.score_utility
        if scorer is not None:
            utility = value + scorer.term(score, sign)
        keep = self.keeps_values
        leaf.u_sum += utility
        leaf.u_sq += utility * utility
        gain[0] += 1
        gain[1] += sign * utility
        gain[2] += utility * utility
        gain[3] += sign * score
        gain[4] += score * score
        gain[5] += sign * value
        root = self.root
        update = self.update
        for node, idx in reversed(path):
            utility = -utility  # the parent's view of its child's outcome
            value = -value
            score = -score
            update(node, idx, 1 - vl, utility + vl)
            square = utility * utility
            squares = node.w2
            squares[idx] = squares.item(idx) + square
            scores = node.s
            scores[idx] = scores.item(idx) + score
            squares = node.s2
            squares[idx] = squares.item(idx) + score * score
            if keep:
                values = node.v
                values[idx] = values.item(idx) + value
            node.visits += 1
            node.u_sum += utility
            node.u_sq += square
            if node is root:
                self.root_pending[idx] -= 1

    # -- the subtree value bias ----------------------------------------------------------------------------------

    def _backup_biased(self, path: Path, leaf: Node, value: float, score: float) -> None:
        """``backup`` with KataGo's subtree value bias correction: a new leaf's utility carries its bucket's
        correction, and each node on the way up brings its bucket's entry up to date with what the search below it
        now says (``_rebias``); where that moves the correction its own evaluation carries, the change is added to
        every edge above it as well, so that each edge still sums the utilities of the playouts through it."""
        vl = self.virtual_loss
        leaf.visits += 1
        sign = 1.0 if len(path) % 2 == 0 else -1.0  # the root's view of the leaf
        utility = value
        scorer = self.score_utility
        if scorer is not None:
            utility = value + scorer.term(score, sign)
        if leaf.visits == 1 and leaf.status != TERMINAL and leaf.bias_key is not None:
            entry = self.bias_table.get(leaf.bias_key)
            if entry is not None and entry[1] > 1e-3:
                leaf.bias = self.value_bias * entry[0] / entry[1]
                utility += leaf.bias
        leaf.u_sum += utility
        leaf.u_sq += utility * utility
        shift = shift_sq = 0.0  # changes of the nodes' own corrections below: utility (this level's view), squares
        square = utility * utility
        root = self.root
        update = self.update
        keep = self.keeps_values
        child = leaf
        for node, idx in reversed(path):
            if child is not leaf and child.bias_key is not None:
                change, change_sq = self._rebias(child)
                shift += change
                shift_sq += change_sq
            utility, shift, value, score = -utility, -shift, -value, -score  # the parent's view
            total = utility + shift
            square = utility * utility + shift_sq
            update(node, idx, 1 - vl, total + vl)
            node.w2[idx] += square
            node.s[idx] += score
            node.s2[idx] += score * score
            if keep:
                node.v[idx] += value
            node.visits += 1
            node.u_sum += total
            node.u_sq += square
            if node is root:
                self.root_pending[idx] -= 1
            child = node
        gain = self._gain
        gain[0] += 1
        gain[1] += utility + shift  # the root's view, as every edge above it sees the playout
        gain[2] += square
        gain[3] += score
        gain[4] += score * score
        gain[5] += value

    def _rebias(self, node: Node) -> tuple[float, float]:
        """Bring ``node``'s share of its bucket's entry up to date (its children's mean utility less the network's
        utility of it, weighted by its children's visits to the power ``subtree_value_bias_exponent``) and give its
        own evaluation the bucket's new correction. Returns the change of that evaluation's utility and of its square,
        which the sums above it take on (node's view; the caller has already added this playout to the node)."""
        children = node.visits - 1
        if children <= 0:
            return 0.0, 0.0
        own = node.utility + node.bias
        weight = children ** self.config.subtree_value_bias_exponent
        delta = ((node.u_sum - own) / children - node.utility) * weight
        entry = self.bias_table.get(node.bias_key)
        if entry is None:
            entry = self.bias_table[node.bias_key] = [0.0, 0.0]
        entry[0] += delta - node.bias_delta
        entry[1] += weight - node.bias_weight
        node.bias_delta, node.bias_weight = delta, weight
        bias = self.value_bias * entry[0] / entry[1] if entry[1] > 1e-3 else 0.0
        change = bias - node.bias
        if change == 0.0:
            return 0.0, 0.0
        node.bias = bias
        change_sq = (node.utility + bias) ** 2 - own * own
        node.u_sum += change
        node.u_sq += change_sq
        return change, change_sq


__all__ = ["Node", "Expansion", "ScoreUtility", "TranspositionTable", "Tree", "Path", "expansions", "UNEXPANDED",
           "PENDING", "EXPANDED", "TERMINAL"]

"""What a search found, read from its tree: the root's moves in the order the search would choose them (visits, and
the lower confidence bound where it separates them), principal variations, the tree's value and ownership.

Layer: above the tree (``engine.play.tree``); the search calls these under its lock. Values are in [-1, 1] and
scores in points, the root side to move's view; ownership is black's view.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tabula.engine.config import SearchConfig
from tabula.engine.play.tree import EXPANDED, Node, Tree
from tabula.engine.rules.coords import PASS

PV_DEPTH = 24  # longest principal variation reported
OWNERSHIP_DEPTH = 4  # plies of the tree averaged into the ownership; deeper nodes count through their ancestor
OWNERSHIP_MIN_VISITS = 2  # a child with fewer visits adds nothing its parent's evaluation does not


@dataclass
class Candidate:
    """One root move as the search sees it. ``value`` and ``lcb`` are in [-1, 1], the root side to move's view.

    ``utility`` and ``utility_lcb`` are what the search ranks by: the value plus the score utility (the same as
    ``value`` and ``lcb`` without one, and left out: None becomes them); every reported winrate is the value."""

    move: int  # flat point or PASS
    visits: int
    value: float
    prior: float
    lcb: float
    pv: list[int]  # starts with ``move``
    order: int = 0  # rank in the order the search would choose (0: its move)
    score: float = 0.0  # mean final margin after this move, points, the root side to move's view
    score_stdev: float = 0.0  # spread of that margin over the move's visits
    utility: float | None = None  # mean utility of the move's visits (None: ``value``)
    utility_lcb: float | None = None  # its lower confidence bound (None: ``lcb``)

    def __post_init__(self) -> None:
        if self.utility is None:
            self.utility = self.value
        if self.utility_lcb is None:
            self.utility_lcb = self.lcb

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


def _t_quantile(dof: int, z: float = 4.265) -> float:
    """Student-t quantile for ``dof`` degrees of freedom at the normal quantile ``z`` (one-sided 1e-5 by default),
    by the Cornish-Fisher expansion: Leela Zero's confidence for its lower bound."""
    if dof <= 0:
        return math.inf
    z3, z5 = z ** 3, z ** 5
    return z + (z3 + z) / (4 * dof) + (5 * z5 + 16 * z3 + 3 * z) / (96 * dof * dof)


def candidates(tree: Tree, config: SearchConfig, mask: np.ndarray | None) -> list[Candidate]:
    """The root's visited moves in the order the search would choose them, leaves in flight left out. ``mask``
    (bool [k]): the root edges that may be chosen (None: all)."""
    root = tree.root
    if root.status != EXPANDED:
        return []
    vl = tree.virtual_loss
    pending = tree.root_pending if tree.root_pending is not None else 0
    n = root.n - vl * pending  # real visits: in-flight leaves removed
    w = root.w + vl * pending  # utility sums (value sums without a score utility)
    values = root.v if tree.scored else w
    size = tree.root_state.size
    result = []
    for idx in np.flatnonzero(n >= 1):
        if root.blocked is not None and root.blocked[idx]:
            continue
        if mask is not None and not mask[idx]:
            continue
        count = float(n[idx])
        mean = float(w[idx]) / count
        value = float(values[idx]) / count
        if count >= 2:
            # The utility's spread bounds both: the value's bound is reported, the utility's ranks.
            variance = max(0.0, float(root.w2[idx]) / count - mean * mean) * count / (count - 1)
            radius = _t_quantile(int(count) - 1) * math.sqrt(variance / count)
            lcb, utility_lcb = value - radius, mean - radius
        else:
            lcb = utility_lcb = -1.0  # one visit says nothing
        move = int(root.moves[idx])
        move = PASS if move == size * size else move
        score = float(root.s[idx]) / count
        spread = math.sqrt(max(0.0, float(root.s2[idx]) / count - score * score))
        result.append(Candidate(move=move, visits=int(round(count)), value=value,
                                prior=float(root.prior[idx]), lcb=max(-1.0, lcb),
                                pv=[move] + principal_variation(root.children.get(int(idx)), size), score=score,
                                score_stdev=spread, utility=mean, utility_lcb=utility_lcb))
    result.sort(key=lambda c: (-c.visits, -c.utility))
    if config.lcb and len(result) > 1:
        result = lcb_order(result, config)
    for order, candidate in enumerate(result):
        candidate.order = order
    return result


def lcb_order(result: list[Candidate], config: SearchConfig) -> list[Candidate]:
    """``result`` (most visits first) with the move the lower confidence bound promotes, if any, first: the bound and
    mean of the utility (the value without a score utility).

    A move whose lower confidence bound is above the most visited move's mean goes first: the bound then separates
    the two, where LCB over close means ranks noise (choosing by LCB among moves whose means are close predicted
    fewer strong players' moves than the most visits did). A move that both the network and the visits rate well below
    the top one (under ``lcb_veto_ratio`` of its prior and of its visits) is never promoted."""
    top = result[0]
    floor = max(2, config.lcb_min_visit_ratio * top.visits)
    veto = config.lcb_veto_ratio
    promoted = [c for c in result[1:] if c.visits >= floor and c.utility_lcb > top.utility
                and not (c.prior < veto * top.prior and c.visits < veto * top.visits)]
    if not promoted:
        return result
    best = max(promoted, key=lambda c: c.utility_lcb)
    return [best] + [c for c in result if c is not best]


def principal_variation(node: Node | None, size: int) -> list[int]:
    """The most visited line below ``node`` (flat points or PASS on a board of ``size``)."""
    pv: list[int] = []
    while node is not None and node.status == EXPANDED and len(pv) < PV_DEPTH:
        if node.n_sum <= 0:
            break
        idx = int(node.n.argmax())
        if node.n[idx] < 1:
            break
        move = int(node.moves[idx])
        pv.append(PASS if move == size * size else move)
        node = node.children.get(idx)
    return pv


def principal_variation_visits(tree: Tree, move: int) -> list[int]:
    """The visits of each move of ``move``'s principal variation (``principal_variation`` from the root's edge of
    ``move``, flat point or PASS): the edge visits along the most visited line, leaves in flight included below
    the root. Empty where the root has no such edge."""
    root = tree.root
    if root.status != EXPANDED:
        return []
    size = tree.root_state.size
    where = np.flatnonzero(root.moves == (size * size if move == PASS else move))
    if not where.size:
        return []
    idx = int(where[0])
    pending = tree.root_pending[idx] if tree.root_pending is not None else 0
    visits = [int(round(float(root.n[idx]) - tree.virtual_loss * pending))]
    node = root.children.get(idx)
    while node is not None and node.status == EXPANDED and len(visits) < PV_DEPTH + 1:
        if node.n_sum <= 0:
            break
        idx = int(node.n.argmax())
        if node.n[idx] < 1:
            break
        visits.append(int(round(float(node.n[idx]))))
        node = node.children.get(idx)
    return visits


@dataclass
class RootStats:
    """The root's statistics over all its visits, the root side to move's view: what KataGo's analysis reports as
    ``rootInfo``."""

    visits: int
    value: float  # mean value in [-1, 1]
    score: float  # mean final margin, points
    score_stdev: float  # spread of that margin over the visits
    utility: float  # mean utility (value plus score utility)
    raw_value: float  # the network's value of the root alone
    raw_score: float  # the network's score of the root alone (0 without a score head)


def root_stats(tree: Tree) -> RootStats:
    """The root's ``RootStats`` (its own evaluation counted as one visit); the network's alone before any child
    is visited."""
    root = tree.root
    if root.status != EXPANDED or root.visits <= 1 or root.s is None:
        return RootStats(max(0, root.visits), root.value, root.score, 0.0, root.utility, root.value, root.score)
    visits = root.visits
    score = (root.score + float(np.sum(root.s))) / visits
    squares = (root.score * root.score + float(np.sum(root.s2))) / visits
    utility = root.u_sum / visits if root.u_sum else root_value(tree)
    return RootStats(visits, root_value(tree), score, math.sqrt(max(0.0, squares - score * score)), utility,
                     root.value, root.score)


def ownership_terms(tree: Tree) -> list[tuple[float, np.ndarray]] | None:
    """The tree's ownership as (weight, float16 [N*N] ownership) terms to sum, as KataGo averages it: each node's
    own ownership weighs one visit and each child's average as many as the child has. None when the network has no
    ownership head. Reads only scalars, so that the search's lock is held briefly; ``sum_ownership`` adds them up."""
    if tree.root.ownership is None:
        return None
    terms: list[tuple[float, np.ndarray]] = []
    _add_ownership_terms(tree.root, 1.0, OWNERSHIP_DEPTH, terms)
    return terms


def move_ownership_terms(tree: Tree, move: int) -> list[tuple[float, np.ndarray]] | None:
    """``ownership_terms`` of the position after the root's ``move`` (flat point or PASS): its node's tree average,
    one ply shallower. None where that node has not been evaluated or the network has no ownership head."""
    root = tree.root
    if root.status != EXPANDED:
        return None
    size = tree.root_state.size
    where = np.flatnonzero(root.moves == (size * size if move == PASS else move))
    child = root.children.get(int(where[0])) if where.size else None
    if child is None or child.ownership is None:
        return None
    terms: list[tuple[float, np.ndarray]] = []
    _add_ownership_terms(child, 1.0, OWNERSHIP_DEPTH - 1, terms)
    return terms


def _add_ownership_terms(node: Node, weight: float, depth: int, terms: list) -> None:
    """``weight`` times ``node``'s tree average, as (weight, ownership) terms; children with fewer than
    ``OWNERSHIP_MIN_VISITS`` visits, and plies past ``depth``, count through their parent's own ownership."""
    children = [c for c in node.children.values()
                if c.ownership is not None and c.visits >= OWNERSHIP_MIN_VISITS] if depth > 0 else []
    total = 1.0 + sum(c.visits for c in children)
    terms.append((weight / total, node.ownership))
    for child in children:
        _add_ownership_terms(child, weight * child.visits / total, depth - 1, terms)


def sum_ownership(terms: list[tuple[float, np.ndarray]]) -> np.ndarray:
    """The ownership of ``ownership_terms``: float32 [N*N] in [-1, 1], black's view."""
    total = np.zeros(len(terms[0][1]), dtype=np.float64)
    for weight, owned in terms:
        total += weight * owned.astype(np.float64)  # float16 times a Python float stays float16 in numpy 2
    return np.clip(total, -1.0, 1.0).astype(np.float32)  # the weights sum to 1 up to rounding


def root_value(tree: Tree) -> float:
    """Mean value of the root's visits, side to move's view (the net's value if unvisited), leaves in flight left
    out."""
    root = tree.root
    if root.status != EXPANDED or root.visits <= 1:
        return root.value
    if tree.scored:
        total = float(np.sum(root.v))  # values alone, no virtual loss in them
    else:
        total = float(np.sum(root.w)) + tree.virtual_loss * float(np.sum(tree.root_pending))
    return (root.value + total) / root.visits


def root_priors(tree: Tree) -> dict[int, float]:
    """The root's priors by move (flat point or PASS); empty before the root is expanded."""
    root = tree.root
    if root.status != EXPANDED:
        return {}
    size = tree.root_state.size
    return {PASS if int(m) == size * size else int(m): float(p) for m, p in zip(root.moves, root.prior)}


__all__ = ["Candidate", "SearchResult", "RootStats", "candidates", "lcb_order", "principal_variation",
           "principal_variation_visits", "ownership_terms", "move_ownership_terms", "sum_ownership", "root_value",
           "root_priors", "root_stats"]

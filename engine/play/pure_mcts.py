"""The baselines a learning player is measured against: pure MCTS (UCT with random rollouts, no network: the AlphaZero
gomoku chapter's ``MCTS_Pure``) and uniformly random moves. Both are ``MovePicker``s (engine/play/picker.py).

Layer: play. Game-agnostic: they ask of a position only ``copy``, ``play``, ``legal_moves``, ``terminal_value`` and
``to_move`` (the rules interface, engine/rules/interface.py), plus, where a game has it, the fast rollout hook
``random_playout_value(rng)`` (gomoku's). ``rng`` is always a ``random.Random`` (or a seed for one) passed in.
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

DEFAULT_PLAYOUTS = 1000
DEFAULT_C_PUCT = 5.0  # the chapter's c_puct: with uniform priors, how wide the search stays
ROLLOUT_MOVE_LIMIT = 1000  # the chapter's limit on a rollout; only a game that can go on for ever reaches it


def as_rng(rng: random.Random | int | None) -> random.Random:
    return rng if isinstance(rng, random.Random) else random.Random(rng)


def random_rollout_value(state, rng: random.Random, move_limit: int = ROLLOUT_MOVE_LIMIT) -> float:
    """The result of one game of uniformly random moves from ``state`` (left unchanged), from the view of its side
    to move: +1, -1, or 0 for a draw or a game still going after ``move_limit`` moves."""
    fast = getattr(state, "random_playout_value", None)
    if fast is not None:
        return fast(rng)
    value = state.terminal_value()
    if value is not None:
        return value
    scratch = state.copy()
    for _ in range(move_limit):
        moves = scratch.legal_moves()
        if not moves:
            return 0.0
        scratch.play(moves[rng.randrange(len(moves))])
        value = scratch.terminal_value()
        if value is not None:
            return value if scratch.to_move == state.to_move else -value
    return 0.0


class Node:
    """One position of the tree. ``q`` is the mean result from the view of the player who moved into it (the
    parent's side to move), so the parent picks the child with the highest ``q`` plus its exploration term.

    Children are made only when first visited: ``moves`` holds the legal moves once the node is expanded (None
    before), ``children`` the nodes of the first ``len(children)`` of them, in the order they were first visited.
    Every child has the same prior, ``1 / len(moves)``.
    """

    __slots__ = ("move", "parent", "moves", "children", "visits", "q")

    def __init__(self, move: int | None, parent: "Node | None"):
        self.move = move
        self.parent = parent
        self.moves: list[int] | None = None
        self.children: list[Node] = []
        self.visits = 0
        self.q = 0.0


class PureMctsPicker:
    """A ``MovePicker`` by UCT with random rollouts: every playout walks down by
    ``q + c_puct * prior * sqrt(N_parent) / (1 + n)``, expands the leaf it reaches with uniform priors, and scores it
    by one random rollout to the end of the game.

    All unvisited children of a node score the same (``q`` 0, the same prior), so which of them a playout tries
    first is drawn with ``rng``, where the chapter takes the lowest point (its dictionary order); a visited child
    is preferred over them only when it scores strictly higher.
    """

    def __init__(self, playouts: int = DEFAULT_PLAYOUTS, c_puct: float = DEFAULT_C_PUCT,
                 rng: random.Random | int | None = None, clock: Callable[[], float] = time.monotonic):
        if playouts < 1:
            raise ValueError(f"playouts must be at least 1, not {playouts}")
        self.playouts = playouts
        self.c_puct = c_puct
        self.rng = as_rng(rng)
        self.clock = clock
        self.last_playouts = 0  # playouts the last search ran, for logs and benchmarks

    def search(self, state, budget_s: float | None = None) -> Node:
        """Run up to ``playouts`` playouts (fewer when ``budget_s`` runs out, but at least two where ``playouts``
        allows: the root's expansion and one child) from ``state``, which is not changed, and return the root."""
        root = Node(None, None)
        deadline = None if budget_s is None else self.clock() + max(0.0, budget_s)
        count = 0
        while count < self.playouts:
            self._playout(root, state)
            count += 1
            # The first playout only expands the root: go on to one child at least, so that there is a move.
            if deadline is not None and root.children and self.clock() >= deadline:
                break
        self.last_playouts = count
        return root

    def _playout(self, root: Node, state) -> None:
        rng, c_puct = self.rng, self.c_puct
        node = root
        scratch = state.copy()
        while node.moves:  # expanded, with moves to choose from
            moves, children = node.moves, node.children
            visited = len(children)
            scale = c_puct * math.sqrt(node.visits) / len(moves)
            best, best_score = None, scale if visited < len(moves) else -math.inf  # an unvisited child: q 0, n 0
            for child in children:
                score = child.q + scale / (1 + child.visits)
                if score > best_score:
                    best, best_score = child, score
            if best is None:  # the first visit of one more child, drawn from the unvisited ones
                pick = rng.randrange(visited, len(moves))
                moves[visited], moves[pick] = moves[pick], moves[visited]
                best = Node(moves[visited], node)
                children.append(best)
            node = best
            scratch.play(node.move)
        value = scratch.terminal_value()
        if value is None:
            if node.moves is None:
                node.moves = list(scratch.legal_moves())
            value = random_rollout_value(scratch, rng)
        # ``value`` is the leaf's side to move's; the leaf's q is its mover's, the other side.
        value = -value
        while node is not None:
            node.visits += 1
            node.q += (value - node.q) / node.visits
            value = -value
            node = node.parent

    def visit_counts(self, state, budget_s: float | None = None) -> dict[int, int]:
        """move -> visits of the root's children after a search."""
        return {child.move: child.visits for child in self.search(state, budget_s).children}

    def pick(self, state, budget_s: float | None = None) -> int:
        """The most visited move of a search from ``state`` (ValueError when the game is over)."""
        if state.terminal_value() is not None:
            raise ValueError("the game is over: there is no move to choose")
        moves = state.legal_moves()
        if not moves:
            raise ValueError("no legal move to choose")
        if len(moves) == 1:
            return moves[0]
        root = self.search(state, budget_s)
        if not root.children:  # a search of one playout expanded the root and no more
            return moves[self.rng.randrange(len(moves))]
        return max(root.children, key=lambda child: child.visits).move


class RandomPicker:
    """A ``MovePicker`` of uniformly random legal moves: the floor every player must beat."""

    def __init__(self, rng: random.Random | int | None = None):
        self.rng = as_rng(rng)

    def pick(self, state, budget_s: float | None = None) -> int:
        moves = state.legal_moves()
        if state.terminal_value() is not None or not moves:
            raise ValueError("the game is over: there is no move to choose")
        return moves[self.rng.randrange(len(moves))]


__all__ = ["PureMctsPicker", "RandomPicker", "Node", "random_rollout_value", "as_rng", "DEFAULT_PLAYOUTS",
           "DEFAULT_C_PUCT"]

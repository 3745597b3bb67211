"""How the search talks to the network: the one batch-first ``Evaluator`` protocol, what it returns, and the
stand-in that needs no network.

``value`` always means the expected outcome in [-1, 1] from the side to move's view. ``policy`` is float32
[B, N*N+1], pass last, softmaxed over the legal moves (illegal points are 0) and renormalised.

Layer: net, below every evaluator (``onnx_evaluator.py``, ``network_set.py``, ``batching.py``); numpy only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from tabula.engine.rules.game import GameState
from tabula.engine.rules.interface import batch_legal_masks


class UnsupportedBoardSizeError(ValueError):
    """The network was not made for this board size."""


@dataclass
class Evaluation:
    # float32 [B, policy_size] (Go: N*N+1, pass last; gomoku: N*N), 0 on illegal moves, rows sum to 1
    policy: np.ndarray
    value: np.ndarray  # float32 [B], side to move's view, in [-1, 1]
    # From networks with score and ownership heads (None otherwise), side to move's view:
    score: np.ndarray | None = None  # float32 [B], the final margin in points
    ownership: np.ndarray | None = None  # float32 [B, N*N] in [-1, 1], +1: the side to move will own the point
    # From networks that give them (KataGo's; None otherwise), side to move's view:
    wdl: np.ndarray | None = None  # float32 [B, 3]: P(win), P(loss), P(no result)
    score_mean: np.ndarray | None = None  # float32 [B], the expected final score in points (KataGo's scoreMean)
    score_stdev: np.ndarray | None = None  # float32 [B], its standard deviation
    # From KataGo's networks that have one (None otherwise): its optimistic policy alone (KataGo's policyOptimism 1,
    # which its search uses below the root; SearchConfig.optimistic_policy), masked and normalised as ``policy``
    policy_optimistic: np.ndarray | None = None


class Evaluator(Protocol):
    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        """Evaluate positions of one game and board size (any ``engine.rules.interface.Game``)."""
        ...


def legal_mask(state: GameState) -> np.ndarray:
    """bool [N*N+1]: the side to move's legal points, and pass (always legal)."""
    return state.legal_mask()


def masked_softmax(logits: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """float32 [B, L]: softmax of ``logits`` over the entries where ``masks`` (bool [B, L]) is true, 0 elsewhere."""
    x = np.where(masks, logits.astype(np.float32, copy=False), np.float32(-np.inf))
    x -= x.max(axis=1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=1, keepdims=True)
    return x


class UniformEvaluator:
    """A stand-in that needs no network: equal priors over legal moves and a value of 0."""

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        masks = batch_legal_masks(states).astype(np.float32)
        return Evaluation(policy=masks / masks.sum(axis=1, keepdims=True),
                          value=np.zeros(len(states), dtype=np.float32))


def empty_evaluation() -> Evaluation:
    return Evaluation(np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32))


class PendingEvaluation:
    """A batch on its way through the network; ``result()`` waits for it and raises what the evaluation raised."""

    def __init__(self, finish: Callable[[], Evaluation]):
        self._finish = finish

    def result(self) -> Evaluation:
        return self._finish()


def evaluate_all_symmetries(evaluator: Evaluator, states: Sequence[GameState]) -> Evaluation:
    """``evaluator.evaluate_averaged`` (the mean over the 8 symmetries) where the evaluator has one; otherwise its
    ``evaluate`` (stand-ins in tests, which have no symmetries to average)."""
    averaged = getattr(evaluator, "evaluate_averaged", None)
    return averaged(states) if averaged is not None else evaluator.evaluate(states)


def evaluate_async(evaluator: Evaluator, states: Sequence[GameState]) -> PendingEvaluation:
    """``evaluator.evaluate_async`` where the evaluator has one; otherwise ``evaluate`` now, handed back as done."""
    start = getattr(evaluator, "evaluate_async", None)
    if start is not None:
        return start(states)
    evaluation = evaluator.evaluate(states)
    return PendingEvaluation(lambda: evaluation)


__all__ = ["Evaluation", "Evaluator", "UnsupportedBoardSizeError", "UniformEvaluator", "PendingEvaluation",
           "legal_mask", "masked_softmax", "empty_evaluation", "evaluate_all_symmetries", "evaluate_async"]

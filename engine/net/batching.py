"""One network for many searches: the evaluate calls of several threads (searches of different positions running at
once, as the analysis engine runs them) merged into batches for one evaluator.

Layer: net, a wrapper with the ``Evaluator`` protocol (``engine.net.evaluator``); numpy only. The merge never waits
for a batch to fill: while the network runs one batch the next callers queue, and the next batch takes them all.
"""
from __future__ import annotations

import dataclasses
import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tabula.engine.net.evaluator import (
    DEFAULT_MAX_BATCH,
    Evaluation,
    Evaluator,
    PendingEvaluation,
    evaluate_all_symmetries,
)
from tabula.engine.net.features import NUM_SYMMETRIES
from tabula.engine.rules.game import GameState

PLAIN, AVERAGED = "plain", "averaged"  # evaluate, and evaluate_all_symmetries (the mean over the 8 symmetries)


@dataclass
class _Request:
    """One caller's positions on their way to the network."""

    states: Sequence[GameState]
    mode: str  # PLAIN | AVERAGED
    future: Future

    @property
    def rows(self) -> int:
        """Network rows it takes: one a position, eight for the mean over the symmetries."""
        return len(self.states) * (NUM_SYMMETRIES if self.mode == AVERAGED else 1)

    @property
    def key(self) -> tuple[str, int]:
        """What a batch must share: the mode and the board size (a batch is of one size)."""
        return self.mode, self.states[0].size


def split_evaluation(evaluation: Evaluation, counts: Sequence[int]) -> list[Evaluation]:
    """``evaluation`` of consecutive groups of ``counts`` positions, one Evaluation a group: every array field
    (policy, value and any optional head the evaluator gives) sliced by rows; None stays None."""
    parts, start = [], 0
    for count in counts:
        end = start + count
        fields = {f.name: (value[start:end] if isinstance(value, np.ndarray) else value)
                  for f in dataclasses.fields(evaluation) for value in [getattr(evaluation, f.name)]}
        parts.append(Evaluation(**fields))
        start = end
    return parts


class BatchingEvaluator:
    """Merges the ``evaluate`` calls of many threads into batches for ``inner``, run on one network thread.

    Callers of one board size and mode are merged, oldest first, up to ``max_batch`` network rows (a position
    averaged over the symmetries takes 8; a caller's own batch is never split). ``evaluate_async`` hands a batch
    over without waiting; ``evaluate_averaged`` merges the 8-symmetry evaluations of search roots the same way. An
    evaluator error goes to every caller of its batch. ``close`` ends the network thread once the queue is empty.
    Thread-safe.
    """

    def __init__(self, inner: Evaluator, max_batch: int = DEFAULT_MAX_BATCH):
        self.inner = inner
        self.max_batch = max(1, max_batch)
        self.board_sizes = getattr(inner, "board_sizes", None)
        self.on_gpu = bool(getattr(inner, "on_gpu", False))
        self._queue: deque[_Request] = deque()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Statistics (under _wake): network calls made and positions sent.
        self.batches = 0
        self.positions = 0

    # -- the Evaluator protocol -----------------------------------------------------------------------------------

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        return self.evaluate_async(states).result()

    def evaluate_async(self, states: Sequence[GameState]) -> PendingEvaluation:
        return self._submit(states, PLAIN)

    def evaluate_averaged(self, states: Sequence[GameState]) -> Evaluation:
        return self._submit(states, AVERAGED).result()

    @property
    def mean_batch(self) -> float:
        with self._wake:
            return self.positions / self.batches if self.batches else 0.0

    def close(self) -> None:
        """Finish what is queued, then end the network thread."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()

    # -- the network thread ---------------------------------------------------------------------------------------

    def _submit(self, states: Sequence[GameState], mode: str) -> PendingEvaluation:
        future: Future = Future()
        if not states:
            future.set_result(Evaluation(np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32)))
            return PendingEvaluation(future.result)
        with self._wake:
            if self._closed:
                raise RuntimeError("the batching evaluator is closed")
            self._queue.append(_Request(list(states), mode, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="network-batches", daemon=True)
                self._thread.start()
            self._wake.notify()
        return PendingEvaluation(future.result)

    def _next_batch(self) -> list[_Request] | None:
        """The oldest request and every later one that shares its key, up to ``max_batch`` network rows (None:
        closed and nothing left)."""
        with self._wake:
            while not self._queue:
                if self._closed:
                    return None
                self._wake.wait()
            first = self._queue.popleft()
            taken, rows, kept = [first], first.rows, deque()
            while self._queue:
                request = self._queue.popleft()
                if request.key == first.key and rows + request.rows <= self.max_batch:
                    taken.append(request)
                    rows += request.rows
                else:
                    kept.append(request)
            self._queue = kept
            self.batches += 1
            self.positions += sum(len(request.states) for request in taken)
            return taken

    def _serve(self) -> None:
        while True:
            taken = self._next_batch()
            if taken is None:
                return
            states = [state for request in taken for state in request.states]
            try:
                if taken[0].mode == AVERAGED:
                    evaluation = evaluate_all_symmetries(self.inner, states)
                else:
                    evaluation = self.inner.evaluate(states)
                parts = split_evaluation(evaluation, [len(request.states) for request in taken])
            except BaseException as error:  # every caller of the batch gets it, and the thread serves on
                for request in taken:
                    request.future.set_exception(error)
                continue
            for request, part in zip(taken, parts):
                request.future.set_result(part)


__all__ = ["BatchingEvaluator", "split_evaluation"]

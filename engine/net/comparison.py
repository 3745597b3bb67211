"""Comparing two runners of one network (a GPU backend against onnxruntime on the CPU, an int8 file against its
fp32 file): the positions they are compared on and their largest difference. Start-up checks and tests use it.

Layer: net; numpy only.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from tabula.engine.net.encodings import Encoding
from tabula.engine.net.evaluation import masked_softmax
from tabula.engine.net.features import INPUT_ENCODING, NUM_PLANES

GPU_TOLERANCE = 0.05  # largest difference of a probability or a value between a GPU backend and the CPU
# ... and of a score lead, in points: bf16 moves the default network's score by up to a point (its 8-bit mantissa)
SCORE_TOLERANCE_POINTS = 2.0


def comparison_planes(size: int, count: int = 16, seed: int = 0, encoding: Encoding | None = None) -> np.ndarray:
    """float32 [count, 18, size, size]: random stones and histories, either side to move; for comparing backends.
    With an ``encoding`` that has a komi plane, the komi of each drawn around 7 points (``encoding.planes`` planes)."""
    rng = np.random.default_rng(seed + size)
    if encoding is not None and encoding.planes != NUM_PLANES and encoding.komi_plane is None \
            and encoding.state_encoding == INPUT_ENCODING:
        return _played_planes(size, count, rng, encoding)  # KataGo's inputs: not random planes, real positions
    planes = (rng.random((count, NUM_PLANES, size, size)) < 0.25).astype(np.float32)
    planes[:, 16:18] = 0.0
    planes[np.arange(count), 16 + rng.integers(0, 2, count)] = 1.0
    if encoding is not None and encoding.komi_plane is not None:
        from tabula.engine.net.features import with_komi_plane

        komi = np.round(rng.normal(7.0, 3.0, count) * 2.0) / 2.0 * np.where(planes[:, 16, 0, 0] > 0, -1.0, 1.0)
        planes = with_komi_plane(planes, komi)
    return planes


def _played_planes(size: int, count: int, rng: np.random.Generator, encoding: Encoding) -> np.ndarray:
    """The planes of ``count`` Go positions of random legal moves (up to a third of the board), the komi and the
    side to move varied: for encodings whose planes are not independent bits (KataGo's)."""
    from tabula.engine.rules.coords import PASS

    states = []
    for index in range(count):
        state = encoding.new_state(size)
        state.rules = dataclasses.replace(state.rules, komi=float(np.round(rng.normal(7.0, 3.0) * 2.0) / 2.0))
        for _ in range(int(rng.integers(0, size * size // 3 + 1))):
            moves = [m for m in state.legal_moves() if m != PASS]
            if not moves:
                break
            state.play(moves[int(rng.integers(len(moves)))])
        states.append(state)
    return encoding.encode_batch(states, None)


def outputs_difference(reference: Callable[[np.ndarray], tuple[np.ndarray, ...]],
                       other: Callable[[np.ndarray], tuple[np.ndarray, ...]], size: int,
                       encoding: Encoding | None = None) -> float:
    """Largest difference between two raw runners' move probabilities (softmax over all points) and values, and,
    where both give them, score leads (in units of SCORE_TOLERANCE_POINTS / GPU_TOLERANCE points, so that a score
    off by that many points counts as a probability off by GPU_TOLERANCE) and ownerships."""
    planes = comparison_planes(size, encoding=encoding)
    expected, actual = reference(planes), other(planes)
    (ref_logits, ref_value), (logits, value) = expected[:2], actual[:2]
    everything = np.ones(ref_logits.shape, dtype=bool)
    probabilities = np.abs(masked_softmax(ref_logits, everything) - masked_softmax(logits, everything)).max()
    differences = [probabilities, np.abs(ref_value.reshape(-1) - value.reshape(-1)).max()]
    if len(expected) >= 4 and len(actual) >= 4:
        differences.append(np.abs(expected[2].reshape(-1) - actual[2].reshape(-1)).max()
                           * GPU_TOLERANCE / SCORE_TOLERANCE_POINTS)
        differences.append(np.abs(expected[3].reshape(len(planes), -1) - actual[3].reshape(len(planes), -1)).max())
    return float(max(differences))


__all__ = ["GPU_TOLERANCE", "SCORE_TOLERANCE_POINTS", "comparison_planes", "outputs_difference"]

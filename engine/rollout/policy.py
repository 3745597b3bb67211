"""The rollout policy: a linear softmax over the pattern features, its weights file, and its move weights.

Layer: rollout. The logit of a candidate point is the sum of the weights of its features (``patterns``): its 3×3
pattern (or ``unknown_pattern`` for a pattern the training never kept), self-atari, save-atari, its response pattern
when it lies in the previous move's diamond (or ``unknown_response``), and its distance buckets to the last two moves.
The file is an .npz of plain arrays with a JSON metadata string, read with ``allow_pickle=False``.
"""
from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np

from tabula.engine.rollout.patterns import (
    AMBIGUOUS,
    NEAR_BUCKET,
    NUM_CODES,
    NUM_DISTANCES,
    OWN_EYE,
    OWN_IN_ATARI,
    SAVES,
    SELF_ATARI,
    SUICIDE,
    Features,
    code_tables,
    pattern_geometry,
    transform_response_keys,
)

FORMAT = "tabula-rollout-patterns"
FORMAT_VERSION = 1


class RolloutPolicyError(ValueError):
    """A rollout weights file that cannot be used: not an .npz, a missing or malformed array, another format."""


@dataclass
class RolloutWeights:
    """The learned parameters. ``pattern_codes``/``response_keys`` are canonical (``patterns``), sorted, unique."""

    pattern_codes: np.ndarray  # int32 [P]
    pattern_weights: np.ndarray  # float32 [P]
    response_keys: np.ndarray  # int64 [R]
    response_weights: np.ndarray  # float32 [R]
    unknown_pattern: float = 0.0
    unknown_response: float = 0.0
    self_atari: float = 0.0
    save_atari: float = 0.0
    distance_previous: np.ndarray = field(default_factory=lambda: np.zeros(NUM_DISTANCES, np.float32))
    distance_own: np.ndarray = field(default_factory=lambda: np.zeros(NUM_DISTANCES, np.float32))
    metadata: dict = field(default_factory=dict)

    # -- the parameters as one vector, for training --------------------------------------------------------------

    def vector(self) -> np.ndarray:
        """float64 [P + R + 4 + 2 * NUM_DISTANCES]: patterns, responses, the 4 scalars, the distances."""
        return np.concatenate([self.pattern_weights, self.response_weights,
                               [self.unknown_pattern, self.unknown_response, self.self_atari, self.save_atari],
                               self.distance_previous, self.distance_own]).astype(np.float64)

    def with_vector(self, vector: np.ndarray) -> "RolloutWeights":
        p, r = len(self.pattern_codes), len(self.response_keys)
        v = np.asarray(vector, dtype=np.float64)
        scalars = v[p + r: p + r + 4]
        rest = v[p + r + 4:]
        return RolloutWeights(self.pattern_codes, v[:p].astype(np.float32), self.response_keys,
                              v[p: p + r].astype(np.float32), *map(float, scalars),
                              rest[:NUM_DISTANCES].astype(np.float32), rest[NUM_DISTANCES:].astype(np.float32),
                              dict(self.metadata))

    # -- the file ------------------------------------------------------------------------------------------------

    def save(self, path: str) -> None:
        """Write the .npz atomically (temporary file, then rename)."""
        meta = dict(self.metadata, format=FORMAT, version=FORMAT_VERSION)
        temporary = path + ".tmp.npz"
        np.savez_compressed(temporary, pattern_codes=self.pattern_codes.astype(np.int32),
                            pattern_weights=self.pattern_weights.astype(np.float32),
                            response_keys=self.response_keys.astype(np.int64),
                            response_weights=self.response_weights.astype(np.float32),
                            scalars=np.array([self.unknown_pattern, self.unknown_response, self.self_atari,
                                              self.save_atari], dtype=np.float64),
                            distance_previous=self.distance_previous.astype(np.float32),
                            distance_own=self.distance_own.astype(np.float32),
                            metadata=np.array(json.dumps(meta, sort_keys=True)))
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: str) -> "RolloutWeights":
        """Read and check a weights file; RolloutPolicyError says what is wrong with an unusable one."""
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
            raise RolloutPolicyError(f"{path}: not a rollout weights file (.npz): {error}") from None
        expected = {"pattern_codes": (np.integer, 1), "pattern_weights": (np.floating, 1),
                    "response_keys": (np.integer, 1), "response_weights": (np.floating, 1),
                    "scalars": (np.floating, 1), "distance_previous": (np.floating, 1),
                    "distance_own": (np.floating, 1), "metadata": (np.str_, 0)}
        for name, (kind, ndim) in expected.items():
            if name not in arrays:
                raise RolloutPolicyError(f"{path}: no {name!r} array (a rollout weights file has {sorted(expected)})")
            if not np.issubdtype(arrays[name].dtype, kind) or arrays[name].ndim != ndim:
                raise RolloutPolicyError(f"{path}: {name!r} is {arrays[name].dtype} with {arrays[name].ndim} "
                                         f"dimensions, not a {ndim}-dimensional {kind.__name__} array")
        try:
            meta = json.loads(str(arrays["metadata"]))
        except ValueError as error:
            raise RolloutPolicyError(f"{path}: metadata is not JSON: {error}") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            named = meta.get("format") if isinstance(meta, dict) else meta
            raise RolloutPolicyError(f"{path}: metadata names format {named!r}, not {FORMAT!r}")
        if meta.get("version") != FORMAT_VERSION:
            raise RolloutPolicyError(f"{path}: format version {meta.get('version')!r}; this build reads "
                                     f"version {FORMAT_VERSION}")
        codes, keys = arrays["pattern_codes"].astype(np.int64), arrays["response_keys"].astype(np.int64)
        checks = [
            (len(codes) == len(arrays["pattern_weights"]), "pattern_codes and pattern_weights differ in length"),
            (len(keys) == len(arrays["response_weights"]), "response_keys and response_weights differ in length"),
            (arrays["scalars"].shape == (4,), "scalars must hold 4 values"),
            (arrays["distance_previous"].shape == (NUM_DISTANCES,) and arrays["distance_own"].shape
             == (NUM_DISTANCES,), f"the distance weights must hold {NUM_DISTANCES} values each"),
            (bool(np.all((codes >= 0) & (codes < NUM_CODES))), "a pattern code lies outside 0..2^20-1"),
            (bool(np.all(np.diff(codes) > 0)), "pattern_codes are not sorted and unique"),
            (bool(np.all(keys >= 0)) and bool(np.all(np.diff(keys) > 0)), "response_keys are not sorted, unique, >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise RolloutPolicyError(f"{path}: {message}")
        for name in ("pattern_weights", "response_weights", "scalars", "distance_previous", "distance_own"):
            if not np.all(np.isfinite(arrays[name])):
                raise RolloutPolicyError(f"{path}: {name!r} holds a value that is not finite")
        scalars = arrays["scalars"].astype(np.float64)
        return cls(codes.astype(np.int32), arrays["pattern_weights"].astype(np.float32), keys,
                   arrays["response_weights"].astype(np.float32), *map(float, scalars),
                   arrays["distance_previous"].astype(np.float32), arrays["distance_own"].astype(np.float32), meta)


def lookup(keys: np.ndarray, values: np.ndarray, queries: np.ndarray, default: float) -> np.ndarray:
    """float64, the shape of ``queries``: the value of each query in sorted ``keys``, ``default`` where absent."""
    if not len(keys):
        return np.full(queries.shape, default, dtype=np.float64)
    at = np.minimum(np.searchsorted(keys, queries), len(keys) - 1)
    return np.where(keys[at] == queries, values[at], default).astype(np.float64)


def logits(weights: RolloutWeights, feats: Features) -> np.ndarray:
    """float64 [B, N*N]: each candidate's logit from its features (-inf where no candidate). The reference that the
    training optimises; ``RolloutPolicy.move_weights`` computes exp of the same numbers faster."""
    points = feats.pattern.shape[1]
    near = pattern_geometry(int(round(points ** 0.5))).near_flat
    out = lookup(weights.pattern_codes, weights.pattern_weights, feats.pattern, weights.unknown_pattern)
    out += weights.self_atari * (feats.tactics & 1) + weights.save_atari * ((feats.tactics >> 1) & 1)
    for moves, table in ((feats.previous, weights.distance_previous), (feats.own_previous, weights.distance_own)):
        for row in np.flatnonzero(moves >= 0):
            inside = near[moves[row]] < points
            out[row, near[moves[row]][inside]] += table[NEAR_BUCKET[inside]]
    for row in np.flatnonzero(feats.previous >= 0):
        slots = np.flatnonzero(feats.response[row] >= 0)
        out[row, near[feats.previous[row], slots]] += lookup(weights.response_keys, weights.response_weights,
                                                             feats.response[row, slots], weights.unknown_response)
    return np.where(feats.pattern >= 0, out, -np.inf)


class RolloutPolicy:
    """The weights as lookup tables for fast rollouts: exp(logit) per relative 3×3 code, and the response weights
    under all 8 symmetries and both colours, so that nothing is made canonical while playing."""

    def __init__(self, weights: RolloutWeights):
        self.weights = weights
        tables = code_tables()
        by_canonical = np.full(NUM_CODES, weights.unknown_pattern, dtype=np.float64)
        by_canonical[weights.pattern_codes] = weights.pattern_weights
        logit = by_canonical[tables.canonical]
        flags = tables.flags
        ambiguous = (flags & AMBIGUOUS) != 0
        own_in_atari = (flags & OWN_IN_ATARI) != 0
        logit += ~ambiguous * (weights.self_atari * ((flags & SELF_ATARI) != 0)
                               + weights.save_atari * ((flags & SAVES) != 0))
        # An AMBIGUOUS code is self-atari or not, saving or not, by liberties the code cannot see: its table entry
        # is an upper bound (the larger factor), made exact on the board when a rollout draws it.
        bound = np.where(ambiguous, np.maximum(np.exp(weights.self_atari),
                                               np.where(own_in_atari, np.exp(weights.save_atari), 1.0)), 1.0)
        blocked = (flags & (OWN_EYE | SUICIDE)) != 0
        as_black = np.where(blocked, 0.0, np.exp(logit) * bound)
        # Indexed by mover * NUM_CODES + the code as black sees it (mover 0 black, 1 white): no swap while playing.
        swap = tables.swap
        self.pattern_exp = np.concatenate([as_black, as_black[swap]]).astype(np.float32)  # 0: never a candidate
        self.ambiguous = np.concatenate([ambiguous, ambiguous[swap]])
        self.own_in_atari = np.concatenate([own_in_atari, own_in_atari[swap]])
        self.ambiguous_bound = np.concatenate([bound, bound[swap]])
        self.self_atari_exp = float(np.exp(weights.self_atari))
        self.save_atari_exp = float(np.exp(weights.save_atari))
        # Response keys as the board shows them: every symmetric image of each canonical key.
        keys = [transform_response_keys(weights.response_keys, s) for s in range(8)] if len(weights.response_keys) \
            else [np.zeros(0, np.int64)]
        values = np.tile(weights.response_weights.astype(np.float64), len(keys))
        raw, first = np.unique(np.concatenate(keys), return_index=True)
        self.response_keys = raw
        self.response_exp = np.exp(values[first])
        self.unknown_response_exp = float(np.exp(weights.unknown_response))
        self.distance_previous_exp = np.exp(weights.distance_previous.astype(np.float64))
        self.distance_own_exp = np.exp(weights.distance_own.astype(np.float64))

    @classmethod
    def load(cls, path: str) -> "RolloutPolicy":
        return cls(RolloutWeights.load(path))


__all__ = ["RolloutPolicy", "RolloutWeights", "RolloutPolicyError", "logits", "lookup", "FORMAT", "FORMAT_VERSION"]

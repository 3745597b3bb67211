"""How the search talks to the network: one batch-first protocol and its implementations.

``value`` always means the expected outcome in [-1, 1] from the side to move's view. ``policy`` is float32
[B, N*N+1], pass last, softmaxed over the legal moves (illegal points are 0) and renormalised.

Layer: above features; numpy and onnxruntime only (never torch), so that the GTP engine starts fast.
``OnnxEvaluator`` runs a network file; ``NetworkSet`` routes each board size to its network; ``CachedEvaluator``
wraps any evaluator with an LRU cache.
"""
from __future__ import annotations

import json
import os
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from .features import (INPUT_ENCODING, NUM_PLANES, NUM_SYMMETRIES, encode_batch, inverse_transform_policy,
                       transform_planes)
from .game import GameState

METADATA_FORMAT_VERSION = "1"
SYMMETRY_MODES = ("random", "identity", "average")
PROVIDERS = {  # our names -> onnxruntime's, in order of preference for "auto"
    "tensorrt": "TensorrtExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "cpu": "CPUExecutionProvider",
}


class NetworkFileError(ValueError):
    """A network file that cannot be used: names the file and what is wrong with it."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class UnsupportedBoardSizeError(ValueError):
    """The network was not made for this board size."""


@dataclass
class Evaluation:
    policy: np.ndarray  # float32 [B, N*N+1], pass last, 0 on illegal moves, rows sum to 1
    value: np.ndarray  # float32 [B], side to move's view, in [-1, 1]


class Evaluator(Protocol):
    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        """Evaluate positions of one board size."""
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
        masks = np.stack([legal_mask(s) for s in states]).astype(np.float32)
        return Evaluation(policy=masks / masks.sum(axis=1, keepdims=True),
                          value=np.zeros(len(states), dtype=np.float32))


def _stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def choose_providers(provider: str, available: Sequence[str]) -> list[str]:
    """onnxruntime provider names to try, best first, always ending with the CPU."""
    if provider == "auto":
        wanted = [name for name in PROVIDERS.values() if name in available]
    elif provider in PROVIDERS:
        name = PROVIDERS[provider]
        if name not in available:
            raise ValueError(f"onnxruntime provider {provider!r} is not available here (have: {', '.join(available)})")
        wanted = [name]
    else:
        raise ValueError(f"unknown provider {provider!r} (auto, {', '.join(PROVIDERS)})")
    if PROVIDERS["cpu"] not in wanted:
        wanted.append(PROVIDERS["cpu"])
    return wanted


class OnnxEvaluator:
    """Evaluates positions with an ONNX network through onnxruntime.

    Args:
        path: an ONNX file with one input ``planes`` float32 [batch, 18, N, N] and outputs ``policy`` (logits,
            [batch, N*N+1]) and ``value`` (tanh, [batch], side to move's view), as ``tabula export`` writes.
        symmetry: ``random`` (each position under one of the 8 symmetries, drawn from ``rng``), ``identity``,
            or ``average`` (the mean of all 8: eight times the work).
        rng: numpy Generator for random symmetries; a fresh one when None.
        threads: onnxruntime intra-op threads (0: onnxruntime decides).
        provider: ``auto`` (TensorRT, then CUDA, then CPU, whichever works), ``cpu``, ``cuda`` or ``tensorrt``.
        log: receives one line naming the provider; by default it goes to stderr.

    Raises NetworkFileError for a missing, corrupt or unsuitable file, before any position is evaluated.
    """

    def __init__(self, path: str | os.PathLike, symmetry: str = "random", rng: np.random.Generator | None = None,
                 threads: int = 0, provider: str = "auto", log: Callable[[str], None] | None = _stderr_log):
        import onnxruntime as ort

        if symmetry not in SYMMETRY_MODES:
            raise ValueError(f"unknown symmetry mode {symmetry!r} ({', '.join(SYMMETRY_MODES)})")
        self.path = path = os.fspath(path)
        self.symmetry = symmetry
        self._rng = rng if rng is not None else np.random.default_rng()
        self._rng_lock = threading.Lock()  # numpy Generators are not thread-safe; the search may call from threads
        if not os.path.isfile(path):
            raise NetworkFileError(path, "no such file")
        if os.path.getsize(path) == 0:
            raise NetworkFileError(path, "empty file")

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(0, int(threads))
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # onnxruntime's own warnings would clutter stderr
        candidates = choose_providers(provider, ort.get_available_providers())
        session = None
        failure = None
        for start in range(len(candidates)):
            try:
                session = ort.InferenceSession(path, sess_options=options, providers=candidates[start:])
                break
            except Exception as e:  # onnxruntime raises its own exception types for bad files and providers
                failure = e
                if not _is_provider_failure(e):
                    break
        if session is None:
            first_line = str(failure).strip().splitlines()[0] if str(failure).strip() else type(failure).__name__
            raise NetworkFileError(path, f"onnxruntime cannot load it: {first_line[:300]}")
        self._session = session
        self._input_name = session.get_inputs()[0].name
        self.metadata: dict[str, str] = dict(session.get_modelmeta().custom_metadata_map)
        self.board_sizes: tuple[int, ...] = self._validate()
        self.provider: str = session.get_providers()[0]
        if log is not None:
            log(f"tabula: network {os.path.basename(path)} ({self.describe()}) on {self.provider}, "
                f"{threads or 'default'} threads")

    def describe(self) -> str:
        """One line: blocks x filters, head, board sizes, precision — from the metadata."""
        try:
            arch = json.loads(self.metadata["architecture"])
            shape = f"{arch['blocks']}x{arch['filters']} {arch['head']}"
        except (KeyError, TypeError, ValueError):
            shape = "unknown architecture"
        sizes = "/".join(str(s) for s in self.board_sizes)
        return f"{shape}, {sizes}, {self.metadata.get('precision', 'fp32')}"

    # -- checks --------------------------------------------------------------------------------------------------

    def _fail(self, problem: str) -> NetworkFileError:
        return NetworkFileError(self.path, problem)

    def _validate(self) -> tuple[int, ...]:
        """Check inputs, outputs and metadata against each other and against one trial run; returns board sizes."""
        session, meta = self._session, self.metadata
        inputs = session.get_inputs()
        if len(inputs) != 1:
            raise self._fail(f"{len(inputs)} inputs, expected one (planes)")
        shape, kind = inputs[0].shape, inputs[0].type
        if kind != "tensor(float)":
            raise self._fail(f"input is {kind}, expected tensor(float)")
        if len(shape) != 4 or shape[1] != NUM_PLANES:
            raise self._fail(f"input shape {shape}, expected [batch, {NUM_PLANES}, N, N]")
        outputs = {o.name for o in session.get_outputs()}
        if not {"policy", "value"} <= outputs:
            raise self._fail(f"outputs {sorted(outputs)}, expected policy and value")
        if meta.get("tabula_format", METADATA_FORMAT_VERSION) != METADATA_FORMAT_VERSION:
            raise self._fail(f"metadata format {meta['tabula_format']!r}, expected {METADATA_FORMAT_VERSION}")
        encoding = meta.get("input_encoding", INPUT_ENCODING)
        if encoding != INPUT_ENCODING:
            raise self._fail(f"input encoding {encoding!r}, expected {INPUT_ENCODING!r}")
        static = [d for d in shape[2:] if isinstance(d, int)]
        if len(static) == 1 or (len(static) == 2 and static[0] != static[1]):
            raise self._fail(f"input shape {shape} is not square")
        if "board_sizes" in meta:
            try:
                sizes = tuple(int(s) for s in meta["board_sizes"].split(","))
            except ValueError:
                raise self._fail(f"unreadable board_sizes metadata {meta['board_sizes']!r}") from None
            if static and any(s != static[0] for s in sizes):
                raise self._fail(f"metadata says board sizes {sizes} but the input is {static[0]}x{static[0]}")
        elif static:
            sizes = (static[0],)
        else:
            raise self._fail("the input size is dynamic and the metadata names no board_sizes")
        if not sizes or any(not 2 <= s <= 25 for s in sizes):
            raise self._fail(f"unsupported board sizes {sizes}")
        for size in sizes:
            planes = np.zeros((1, NUM_PLANES, size, size), dtype=np.float32)
            planes[:, 16] = 1.0
            try:
                policy, value = self._run(planes)
            except Exception as e:
                raise self._fail(f"a trial evaluation on {size}x{size} failed: {str(e).splitlines()[0][:300]}") \
                    from None
            if policy.shape != (1, size * size + 1) or value.shape != (1,):
                raise self._fail(f"on {size}x{size} the outputs have shapes {policy.shape} and {value.shape}, "
                                 f"expected (1, {size * size + 1}) and (1,)")
            if not (np.all(np.isfinite(policy)) and np.all(np.isfinite(value))):
                raise self._fail("the network outputs NaN or infinity")
        return sizes

    # -- evaluation ----------------------------------------------------------------------------------------------

    def _run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw network: planes float32 [B, 18, N, N] -> (policy logits float32 [B, N*N+1], value float32 [B])."""
        policy, value = self._session.run(["policy", "value"], {self._input_name: planes})
        return policy, value.reshape(-1)

    def run(self, planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The raw network on encoded planes, no symmetry and no masking (benchmarks and tests)."""
        return self._run(np.ascontiguousarray(planes, dtype=np.float32))

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        """Evaluate positions of one board size: policy masked to legal moves and pass, value side to move's view."""
        count = len(states)
        if count == 0:
            return Evaluation(np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32))
        size = states[0].size
        if size not in self.board_sizes:
            raise UnsupportedBoardSizeError(
                f"{os.path.basename(self.path)} plays {', '.join(f'{s}x{s}' for s in self.board_sizes)}, "
                f"not {size}x{size}")
        masks = np.stack([legal_mask(s) for s in states])
        if self.symmetry == "identity":
            logits, value = self._run(encode_batch(states))
            policy = masked_softmax(logits, masks)
        elif self.symmetry == "random":
            with self._rng_lock:
                symmetries = self._rng.integers(0, NUM_SYMMETRIES, count)
            logits, value = self._run(encode_batch(states, symmetries))
            policy = masked_softmax(inverse_transform_policy(logits, symmetries), masks)
        else:
            planes = encode_batch(states)
            everything = np.concatenate([transform_planes(planes, s) for s in range(NUM_SYMMETRIES)])
            logits, values = self._run(everything)
            policy = np.zeros((count, size * size + 1), dtype=np.float32)
            for s in range(NUM_SYMMETRIES):
                policy += masked_softmax(inverse_transform_policy(logits[s * count: (s + 1) * count], s), masks)
            policy /= NUM_SYMMETRIES
            value = values.reshape(NUM_SYMMETRIES, count).mean(axis=0)
        return Evaluation(policy=policy.astype(np.float32, copy=False),
                          value=np.clip(value, -1.0, 1.0).astype(np.float32, copy=False))


class NetworkSet:
    """Several networks behind one evaluator, each board size routed to the first network that plays it.

    A shipped engine plays 19x19 with one network and 9x9 with another; the search sees one evaluator whose
    ``board_sizes`` are the union. A batch is always of one size (``Evaluator.evaluate``), so it goes whole to one
    network.
    """

    def __init__(self, networks: Sequence):
        if not networks:
            raise ValueError("a network set needs at least one network")
        self.networks = list(networks)
        self._by_size: dict[int, object] = {}
        for network in self.networks:
            for size in network.board_sizes:
                self._by_size.setdefault(size, network)
        self.board_sizes: tuple[int, ...] = tuple(sorted(self._by_size))

    def network_for(self, size: int):
        network = self._by_size.get(size)
        if network is None:
            raise UnsupportedBoardSizeError(
                f"no network for {size}x{size}; the networks play {', '.join(f'{s}x{s}' for s in self.board_sizes)}")
        return network

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        if not states:
            return Evaluation(np.zeros((0, 0), dtype=np.float32), np.zeros(0, dtype=np.float32))
        return self.network_for(states[0].size).evaluate(states)


def _is_provider_failure(error: Exception) -> bool:
    """Whether a session failed because of a GPU provider (then the next provider is tried) rather than the file."""
    text = str(error).lower()
    return any(word in text for word in ("cuda", "tensorrt", "provider", "cudnn", "libcu"))


class CachedEvaluator:
    """An LRU cache of evaluations keyed by ``GameState.hash`` (stones, side to move, ko) and board size.

    Positions with the same stones but different histories share an entry, as in Leela Zero's NNCache; the policy
    is re-masked to the asking position's legal moves. Thread-safe.
    """

    def __init__(self, inner: Evaluator, capacity: int = 200_000):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.inner = inner
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[int, int], tuple[np.ndarray, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        count = len(states)
        keys = [(s.hash, s.size) for s in states]
        found: list[tuple[np.ndarray, float] | None] = [None] * count
        with self._lock:
            for i, key in enumerate(keys):
                entry = self._entries.get(key)
                if entry is not None:
                    self._entries.move_to_end(key)
                    found[i] = entry
        missing: dict[tuple[int, int], int] = {}
        for i, key in enumerate(keys):
            if found[i] is None and key not in missing:
                missing[key] = i
        if missing:
            fresh = self.inner.evaluate([states[i] for i in missing.values()])
            computed = {key: (fresh.policy[j], float(fresh.value[j])) for j, key in enumerate(missing)}
            with self._lock:
                for key, entry in computed.items():
                    self._entries[key] = entry
                    self._entries.move_to_end(key)
                while len(self._entries) > self.capacity:
                    self._entries.popitem(last=False)
            for i, key in enumerate(keys):
                if found[i] is None:
                    found[i] = computed[key]
        with self._lock:
            self.misses += len(missing)
            self.hits += count - len(missing)
        policy = np.stack([entry[0] for entry in found])  # type: ignore[index]
        value = np.array([entry[1] for entry in found], dtype=np.float32)  # type: ignore[index]
        if missing and len(missing) == count:
            return Evaluation(policy, value)
        # Entries computed for another history may allow a move that a superko rule now forbids.
        policy = policy * np.stack([legal_mask(s) for s in states])
        policy /= policy.sum(axis=1, keepdims=True)
        return Evaluation(policy.astype(np.float32, copy=False), value)

"""Several networks behind one evaluator (``NetworkSet``: each board size to the first network that plays it), and
the networks an engine loads from its paths (``load_networks``; a KataGo model file through its cached ONNX
conversion).

Layer: net; numpy and onnxruntime only.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np

from tabula.engine.net.evaluation import (
    Evaluation,
    PendingEvaluation,
    UnsupportedBoardSizeError,
    empty_evaluation,
    evaluate_all_symmetries,
    evaluate_async,
)
from tabula.engine.net.onnx_evaluator import OnnxEvaluator
from tabula.engine.net.providers import stderr_log
from tabula.engine.rules.game import GameState


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

    @property
    def on_gpu(self) -> bool:
        """Whether any of the networks runs on a GPU."""
        return any(getattr(network, "on_gpu", False) for network in self.networks)

    def network_for(self, size: int):
        network = self._by_size.get(size)
        if network is None:
            raise UnsupportedBoardSizeError(
                f"no network for {size}x{size}; the networks play {', '.join(f'{s}x{s}' for s in self.board_sizes)}")
        return network

    def evaluate(self, states: Sequence[GameState]) -> Evaluation:
        if not states:
            return empty_evaluation()
        return self.network_for(states[0].size).evaluate(states)

    def evaluate_async(self, states: Sequence[GameState]) -> PendingEvaluation:
        if not states:
            return PendingEvaluation(empty_evaluation)
        return evaluate_async(self.network_for(states[0].size), states)

    def evaluate_averaged(self, states: Sequence[GameState]) -> Evaluation:
        if not states:
            return empty_evaluation()
        return evaluate_all_symmetries(self.network_for(states[0].size), states)

    def evaluate_symmetry(self, states: Sequence[GameState], symmetry: int) -> Evaluation:
        if not states:
            return empty_evaluation()
        return self.network_for(states[0].size).evaluate_symmetry(states, symmetry)


def load_networks(paths: Sequence, seed: np.random.SeedSequence, **options) -> tuple[object, list[OnnxEvaluator]]:
    """(the evaluator the search sees, the networks): one ``OnnxEvaluator`` a path (a KataGo model file through its
    cached ONNX conversion, ``katago_onnx``), each with its own random stream spawned from ``seed`` and the given
    options, behind a ``NetworkSet`` where there are several (each board size to the first that plays it)."""
    rngs = [np.random.default_rng(s) for s in seed.spawn(len(paths))]
    paths = [katago_onnx(path, options.get("log", stderr_log)) for path in paths]
    networks = [OnnxEvaluator(path, rng=rng, **options) for path, rng in zip(paths, rngs)]
    return (networks[0] if len(networks) == 1 else NetworkSet(networks)), networks


def katago_onnx(path, log: Callable[[str], None] | None = stderr_log):
    """``path`` itself, or for a KataGo model file (``.bin.gz`` and the like) its ONNX conversion, made on first use
    and kept in a cache (``katago_model.converted_onnx``: NetworkFileError where it cannot be made)."""
    from tabula.engine.net import katago_model

    if not os.path.isfile(path) or not katago_model.looks_like_katago(path):
        return path
    return katago_model.converted_onnx(path, log)


__all__ = ["NetworkSet", "load_networks", "katago_onnx"]

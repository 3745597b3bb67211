"""Network fixtures: a tiny network (1 block × 8 channels) built, calibrated and exported once per session.

Test modules import the fixtures they use (``from tests.conftest_network import tiny_onnx``); ``conftest.py`` may
also list this module in ``pytest_plugins``.
"""
from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from tabula.engine.net.features import encode_batch
from tabula.engine.rules.coords import PASS
from tabula.engine.rules.game import GameState


def random_game(size: int, moves: int, seed: int) -> list[GameState]:
    """The positions of one random game (no own-eye filling), the empty board first."""
    rng = random.Random(seed)
    state = GameState(size)
    states = [state.copy()]
    for _ in range(moves):
        legal = [m for m in state.legal_moves()
                 if not state.board.is_own_eye(state.board.geometry.padded[m], state.to_move)]
        state.play(rng.choice(legal) if legal else PASS)
        states.append(state.copy())
        if state.is_game_over():
            break
    return states


def calibration(size: int, seed: int = 0) -> list[np.ndarray]:
    states = random_game(size, 60, seed)
    return [encode_batch(states)]


@pytest.fixture(scope="session")
def tiny_model():
    """torch TabulaNet, agz head, 19×19, 1 block × 8 channels, random but calibrated weights."""
    from tabula.engine.net.network import NetSpec, random_network

    return random_network(NetSpec(blocks=1, filters=8, board_size=19), seed=1, calibration=calibration(19))


@pytest.fixture(scope="session")
def tiny_onnx(tiny_model, tmp_path_factory) -> Path:
    """Path of ``tiny_model`` exported to ONNX (fp32, with metadata)."""
    from tabula.engine.net.network import export_onnx

    path = tmp_path_factory.mktemp("net") / "tiny.onnx"
    export_onnx(tiny_model, path, provenance="tests: random seed 1")
    return path


@pytest.fixture(scope="session")
def tiny_pooled_model():
    """torch TabulaNet with the size-independent head, 1 block × 8 channels."""
    from tabula.engine.net.network import POOLED, NetSpec, random_network

    spec = NetSpec(blocks=1, filters=8, head=POOLED, head_channels=8)
    return random_network(spec, seed=2, calibration=calibration(9) + calibration(13))


@pytest.fixture(scope="session")
def tiny_pooled_onnx(tiny_pooled_model, tmp_path_factory) -> Path:
    from tabula.engine.net.network import export_onnx

    path = tmp_path_factory.mktemp("net") / "tiny_pooled.onnx"
    export_onnx(tiny_pooled_model, path, provenance="tests: random seed 2", board_sizes=[9, 13, 19])
    return path


@pytest.fixture(scope="session")
def tiny_aux_onnx(tmp_path_factory) -> Path:
    """A size-independent network with score and ownership heads (1 block × 8 channels, random weights)."""
    from tabula.engine.net.network import POOLED, NetSpec, export_onnx, random_network

    spec = NetSpec(blocks=1, filters=8, head=POOLED, head_channels=8, aux=True)
    model = random_network(spec, seed=3, calibration=calibration(9))
    path = tmp_path_factory.mktemp("net") / "tiny_aux.onnx"
    export_onnx(model, path, provenance="tests: random seed 3")
    return path


def as_the_file_computes(path, **options):
    """An OnnxEvaluator of an int8 file that runs its QDQ graph in float (onnxruntime's graph optimisations off), so
    that what a test reads of the file does not hang on this CPU's int8 kernels, which saturate where the CPU has
    no VNNI (docs/BENCHMARKS.md, "int8 on a CPU without VNNI"; the engine checks for that: OnnxEvaluator's
    check_int8)."""
    import onnxruntime as ort

    from tabula.engine.net.evaluator import OnnxEvaluator

    evaluator = OnnxEvaluator(path, provider="cpu", log=None, check_int8=False, **options)
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    evaluator._use_session(ort.InferenceSession(str(path), sess_options=plain, providers=["CPUExecutionProvider"]))
    return evaluator

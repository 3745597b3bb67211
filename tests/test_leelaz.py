"""Leela Zero weight files: read/write, clear errors on bad files, and a cross-check against leelaz 0.17 itself."""
from __future__ import annotations

import gzip
import os
import subprocess

import numpy as np
import pytest

from tabula.engine.net.evaluator import OnnxEvaluator
from tabula.engine.net.features import encode_batch, inverse_transform_policy, transform_planes
from tabula.engine.net.leelaz import LeelazFormatError, format_leelaz, read_leelaz, write_leelaz
from tabula.engine.net.network import NetSpec, export_onnx, from_leelaz, load_onnx, random_network, to_leelaz
from tabula.engine.rules.coords import parse_vertex
from tabula.engine.rules.game import GameState

LEELAZ = "/usr/games/leelaz"
needs_leelaz = pytest.mark.skipif(not os.access(LEELAZ, os.X_OK), reason="leelaz not installed")
MOVES = ["D4", "Q16", "D16", "Q4", "C3", "pass", "R3", "C4", "D3"]


@pytest.fixture(scope="module")
def lz_file(tmp_path_factory, tiny_model):
    path = tmp_path_factory.mktemp("lz") / "tiny.txt"
    write_leelaz(to_leelaz(tiny_model), path)
    return path


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    """A 9×9 net (1 block × 4 filters): small enough to read and write quickly."""
    path = tmp_path_factory.mktemp("lz") / "small.txt"
    write_leelaz(to_leelaz(random_network(NetSpec(blocks=1, filters=4, board_size=9), seed=4)), path)
    return path


def test_round_trip(small_file, tmp_path):
    weights = read_leelaz(small_file)
    assert (weights.blocks, weights.filters, weights.board_size, weights.version) == (1, 4, 9, 1)
    zipped = tmp_path / "small.txt.gz"
    write_leelaz(weights, zipped)
    assert gzip.decompress(zipped.read_bytes()).decode() == small_file.read_text()
    again = read_leelaz(zipped)
    assert format_leelaz(again) == small_file.read_text()
    assert np.array_equal(again.policy_fc_weights, weights.policy_fc_weights)


def broken(source, tmp_path, edit) -> str:
    lines = source.read_text().split("\n")
    path = tmp_path / "broken.txt"
    path.write_text("\n".join(edit(lines)))
    return str(path)


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:10], "truncated"),
    (lambda lines: ["3"] + lines[1:], "version 3"),
    (lambda lines: ["one"] + lines[1:], "format version"),
    (lambda lines: lines[:2] + ["1 2 x"] + lines[3:], "line 3: not a list of numbers"),
    (lambda lines: lines[:3] + [lines[3] + " 0.5"] + lines[4:], "line 4"),
    (lambda lines: lines[:4] + ["nan " * 8] + lines[5:], "non-finite"),
    (lambda lines: [], "empty file"),
])
def test_bad_files_name_the_file_and_the_problem(small_file, tmp_path, edit, message):
    path = broken(small_file, tmp_path, edit)
    with pytest.raises(LeelazFormatError, match=message) as info:
        read_leelaz(path)
    assert "broken.txt" in str(info.value)


def test_binary_and_missing_files(tmp_path):
    binary = tmp_path / "net.bin"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(LeelazFormatError, match="net.bin"):
        read_leelaz(binary)
    bad_gzip = tmp_path / "net.gz"
    bad_gzip.write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(LeelazFormatError, match="gzip"):
        read_leelaz(bad_gzip)
    with pytest.raises(LeelazFormatError, match="cannot read"):
        read_leelaz(tmp_path / "absent.txt")


# -- against leelaz 0.17 ----------------------------------------------------------------------------------------------


def leelaz_heatmaps(weights: str, symmetry: int = 0) -> list[tuple[np.ndarray, int, float]]:
    """(policy ×1000 as int [361] in flat order, pass ×1000, winrate) after each of MOVES, from ``heatmap``."""
    commands = [f"heatmap {symmetry}"]
    for i, move in enumerate(MOVES):
        commands += [f"play {'bw'[i % 2]} {move}", f"heatmap {symmetry}"]
    result = subprocess.run([LEELAZ, "--cpu-only", "-w", weights, "--gtp", "--noponder", "-t", "1"],
                            input="\n".join(commands + ["quit"]) + "\n", capture_output=True, text=True, timeout=60)
    lines = result.stderr.splitlines()
    maps = []
    for i, line in enumerate(lines):
        if line.startswith("winrate:"):
            rows = [[int(t) for t in row.split()] for row in lines[i - 20: i - 1]]
            maps.append((np.array(rows[::-1]).ravel(), int(lines[i - 1].split()[1]), float(line.split()[1])))
    assert len(maps) == len(MOVES) + 1, result.stderr[-2000:]
    return maps


def positions() -> list[GameState]:
    state = GameState(19)
    states = [state.copy()]
    for move in MOVES:
        state.play(parse_vertex(move, 19))
        states.append(state.copy())
    return states


def our_heatmaps(onnx_path: str, symmetry: int = 0) -> list[tuple[np.ndarray, int, float]]:
    evaluator = OnnxEvaluator(onnx_path, symmetry="identity", log=None)
    states = positions()
    planes = transform_planes(encode_batch(states), symmetry)
    logits, value = evaluator.run(planes)
    logits = inverse_transform_policy(logits, symmetry)
    # Leela Zero's heatmap: the softmax over all 362 outputs, ×1000 truncated, shown for empty points only.
    policy = np.exp(logits - logits.max(axis=1, keepdims=True))
    policy /= policy.sum(axis=1, keepdims=True)
    maps = []
    for state, p, v in zip(states, policy, value):
        empty = np.array([state.color_at(i) == 0 for i in range(361)])
        maps.append((np.where(empty, (p[:361] * 1000).astype(int), 0), int(p[361] * 1000), (1 + float(v)) / 2))
    return maps


def assert_same(ours, theirs) -> None:
    for (grid, pass_, winrate), (lz_grid, lz_pass, lz_winrate) in zip(ours, theirs):
        assert np.abs(grid - lz_grid).max() <= 1  # both truncate p × 1000: rounding may differ by one
        assert abs(pass_ - lz_pass) <= 1
        assert abs(winrate - lz_winrate) < 2e-6  # leelaz prints six decimals
    assert max(g.max() for g, _, _ in theirs) > 20  # the net is peaked enough for the check to mean something


@needs_leelaz
@pytest.mark.parametrize("symmetry", [0, 5])
def test_same_policy_and_value_as_leelaz(lz_file, tmp_path, symmetry):
    onnx_path = tmp_path / "from_lz.onnx"
    export_onnx(from_leelaz(read_leelaz(lz_file)), onnx_path, "test")
    assert_same(our_heatmaps(str(onnx_path), symmetry), leelaz_heatmaps(str(lz_file), symmetry))


@needs_leelaz
def test_leelaz_file_with_biases_and_round_trip(tmp_path, tiny_model):
    """A file with non-zero conv biases (which Leela Zero folds into the means) -> ONNX -> LZ text: leelaz prints
    exactly the same heatmaps for both files, and ours match them."""
    weights = to_leelaz(tiny_model)
    rng = np.random.default_rng(0)
    for layer in [weights.input, *weights.residual, weights.policy, weights.value]:
        layer.biases = rng.normal(0, 0.2, layer.biases.shape).astype(np.float32)
    original = tmp_path / "biased.txt"
    write_leelaz(weights, original)
    onnx_path = tmp_path / "biased.onnx"
    export_onnx(from_leelaz(read_leelaz(original)), onnx_path, "test")
    again = tmp_path / "again.txt"
    write_leelaz(to_leelaz(load_onnx(onnx_path)), again)
    theirs = leelaz_heatmaps(str(original))
    assert_same(our_heatmaps(str(onnx_path)), theirs)
    for (a, pa, wa), (b, pb, wb) in zip(leelaz_heatmaps(str(again)), theirs):
        assert np.array_equal(a, b) and pa == pb and wa == wb


@pytest.mark.slow
@needs_leelaz
def test_version_2_value_is_blacks(tmp_path, tiny_model):
    """ELF-style v2 files: the net's value is black's; leelaz and we both turn it to the side to move's."""
    weights = to_leelaz(tiny_model)
    weights.version = 2
    path = tmp_path / "elf.txt.gz"
    write_leelaz(weights, path)
    model = from_leelaz(read_leelaz(path))
    assert model.spec.value_perspective == "black"
    onnx_path = tmp_path / "elf.onnx"
    export_onnx(model, onnx_path, "test")
    assert_same(our_heatmaps(str(onnx_path)), leelaz_heatmaps(str(path)))
    assert to_leelaz(load_onnx(onnx_path)).version == 2

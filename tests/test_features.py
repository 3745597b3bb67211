"""Input planes (Leela Zero's 18-plane encoding) and the 8 dihedral symmetries."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabula.engine.net.features import (
    NUM_PLANES,
    encode,
    encode_batch,
    inverse_transform_planes,
    inverse_transform_policy,
    symmetric_point,
    symmetry_tables,
    transform_planes,
    transform_policy,
)
from tabula.engine.rules.coords import PASS, parse_vertex
from tabula.engine.rules.game import GameState
from tests.conftest_network import random_game


def played(size: int, *vertices: str) -> GameState:
    state = GameState(size)
    for vertex in vertices:
        state.play(parse_vertex(vertex, size))
    return state


def stones(plane: np.ndarray) -> set[str]:
    """GTP vertices where a plane [N, N] is 1."""
    ys, xs = np.nonzero(plane)
    return {f"{'ABCDEFGHJKLMNOPQRST'[x]}{y + 1}" for y, x in zip(ys, xs)}


def test_empty_board_black_to_move():
    planes = encode(GameState(9))
    assert planes.shape == (NUM_PLANES, 9, 9) and planes.dtype == np.float32
    assert not planes[:16].any()
    assert (planes[16] == 1).all() and not planes[17].any()


def test_known_position_with_history():
    state = played(9, "D4", "F6", "C3")  # white to move
    planes = encode(state)
    # Side to move (white): now, before C3, before F6, then the empty start.
    assert [stones(planes[i]) for i in range(4)] == [{"F6"}, {"F6"}, set(), set()]
    # Opponent (black).
    assert [stones(planes[8 + i]) for i in range(4)] == [{"D4", "C3"}, {"D4"}, {"D4"}, set()]
    assert not planes[4:8].any() and not planes[12:16].any()
    assert not planes[16].any() and (planes[17] == 1).all()
    # y = 0 is the bottom row: D4 is column 3, row 3.
    assert planes[9, 3, 3] == 1


def test_history_reaches_back_seven_moves_and_counts_passes():
    state = played(9, "A1", "B1", "C1", "D1", "E1", "F1", "G1", "H1", "J1")  # 9 moves, white to move
    planes = encode(state)
    assert stones(planes[8]) == {"A1", "C1", "E1", "G1", "J1"}
    assert stones(planes[15]) == {"A1"}  # 7 moves ago: after A1 and B1
    state.play(PASS)  # black to move; the position repeats in the history
    planes = encode(state)
    assert stones(planes[0]) == stones(planes[1]) == {"A1", "C1", "E1", "G1", "J1"}
    assert (planes[16] == 1).all()


def test_captured_stones_leave_the_current_plane_only():
    state = played(9, "A2", "A1", "B1")  # black captures A1; white to move
    planes = encode(state)
    assert stones(planes[0]) == set()
    assert stones(planes[1]) == {"A1"}
    assert stones(planes[8]) == {"A2", "B1"}


def test_batch_equals_stacked_singles():
    states = random_game(9, 30, seed=3)
    batch = encode_batch(states)
    assert batch.shape == (len(states), NUM_PLANES, 9, 9)
    assert np.array_equal(batch, np.stack([encode(s) for s in states]))


def test_encoding_under_symmetries_equals_transforming_after():
    states = random_game(9, 30, seed=4)[-8:]
    symmetries = np.arange(8)
    assert np.array_equal(encode_batch(states, symmetries), transform_planes(encode_batch(states), symmetries))


def test_mixed_sizes_rejected():
    with pytest.raises(ValueError):
        encode_batch([GameState(9), GameState(13)])


def test_symmetry_numbering_is_leela_zeros():
    assert symmetric_point(1, 2, 0, 19) == (1, 2)
    assert symmetric_point(1, 2, 1, 19) == (1, 16)  # mirror y
    assert symmetric_point(1, 2, 2, 19) == (17, 2)  # mirror x
    assert symmetric_point(1, 2, 4, 19) == (2, 1)  # transpose
    assert symmetric_point(1, 2, 7, 19) == (16, 17)  # transpose, then both mirrors


def test_symmetries_are_eight_distinct_permutations():
    forward, inverse = symmetry_tables(5)
    assert len({tuple(row) for row in forward}) == 8
    for s in range(8):
        assert sorted(forward[s]) == list(range(26)) and forward[s, 25] == 25
        assert (forward[s][inverse[s]] == np.arange(26)).all()


@settings(max_examples=25, deadline=None)
@given(size=st.integers(2, 19), symmetry=st.integers(0, 7), seed=st.integers(0, 2**32 - 1))
def test_transform_then_inverse_is_identity(size, symmetry, seed):
    rng = np.random.default_rng(seed)
    planes = rng.random((3, NUM_PLANES, size, size), dtype=np.float32)
    policy = rng.random((3, size * size + 1), dtype=np.float32)
    assert np.array_equal(inverse_transform_planes(transform_planes(planes, symmetry), symmetry), planes)
    assert np.array_equal(inverse_transform_policy(transform_policy(policy, symmetry), symmetry), policy)
    assert transform_policy(policy, symmetry)[:, -1].tolist() == policy[:, -1].tolist()  # pass stays


def test_per_row_symmetries_match_single_ones():
    rng = np.random.default_rng(0)
    planes = rng.random((8, NUM_PLANES, 7, 7), dtype=np.float32)
    policy = rng.random((8, 50), dtype=np.float32)
    symmetries = np.arange(8)
    batch = transform_planes(planes, symmetries)
    back = inverse_transform_policy(policy, symmetries)
    for s in range(8):
        assert np.array_equal(batch[s], transform_planes(planes[s], s))
        assert np.array_equal(back[s], inverse_transform_policy(policy[s], s))


@pytest.mark.parametrize("shape", [(5, 52, 19, 19), (5, 52, 9, 9), (5, 3, 5, 5), (4, 2, 3, 19, 19)])
def test_per_row_symmetries_both_ways(shape):
    """Batches of many planes a row take each row on its own, smaller ones take_along_axis: both as one symmetry
    at a time."""
    rng = np.random.default_rng(1)
    planes = rng.random(shape, dtype=np.float32)
    symmetries = rng.integers(0, 8, shape[0])
    batch = transform_planes(planes, symmetries)
    back = inverse_transform_planes(batch, symmetries)
    for row, s in enumerate(symmetries.tolist()):
        assert np.array_equal(batch[row], transform_planes(planes[row], s))
    assert np.array_equal(back, planes)
    # one symmetry in an array of one still applies to every row, as numpy broadcasts it
    assert np.array_equal(transform_planes(planes, symmetries[:1]), transform_planes(planes, int(symmetries[0])))


def test_planes_and_policy_transform_alike():
    """A stone at point p in the planes sits where the transformed policy puts p's probability."""
    state = played(9, "C7")
    planes = encode(state)
    one_hot = np.zeros(82, dtype=np.float32)
    one_hot[parse_vertex("C7", 9)] = 1
    for s in range(8):
        moved = transform_planes(planes, s)[8].ravel()
        assert np.array_equal(moved, transform_policy(one_hot, s)[:81])


def symmetric_position() -> GameState:
    """Stones unchanged by all 8 symmetries of the 9×9 board."""
    state = GameState(9)
    for vertex in ("C3", "G3", "C7", "G7", "E5"):
        state.place_setup(parse_vertex(vertex, 9), 1)
    for vertex in ("E3", "E7", "C5", "G5"):
        state.place_setup(parse_vertex(vertex, 9), 2)
    return state


def test_symmetric_position_has_symmetric_planes():
    planes = encode(symmetric_position())
    assert planes[8].sum() == 4 and planes[0].sum() == 5
    for s in range(8):
        assert np.array_equal(transform_planes(planes, s), planes)

"""The fast paths of KataGo's V7 inputs (engine.net.katago_features) and of the reading features against the plain
algorithms they replace, on random games: Benson's pass-alive areas on bit sets against a point-by-point flood fill,
ladder readings kept per string (reused where the stones they looked at are unchanged) against reading every string
afresh, and superko bans computed once for the table key and the features against computing them each time."""
from __future__ import annotations

import random

import numpy as np
import pytest

from tabula.engine.net import katago_features as kf
from tabula.engine.net import reading_features as rf
from tabula.engine.rules.board import Board
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, WHITE
from tabula.engine.rules.game import GameState, parse_rules
from tests.test_reading_features import reference as reading_reference

# -- the plain algorithms ------------------------------------------------------------------------------------------


def reference_area(board: Board, suicide: bool, seki_tax: bool) -> np.ndarray:
    """KataGo's area for the NN, point by point (katago_features' algorithm before it ran on bit sets)."""
    geometry = board.geometry
    result = bytearray(geometry.padded_len)
    for pla in (BLACK, WHITE):
        _reference_area_for(board, pla, suicide, result)
    color = board.color
    for pad in geometry.padded:
        if result[pad] == EMPTY:
            result[pad] = color[pad]
    if seki_tax:
        result = kf._independent_life(board, result)
    return np.frombuffer(bytes(result), dtype=np.int8)[geometry.padded_array].copy()


def _reference_area_for(board: Board, pla: int, suicide: bool, result: bytearray) -> None:
    """Benson's pass-alive strings and territory of ``pla``, and its big single-colour regions, into ``result``
    (padded), as KataGo's calculateAreaForPla with safe and unsafe big territories."""
    geometry = board.geometry
    color = board.color
    root = board.root
    neighbors = geometry.neighbors
    opp = 3 - pla
    region_of = [-1] * geometry.padded_len
    regions: list[list[int]] = []
    vital: list[set[int]] = []
    internal: list[int] = []
    has_opp: list[bool] = []
    at_least_one = False
    for pad in geometry.padded:
        c = color[pad]
        if c != EMPTY:
            if c == pla:
                at_least_one = True
            continue
        if region_of[pad] != -1:
            continue
        index = len(regions)
        heads = {root[n] for n in neighbors[pad] if color[n] == pla}
        points = [pad]
        region_of[pad] = index
        inner = 0
        contains_opp = False
        i = 0
        while i < len(points):
            point = points[i]
            i += 1
            point_color = color[point]
            adjacent_heads = None
            if heads and (suicide or point_color == EMPTY):
                adjacent_heads = {root[n] for n in neighbors[point] if color[n] == pla}
                heads &= adjacent_heads
            if inner < 2:
                if adjacent_heads is None:
                    touches = any(color[n] == pla for n in neighbors[point])
                else:
                    touches = bool(adjacent_heads)
                if not touches:
                    inner += 1
            if point_color == opp:
                contains_opp = True
            for n in neighbors[point]:
                nc = color[n]
                if (nc == EMPTY or nc == opp) and region_of[n] == -1:
                    region_of[n] = index
                    points.append(n)
        regions.append(points)
        vital.append(heads)
        internal.append(inner)
        has_opp.append(contains_opp)

    strings = {r for r in board.liberties if color[r] == pla}
    vital_count = dict.fromkeys(strings, 0)
    for heads in vital:
        for head in heads:
            vital_count[head] += 1
    borders_dead = [False] * len(regions)
    killed: set[int] = set()
    while True:
        killed_any = False
        for head in strings:
            if head in killed or vital_count[head] >= 2:
                continue
            killed.add(head)
            killed_any = True
            for stone in board.string_stones(head):
                for n in neighbors[stone]:
                    index = region_of[n]
                    if index >= 0 and not borders_dead[index]:
                        borders_dead[index] = True
                        for other in vital[index]:
                            vital_count[other] -= 1
        if not killed_any:
            break
    for head in strings:
        if head not in killed:
            for stone in board.string_stones(head):
                result[stone] = pla
    if not at_least_one:
        return
    for index, points in enumerate(regions):
        if not borders_dead[index] and (internal[index] <= 1 or not has_opp[index]):
            for point in points:
                result[point] = pla
        elif not has_opp[index]:
            for point in points:
                if result[point] == EMPTY:
                    result[point] = pla


def reference_ladders(board: Board, ko: int) -> tuple[set[int], dict[int, set[int]]]:
    """Feature 14's stones and feature 17's moves by colour (flat points), every string read afresh."""
    if board.ko != ko:
        board = board.copy()
        board.ko = ko
    flat = board.geometry.flat
    stones: set[int] = set()
    working: dict[int, set[int]] = {BLACK: set(), WHITE: set()}
    for root, libs in list(board.liberties.items()):
        if len(libs) == 1:
            captured = kf._ladder_captured(board, root, True)
        elif len(libs) == 2:
            moves, _ = kf._attacker_first_two_liberties(board, root)
            working[board.color[root]].update(flat[m] for m in moves)
            captured = bool(moves)
        else:
            continue
        if captured:
            stones.update(flat[s] for s in board.string_stones(root))
    return stones, working


# -- positions -----------------------------------------------------------------------------------------------------


def filled_games(size: int, games: int, seed: int, rules_name: str) -> list[GameState]:
    """Positions of random games that fill the board but their own single-point eyes (so that groups live, areas
    form and strings sit in atari), a few from each game and its end."""
    rng = random.Random(seed)
    positions = []
    for _ in range(games):
        state = GameState(size, parse_rules(rules_name, 7.5))
        for _ in range(size * size * 3):
            legal = np.flatnonzero(state.legal_mask()[:-1] & ~state.board.own_eye_mask(state.to_move)).tolist()
            state.play(rng.choice(legal) if legal and rng.random() > 0.02 else PASS)
            if rng.random() < 0.04:
                positions.append(state.copy())
            if state.passes >= 2:
                break
        positions.append(state)
    return positions


def search_walk(root: GameState, leaves: int, seed: int) -> list[GameState]:
    """Positions as a search meets them: each a child of the root or of an earlier one, in a random order."""
    rng = random.Random(seed)
    found = [root]
    for _ in range(leaves):
        parent = rng.choice(found)
        legal = parent.legal_moves()
        if not legal:
            continue
        child = parent.copy()
        child.play(rng.choice(legal))
        found.append(child)
    return found


# -- the tests -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size, rules_name", [(2, "tromp-taylor"), (4, "chinese"), (5, "tromp-taylor"),
                                              (7, "chinese"), (9, "tromp-taylor"), (13, "chinese")])
def test_the_area_on_bit_sets_is_the_plain_flood_fills(size, rules_name):
    owned_empty = 0
    for state in filled_games(size, max(2, 40 // size), size, rules_name):
        board = state.board
        empty = np.frombuffer(bytes(board.color), dtype=np.int8)[board.geometry.padded_array] == EMPTY
        for suicide in (False, True):
            for seki_tax in (False, True):
                kf.clear_caches()
                expected = reference_area(board, suicide, seki_tax)
                assert np.array_equal(kf._area(board, suicide, seki_tax), expected), f"{suicide} {seki_tax}\n{state}"
                owned_empty += int((empty & (expected != EMPTY)).any())
    assert owned_empty > 0  # territory was found, not only stones


def test_areas_in_a_search_walk_reuse_regions_and_stay_the_plain_ones():
    kf.clear_caches()
    for size, rules_name in [(7, "tromp-taylor"), (9, "chinese"), (13, "new-zealand")]:
        for index, state in enumerate(filled_games(size, 1, 300 + size, rules_name)[-3:]):
            for leaf in search_walk(state, 40, index):
                for suicide in (False, True):
                    assert np.array_equal(kf._area(leaf.board, suicide, False),
                                          reference_area(leaf.board, suicide, False)), f"\n{leaf}"
    assert kf._REGION_CACHE  # regions were kept (and reused by the leaves that share a colour's stones)


@pytest.mark.parametrize("size, rules_name", [(7, "tromp-taylor"), (9, "chinese"), (13, "japanese"),
                                              (19, "chinese")])
def test_ladders_kept_per_string_are_every_string_read_afresh(size, rules_name, monkeypatch):
    reads = []  # strings read afresh (and kept) by the cached path
    footprint = kf._footprint
    monkeypatch.setattr(kf, "_footprint", lambda *args: reads.append(1) or footprint(*args))
    kf.clear_caches()
    strings = laddered = 0
    for index, state in enumerate(filled_games(size, 1, 100 + size, rules_name)[-4:]):
        for leaf in search_walk(state, 120 if size < 19 else 40, index):
            board = leaf.board
            stones, working = kf._ladders(bytes(board.color), board.ko, board)
            expected_stones, expected_working = reference_ladders(board, board.ko)
            assert set(stones.tolist()) == expected_stones, f"\n{leaf}"
            for color in (BLACK, WHITE):
                assert set(working[color].tolist()) == expected_working[color], f"\n{leaf}"
            strings += sum(1 for libs in board.liberties.values() if len(libs) <= 2)
            laddered += len(expected_stones)
    assert laddered > 0
    assert len(reads) < 0.8 * strings, (len(reads), strings)  # the string cache answered many strings


def test_ladder_escapes_kept_per_move_are_every_escape_read_afresh():
    kf.clear_caches()
    rf.clear_caches()
    escapes = 0
    for size, rules_name in [(9, "chinese"), (13, "tromp-taylor"), (19, "aga")]:
        for index, state in enumerate(filled_games(size, 1, 200 + size, rules_name)[-3:]):
            for leaf in search_walk(state, 60 if size < 19 else 25, index):
                planes = rf.encode(leaf)
                assert np.array_equal(planes, reading_reference(leaf)), f"\n{leaf}"
                escapes += int(planes[rf.LADDER_ESCAPE].sum())
    assert escapes > 0


def test_superko_bans_shared_by_the_table_key_and_the_features():
    kf.clear_caches()
    rng = random.Random(1)
    banned = 0
    for game in range(16):
        # 4x4 random games repeat positions often enough to ban moves; the same position object is played on, so
        # its set of seen positions grows under the cache
        state = GameState(4, parse_rules("tromp-taylor" if game % 2 == 0 else "aga", 7.5))
        for _ in range(60):
            expected = sorted(kf._superko_banned(state, state.board.ko, state.seen))
            assert sorted(kf.table_key(state)[1]) == expected
            plane = kf.features(state)[0][6].reshape(-1)
            assert all(plane[point] == 1.0 for point in expected)
            assert sorted(kf.table_key(state)[1]) == expected
            banned += len(expected)
            legal = state.legal_moves()
            state.play(rng.choice(legal) if legal and rng.random() > 0.05 else PASS)
            if state.passes >= 2:
                break
    assert banned > 0


@pytest.mark.slow
def test_the_reading_features_legal_moves_are_the_games():
    # Small boards repeat positions (superko bans), retake kos and, under Tromp-Taylor and New Zealand rules, take
    # multi-stone suicides; either colour is asked, so the ko point sometimes binds the colour not to move.
    rng = random.Random(3)
    checked = 0
    for game in range(24):
        rules = parse_rules(["tromp-taylor", "aga", "new-zealand", "chinese"][game % 4], 7.5)
        state = GameState(4 + game % 3, rules)
        for _ in range(50):
            for asked in (state, state.with_to_move(3 - state.to_move)):
                legal = asked.legal_mask()[:-1].reshape(asked.size, asked.size)
                assert np.array_equal(rf.encode(asked)[:6].sum(axis=0), legal), f"\n{asked}"
                checked += 1
            legal = state.legal_moves()
            state.play(rng.choice(legal) if legal and rng.random() > 0.05 else PASS)
            if state.passes >= 2:
                break
    assert checked > 1000

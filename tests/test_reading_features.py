"""AlphaGo's reading features (engine.net.reading_features): against a slow reference that plays every move on a
copy of the position and looks at the result, over random games of 5x5 to 19x19 under four rulesets; hand positions
for each plane; symmetries and the batch."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from tabula.engine.net import katago_features as kf
from tabula.engine.net import reading_features as rf
from tabula.engine.net.features import symmetric_point, transform_planes
from tabula.engine.rules.board import IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, WHITE, parse_vertex
from tabula.engine.rules.game import GameState, Rules, parse_rules
from tests.test_katago_features import GOLDEN, from_gtp

PLANE = {name: index for index, name in enumerate(rf.PLANES)}


def reference(state: GameState) -> np.ndarray:
    """uint8 [11, N, N] the slow way: every empty point played on a copy of ``state``, the string there read after."""
    size = state.size
    planes = np.zeros((rf.NUM_PLANES, size * size), dtype=np.uint8)
    board = state.board
    pla = state.to_move
    neighbors = board.geometry.neighbors
    in_atari = {root for root, libs in board.liberties.items() if board.color[root] == pla and len(libs) == 1}
    for point, pad in enumerate(board.geometry.padded):
        if board.color[pad] != EMPTY:
            continue
        child = state.copy()
        try:
            removed = child.play(point)
        except IllegalMoveError:
            continue
        after = child.board
        if after.color[pad] == EMPTY:  # a multi-stone suicide: its stones came off
            liberties, stones, captured = 0, len(removed), 0
        else:
            liberties, stones, captured = len(after.string_liberties(pad)), len(after.string_stones(pad)), len(removed)
        if liberties >= 2:
            planes[PLANE["liberties_after_2"] + min(liberties, 4) - 2, point] = 1
        else:
            planes[PLANE["self_atari_1"] + min(stones, 3) - 1, point] = 1
        if captured:
            planes[PLANE["capture_1"] + min(captured, 3) - 1, point] = 1
        extends = any(board.color[n] == pla and board.root[n] in in_atari for n in neighbors[pad])
        if extends and (liberties >= 3 or (liberties == 2 and not kf._ladder_captured(after, pad, False))):
            planes[PLANE["ladder_escape"], point] = 1
        if board.is_own_eye(pad, pla):
            planes[PLANE["own_eye"], point] = 1
    return planes.reshape(rf.NUM_PLANES, size, size)


def random_games(size: int, rules: Rules, seed: int, every: int, symmetry: int = 0) -> list[GameState]:
    """Positions every ``every`` moves of a random game (captures, self-ataris, kos, passes) twice the board long, the
    moves seen under ``symmetry``."""
    rng = random.Random(seed)
    plain = GameState(size, rules)
    turned = GameState(size, rules)
    positions = []
    for number in range(2 * size * size):
        legal = plain.legal_moves()
        move = PASS if not legal or rng.random() < 0.03 else rng.choice(legal)
        plain.play(move)
        if move == PASS:
            turned.play(PASS)
        else:
            x, y = symmetric_point(move % size, move // size, symmetry, size)
            turned.play(y * size + x)
        if number % every == every - 1:
            positions.append(turned.copy())
    return positions


RULESETS = ["chinese-ogs", "japanese", "tromp-taylor", "aga"]  # positional, simple, suicide allowed, situational


def test_every_plane_of_random_games_agrees_with_playing_each_move():
    rf.clear_caches()
    hits = np.zeros(rf.NUM_PLANES, dtype=np.int64)
    suicides = positions = 0
    for seed, size in enumerate([5, 6, 7, 8, 9, 11, 13, 19]):
        rules = parse_rules(RULESETS[seed % 4], 7.5)
        for state in random_games(size, rules, seed, max(3, size * size // 12)):
            expected = reference(state)
            planes = rf.encode(state)
            assert planes.shape == expected.shape and planes.dtype == np.uint8
            differ = [rf.PLANES[c] for c in range(rf.NUM_PLANES) if not np.array_equal(planes[c], expected[c])]
            assert not differ, f"{size}x{size} {rules.superko}, {len(state.moves)} moves: {differ}\n{state}"
            # Planes 0-5 partition the legal moves: no legal-move plane is needed, and "one liberty after the move"
            # is the union of the self-atari planes.
            legal = state.legal_mask()[:-1].reshape(size, size)
            assert np.array_equal(planes[:6].sum(axis=0), legal)
            hits += planes.reshape(rf.NUM_PLANES, -1).sum(axis=1, dtype=np.int64)
            suicides += int(rules.suicide and (planes[3:6].any(axis=0) & (planes[6:9].sum(axis=0) == 0)).any())
            positions += 1
    assert positions > 150
    assert hits.min() > 0, dict(zip(rf.PLANES, hits))  # every plane was seen, and checked, at least once
    assert suicides > 0


def test_cached_ladder_escapes_give_the_same_planes():
    states = [s for seed in range(3) for s in random_games(9, Rules(), 10 + seed, 5)]
    rf.clear_caches()
    first = [rf.encode(s) for s in states]
    assert any(planes[PLANE["ladder_escape"]].any() for planes in first)
    assert all(np.array_equal(rf.encode(s), planes) for s, planes in zip(states, first))


# -- hand positions ------------------------------------------------------------------------------------------------


def position(size: int, black: str, white: str, to_move: int = BLACK, rules: Rules | None = None) -> GameState:
    state = GameState(size, rules)
    for color, vertices in ((BLACK, black), (WHITE, white)):
        for vertex in vertices.split():
            state.place_setup(parse_vertex(vertex, size), color)
    state.to_move = to_move
    return state


def marked(state: GameState) -> dict[str, set[str]]:
    """Each plane's points, as GTP vertices."""
    planes = rf.encode(state)
    return {name: {"ABCDEFGHJKLMNOPQRST"[x] + str(y + 1) for y, x in zip(*np.nonzero(planes[index]))}
            for index, name in enumerate(rf.PLANES)}


def test_liberties_after_the_move():
    planes = marked(position(9, "E5", ""))
    assert {"A1", "J9"} <= planes["liberties_after_2"] and {"A5", "E1"} <= planes["liberties_after_3"]
    assert {"C3", "E6"} <= planes["liberties_after_4+"]  # E6 joins E5: six liberties
    # D4 joins D5 and E4, which share the liberties D4 and E5: the string of three keeps E5 and E3, each once.
    shared = marked(position(9, "D5 E4", "C4 D3 C5 D6 F4"))
    assert "D4" in shared["liberties_after_2"]


def test_self_atari_by_the_size_of_the_string():
    state = position(9, "J2 A9 B9", "B1 H2 J3 C9 A8 C8")
    planes = marked(state)
    assert "A1" in planes["self_atari_1"]  # a lone stone beside B1, its one liberty A2
    assert "J1" in planes["self_atari_2"]  # joins J2 (in atari): one liberty, H1
    assert "B8" in planes["self_atari_3+"]  # joins A9 B9: one liberty, B7
    assert not planes["ladder_escape"] & {"J1", "B8"}  # extending into atari escapes nothing


def test_capture_by_the_stones_taken():
    planes = marked(position(9, "B1 G1 H2 A8 B8 D9 G9 H8 J7", "A1 H1 J1 A9 B9 C9 H9 J8"))
    assert planes["capture_1"] == {"A2"}
    assert planes["capture_2"] == {"J2", "J9"}  # two stones of one string; two lone stones of two strings
    assert planes["capture_3+"] == {"C8"}
    assert "C8" in planes["liberties_after_4+"]  # the captured stones' points are liberties again


def test_a_working_ladder_is_no_escape_and_a_breaker_makes_it_one():
    # Black's F5 put white E5 in atari; extending at E4 runs into a ladder that works on an empty board...
    ladder = marked(position(9, "D5 E6 F4 F5", "E5", WHITE))
    assert "E4" in ladder["liberties_after_2"] and "E4" not in ladder["ladder_escape"]
    # ... and fails with white stones on its paths.
    broken = marked(position(9, "D5 E6 F4 F5", "E5 B2 H8", WHITE))
    assert broken["ladder_escape"] == {"E4"}
    # An extension to three liberties escapes without reading.
    open_side = marked(position(9, "D5 F5 E6", "E5", WHITE))
    assert open_side["ladder_escape"] == {"E4"} and "E4" in open_side["liberties_after_3"]


def test_own_eyes_and_moves_that_are_not_legal():
    planes = marked(position(9, "A2 B1 E5", ""))
    assert planes["own_eye"] == {"A1"}
    white = rf.encode(position(9, "A2 B1 E5", "", WHITE))
    assert not white[:, 0, 0].any()  # suicide for white: no plane at all
    assert not white[:, 4, 4].any()  # occupied


def test_ko_and_superko_leave_the_banned_point_empty():
    ko_moves = ["C5", "E6", "D6", "E4", "D4", "F5", "A1", "D5", "E5"]  # black takes the ko at E5; white to move

    def played(rules: str, extra: list[str]) -> GameState:
        state = GameState(9, parse_rules(rules, 7.5))
        for vertex in ko_moves + extra:
            state.play(PASS if vertex == "pass" else parse_vertex(vertex, 9))
        return state

    d5 = (4, 3)  # [y, x] of D5
    assert not rf.encode(played("japanese", []))[(slice(None),) + d5].any()
    # After two passes the simple ko is lifted (white takes one stone back), positional superko still bans it.
    retake = rf.encode(played("japanese", ["pass", "pass"]))
    assert retake[(PLANE["capture_1"],) + d5] == 1 and retake[(PLANE["self_atari_1"],) + d5] == 1
    assert not rf.encode(played("tromp-taylor", ["pass", "pass"]))[(slice(None),) + d5].any()


def test_multi_stone_suicide_is_a_self_atari_where_the_rules_allow_it():
    black, white = "A2", "A3 B2 B1"
    allowed = rf.encode(position(9, black, white, rules=parse_rules("tromp-taylor")))
    assert allowed[:, 0, 0].tolist() == [1 if name == "self_atari_2" else 0 for name in rf.PLANES]
    assert not rf.encode(position(9, black, white, rules=parse_rules("chinese")))[:, 0, 0].any()


# -- symmetries and the batch --------------------------------------------------------------------------------------


@pytest.mark.parametrize("symmetry", range(1, 8))
def test_the_planes_of_a_turned_game_are_its_planes_turned(symmetry):
    for seed, size in enumerate((7, 9)):
        plain = random_games(size, Rules(), 30 + seed, size * size)
        turned = random_games(size, Rules(), 30 + seed, size * size, symmetry)
        for a, b in zip(plain, turned):
            assert np.array_equal(transform_planes(rf.encode(b), symmetry), rf.encode(a))
            batch = rf.encode_batch([a, a], np.array([0, symmetry]))
            assert batch.dtype == np.float32 and batch.shape == (2, rf.NUM_PLANES, size, size)
            assert np.array_equal(batch[0], rf.encode(a))
            assert np.array_equal(batch[1], transform_planes(rf.encode(a), symmetry))


def test_a_batch_of_different_games_is_each_position_alone():
    """The batch is computed at once, its grids end to end and its strings numbered across them: positions of games
    under the four rulesets, either colour to move, kos and captures, shuffled into one batch, give each position's
    own planes."""
    for size in (5, 9, 13):
        states = [state for seed in range(4) for state in
                  random_games(size, parse_rules(RULESETS[seed], 7.5), 70 + seed, size)]
        random.Random(size).shuffle(states)
        batch = rf.encode_batch(states)
        assert len(states) > 20 and batch[:, rf.PLANES.index("capture_1")].any()
        for state, planes in zip(states, batch):
            assert np.array_equal(planes, reference(state)), state.moves[-3:]


def test_the_batch_refuses_mixed_sizes_and_no_positions():
    with pytest.raises(ValueError):
        rf.encode_batch([GameState(9), GameState(13)])
    with pytest.raises(ValueError):
        rf.encode_batch([])
    empty = rf.encode_batch([GameState(5)])
    assert empty.shape == (1, rf.NUM_PLANES, 5, 5) and np.array_equal(empty[0, :6].sum(axis=0), np.ones((5, 5)))


def test_the_katago_reference_positions_for_either_colour_and_v7s_laddered_strings_never_escape():
    """KataGo's golden positions (hand ladders, kos and superko, handicaps, the reference positions, random and KGS
    games): the planes equal the reference's for both colours to move; and an own string in atari that V7's feature
    14 marks as taken by a ladder (KataGo's search, the defender first) has no escaping extension."""
    with open(GOLDEN) as handle:
        cases = json.load(handle)["cases"]
    rf.clear_caches()
    kf.clear_caches()
    laddered_atari = 0
    for case in cases:
        for color in (BLACK, WHITE):
            state = from_gtp(case["commands"]).with_to_move(color)
            planes = rf.encode(state)
            assert np.array_equal(planes, reference(state)), (case["name"], color)
            laddered = kf.features(state)[0][14].reshape(-1)
            board = state.board
            for root, libs in board.liberties.items():
                if board.color[root] == color and len(libs) == 1 and laddered[board.geometry.flat[root]]:
                    laddered_atari += 1
                    (liberty,) = libs
                    assert not planes[PLANE["ladder_escape"]].reshape(-1)[board.geometry.flat[liberty]], case["name"]
    assert laddered_atari > 0


def test_the_bench_reads_an_archive_and_prints_both_encoders_costs(tmp_path, capsys):
    import io
    import tarfile

    from tabula.engine.rules.sgf import write_sgf
    from tabula.tools.bench import reading_features as bench

    game = random_games(19, Rules(), 7, 170)[0]  # 170 moves: the bench takes games of 160 moves and more
    data = write_sgf(game)
    with tarfile.open(tmp_path / "games.tar.gz", "w:gz") as archive:
        member = tarfile.TarInfo("games/one.sgf")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    assert bench.main(["--sgf", str(tmp_path / "games.tar.gz"), "--rounds", "1", "--children", "2"]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[:4] == ["19x19", "1", "2", "|"] and row.count("ms") == 4
    with pytest.raises(SystemExit):
        bench.main(["--sgf", str(tmp_path / "missing-*.tar.gz")])

"""KataGo's V7 network inputs (engine.net.katago_features): KataGo's own rows for 66 positions, hand positions with
known features (ladders, ko and superko, pass-alive areas, history after passes, komi and rules globals), and the
symmetries."""
from __future__ import annotations

import json
import os
import random
from dataclasses import replace

import numpy as np
import pytest

from tabula.engine.net import katago_features as kf
from tabula.engine.net.encodings import encoding_named
from tabula.engine.net.features import symmetric_point, transform_planes
from tabula.engine.rules.coords import BLACK, PASS, WHITE, parse_color, parse_vertex
from tabula.engine.rules.game import GameState, Rules, parse_rules

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "katago_features_v7.json")


def from_gtp(commands: list[str]) -> GameState:
    """The position the GTP commands set up (boardsize, clear_board, komi, kata-set-rules, set_free_handicap,
    set_position, play), seen for the colour ``kata-raw-nn COLOR 0`` names if the last command is that."""
    size, komi, rules, state = 19, 7.5, Rules(), None
    for command in commands:
        name, *args = command.split()
        if name == "boardsize":
            size = int(args[0])
        elif name == "clear_board":
            state = GameState(size, rules)
        elif name in ("komi", "kata-set-rules"):
            komi = float(args[0]) if name == "komi" else komi
            rules = replace(rules, komi=komi) if name == "komi" else parse_rules(args[0], komi)
            if state is not None:  # set before any move in these cases
                state.rules = rules
        elif name == "set_free_handicap":
            state = GameState(size, rules)
            state.place_handicap([parse_vertex(v, size) for v in args])
        elif name == "set_position":
            state = GameState(size, rules)
            for color, vertex in zip(args[::2], args[1::2]):
                state.place_setup(parse_vertex(vertex, size), parse_color(color))
        elif name == "play":
            state.play(parse_vertex(args[1], size), parse_color(args[0]))
        elif name == "kata-raw-nn" and len(args) == 2:
            state = state.with_to_move(parse_color(args[0]))
    return state


def points(plane: np.ndarray) -> set[str]:
    """GTP vertices where a plane [N, N] (Tabula's rows) is 1."""
    ys, xs = np.nonzero(plane)
    return {f"{'ABCDEFGHJKLMNOPQRST'[x]}{y + 1}" for y, x in zip(ys, xs)}


NINE = ["boardsize 9", "clear_board"]
KO = ["play b C5", "play w E6", "play b D6", "play w E4", "play b D4", "play w F5", "play b A1", "play w D5",
      "play b E5"]


def features_of(commands: list[str]) -> tuple[np.ndarray, np.ndarray]:
    kf.clear_caches()
    return kf.features(from_gtp(commands))


# -- KataGo's own rows -----------------------------------------------------------------------------------------


def test_katagos_own_rows_for_66_positions():
    """Hand positions, the reference positions, random games (5x5 to 19x19, eight rulesets, handicaps, passes, kos,
    suicide, out-of-turn moves) and KGS games, as KataGo 1.17.2 computes them."""
    with open(GOLDEN) as handle:
        cases = json.load(handle)["cases"]
    assert len(cases) == 66
    kf.clear_caches()
    for case in cases:
        spatial, glob = kf.features(from_gtp(case["commands"]))
        size = spatial.shape[-1]
        expected = np.zeros((kf.NUM_SPATIAL, size * size), dtype=np.float32)
        for feature, where in case["spatial"].items():
            expected[int(feature), where] = 1.0
        differ = [c for c in range(kf.NUM_SPATIAL) if not np.array_equal(spatial[c].reshape(-1), expected[c])]
        assert not differ, f"{case['name']}: spatial features {differ} differ from KataGo's"
        np.testing.assert_allclose(glob, case["global"], atol=1e-7, err_msg=case["name"])


# -- hand positions --------------------------------------------------------------------------------------------


def test_a_ladder_that_works_marks_the_stones_and_the_moves_that_start_it():
    spatial, _ = features_of(NINE + ["set_position b D5 b E6 b F4 w E5", "kata-raw-nn b 0"])
    assert points(spatial[14]) == {"E5"}  # laddered string (2 liberties)
    assert points(spatial[17]) == {"E4", "F5"}  # black's moves that capture it by ladder
    assert points(spatial[15]) == points(spatial[16]) == {"E5"}  # no history: the same position
    one_liberty, _ = features_of(NINE + ["set_position b D2 b F2 b E3 w E2", "kata-raw-nn b 0"])
    assert points(one_liberty[14]) == {"E2"} and not one_liberty[17].any()


def test_a_ladder_breaker_on_each_path_saves_the_string():
    spatial, _ = features_of(NINE + ["set_position b D5 b E6 b F4 w E5 w B2 w H8", "kata-raw-nn b 0"])
    assert not spatial[14].any() and not spatial[17].any()


def test_ko_and_superko_bans():
    ko, _ = features_of(NINE + ["komi 7.5", "kata-set-rules japanese"] + KO)
    assert points(ko[6]) == {"D5"}  # white may not retake now
    # Two passes lift the simple ko; positional superko still forbids the retake (it repeats the position).
    positional, glob = features_of(NINE + ["komi 7.5", "kata-set-rules tromp-taylor"] + KO
                                   + ["play w pass", "play b pass"])
    assert points(positional[6]) == {"D5"} and glob[0] == 1.0 and glob[14] == 1.0
    simple, _ = features_of(NINE + ["komi 7.5", "kata-set-rules japanese"] + KO + ["play w pass", "play b pass"])
    assert not simple[6].any()


def test_pass_alive_area_by_bensons_algorithm():
    spatial, _ = features_of(NINE + ["kata-set-rules chinese", "set_position b B1 b D1 b A2 b B2 b C2 b D2 w G7",
                                     "kata-raw-nn w 0"])
    black_group = {"B1", "D1", "A2", "B2", "C2", "D2"}
    assert points(spatial[19]) == black_group | {"A1", "C1"}  # opp (black): two eyes, pass-alive
    assert points(spatial[18]) == {"G7"}  # a lone white stone is no area of its own
    territory, _ = features_of(NINE + ["kata-set-rules japanese", "set_position b B1 b D1 b A2 b B2 b C2 b D2",
                                       "kata-raw-nn w 0"])
    assert not territory[18].any() and not territory[19].any()  # territory scoring shows no area outside the encore


def test_history_after_a_pass_follows_the_rules():
    chinese_spatial, chinese = features_of(NINE + ["komi 7", "kata-set-rules chinese", "play b D4", "play w pass"])
    # Chinese: friendly passing, so KataGo hides the history rather than show a pass that would end the game.
    assert not chinese_spatial[9:14].any() and not chinese[:5].any() and chinese[14] == 0.0
    for rules in ("tromp-taylor", "japanese"):
        spatial, glob = features_of(NINE + ["komi 7", f"kata-set-rules {rules}", "play b D4", "play w pass"])
        assert glob[0] == 1.0 and points(spatial[10]) == {"D4"} and glob[14] == 1.0, rules
    # A finished game shows its last move only.
    spatial, glob = features_of(NINE + ["kata-set-rules chinese", "play b D4", "play w F6", "play b pass",
                                        "play w pass"])
    assert glob[0] == 1.0 and not glob[1:5].any() and not spatial[9:14].any()


def test_the_last_five_moves_and_a_position_asked_for_the_colour_that_moved():
    moves = ["play b C3", "play w G7", "play b C7", "play w G3", "play b E5", "play w E3"]
    spatial, glob = features_of(NINE + moves)
    assert [points(spatial[9 + k]) for k in range(5)] == [{"E3"}, {"E5"}, {"G3"}, {"C7"}, {"G7"}]
    other, _ = features_of(NINE + moves + ["kata-raw-nn w 0"])
    assert not other[9:14].any() and points(other[1]) == {"G7", "G3", "E3"}


@pytest.mark.parametrize("rules, komi, expected", [
    ("chinese", 0.5, dict(komi=4.5, ko=(0.0, 0.0), suicide=0.0, territory=0.0, tax=0.0, wave=-0.5)),
    ("aga", 0.5, dict(komi=3.5, ko=(1.0, -0.5), suicide=0.0, territory=0.0, tax=0.0, wave=0.5)),
    ("japanese", 0.5, dict(komi=4.5, ko=(0.0, 0.0), suicide=0.0, territory=1.0, tax=1.0, wave=0.0)),
    ("tromp-taylor", 0.5, dict(komi=0.5, ko=(1.0, 0.5), suicide=1.0, territory=0.0, tax=0.0, wave=-0.5)),
])
def test_handicap_komi_and_rules_globals(rules, komi, expected):
    """Four handicap stones, white to move: Chinese gives white 4 points, AGA 3, Japanese none but one point per
    stone played (KataGo's territory chilling), Tromp-Taylor none."""
    _, glob = features_of(["boardsize 19", "clear_board", f"komi {komi}", f"kata-set-rules {rules}",
                           "set_free_handicap D4 Q16 D16 Q4"])
    assert glob[5] == pytest.approx(expected["komi"] / 20.0)
    assert tuple(glob[6:8]) == expected["ko"]
    assert (glob[8], glob[9], glob[10]) == (expected["suicide"], expected["territory"], expected["tax"])
    assert glob[18] == expected["wave"]
    assert not glob[[11, 12, 13, 15, 16, 17]].any()


def test_black_sees_minus_the_komi_and_the_wave_follows_the_boards_parity():
    _, even = features_of(["boardsize 8", "clear_board", "komi 7.5", "kata-set-rules chinese"])
    _, odd = features_of(["boardsize 9", "clear_board", "komi 7.5", "kata-set-rules chinese"])
    assert even[5] == odd[5] == np.float32(-7.5 / 20)
    # Black's komi -7.5: half a point above a komi that can draw on 8x8 (-8), half below one on 9x9 (-7).
    assert even[18] == 0.5 and odd[18] == -0.5


# -- symmetries and the encoding -------------------------------------------------------------------------------


def _random_game(size: int, moves: int, rules: Rules, seed: int, symmetry: int = 0) -> GameState:
    """A random game (captures, kos, passes) played as it is or with every move seen under ``symmetry``."""
    rng = random.Random(seed)
    plain = GameState(size, rules)
    turned = GameState(size, rules)
    for _ in range(moves):
        legal = plain.legal_moves()
        move = PASS if not legal or rng.random() < 0.03 else rng.choice(legal)
        plain.play(move)
        if move == PASS:
            turned.play(PASS)
        else:
            x, y = symmetric_point(move % size, move // size, symmetry, size)
            turned.play(y * size + x)
    return turned


@pytest.mark.parametrize("symmetry", range(1, 8))
def test_the_features_of_a_turned_game_are_its_features_turned(symmetry):
    for seed, (size, rules) in enumerate([(9, parse_rules("tromp-taylor", 7.5)), (7, parse_rules("chinese", 7.0)),
                                          (13, parse_rules("japanese", 6.5))]):
        plain = _random_game(size, 3 * size * size // 4, rules, seed)
        turned = _random_game(size, 3 * size * size // 4, rules, seed, symmetry)
        kf.clear_caches()
        expected = kf.encode(plain)
        # the turned game's point symmetric_point(p) holds what the plain game's p holds: turning its planes by the
        # same symmetry gives the plain game's planes
        assert np.array_equal(transform_planes(kf.encode(turned), symmetry), expected)
        batch = kf.encode_batch([plain, plain], np.array([0, symmetry]))
        assert np.array_equal(batch[0], expected)
        assert np.array_equal(batch[1], transform_planes(expected, symmetry))


def test_the_katago_v7_encoding():
    encoding = encoding_named("katago-v7")
    assert (encoding.planes, encoding.has_pass, encoding.scored) == (41, True, True)
    state = GameState(9)
    assert encoding.accepts(state) and encoding.size_planes == (0, 1)
    planes = encoding.trial_planes(9)
    assert planes.shape == (1, 41, 9, 9) and planes.dtype == np.float32
    assert np.all(planes[0, 0] == 1.0) and np.all(planes[0, 22 + 5] == np.float32(-7.5 / 20))
    with pytest.raises(ValueError):
        kf.encode_batch([GameState(9), GameState(13)])
    with pytest.raises(ValueError):
        kf.encode_batch([])


def test_cached_ladders_and_areas_give_the_same_rows():
    state = _random_game(13, 100, parse_rules("chinese", 7.0), 3)
    kf.clear_caches()
    first = kf.encode(state)
    child = state.copy()
    child.play(child.legal_moves()[0])
    kf.encode(child)
    assert np.array_equal(kf.encode(state), first)
    kf.clear_caches()
    assert np.array_equal(kf.encode(child), kf.encode(child))


def test_black_and_white_swap_their_planes():
    state = _random_game(9, 40, parse_rules("tromp-taylor", 7.5), 5)
    assert state.to_move == BLACK
    black, _ = kf.features(state)
    white, _ = kf.features(state.with_to_move(WHITE))
    assert np.array_equal(black[1], white[2]) and np.array_equal(black[2], white[1])

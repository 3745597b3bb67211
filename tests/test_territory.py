"""Rules beyond Tromp-Taylor: the Rules fields and KataGo's named rulesets, prisoners, territory scoring with seki and
dead stones, white's handicap bonus, another ko rule mid-game, and the decision to pass when only dame are left."""
from __future__ import annotations

import random

import numpy as np
import pytest

from tabula.engine.config import PlayConfig
from tabula.engine.play import decision
from tabula.engine.play.judging import seki_for_counting
from tabula.engine.play.player import Player, RandomGoPicker
from tabula.engine.play.result import Candidate, SearchResult
from tabula.engine.rules import playout
from tabula.engine.rules.coords import BLACK, PASS, WHITE, parse_vertex
from tabula.engine.rules.game import (
    AREA,
    POSITIONAL,
    SIMPLE_KO,
    SITUATIONAL,
    TAX_NONE,
    TAX_SEKI,
    TERRITORY,
    GameState,
    Rules,
    UnsupportedRulesError,
    parse_rules,
    scoring_from_sgf,
    sgf_ruleset,
)
from tests.conftest import SEKI_INNER_BLACK, SEKI_INNER_WHITE, SEKI_ONE_EYE_EACH, board_from_ascii

# score.gtp's settled 5x5: black A-B with eyes A5 A3 A1, white C-E with eyes D5 D3 D1.
THREE_EYES_EACH = """
    . X O . O
    X X O O O
    . X O . O
    X X O O O
    . X O . O"""

# kgs.gtp's finished 7x7: black walls on C and E, a lone white stone at A4 inside black's area.
WALLS_AND_A_DEAD_STONE = """
    . . X . X . .
    . . X . X . .
    . . X . X . .
    O . X . X . .
    . . X . X . .
    . . X . X . .
    . . X . X . ."""

# A finished 9x9 game: black's wall on E with 36 points behind it, white's on G with 18, the F column all dame.
ONLY_DAME_LEFT = "\n".join([". . . . X . O . ."] * 9)


def vertices(names, size: int) -> list[int]:
    return [parse_vertex(name, size) for name in names]


def with_rules(state: GameState, name: str) -> GameState:
    state.rules = parse_rules(name, state.rules.komi)
    return state


# -- Rules ---------------------------------------------------------------------------------------------------------

def test_the_default_rules_are_tromp_taylor_area_scoring():
    rules = Rules()
    assert (rules.komi, rules.superko, rules.scoring, rules.tax) == (7.5, POSITIONAL, AREA, TAX_NONE)
    assert rules.white_handicap_bonus == "0" and rules.friendly_pass_ok is False
    assert Rules(scoring=TERRITORY).tax == TAX_SEKI  # the tax follows the scoring unless given
    assert Rules(scoring=TERRITORY, tax=TAX_NONE).tax == TAX_NONE


@pytest.mark.parametrize("fields", [
    {"superko": "spight"}, {"scoring": "stones"}, {"tax": "all"}, {"white_handicap_bonus": "N+1"},
    {"white_handicap_bonus": 1}, {"komi": float("nan")}, {"komi": float("inf")}, {"komi": "6.5"}, {"komi": True},
    {"friendly_pass_ok": "yes"},
])
def test_rules_refuse_bad_fields(fields):
    with pytest.raises(ValueError):
        Rules(**fields)


@pytest.mark.parametrize("name, superko, scoring, bonus", [
    ("japanese", SIMPLE_KO, TERRITORY, "0"), ("Korean", SIMPLE_KO, TERRITORY, "0"),
    ("chinese", SIMPLE_KO, AREA, "N"), ("chinese-ogs", POSITIONAL, AREA, "N"), ("chinese_kgs", POSITIONAL, AREA, "N"),
    ("aga", SITUATIONAL, AREA, "N-1"), ("BGA", SITUATIONAL, AREA, "N-1"), ("new-zealand", SITUATIONAL, AREA, "0"),
    ("new_zealand", SITUATIONAL, AREA, "0"), ("nz", SITUATIONAL, AREA, "0"), ("tromp-taylor", POSITIONAL, AREA, "0"),
    ("TrompTaylor", POSITIONAL, AREA, "0"), ("tromp taylor", POSITIONAL, AREA, "0"), ("ing", POSITIONAL, AREA, "0"),
])
def test_katago_shorthands(name, superko, scoring, bonus):
    rules = parse_rules(name, komi=6.5)
    assert (rules.superko, rules.scoring, rules.white_handicap_bonus, rules.komi) == (superko, scoring, bonus, 6.5)
    assert rules.tax == (TAX_SEKI if scoring == TERRITORY else TAX_NONE)


@pytest.mark.parametrize("text", ["frobnicate", "", "stone-scoring", "ancient_territory", "aga-button",
                                  '{"hasButton": true}', '{"tax": "ALL"}', '{"ko": "SPIGHT"}',
                                  '{"komi": 6.5}', '{"colour": "blue"}', '{"ko": 3}', '["ko"]', '{"ko": "SIMPLE"'])
def test_unknown_or_unplayable_rules_are_refused(text):
    with pytest.raises(UnsupportedRulesError):
        parse_rules(text)


def test_json_rules_default_as_katago_does():
    rules = parse_rules('{"scoring":"TERRITORY","ko":"SITUATIONAL","suicide":false,"friendlyPassOk":true}', 5.5)
    assert (rules.scoring, rules.tax, rules.superko, rules.friendly_pass_ok, rules.komi) == (
        TERRITORY, TAX_SEKI, SITUATIONAL, True, 5.5)
    assert parse_rules("{}") == Rules(suicide=True)  # Tromp-Taylor's, multi-stone suicide included
    assert parse_rules('{"score": "territory", "tax": "NONE"}').tax == TAX_NONE


def test_kata_json_round_trips_and_matches_katagos_form():
    assert Rules().kata_json() == ('{"friendlyPassOk":false,"hasButton":false,"ko":"POSITIONAL","scoring":"AREA",'
                                   '"suicide":false,"tax":"NONE","whiteHandicapBonus":"0"}')
    for name in ("japanese", "chinese", "aga", "nz", "tromp-taylor", "chinese-kgs"):
        rules = parse_rules(name, 0.5)
        assert parse_rules(rules.kata_json(), 0.5) == rules


def test_sgf_ruleset_names():
    assert sgf_ruleset(Rules()) == "Chinese" and sgf_ruleset(parse_rules("japanese")) == "Japanese"
    assert scoring_from_sgf("Japanese") == scoring_from_sgf("korean") == TERRITORY
    assert scoring_from_sgf("Chinese") == scoring_from_sgf("AGA") == scoring_from_sgf("NZ") == AREA
    assert scoring_from_sgf("martian") is None


# -- prisoners ------------------------------------------------------------------------------------------------------

def test_prisoners_are_counted_and_undo_keeps_them_right():
    player = Player(RandomGoPicker(random.Random(1)), size=5)
    for color, vertex in ((WHITE, "A1"), (BLACK, "A2"), (WHITE, "E5"), (BLACK, "B1")):
        player.play(color, parse_vertex(vertex, 5))
    assert player.state.prisoners == (1, 0)  # black took A1
    before = player.state.copy()
    player.play(WHITE, parse_vertex("C3", 5))
    player.play(BLACK, PASS)
    assert player.state.prisoners == (1, 0) and before.prisoners == (1, 0)
    player.undo()
    player.undo()
    player.undo()
    assert player.state.prisoners == (0, 0)


# -- territory scoring ----------------------------------------------------------------------------------------------

def test_territory_and_area_on_a_settled_position():
    state = board_from_ascii(THREE_EYES_EACH, komi=0.5)
    assert state.score() == state.area_score() == -5.5  # 10 - 15 points of area
    assert with_rules(state, "japanese").score() == -0.5  # 3 - 3 points of territory


def test_territory_counts_prisoners_and_removed_dead_stones():
    state = board_from_ascii(WALLS_AND_A_DEAD_STONE, komi=0.5)
    dead = vertices(["A4"], 7)
    assert state.score(dead) == 48.5  # area: 14 stones and 35 points
    with_rules(state, "japanese")
    assert state.score(dead) == 35.5  # 35 points of territory (A4's among them) and the dead stone as a prisoner
    state.prisoners = (2, 5)  # stones captured during the game
    assert state.score(dead) == 32.5


def test_no_territory_in_seki():
    state = board_from_ascii(SEKI_ONE_EYE_EACH, komi=0.0)
    inner = sorted(vertices(SEKI_INNER_BLACK + SEKI_INNER_WHITE, 7))
    assert seki_for_counting(state, []) == inner
    with_rules(state, "japanese")
    assert state.score(seki=inner) == 0  # 2 - 2: the eyes B7 and F7 count for nobody
    # Only black's inner string in seki: its eye B7 is nobody's, white's F7 stays white's.
    assert state.score(seki=vertices(SEKI_INNER_BLACK, 7)) == -1
    state.rules = Rules(komi=0.0, scoring=TERRITORY, tax=TAX_NONE)  # territory in seki counted
    assert state.score(seki=vertices(SEKI_INNER_BLACK, 7)) == 0


def test_walls_with_territory_and_dame_between_are_not_a_seki():
    """The raw seki reading sees two walls with one region of their own each and dame between them as a seki; the
    count must not: the seki tax would take all their territory."""
    state = with_rules(board_from_ascii(ONLY_DAME_LEFT, komi=6.5), "japanese")
    assert playout.seki_stones(state, [])  # what the raw reading says
    assert seki_for_counting(state, []) == []
    assert state.score(seki=seki_for_counting(state, [])) == 36 - 18 - 6.5


def test_final_score_japanese_and_chinese_on_the_same_position():
    results = {}
    for name in ("chinese", "japanese"):
        player = Player(RandomGoPicker(random.Random(3)), size=7)
        player.set_komi(0.5)
        player.set_rules(parse_rules(name, player.komi))
        rows = [row.split() for row in WALLS_AND_A_DEAD_STONE.strip().splitlines()]
        for i, row in enumerate(rows):
            for x, cell in enumerate(row):
                if cell != ".":
                    player.play(BLACK if cell == "X" else WHITE, (6 - i) * 7 + x)
        player.play(BLACK, PASS)
        player.play(WHITE, PASS)
        assert player.final_status("dead") == [vertices(["A4"], 7)]
        results[name] = player.final_score()
    assert results == {"chinese": "B+48.5", "japanese": "B+35.5"}


def test_white_handicap_bonus():
    for name, bonus in (("chinese", 4), ("aga", 3), ("japanese", 0), ("tromp-taylor", 0)):
        state = GameState(9, parse_rules(name, 0.5))
        state.place_handicap(vertices(["C3", "G7", "C7", "G3"], 9))
        assert state.counted_komi == 0.5 + bonus
        assert state.area_score() == 4 + 77 - 0.5 - bonus  # black's area: the stones and every empty point
    assert Rules(white_handicap_bonus="N").handicap_bonus(1) == 0  # one stone is no handicap


# -- another ko rule mid-game ---------------------------------------------------------------------------------------

# A ko on 5x5: black takes at C3, both pass, and white's retake repeats the position before black's take.
KO_SETUP = [(BLACK, "B4"), (BLACK, "A3"), (BLACK, "B2"), (WHITE, "C4"), (WHITE, "D3"), (WHITE, "C2"), (WHITE, "B3"),
            (BLACK, "C3"), (WHITE, "pass"), (BLACK, "pass")]


def ko_player(superko: str) -> Player:
    player = Player(RandomGoPicker(random.Random(1)), size=5, rules=Rules(superko=superko))
    for color, vertex in KO_SETUP:
        player.play(color, parse_vertex(vertex, 5))
    return player


def test_a_stricter_ko_rule_applies_to_the_game_so_far():
    player = ko_player(SIMPLE_KO)
    retake = parse_vertex("B3", 5)
    assert player.state.legal(retake, WHITE)  # simple ko: the passes lifted the ban
    player.set_rules(parse_rules("chinese-ogs", 7.5))  # positional superko: the history is rebuilt
    assert player.rules.superko == POSITIONAL and player.state.rules.superko == POSITIONAL
    assert not player.state.legal(retake, WHITE)
    player.undo()  # the undo stack was replayed too
    player.undo()
    assert player.state.moves[-1] == (BLACK, parse_vertex("C3", 5))
    assert all(state.rules.superko == POSITIONAL for state in player.history)


def test_a_ko_rule_the_game_has_broken_is_refused_and_changes_nothing():
    player = ko_player(SIMPLE_KO)
    player.play(WHITE, parse_vertex("B3", 5))  # legal under simple ko, a repetition under superko
    before = (player.rules, len(player.history), list(player.state.moves))
    with pytest.raises(ValueError, match="move 11"):
        player.set_rules(parse_rules("chinese-ogs", 7.5))
    assert (player.rules, len(player.history), list(player.state.moves)) == before
    player.set_rules(parse_rules("japanese", 7.5))  # simple ko again: scoring changes, the game stays
    assert player.state.rules.scoring == TERRITORY and len(player.history) == before[1]


def test_rules_of_a_loaded_game_are_replayed_with_its_undo_stack():
    from tabula.engine.rules.sgf import write_sgf
    player = ko_player(SIMPLE_KO)
    data = write_sgf(player.state)
    fresh = Player(RandomGoPicker(random.Random(1)), size=5, rules=Rules(superko=SIMPLE_KO))
    fresh.load_sgf(data)
    fresh.set_rules(parse_rules("tromp-taylor", 7.5))
    assert not fresh.state.legal(parse_vertex("B3", 5), WHITE)
    for _ in KO_SETUP:
        fresh.undo()
    assert not fresh.state.moves


# -- passing when only dame are left -------------------------------------------------------------------------------

def decide(state: GameState, vertex: str, seed: int = 0) -> int:
    move = parse_vertex(vertex, state.size)
    candidates = [Candidate(move, 36, 0.2, 0.5, -1.0, [move]), Candidate(PASS, 4, 0.1, 0.01, -1.0, [PASS])]
    result = SearchResult(move, candidates, 40, 40, 0.1, 40, 40, 0, 0, 0, False)
    return decision.MoveDecider(PlayConfig(resign_winrate=0.0), np.random.default_rng(seed)).decide(state, result).move


@pytest.mark.parametrize("vertex", ["F5", "B5", "H5"])  # a dame, black's own territory, white's territory
def test_under_japanese_rules_a_won_game_with_only_dame_left_is_passed(vertex):
    state = with_rules(board_from_ascii(ONLY_DAME_LEFT, komi=6.5), "japanese")
    assert all(decide(state, vertex, seed) == PASS for seed in range(3))
    # Under area scoring a dame is a point and a stone in one's own territory costs nothing: the move stands.
    area = board_from_ascii(ONLY_DAME_LEFT, komi=6.5)
    assert decide(area, vertex) == parse_vertex(vertex, 9)


def test_under_japanese_rules_a_lost_game_or_an_open_one_is_not_passed_away():
    behind = with_rules(board_from_ascii(ONLY_DAME_LEFT, komi=20.5), "japanese")  # white wins by 2.5
    assert decide(behind, "F5") == parse_vertex("F5", 9)
    open_board = with_rules(board_from_ascii(ONLY_DAME_LEFT.replace(". X . O", ". . . O", 3), komi=6.5), "japanese")
    assert decide(open_board, "B5") == parse_vertex("B5", 9)  # black's wall has gaps: B5 is not yet territory
    assert not decision.only_dame_left(open_board, playout.ownership(open_board, random.Random(0), 24))

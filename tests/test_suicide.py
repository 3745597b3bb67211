"""Multi-stone suicide as KataGo's rules have it: legal under Tromp-Taylor, New Zealand and Ing rules (and JSON rules
that say so), never for a single stone, never under Chinese or Japanese rules; the suicided string goes to the
opponent as prisoners, and the ko, superko and hash bookkeeping stays right."""
from __future__ import annotations

import json
import random
from dataclasses import replace

import numpy as np
import pytest

from tabula.engine.rules.board import Board, IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, WHITE, format_vertex, parse_vertex
from tabula.engine.rules.game import (
    POSITIONAL,
    SIMPLE_KO,
    SITUATIONAL,
    TERRITORY,
    GameState,
    Rules,
    legal_masks,
    parse_rules,
    scoring_from_sgf,
    sgf_ruleset,
    suicide_from_sgf,
)
from tabula.engine.rules.sgf import load_state, write_sgf
from tests.conftest import make_session

TROMP_TAYLOR = parse_rules("tromp-taylor", 0.0)
CHINESE = parse_rules("chinese", 0.0)
JAPANESE = parse_rules("japanese", 0.0)


def position(ascii_rows: str, rules: Rules, to_move: int) -> GameState:
    """A game set up from rows written top (highest row) first: X black, O white, . empty."""
    rows = [row.split() for row in ascii_rows.strip().splitlines()]
    size = len(rows)
    state = GameState(size, rules)
    state.to_move = to_move
    for i, row in enumerate(rows):
        for x, cell in enumerate(row):
            if cell != ".":
                state.place_setup((size - 1 - i) * size + x, BLACK if cell == "X" else WHITE)
    return state


def at(state: GameState, vertex: str) -> int:
    return parse_vertex(vertex, state.size)


def names(state: GameState, points: list[int]) -> list[str]:
    return sorted(format_vertex(p, state.size) for p in points)


# White's B5 stone has its last liberty at A5: white A5 would take its own two stones off. White E5 alone would be a
# single stone's suicide.
TWO_STONE_SUICIDE = """
    . O X X .
    X X . . X
    . . . . .
    . . . . .
    . . . . .
"""


@pytest.mark.parametrize("rules, legal", [
    (TROMP_TAYLOR, True), (parse_rules("nz"), True), (parse_rules("ing"), True), (parse_rules('{"ko":"SIMPLE"}'), True),
    (CHINESE, False), (JAPANESE, False), (parse_rules("aga"), False), (parse_rules('{"suicide":false}'), False),
    (Rules(), False),
])
def test_multi_stone_suicide_is_legal_only_where_the_rules_say(rules: Rules, legal: bool):
    state = position(TWO_STONE_SUICIDE, rules, WHITE)
    a5 = at(state, "A5")
    assert state.legal(a5) == legal
    assert bool(state.legal_mask()[a5]) == legal
    assert (a5 in state.legal_moves()) == legal
    # A single stone's suicide is illegal under every ruleset, KataGo's included.
    assert not state.legal(at(state, "E5")) and not state.legal_mask()[at(state, "E5")]
    with pytest.raises(IllegalMoveError) as error:
        state.play(at(state, "E5"))
    assert error.value.reason == "suicide"
    if not legal:
        before = state.board.color[:]
        with pytest.raises(IllegalMoveError) as error:
            state.play(a5)
        assert error.value.reason == "suicide" and state.board.color == before and state.to_move == WHITE


def test_suicide_takes_the_string_off_and_gives_the_opponent_prisoners():
    state = position(TWO_STONE_SUICIDE, TROMP_TAYLOR, WHITE)
    stones_before = state.stones
    removed = state.play(at(state, "A5"))
    assert names(state, removed) == ["A5", "B5"]
    assert state.color_at(at(state, "A5")) == EMPTY and state.color_at(at(state, "B5")) == EMPTY
    assert state.prisoners == (2, 0)  # captured by black: white's own two stones
    assert state.stones == stones_before - 1 and state.to_move == BLACK
    assert state.board.ko == 0  # no ko after a suicide
    _check_board(state.board)
    # The freed points are liberties of the black strings beside them again.
    board = state.board
    c5 = board.geometry.padded[at(state, "C5")]
    assert board.geometry.padded[at(state, "B5")] in board.string_liberties(c5)
    a4 = board.geometry.padded[at(state, "A4")]
    assert board.geometry.padded[at(state, "A5")] in board.string_liberties(a4)
    # Black's own multi-stone suicide goes to white's count.
    black = position("""
        . X O . .
        O O . . .
        . . . . .
        . . . . .
        . . . . .
    """, TROMP_TAYLOR, BLACK)
    assert names(black, black.play(at(black, "A5"))) == ["A5", "B5"]
    assert black.prisoners == (0, 2)


def test_territory_scoring_counts_suicided_stones_as_prisoners():
    rules = parse_rules('{"scoring":"TERRITORY","suicide":true}', 0.0)
    assert rules.scoring == TERRITORY and rules.suicide
    state = position(TWO_STONE_SUICIDE, rules, WHITE)
    before = state.score()
    state.play(at(state, "A5"))
    # Black gains the two prisoners, and the two points the stones stood on are black's territory now.
    assert state.prisoners == (2, 0)
    assert state.score() == before + 4


def test_captures_before_suicide_in_a_real_capture_race():
    # White A5 fills the last liberty of its own B5 stone, but black's string around it has no other liberty: the
    # capture comes first and nothing is suicide, whatever the rules.
    state = position("""
        . O X O .
        X X X O .
        O O O . .
        . . . . .
        . . . . .
    """, TROMP_TAYLOR, WHITE)
    captured = state.play(at(state, "A5"))
    # Black's A4-B4-C4-C5 string had A5 as its last liberty: white captures it, and its own stones stay.
    assert names(state, captured) == ["A4", "B4", "C4", "C5"]
    assert state.color_at(at(state, "A5")) == WHITE and state.color_at(at(state, "B5")) == WHITE
    assert state.prisoners == (0, 4)
    _check_board(state.board)


# White's A1 and B1 stones (C1 their last liberty) inside black's wall: white C1 takes off three stones, which
# leaves the board as it was before A1 and B1 were played.
SUPERKO_WALL = """
    . . . . .
    . . . . .
    . . . . .
    X X X . .
    . . . X .
"""


@pytest.mark.parametrize("superko, legal", [(POSITIONAL, False), (SITUATIONAL, True), (SIMPLE_KO, True)])
def test_a_suicide_that_repeats_a_position_is_superko(superko: str, legal: bool):
    rules = replace(TROMP_TAYLOR, superko=superko)
    state = position(SUPERKO_WALL, rules, WHITE)
    for move in ("A1", "pass", "B1", "pass"):
        state.play(PASS if move == "pass" else at(state, move))
    c1 = at(state, "C1")
    assert state.legal(c1) == legal
    assert bool(state.legal_mask()[c1]) == legal
    if legal:
        assert names(state, state.play(c1)) == ["A1", "B1", "C1"]
        assert state.board.hash == position(SUPERKO_WALL, rules, WHITE).board.hash
    else:
        with pytest.raises(IllegalMoveError) as error:
            state.play(c1)
        assert error.value.reason == "superko"


def test_after_a_suicide_the_position_it_made_is_superko_history():
    """Positional superko: once the suicide is played, recreating its position later is refused too."""
    state = position(SUPERKO_WALL, replace(TROMP_TAYLOR, superko=SITUATIONAL), WHITE)
    for move in ("A1", "pass", "B1", "pass", "C1"):
        state.play(PASS if move == "pass" else at(state, move))
    assert state.board.hash == position(SUPERKO_WALL, TROMP_TAYLOR, WHITE).board.hash
    assert state._superko_key(state.board.hash, BLACK) in state.seen


def _check_board(board: Board) -> None:
    """The incremental strings, liberties and hash agree with a board rebuilt from the stones."""
    geometry = board.geometry
    expected_hash = 0
    for pad in geometry.padded:
        color = board.color[pad]
        if color in (BLACK, WHITE):
            expected_hash ^= geometry.zobrist[color][pad]
    assert board.hash == expected_hash
    for pad in geometry.padded:
        color = board.color[pad]
        if color not in (BLACK, WHITE):
            assert board.root[pad] == 0
            continue
        stones = set(board.string_stones(pad))
        # flood fill the string from the colours alone
        seen, stack = {pad}, [pad]
        while stack:
            point = stack.pop()
            for n in geometry.neighbors[point]:
                if board.color[n] == color and n not in seen:
                    seen.add(n)
                    stack.append(n)
        assert stones == seen
        liberties = {n for s in seen for n in geometry.neighbors[s] if board.color[n] == EMPTY}
        assert set(board.string_liberties(pad)) == liberties and liberties


def test_random_games_with_suicide_keep_the_board_and_the_masks_right():
    """Random 5x5 games under Tromp-Taylor rules, suicides preferred where legal: after every move the board agrees
    with a rebuilt one, and the batched legal mask with move-by-move ``check`` for both colours."""
    rng = random.Random(7)
    suicides = 0
    for game in range(12):
        state = GameState(5, replace(TROMP_TAYLOR, superko=[POSITIONAL, SITUATIONAL, SIMPLE_KO][game % 3]))
        for _ in range(120):
            masks = legal_masks([state, state], [BLACK, WHITE])
            for row, color in enumerate((BLACK, WHITE)):
                for move in range(25):
                    assert bool(masks[row, move]) == state.legal(move, color)
            legal = np.flatnonzero(masks[0 if state.to_move == BLACK else 1][:-1]).tolist()
            killing = [m for m in legal if _is_suicide(state, m)]  # suicides are rare in random play
            if killing:
                move = rng.choice(killing)
            else:
                move = rng.choice(legal + [PASS]) if legal else PASS
            removed = state.play(move)
            if move != PASS and state.color_at(move) == EMPTY:
                suicides += 1
                assert move in removed and len(removed) >= 2
            _check_board(state.board)
            assert state.stones == sum(1 for p in range(25) if state.color_at(p) != EMPTY)
            if state.is_game_over():
                break
    assert suicides >= 5


def _is_suicide(state: GameState, move: int) -> bool:
    board = state.board
    if any(board.color[n] == EMPTY for n in board.geometry.neighbors[board.geometry.padded[move]]):
        return False
    trial = state.copy()
    trial.play(move)
    return trial.color_at(move) == EMPTY


# -- the rules' names, JSON, SGF and GTP ----------------------------------------------------------------------------

def test_rulesets_allow_suicide_as_katago_does():
    allowed = {name: parse_rules(name).suicide for name in (
        "tromp-taylor", "nz", "new-zealand", "goe", "ing", "chinese", "chinese-ogs", "japanese", "korean", "aga")}
    assert allowed == {"tromp-taylor": True, "nz": True, "new-zealand": True, "goe": True, "ing": True,
                       "chinese": False, "chinese-ogs": False, "japanese": False, "korean": False, "aga": False}
    assert not Rules().suicide  # the default stays as it was
    assert parse_rules("{}").suicide and not parse_rules('{"suicide": false}').suicide
    assert json.loads(TROMP_TAYLOR.kata_json())["suicide"] is True
    assert json.loads(Rules().kata_json())["suicide"] is False
    assert parse_rules(TROMP_TAYLOR.kata_json(), 0.0) == TROMP_TAYLOR
    with pytest.raises(ValueError):
        Rules(suicide="yes")  # type: ignore[arg-type]


def test_sgf_keeps_suicide_rules():
    assert sgf_ruleset(TROMP_TAYLOR) == "Tromp-Taylor" and sgf_ruleset(CHINESE) == "Chinese"
    territory = parse_rules('{"scoring":"TERRITORY","suicide":true}')
    assert scoring_from_sgf(sgf_ruleset(territory)) == TERRITORY and suicide_from_sgf(sgf_ruleset(territory))
    assert [suicide_from_sgf(name) for name in ("NZ", "GOE", "TT", "Chinese", "Japanese", "AGA", "Martian")] == [
        True, True, True, False, False, False, None]
    state = position(TWO_STONE_SUICIDE, TROMP_TAYLOR, WHITE)
    state.play(at(state, "A5"))
    state.play(at(state, "B5"))
    data = write_sgf(state)
    assert b"RU[Tromp-Taylor]" in data
    loaded = load_state(data, Rules(komi=0.0))  # the file's rules allow the suicide in it
    assert loaded.rules.suicide and loaded.board.color == state.board.color and loaded.prisoners == state.prisoners
    with pytest.raises(Exception):
        load_state(data.replace(b"RU[Tromp-Taylor]", b"RU[Chinese]"), TROMP_TAYLOR)


def test_suicide_over_gtp():
    session = make_session()

    def reply(line: str) -> str:
        return session.dispatch(line).rstrip("\n")

    for line in ("boardsize 5", "kata-set-rules tromp-taylor", "play b a4", "play b b4", "play w b5", "play b c5"):
        assert reply(line) == "=", line
    assert json.loads(reply("kata-get-rules")[2:])["suicide"] is True
    assert reply("play w a5") == "="  # white's two stones come off
    assert "O" not in "".join(reply("showboard").splitlines()[2:7])
    # A game with a suicide in it cannot go on under rules that forbid it; nothing changes.
    assert reply("kata-set-rules chinese").startswith("? cannot change the rules of this game: move 5 is illegal "
                                                      "under the suicide rule")
    assert json.loads(reply("kata-get-rules")[2:])["suicide"] is True
    assert reply("kata-set-rule suicide false").startswith("? cannot change the rules")
    assert reply("undo") == "="
    assert reply("kata-set-rule suicide false") == "="
    assert reply("play w a5") == "? illegal move"
    assert reply('kata-set-rules {"suicide":true,"ko":"SITUATIONAL"}') == "="
    assert reply("play w a5") == "="


class FavouriteEvaluator:
    """Priors over the rules' legal moves (``legal_mask``), ``weight`` of them on ``favourite`` where it is legal."""

    def __init__(self, favourite: int, weight: float = 0.9):
        self.favourite = favourite
        self.weight = weight

    def evaluate(self, states):
        from tabula.engine.net.evaluator import Evaluation

        policy = np.stack([state.legal_mask() for state in states]).astype(np.float32)
        policy /= policy.sum(axis=1, keepdims=True)
        for row in policy:
            if row[self.favourite] > 0:
                row *= 1.0 - self.weight
                row[self.favourite] += self.weight
        return Evaluation(policy=policy, value=np.zeros(len(states), dtype=np.float32))


@pytest.mark.parametrize("rules, searched", [(TROMP_TAYLOR, True), (CHINESE, False)])
def test_the_search_tries_a_suicide_only_where_the_rules_allow_it(rules: Rules, searched: bool):
    from tabula.engine.config import SearchConfig
    from tabula.engine.play.search import Search
    from tests.test_search import check_tree

    state = position(TWO_STONE_SUICIDE, rules, WHITE)
    a5 = at(state, "A5")
    search = Search(FavouriteEvaluator(a5), SearchConfig(threads=1, visits=60, early_stop=False),
                    rng=np.random.default_rng(0))
    result = search.run(state)
    visited = {c.move: c.visits for c in result.candidates}
    assert (visited.get(a5, 0) > 0) == searched
    check_tree(search)

"""The rules, played out as small games: captures, ko, superko, suicide, handicap, scoring, history."""
import random

import pytest

from tabula.engine.rules.board import Board, IllegalMoveError
from tabula.engine.rules.coords import BLACK, EMPTY, PASS, WHITE, format_vertex, parse_vertex
from tabula.engine.rules.game import POSITIONAL, SIMPLE_KO, SITUATIONAL, GameState, Rules, handicap_points, legal_masks


def position(ascii_rows: str, to_move: int = BLACK, komi: float = 0.0, superko: str = POSITIONAL) -> GameState:
    """A game set up from rows written top (highest row) first: X black, O white, . empty."""
    rows = [row.split() for row in ascii_rows.strip().splitlines()]
    size = len(rows)
    state = GameState(size, Rules(komi=komi, superko=superko))
    for i, row in enumerate(rows):
        y = size - 1 - i
        for x, cell in enumerate(row):
            if cell != ".":
                state.place_setup(y * size + x, BLACK if cell == "X" else WHITE)
    state.to_move = to_move
    state.seen = {state._superko_key(state.board.hash, to_move)}
    return state


def play_all(state: GameState, *vertices: str) -> list[list[str]]:
    captures = []
    for vertex in vertices:
        captured = state.play(parse_vertex(vertex, state.size))
        captures.append(sorted(format_vertex(p, state.size) for p in captured))
    return captures


def test_single_stone_capture_and_liberties():
    game = GameState(9)
    play_all(game, "E5", "E6", "D6", "F6", "pass", "E7")
    assert play_all(game, "pass", "pass")  # nothing captured by passes
    game = GameState(9)
    caps = play_all(game, "E6", "E5", "D5", "pass", "F5", "pass", "E4")
    assert caps[-1] == ["E5"]
    assert game.color_at(parse_vertex("E5", 9)) == EMPTY
    board = game.board
    d5 = board.geometry.padded[parse_vertex("D5", 9)]
    assert len(board.string_liberties(d5)) == 4


def test_multi_stone_capture_merges_and_frees_liberties():
    game = position("""
        . . . . .
        X X . . .
        O O X . .
        . . X . .
        . . . . .
    """, to_move=BLACK)
    # White's two stones have liberties A2, B2... capture them by filling the last ones.
    assert play_all(game, "A2", "pass", "B2")[-1] == ["A3", "B3"]
    assert game.board.area_score()[1] == 0
    a3 = game.board.geometry.padded[parse_vertex("A3", 5)]
    assert game.board.color[a3] == EMPTY


def test_merging_strings_counts_shared_liberties_once():
    game = GameState(9)
    play_all(game, "C3", "pass", "E3", "pass", "D3")
    pad = game.board.geometry.padded[parse_vertex("D3", 9)]
    assert len(game.board.string_stones(pad)) == 3
    assert len(game.board.string_liberties(pad)) == 8


def test_suicide_is_illegal_and_leaves_state_unchanged():
    game = position("""
        . X . . .
        X . . . .
        . . . . .
        . . . . .
        . . . . .
    """, to_move=WHITE)
    before = game.board.color[:]
    with pytest.raises(IllegalMoveError) as error:
        game.play(parse_vertex("A5", 5))
    assert error.value.reason == "suicide"
    assert game.board.color == before and game.to_move == WHITE
    # A multi-stone suicide too.
    game = position("""
        . O X . .
        X X . . .
        . . . . .
        . . . . .
        . . . . .
    """, to_move=WHITE)
    assert not game.legal(parse_vertex("A5", 5))
    # Filling the last liberty is legal when it captures.
    game = position("""
        . X O . .
        X O . . .
        O . . . .
        . . . . .
        . . . . .
    """, to_move=WHITE)
    assert play_all(game, "A5")[-1] == ["A4", "B5"]


def test_occupied_point():
    game = GameState(9)
    game.play(parse_vertex("E5", 9))
    with pytest.raises(IllegalMoveError) as error:
        game.play(parse_vertex("E5", 9))
    assert error.value.reason == "occupied"


KO_POSITION = """
    . . . . .
    . X O . .
    X O . O .
    . X O . .
    . . . . .
"""


def test_simple_ko_forbids_the_immediate_retake_only():
    for superko in (POSITIONAL, SITUATIONAL, SIMPLE_KO):
        game = position(KO_POSITION, to_move=BLACK, superko=superko)
        assert play_all(game, "C3")[-1] == ["B3"]
        with pytest.raises(IllegalMoveError) as error:
            game.play(parse_vertex("B3", 5))
        assert error.value.reason in ("ko", "superko")
        play_all(game, "E5", "E1")  # ko threats elsewhere
        assert play_all(game, "B3")[-1] == ["C3"]
        # passing also lifts the ko
        with pytest.raises(IllegalMoveError):
            game.play(parse_vertex("C3", 5))
        play_all(game, "pass", "pass")
        assert not game.is_game_over() or game.passes == 2


# Found by a random search on 4x4 under simple ko: the last move (white A2) re-creates the position after move 13
# with the other side to move — a positional superko violation, legal under situational superko.
CYCLE = ["B2", "A2", "D2", "C4", "C2", "D1", "D3", "D4", "C3", "B4", "A4", "B1", "B3", "A3", "A1", "A2"]


def test_positional_superko_forbids_a_longer_cycle():
    game = GameState(4, Rules(superko=POSITIONAL))
    play_all(game, *CYCLE[:-1])
    with pytest.raises(IllegalMoveError) as error:
        game.play(parse_vertex(CYCLE[-1], 4))
    assert error.value.reason == "superko"
    assert parse_vertex(CYCLE[-1], 4) not in game.legal_moves()


def test_the_cycle_repeats_a_position_under_simple_ko_and_situational_superko():
    for superko in (SIMPLE_KO, SITUATIONAL):
        game = GameState(4, Rules(superko=superko))
        boards = []
        for vertex in CYCLE:
            game.play(parse_vertex(vertex, 4))
            boards.append(game.board.color[:])
        assert boards[-1] == boards[12]


def test_legal_moves_agree_with_play_in_random_games():
    rng = random.Random(3)
    for size in (3, 5, 7):
        for superko in (POSITIONAL, SITUATIONAL, SIMPLE_KO):
            game = GameState(size, Rules(superko=superko))
            for _ in range(150):
                legal = set(game.legal_moves())
                for point in range(size * size):
                    probe = game.copy()
                    try:
                        probe.play(point)
                        assert point in legal
                    except IllegalMoveError:
                        assert point not in legal
                game.play(rng.choice(sorted(legal)) if legal and rng.random() < 0.95 else PASS)
                # the stone count that lets legal_mask skip the superko lookup when nothing was ever captured
                assert game.stones == sum(c in (BLACK, WHITE) for c in game.board.color) <= game.peak_stones


def test_a_batch_of_legal_masks_is_each_position_its_own():
    # the search asks for a batch of leaves at once: rows must not leak into each other (captures, ko, superko)
    rng = random.Random(5)
    for size in (5, 9):
        states = []
        for superko in (POSITIONAL, SITUATIONAL, SIMPLE_KO):
            game = GameState(size, Rules(superko=superko))
            for _ in range(120):
                legal = game.legal_moves()
                game.play(rng.choice(legal) if legal and rng.random() < 0.97 else PASS)
                if rng.random() < 0.1:
                    states.append(game.copy())
        for colors in (None, [rng.choice((BLACK, WHITE)) for _ in states]):
            batch = legal_masks(states, colors)
            for row, state in enumerate(states):
                color = state.to_move if colors is None else colors[row]
                expected = [state.legal(point, color) for point in range(size * size)] + [True]
                assert batch[row].tolist() == expected


def test_incremental_strings_match_a_flood_fill():
    rng = random.Random(11)
    game = GameState(9)
    for _ in range(400):
        legal = game.legal_moves()
        game.play(rng.choice(legal) if legal else PASS)
        board = game.board
        geometry = board.geometry
        for pad in geometry.padded:
            color = board.color[pad]
            if color not in (BLACK, WHITE):
                continue
            stones, frontier, liberties = {pad}, [pad], set()
            while frontier:
                point = frontier.pop()
                for neighbor in geometry.neighbors[point]:
                    if board.color[neighbor] == color and neighbor not in stones:
                        stones.add(neighbor)
                        frontier.append(neighbor)
                    elif board.color[neighbor] == EMPTY:
                        liberties.add(neighbor)
            assert set(board.string_stones(pad)) == stones
            assert set(board.string_liberties(pad)) == liberties


def test_zobrist_hash_is_a_function_of_the_stones():
    a, b = GameState(9), GameState(9)
    play_all(a, "C3", "D4", "E5")
    play_all(b, "E5", "D4", "C3")
    assert a.board.hash == b.board.hash
    assert a.hash == b.hash  # white to move in both
    play_all(a, "pass")
    assert a.hash != b.hash  # side to move differs


def test_copy_is_independent():
    game = GameState(9)
    play_all(game, "C3", "D4")
    clone = game.copy()
    play_all(clone, "E5")
    assert game.color_at(parse_vertex("E5", 9)) == EMPTY
    assert len(game.moves) == 2 and len(clone.moves) == 3


def test_history_keeps_the_last_positions():
    game = GameState(9)
    assert game.history_colors(1) is None
    play_all(game, "C3", "D4", "E5")
    assert game.history_colors(3) is not None and game.history_colors(4) is None
    e5 = game.board.geometry.padded[parse_vertex("E5", 9)]
    assert game.history_colors(0)[e5] == BLACK and game.history_colors(1)[e5] == EMPTY
    for _ in range(10):
        play_all(game, "pass")
    assert game.history_colors(7) is not None and game.history_colors(8) is None


@pytest.mark.parametrize("size,count,expected", [
    (19, 2, {"D4", "Q16"}),
    (19, 3, {"D4", "Q16", "D16"}),
    (19, 4, {"D4", "Q16", "D16", "Q4"}),
    (19, 5, {"D4", "Q16", "D16", "Q4", "K10"}),
    (19, 6, {"D4", "Q16", "D16", "Q4", "D10", "Q10"}),
    (19, 7, {"D4", "Q16", "D16", "Q4", "D10", "Q10", "K10"}),
    (19, 8, {"D4", "Q16", "D16", "Q4", "D10", "Q10", "K4", "K16"}),
    (19, 9, {"D4", "Q16", "D16", "Q4", "D10", "Q10", "K4", "K16", "K10"}),
    (13, 5, {"D4", "K10", "D10", "K4", "G7"}),
    (9, 4, {"C3", "G7", "C7", "G3"}),
    (9, 9, {"C3", "G7", "C7", "G3", "C5", "G5", "E3", "E7", "E5"}),
])
def test_fixed_handicap_follows_the_gtp_table(size, count, expected):
    assert {format_vertex(p, size) for p in handicap_points(size, count)} == expected
    game = GameState(size)
    game.place_handicap(handicap_points(size, count))
    assert game.to_move == WHITE and game.handicap == count


@pytest.mark.parametrize("size,count", [(19, 1), (19, 10), (6, 2), (7, 5), (10, 5)])
def test_fixed_handicap_refuses_what_the_spec_does_not_define(size, count):
    with pytest.raises(ValueError):
        handicap_points(size, count)


def test_area_scoring_counts_stones_and_surrounded_empties():
    game = position("""
        . X O . .
        . X O . .
        . X O . .
        . X O . .
        . X O . .
    """, komi=0.5)
    assert game.board.area_score() == (10, 15)
    assert game.area_score() == -5.5 and game.result_string() == "W+5.5"


def test_area_scoring_leaves_dame_uncounted():
    # Dame: C3 touches both colours.
    game = position("""
        X X O O O
        X X O O O
        X X . O O
        X X O O O
        X X O O O
    """)
    assert game.board.area_score() == (10, 14)


def test_board_sizes_from_2_to_25():
    for size in (2, 3, 13, 19, 25):
        game = GameState(size)
        game.play(0)
        assert game.color_at(0) == BLACK
    with pytest.raises(ValueError):
        Board(1)
    with pytest.raises(ValueError):
        Board(26)


def test_the_ko_ban_binds_only_the_captured_colour():
    # GTP lets either colour move: the capturer may fill its own ko at once.
    game = position(KO_POSITION, to_move=BLACK)
    play_all(game, "C3")
    assert not game.legal(parse_vertex("B3", 5), WHITE)
    game.play(parse_vertex("B3", 5), BLACK)
    assert game.color_at(parse_vertex("B3", 5)) == BLACK


def test_setup_stones_never_capture():
    game = GameState(3)
    game.place_setup(parse_vertex("A3", 3), BLACK)
    game.place_setup(parse_vertex("B3", 3), WHITE)
    with pytest.raises(IllegalMoveError):
        game.place_setup(parse_vertex("A2", 3), WHITE)  # would take A3's last liberty
    assert game.color_at(parse_vertex("A3", 3)) == BLACK
    assert game.color_at(parse_vertex("A2", 3)) == EMPTY

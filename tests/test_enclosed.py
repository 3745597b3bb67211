"""engine/rules/enclosed.py: stones enclosed in a group's only liberties, read to see whether the seki holds."""
from tabula.engine.rules import enclosed
from tabula.engine.rules.coords import parse_vertex
from tabula.engine.rules.enclosed import enclosed_kill
from tabula.engine.rules.playout import seki_stones
from tests.conftest import board_from_ascii

# White's seven stones have two liberties, A6 and D7, both shared with black's four enclosed stones: a liberty count
# sees a seki. Black fills D7, white must take five stones at A6, and black's stone at the vital point of the bulky
# five left (B6) kills: white is dead (a handicap game's corner, GNU Go and KataGo agreeing).
BULKY_FIVE = """
    X X X . O X .
    . X O O O X .
    O O O X X X .
    X X X X . . .
    . . . . . . .
    . . . . . . .
    . . . . . . .
"""

# Two black stones in white's corner share E6 and G7 with white's eight, and nothing else: black fills E6, white
# takes three at G7, and black's F6 kills again.
CORNER_FOUR = """
    . . X O O X .
    . . X O . X O
    . . X O O O O
    . . X X X X X
    . . . . . . .
    . . . . . . .
    . . . . . . .
"""


def vertices(points: list[int], size: int = 7) -> list[str]:
    columns = "ABCDEFGHJ"
    return sorted(f"{columns[p % size]}{p // size + 1}" for p in points)


def test_enclosed_stones_that_kill_by_a_sacrifice_are_no_seki() -> None:
    for ascii_rows, enclosed_vertex, white_vertex in ((BULKY_FIVE, "A7", "C6"), (CORNER_FOUR, "F7", "D7")):
        state = board_from_ascii(ascii_rows)
        board = state.board
        pad = board.geometry.padded
        inner = board.root[pad[parse_vertex(enclosed_vertex, 7)]]
        white = board.root[pad[parse_vertex(white_vertex, 7)]]
        assert enclosed_kill(board, inner) == {inner, white}
        assert seki_stones(state, []) == []


def test_the_liberty_count_alone_saw_a_seki(monkeypatch) -> None:
    """Without the reading, both positions are the seki of the liberty count (what the reading corrects)."""
    from tabula.engine.rules import playout
    monkeypatch.setattr(playout, "enclosed_kill", lambda board, root, read=None: None)
    assert vertices(seki_stones(board_from_ascii(BULKY_FIVE), [])) == \
        ["A5", "A7", "B5", "B6", "B7", "C5", "C6", "C7", "D6", "E6", "E7"]
    assert len(seki_stones(board_from_ascii(CORNER_FOUR), [])) == 10


def test_a_true_seki_is_not_enclosed_and_stays() -> None:
    # The no-eye seki of tests/test_playout.py (tests/conftest.py): each inner string is walled in by the other's
    # live group, so neither is enclosed by the other alone, and the reading leaves them.
    from tests.conftest import SEKI_NO_EYES
    state = board_from_ascii(SEKI_NO_EYES)
    board = state.board
    pad = board.geometry.padded
    assert all(enclosed_kill(board, board.root[pad[p]]) is None for p in seki_stones(state, []))


def test_a_region_too_large_or_a_reading_too_long_leaves_the_seki(monkeypatch) -> None:
    state = board_from_ascii(BULKY_FIVE)
    board = state.board
    inner = board.root[board.geometry.padded[parse_vertex("A7", 7)]]
    monkeypatch.setattr(enclosed, "MAX_REGION_POINTS", 5)  # the region is six points
    assert enclosed_kill(board, inner) is None
    monkeypatch.setattr(enclosed, "MAX_REGION_POINTS", 8)
    monkeypatch.setattr(enclosed, "MAX_POSITIONS", 3)
    monkeypatch.setattr(enclosed, "_READ", {})  # not the answer an earlier test's reading kept
    assert enclosed_kill(board, inner) is None


def test_the_judge_takes_the_reading_over_a_map_that_reads_the_group_alive() -> None:
    """An ownership map that gives every stone to its own colour (white's group alive, as the student's head read
    such groups in handicap games): the reading's verdict stands, the map's elsewhere."""
    import numpy as np

    from tabula.engine.play.judging import judge_dead_stones
    from tabula.engine.rules.coords import BLACK, WHITE
    state = board_from_ascii(BULKY_FIVE)
    owned = np.array([{BLACK: 1.0, WHITE: -1.0}.get(state.color_at(p), 0.0) for p in range(49)], dtype=np.float32)
    assert vertices(judge_dead_stones(state, lambda position: owned)) == ["A5", "B5", "C5", "C6", "D6", "E6", "E7"]


# Black's ten stones have three liberties, C1, D2 and E2, round white's stone at E1 (a 13x13 game's end). White,
# moving first, would kill (D1, then sacrifices into a bent three); black, moving first, lives (D1). Whoever is to
# move, the reading leaves such a group alone: GNU Go and KataGo's network call it alive with black to move.
LIVES_MOVING_FIRST = """
    . . . . . . .
    . . . . . . .
    . . . . . . .
    O O O O O O O
    O X X X X X O
    O X X . . X O
    O X . . O X O
"""


# White's twelve stones have two liberties, J9 and H6, shared with black's three enclosed stones J8, H7 and J6 (the
# top right of a 13x13 game's end, moved onto 9x9 with a simpler wall; GNU Go and KataGo's network call white dead).
# Black connects at J7, sacrifices five at H6, and after white's capture at J9 plays J7 again, the vital point of the
# bulky five: a kill whose line, with white passing between black's moves, runs past four plies a point of the region.
LONG_KILL = """
    . . . . X X O O .
    . . . . X X O O X
    . . . . . X O X .
    . . . . . X O . X
    . . . . . X O O O
    . . . . . X X O X
    . . . . . X O O X
    . . . . X X X X X
    . . . . . . . . .
"""


def test_a_kill_read_to_its_end() -> None:
    state = board_from_ascii(LONG_KILL)
    board = state.board
    pad = board.geometry.padded
    inner = {board.root[pad[parse_vertex(v, 9)]] for v in ("J8", "H7", "J6")}
    white = board.root[pad[parse_vertex("G9", 9)]]
    enclosed._READ.clear()
    assert enclosed_kill(board, board.root[pad[parse_vertex("H7", 9)]]) == inner | {white}
    assert seki_stones(state, []) == []


def test_a_group_that_lives_if_it_moves_first_is_not_killed() -> None:
    state = board_from_ascii(LIVES_MOVING_FIRST)
    board = state.board
    white = board.root[board.geometry.padded[parse_vertex("E1", 7)]]
    assert enclosed_kill(board, white) is None
    assert enclosed.settled_by_reading(board) == ([], [])


def test_no_reading_inside_a_wall_judged_dead() -> None:
    """Enclosed stones inside a wall that is dead do not live: the region is left to the map."""
    board = board_from_ascii(BULKY_FIVE).board
    assert enclosed.settled_by_reading(board)[0]  # white's seven die with the wall standing
    wall = [parse_vertex(v, 7) for v in ("D5", "E5", "F5", "F6", "F7", "A4", "B4", "C4", "D4")]
    assert enclosed.settled_by_reading(board, wall) == ([], [])


# BULKY_FIVE with black's wall (D5 to F7 and row 4) short of liberties: white's stones round it leave it E4 and the
# empty points of row 3.
SHORT_WALL = """
    X X X . O X O
    . X O O O X O
    O O O X X X O
    X X X X . O O
    {}
    . . . . . . .
    . . . . . . .
"""


def test_a_wall_in_atari_is_taken_by_the_defender_and_the_seki_stands() -> None:
    def read(row3: str) -> tuple[int, bool]:
        board = board_from_ascii(SHORT_WALL.format(row3)).board
        pad = board.geometry.padded
        enclosed._READ.clear()
        wall_liberties = len(board.liberties[board.root[pad[parse_vertex("D4", 7)]]])
        return wall_liberties, enclosed_kill(board, board.root[pad[parse_vertex("A7", 7)]]) is not None

    assert read("O O O O O O .") == (1, False)  # white takes nine stones at E4
    assert enclosed.settled_by_reading(board_from_ascii(SHORT_WALL.format("O O O O O O .")).board) == ([], [])
    assert read(". . . . O O .") == (5, True)  # the wall stands and white dies, as with BULKY_FIVE's


# Three strings in atari. White's B6: black's capture at C6 is a ko (white takes back at B6). White's F6: black's
# F7 takes it and keeps three liberties. Black's D1: white's C1 takes it but leaves A1 to C1 in atari, and black's
# D1 takes three back (a snapback).
IN_ATARI = """
    . X O . . . .
    X O . O X O X
    . X O . . X .
    . . . . . . .
    . . . . . . .
    X X X O . . .
    O O . X O . .
"""


def test_only_a_wall_taken_for_good_leaves_the_seki() -> None:
    board = board_from_ascii(IN_ATARI).board
    pad = board.geometry.padded

    def taken(vertex: str) -> bool:
        return enclosed._takes_for_good(board, board.root[pad[parse_vertex(vertex, 7)]])

    assert not taken("B6")  # the ko
    assert not taken("C7")  # two liberties: not in atari
    assert taken("F6")  # one stone taken, the taker with liberties to spare
    assert not taken("D1")  # the snapback

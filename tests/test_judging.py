"""engine/play/judging.py: dead stones from an ownership map, a second look at near-even strings, the score check.

The ownership maps here are written by hand (what random playouts might say), so each test shows one step."""
from __future__ import annotations

import numpy as np

from tabula.engine.play.judging import judge_dead_stones
from tabula.engine.rules.coords import format_vertex, parse_vertex
from tabula.engine.rules.game import GameState
from tests.conftest import (
    SEKI_INNER_BLACK,
    SEKI_INNER_WHITE,
    SEKI_ONE_EYE_EACH,
    SEKI_SHARED_EYES,
    SEKI_SHARED_EYES_BLACK,
    board_from_ascii,
)


def walls(size: int, black: tuple[str, ...]) -> GameState:
    """White's wall on D and black's on E, so that white owns A-D and black E to the edge, with ``black`` stones
    inside white's area."""
    rows = []
    for y in range(size, 0, -1):
        row = ["." for _ in range(size)]
        row[3], row[4] = "O", "X"
        rows.append(" ".join(row))
    state = board_from_ascii("\n".join(rows))
    for vertex in black:
        state.place_setup(parse_vertex(vertex, size), 1)
    return state


class HandOwnership:
    """Ownership maps by hand: white owns A-D and black the rest, except the points given (black's view); a second
    map, for the position without the clearly dead stones, may say otherwise. Records the positions it saw."""

    def __init__(self, first: dict[str, float], again: dict[str, float] | None = None):
        self.maps = [first, again if again is not None else first]
        self.seen: list[GameState] = []

    def __call__(self, state: GameState) -> np.ndarray:
        size = state.size
        owned = np.array([-1.0 if x < 4 else 1.0 for y in range(size) for x in range(size)], dtype=np.float32)
        for vertex, value in self.maps[min(len(self.seen), 1)].items():
            owned[parse_vertex(vertex, size)] = value
        self.seen.append(state)
        return owned


def names(points: list[int], size: int) -> list[str]:
    return sorted(format_vertex(p, size) for p in points)


INVADERS = ("B2", "B4", "B5", "B6")
NEAR_EVEN_B4_B6 = {"B4": -0.1, "B5": -0.1, "B6": -0.1}  # the B4-B6 string leans dead, near even
LIVES_AGAIN = {"B4": 0.5, "B5": 0.5, "B6": 0.5}  # ... and lives once B2 is off the board


def test_strings_far_from_even_are_judged_by_the_map_alone():
    state = walls(13, INVADERS)
    ownership = HandOwnership({})  # every black stone inside white's area is white's
    assert names(judge_dead_stones(state, ownership), 13) == ["B2", "B4", "B5", "B6"]
    assert len(ownership.seen) == 1


def test_a_near_even_string_is_judged_again_without_the_clearly_dead_stones():
    state = walls(13, INVADERS)
    ownership = HandOwnership(NEAR_EVEN_B4_B6, again=LIVES_AGAIN)
    assert names(judge_dead_stones(state, ownership), 13) == ["B2"]
    assert len(ownership.seen) == 2
    without = ownership.seen[1]
    assert without.color_at(parse_vertex("B2", 13)) == 0 and without.color_at(parse_vertex("B5", 13)) != 0


def test_9x9_keeps_the_first_verdict():
    ownership = HandOwnership(NEAR_EVEN_B4_B6, again=LIVES_AGAIN)
    assert names(judge_dead_stones(walls(9, INVADERS), ownership), 9) == ["B2", "B4", "B5", "B6"]
    assert len(ownership.seen) == 1


def test_a_count_far_from_the_network_score_changes_a_near_even_verdict():
    state = walls(9, ("B4", "B5", "B6"))
    lives = {"B4": 0.2, "B5": 0.2, "B6": 0.2}
    # Alive, B4-B6 makes A-C dame: B+31.5. The network expects W+2: the string is dead (B+1.5).
    assert state.area_score() == 31.5
    assert names(judge_dead_stones(state, HandOwnership(lives), score=-2.0), 9) == ["B4", "B5", "B6"]
    # A count that names the network's winner stands, however far apart (the score head shrinks large margins).
    assert judge_dead_stones(state, HandOwnership(lives), score=1.0) == []
    # A string far from even is never changed, however far the count is from the score.
    assert judge_dead_stones(state, HandOwnership({"B4": 0.9, "B5": 0.9, "B6": 0.9}), score=-2.0) == []
    # Without a score head there is no check.
    assert judge_dead_stones(state, HandOwnership(lives)) == []


def test_a_dead_group_of_several_strings_changes_together():
    # B4 and B6 are two strings a point apart: either alone leaves A-C dame, so the count moves only when both go.
    state = walls(9, ("B4", "B6"))
    lives = {"B4": 0.2, "B6": 0.2}
    assert state.area_score() == 30.5
    assert names(judge_dead_stones(state, HandOwnership(lives), score=-2.0), 9) == ["B4", "B6"]


def seki_ownership(black_inner: float):
    """A map of ``SEKI_ONE_EYE_EACH`` (black's view): black's outer group owns E-G, white's A-D, and the inner strings
    are near even, as random play, which breaks a seki at random, leaves them; black's as given."""
    def ownership(state: GameState) -> np.ndarray:
        owned = np.array([-1.0 if x < 4 else 1.0 for y in range(7) for x in range(7)], dtype=np.float32)
        for vertex in SEKI_INNER_BLACK:
            owned[parse_vertex(vertex, 7)] = black_inner
        for vertex in SEKI_INNER_WHITE:
            owned[parse_vertex(vertex, 7)] = -0.2  # white's view +0.2: it lives, near even
        return owned
    return ownership


def test_a_near_even_string_in_seki_is_alive():
    state = board_from_ascii(SEKI_ONE_EYE_EACH)
    # The map leans dead on black's inner string; put back on the board, it lives in seki with white's.
    assert judge_dead_stones(state, seki_ownership(-0.1)) == []
    # Nor can the score check take either string in the seki off: counted W+10.5, a network expecting B+40 would
    # otherwise turn white's near-even inner string dead.
    assert state.area_score() == -10.5
    assert judge_dead_stones(state, seki_ownership(-0.1), score=40.0) == []


def test_a_group_living_by_a_seki_of_four_strings_is_alive_when_the_map_leans_it_dead():
    """Random play breaks the seki at the top right of SEKI_SHARED_EYES and leaves black's 11 stones there near
    even, leaning dead; put back, they live in the seki, as GNU Go counts them."""
    state = board_from_ascii(SEKI_SHARED_EYES)
    leaning = {parse_vertex(v, 13) for v in SEKI_SHARED_EYES_BLACK}

    def ownership(position: GameState) -> np.ndarray:
        owned = np.array([1.0 if position.color_at(p) == 1 else -1.0 if position.color_at(p) == 2 else 0.0
                          for p in range(169)], dtype=np.float32)
        for p in leaning:
            owned[p] = -0.2
        return owned

    assert judge_dead_stones(state, ownership) == []


def test_a_clearly_dead_string_is_not_looked_at_for_seki():
    # The seki test reads liberties, not eye shape; a string the map gives away clearly keeps its verdict.
    state = board_from_ascii(SEKI_ONE_EYE_EACH)
    assert names(judge_dead_stones(state, seki_ownership(-0.6)), 7) == sorted(SEKI_INNER_BLACK)

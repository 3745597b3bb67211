"""tools/check/dead_stones.py: a finished game's dead stones and score, an engine against GNU Go."""
import random
import sys

from tabula.engine.rules.coords import BLACK, WHITE
from tabula.engine.rules.game import GameState
from tabula.engine.rules.playout import random_move
from tabula.engine.rules.sgf import write_sgf
from tabula.tools.check.dead_stones import check, dame_parity, dead_set, score_margin
from tests.conftest import board_from_ascii


def finished_game(seed: int) -> bytes:
    """A random 9x9 game played to two passes (no own eye filled), as SGF."""
    rng = random.Random(seed)
    state = GameState(9)
    while not state.is_game_over():
        state.play(random_move(state, rng))
    return write_sgf(state)


def test_dead_set_reads_a_multiline_reply():
    assert dead_set("A1 B2\nc3") == {"A1", "B2", "C3"}
    assert dead_set("") == set()


def test_the_random_player_and_gnugo_judge_finished_games(tmp_path, gnugo):
    for seed in range(3):
        (tmp_path / f"g{seed}.sgf").write_bytes(finished_game(seed))
    agreement = check([str(tmp_path)], f"{sys.executable} -m tabula.gtp --player random --seed 1",
                      f"{gnugo} --mode gtp --chinese-rules", counted_only=False, max_games=None,
                      progress=lambda line: None)
    assert agreement.games[9] == 3
    assert 0 <= agreement.same_dead[9] <= 3 and 0 <= agreement.same_score[9] <= 3
    lines = agreement.lines()
    assert lines[0].startswith("9x9: 3 games, dead stones agree in ")


def test_score_margin_reads_final_score_replies():
    assert [score_margin(r) for r in ("B+7.5", "w+0.5", "0", " W+12 ", "B+", "Void", "")] == \
        [7.5, -0.5, 0.0, -12.0, None, None, None]


DAME_BETWEEN = """
    X X . O O
    X X . O O
    X X . O O
    X X . O O
    X X O O O
"""


def test_the_dame_parity_gives_the_odd_neutral_point_to_the_side_to_move():
    """Four neutral points: GNU Go and the position as it stands agree. Take one white stone off (dead, say) and
    five are left: GNU Go's count gives the side to move one more point than the position as it stands."""
    for to_move, sign in ((BLACK, 1.0), (WHITE, -1.0)):
        data = write_sgf(board_from_ascii(DAME_BETWEEN, to_move=to_move, komi=0.5))
        assert dame_parity(data, set()) == 0.0
        assert dame_parity(data, {"C1"}) == sign


def test_counted_only_keeps_handicap_games_decided_by_counting(tmp_path):
    """Handicap games count too (their final positions are judged like any other); a resignation is not counted."""
    from tabula.tools.check.dead_stones import finished_games
    moves = ";W[ee];B[ge];W[ce];B[gg]"
    for name, result in (("counted", "B+3.5"), ("resigned", "B+R")):
        (tmp_path / f"{name}.sgf").write_text(
            f"(;FF[4]GM[1]SZ[9]KM[0.5]HA[2]AB[cc][gc]RE[{result}]{moves})")
    kept = [name for name, _, _ in finished_games([str(tmp_path)], counted_only=True, max_games=None)]
    assert [name.rsplit("/", 1)[-1] for name in kept] == ["counted.sgf"]

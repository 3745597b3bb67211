"""tools/check/dead_stones.py: a finished game's dead stones and score, an engine against GNU Go."""
import random
import sys

from engine.rules.game import GameState
from engine.rules.playout import random_move
from engine.rules.sgf import write_sgf
from tools.check.dead_stones import check, dead_set


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
    agreement = check([str(tmp_path)], f"{sys.executable} -m gtp --player random --seed 1",
                      f"{gnugo} --mode gtp --chinese-rules", counted_only=False, max_games=None,
                      progress=lambda line: None)
    assert agreement.games[9] == 3
    assert 0 <= agreement.same_dead[9] <= 3 and 0 <= agreement.same_score[9] <= 3
    lines = agreement.lines()
    assert lines[0].startswith("9x9: 3 games, dead stones agree in ")

"""The game interface (engine/rules/interface.py): Go's GameState and gomoku's GomokuState both satisfy it, and the
encodings it names (engine/net/encodings.py) match what the states give."""
from __future__ import annotations

import numpy as np
import pytest

from tabula.engine.net.encodings import LEELAZ, encoding_named, encoding_of
from tabula.engine.play.search import terminal_outcome
from tabula.engine.rules.coords import BLACK, PASS, WHITE
from tabula.engine.rules.game import GameState, Rules
from tabula.engine.rules.gomoku import GomokuState
from tabula.engine.rules.interface import Game, batch_legal_masks, game_key, has_pass

MEMBERS = ("INPUT_ENCODING", "size", "to_move", "moves", "policy_size", "hash", "copy", "play", "legal_moves",
           "legal_mask", "terminal_value")


@pytest.mark.parametrize("state", [GameState(9), GomokuState(9)], ids=["go", "gomoku"])
def test_both_games_satisfy_the_protocol(state):
    assert isinstance(state, Game)
    for name in MEMBERS:
        assert hasattr(state, name), name
    assert state.to_move == BLACK and state.moves == []
    mask = state.legal_mask()
    assert mask.dtype == bool and mask.shape == (state.policy_size,)
    assert np.flatnonzero(mask[:state.size * state.size]).tolist() == state.legal_moves()
    assert state.terminal_value() is None
    encoding = encoding_of(state)
    assert encoding.name == type(state).INPUT_ENCODING
    assert encoding.policy_size(state.size) == state.policy_size
    assert encoding.has_pass == has_pass(state)
    planes = encoding.encode_batch([state], None)
    assert planes.shape == (1, encoding.planes, 9, 9) and planes.dtype == np.float32


def test_policy_sizes_and_the_pass():
    assert GameState(9).policy_size == 82 and has_pass(GameState(9))
    assert GomokuState(9).policy_size == 81 and not has_pass(GomokuState(9))
    assert GameState(9).legal_mask()[-1]  # pass, always legal


def test_go_terminal_value_is_the_count_after_two_passes():
    state = GameState(5, Rules(komi=0.5))
    state.play(12)  # black in the centre owns the board
    assert state.terminal_value() is None
    state.play(PASS)
    assert state.terminal_value() is None
    state.play(PASS)
    assert state.to_move == WHITE and state.terminal_value() == -1.0
    assert (state.terminal_value(), state.terminal_score()) == terminal_outcome(state)
    assert state.terminal_score() == -24.5


def test_gomoku_terminal_value_is_minus_one_for_the_side_to_move_after_a_row():
    state = GomokuState(7, n_in_row=3)
    for move in (0, 7, 1, 8):
        state.play(move)
    assert state.terminal_value() is None
    state.play(2)  # black: 0 1 2 in a row
    assert state.to_move == WHITE and state.terminal_value() == -1.0


def test_hashes_tell_the_side_to_move_apart():
    for state in (GameState(9), GomokuState(9)):
        other = state.copy()
        other.to_move = WHITE
        assert state.hash != other.hash


def test_batched_legal_masks_match_each_mask():
    go = [GameState(7) for _ in range(3)]
    go[1].play(24)
    gomoku = [GomokuState(7) for _ in range(3)]
    gomoku[2].play(10)
    for states in (go, gomoku):
        expected = np.stack([s.legal_mask() for s in states])
        assert np.array_equal(batch_legal_masks(states), expected)


def test_the_game_key_tells_games_apart():
    assert game_key(GameState(9)) == game_key(GameState(9))
    assert game_key(GameState(9)) != game_key(GameState(9, Rules(komi=5.5)))
    assert game_key(GameState(9)) != game_key(GomokuState(9))
    assert game_key(GomokuState(9)) != game_key(GomokuState(11))
    assert game_key(GomokuState(9, n_in_row=5)) != game_key(GomokuState(9, n_in_row=4))  # its ``rules``


def test_encodings_by_name():
    assert encoding_named("leelaz-18") is LEELAZ
    assert encoding_named("gomoku-4").planes == 4
    with pytest.raises(ValueError, match="unknown input encoding"):
        encoding_named("chess-119")
    # the trial planes are the empty board, black to move: Go's plane 16 all ones
    planes = LEELAZ.trial_planes(9)
    assert planes[0, 16].min() == 1.0 and planes.sum() == 81

"""The SGF bridge: round trips, handicap and setup stones, move numbers, and clear errors for bad files."""
from __future__ import annotations

import random

import pytest

from tabula.engine.play.player import Player, RandomGoPicker
from tabula.engine.rules.coords import BLACK, PASS, WHITE, parse_vertex
from tabula.engine.rules.game import GameState, Rules
from tabula.engine.rules.playout import random_move
from tabula.engine.rules.sgf import SgfError, load_state, read_sgf, replay, write_sgf


def random_game(size: int, rng: random.Random, moves: int | None = None) -> GameState:
    state = GameState(size, Rules(komi=6.5))
    while not state.is_game_over() and (moves is None or len(state.moves) < moves):
        state.play(random_move(state, rng))
    return state


@pytest.mark.parametrize("size", [2, 5, 9, 19, 25])
def test_round_trip_of_a_random_game(size: int, rng: random.Random) -> None:
    state = random_game(size, rng, moves=150)
    data = write_sgf(state, "Black Player", "Wh\u00eete", result="B+R")
    loaded = load_state(data)
    assert loaded.moves == state.moves
    assert loaded.board.color == state.board.color
    assert loaded.rules.komi == 6.5 and loaded.to_move == state.to_move
    record = read_sgf(data)
    assert (record.black_name, record.white_name, record.result) == ("Black Player", "Wh\u00eete", "B+R")


def test_round_trip_with_handicap_and_passes(rng: random.Random) -> None:
    player = Player(RandomGoPicker(rng), size=9)
    player.fixed_handicap(3)
    player.play(WHITE, PASS)
    player.play(BLACK, parse_vertex("E5", 9))
    loaded = load_state(player.to_sgf())
    assert loaded.handicap == 3 and sorted(loaded.setup) == sorted(player.state.setup)
    assert loaded.moves == [(WHITE, PASS), (BLACK, parse_vertex("E5", 9))]
    assert loaded.board.color == player.state.board.color


def test_handicap_setup_without_moves_gives_white_the_move() -> None:
    state = load_state(b"(;SZ[9]HA[2]AB[cc][gg])")
    assert state.to_move == WHITE and state.handicap == 2
    assert load_state(b"(;SZ[5]AB[aa]AW[bb]PL[W])").to_move == WHITE
    assert load_state(b"(;SZ[5]AB[aa]AW[bb])").to_move == BLACK


def test_move_number_stops_before_that_move() -> None:
    data = b"(;SZ[9]KM[7];B[ee];W[cc];B[gg])"
    assert len(load_state(data, move_number=1).moves) == 0
    assert len(load_state(data, move_number=3).moves) == 2
    assert len(load_state(data, move_number=99).moves) == 3
    assert len(replay(read_sgf(data))) == 4  # the setup position and one per move


@pytest.mark.parametrize("data, message", [
    (b"", "unreadable"),
    (b"not sgf", "unreadable"),
    (b"(;SZ[9];B[ee];W[ee])", "illegal move 2"),
    (b"(;SZ[40];B[ee])", "size"),
    (b"(;SZ[9];B[zz])", "malformed move in node 1"),
    (b"(;SZ[9]KM[much];B[ee])", "SGF"),
    (b"(;SZ[9];B[ee];AB[cc])", "setup stones after the first move"),
    (b"(;SZ[9]AE[aa])", "AE"),
    (b"(;SZ[3]AB[aa][ab][ba][bb][ca][cb][ac][bc]AW[cc])", "impossible setup"),
    (b"\xff\xfe\x00(", "SGF"),
])
def test_bad_files_raise_sgf_error(data: bytes, message: str) -> None:
    with pytest.raises(SgfError, match=message):
        load_state(data)


def test_player_load_keeps_the_game_on_error(rng: random.Random) -> None:
    player = Player(RandomGoPicker(rng), size=9)
    player.play(BLACK, parse_vertex("D4", 9))
    with pytest.raises(SgfError):
        player.load_sgf(b"(;SZ[9];B[ee];W[ee])")
    assert player.state.moves == [(BLACK, parse_vertex("D4", 9))]
    player.load_sgf(b"(;SZ[13]KM[0.5];B[ee];W[cc])")
    assert player.size == 13 and player.komi == 0.5
    player.undo()
    player.undo()
    assert player.state.moves == []


def test_undo_after_load_walks_back_through_every_position(rng: random.Random) -> None:
    """A loaded game keeps a snapshot every UNDO_SNAPSHOT_MOVES moves, not a copy per move; undo rebuilds the
    rest, and must give exactly the positions the replay went through, across snapshot boundaries."""
    from tabula.engine.play.player import UNDO_SNAPSHOT_MOVES

    state = random_game(9, rng, moves=2 * UNDO_SNAPSHOT_MOVES + 7)
    data = write_sgf(state)
    positions = replay(read_sgf(data))
    player = Player(RandomGoPicker(rng), size=9)
    player.load_sgf(data)
    player.set_komi(3.5)  # komi changes apply to the positions undo brings back
    player.play(player.state.to_move, PASS)
    player.undo()
    for expected in reversed(positions[:-1]):
        player.undo()
        assert player.state.moves == expected.moves
        assert player.state.board.color == expected.board.color
        assert player.state.seen == expected.seen and player.state.recent == expected.recent
        assert player.state.to_move == expected.to_move and player.komi == player.state.rules.komi == 3.5
    with pytest.raises(Exception, match="cannot undo"):
        player.undo()


def test_undo_after_load_then_play_then_undo(rng: random.Random) -> None:
    data = b"(;SZ[9];B[ee];W[cc];B[gg];W[cg])"
    player = Player(RandomGoPicker(rng), size=9)
    player.load_sgf(data, move_number=4)  # three moves
    player.undo()
    player.play(WHITE, parse_vertex("A1", 9))
    player.undo()
    assert player.state.moves == replay(read_sgf(data), move_number=3)[-1].moves
    player.undo()
    player.undo()
    assert player.state.moves == []
    with pytest.raises(Exception, match="cannot undo"):
        player.undo()


def test_replay_snapshots_and_the_last_position() -> None:
    record = read_sgf(b"(;SZ[9];B[ee];W[cc];B[gg];W[cg];B[aa])")
    assert [len(p.moves) for p in replay(record, snapshot_every=2)] == [0, 2, 4, 5]
    assert [len(p.moves) for p in replay(record, snapshot_every=5)] == [0, 5]
    assert [len(p.moves) for p in replay(record, snapshot_every=0)] == [5]
    assert [len(p.moves) for p in replay(record, move_number=1)] == [0]


def test_writing_keeps_the_move_order() -> None:
    state = load_state(b"(;SZ[9];B[ee];W[cc];B[];W[gg])")
    assert load_state(write_sgf(state)).moves == state.moves

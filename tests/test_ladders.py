"""`python3 -m tabula.tools.check.ladders`: the ladder reader on hand-made positions, and the command's table on a
tiny match directory where white runs a dead ladder and loses; bad directories refused with a clear message."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tabula.engine.rules.board import Board
from tabula.engine.rules.coords import BLACK, COLUMNS, WHITE, parse_vertex
from tabula.tools.check.ladders import ladder_read, main


def board_with(black: list[str], white: list[str], size: int = 19) -> Board:
    board = Board(size)
    for color, vertices in ((BLACK, black), (WHITE, white)):
        for vertex in vertices:
            board.place_setup_stone(board.geometry.padded[parse_vertex(vertex, size)], color)
    return board


def at(board: Board, vertex: str) -> int:
    return board.geometry.padded[parse_vertex(vertex, board.size)]


LADDER = (["D4"], ["C4", "D5", "E3"])  # black D4 with 2 liberties (D3, E4), white to move: a ladder either way


def test_a_ladder_on_an_empty_board_is_captured():
    board = board_with(*LADDER)
    verdict, plies = ladder_read(board, at(board, "D4"), WHITE)
    assert verdict is True and plies >= 5 and plies % 2 == 1  # the attacker plays first and last
    board = board_with(["D4"], ["C4", "D5", "E3", "D3"])  # in atari, black to move: extending does not help
    assert ladder_read(board, at(board, "D4"), BLACK)[0] is True
    assert ladder_read(board, at(board, "D4"), BLACK, budget=1)[0] is None  # read too little to say
    with pytest.raises(ValueError):
        ladder_read(board, at(board, "K10"), WHITE)  # no stone there
    corner = board_with(["B2"], ["B3", "C2", "A2"])  # already in atari, white to move: captured at once
    assert ladder_read(corner, at(corner, "B2"), WHITE) == (True, 1)
    free = board_with(["K10"], ["K11"])  # 3 liberties: no ladder
    assert ladder_read(free, at(free, "K10"), WHITE) == (False, 0)


def test_breakers_on_both_diagonals_let_it_escape():
    black, white = LADDER
    board = board_with(black + ["O15"], white)  # one breaker: the ladder towards the lower left still works
    assert ladder_read(board, at(board, "D4"), WHITE)[0] is True
    board = board_with(black + ["O15", "B2"], white)
    assert ladder_read(board, at(board, "D4"), WHITE) == (False, 0)


def test_the_defender_escapes_by_capturing_a_laddering_stone():
    board = board_with(["D4", "F3", "E2"], ["C4", "D5", "E3", "D3"])  # white E3 in atari (only E4 left)
    assert ladder_read(board, at(board, "D4"), BLACK) == (False, 0)


# -- the command ----------------------------------------------------------------------------------------------------


def sgf_point(vertex: str) -> str:
    return chr(ord("a") + COLUMNS.index(vertex[0])) + chr(ord("a") + 19 - int(vertex[1:]))


def sgf(setup: list[str], moves: list[str], result: str) -> str:
    """White first (handicap), then alternately; '' is a pass."""
    played = "".join(f";{'WB'[i % 2]}[{sgf_point(m) if m else ''}]" for i, m in enumerate(moves))
    return f"(;GM[1]FF[4]SZ[19]KM[0.5]HA[{len(setup)}]AB{''.join(f'[{sgf_point(v)}]' for v in setup)}" \
           f"RE[{result}]{played})"


# White D4 runs out of atari twice (E4, E5) into the ladder, turns away with a self-atari at Q16, and black takes
# both: 3 stones captured in the ladder, 1 elsewhere.
LOST = sgf(["C4", "D5", "E3", "Q15", "P16", "R16"],
           ["D4", "D3", "E4", "F4", "E5", "E6", "Q16", "F5", "K10", "Q17"], "B+R")
WON = sgf(["C4", "D5", "E3"], ["K10", "", ""], "W+0.5")


def write_match(directory: Path, games: list[tuple[str, str, str | None]]) -> str:
    """A match directory: gnugo-10 black, tabula white, each game (SGF text, winner, fault)."""
    (directory / "games").mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"names": ["gnugo-10", "tabula"]}))
    lines = []
    for i, (text, winner, fault) in enumerate(games):
        (directory / "games" / f"0-1-{i:04d}.sgf").write_text(text)
        lines.append(json.dumps({"game": f"0-1-{i:04d}", "black": 0, "white": 1, "winner": winner, "fault": fault,
                                 "sgf": f"games/0-1-{i:04d}.sgf"}))
    (directory / "results.jsonl").write_text("\n".join(lines) + "\n")
    return str(directory)


def test_the_table_counts_dead_ladder_runs_and_stones_by_outcome(tmp_path, capsys):
    directory = write_match(tmp_path / "m", [(LOST, "B", None), (WON, "W", None), (WON, "W", "crash")])
    assert main([directory]) == 0
    out = capsys.readouterr().out
    assert "3 games from 1 match directory, tabula's side"  in out
    assert "| lost | 1 | 1 (100%) | 1 (100%) | 4 | 3 (75.0%) |" in out
    assert "| won | 1 | 0 (0%) | 0 (0%) | 0 | 0 (-) |" in out
    assert "| won by forfeit | 1 | 0 (0%) |" in out
    assert main([directory, "--min-plies", "99"]) == 0  # no ladder that long: the stones are not ladder stones
    assert "| lost | 1 | 0 (0%) | 0 (0%) | 4 | 0 (0.0%) |" in capsys.readouterr().out
    assert main([directory, "--player", "gnugo-10"]) == 0  # black's side: won the game white lost
    assert "| won | 1 | 0 (0%) | 0 (0%) | 0 | 0 (-) |" in capsys.readouterr().out


def test_bad_directories_and_files_are_refused_or_skipped(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main([str(tmp_path / "absent")])
    assert "absent: no such directory" in capsys.readouterr().err
    directory = write_match(tmp_path / "m", [(LOST, "B", None), (WON, "W", None)])
    with pytest.raises(SystemExit):
        main([directory, "--player", "leela"])
    assert "no engine named 'leela'" in capsys.readouterr().err
    (Path(directory) / "games" / "0-1-0001.sgf").unlink()
    assert main([directory]) == 0
    captured = capsys.readouterr()
    assert "0-1-0001.sgf: skipped" in captured.err and "(1 skipped)" in captured.out
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        main([str(tmp_path / "empty")])
    assert "config.json" in capsys.readouterr().err

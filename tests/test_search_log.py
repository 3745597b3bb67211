"""tools.compete.search_log: an engine's per-move search lines, from a match's logs, given to the games they belong
to."""
from __future__ import annotations

from pathlib import Path

from tabula.tools.compete.search_log import assign, main, read_log

ENGINE_LOG = """\
tabula: network tabula-6x64-anysize-int8.onnx (6x64 pooled, 2-25, int8) on CPUExecutionProvider
tabula.search: move 1: C3 after 40 playouts (40 visits, 0 reused) in 0.50 s, 80 playouts/s, batch 7.0, nodes 40
     C3      5 visits  75.0% (lcb  74.5%) prior   9.9%  pv C3 G7
tabula.search: move 3: C7 after 60 playouts (60 visits, 12 reused) in 0.80 s, 75 playouts/s, batch 7.0, nodes 60
tabula.search: move 1: E5 after 50 playouts (50 visits, 0 reused) in 0.40 s, 125 playouts/s, batch 7.0, nodes 50
tabula: network tabula-6x64-anysize-int8.onnx (6x64 pooled, 2-25, int8) on CPUExecutionProvider
tabula.search: move 2: D5 after 900 playouts (900 visits, 0 reused) in 0.90 s, 1000 playouts/s, batch 7.9, nodes 900
tabula.search: move 4: pass after 100 playouts (100 visits, 0 reused) in 0.20 s, 500 playouts/s, batch 7.9, nodes 99
"""


def game(path: Path, moves: str) -> None:
    path.write_text(f"(;FF[4]GM[1]SZ[9]KM[7.5]RE[B+R]{moves})")


def match_dir(tmp_path: Path) -> Path:
    """Engine 0 played black in 0-1-0000 and white in 0-1-0001. Between them a game it played black was cut short
    by a stop after its first move, the E5 that 0-1-0001 also opened with; the resumed match started the engine
    again."""
    (tmp_path / "games").mkdir()
    (tmp_path / "logs").mkdir()
    game(tmp_path / "games" / "0-1-0000.sgf", ";B[cg];W[gc];B[cc];W[gg]")
    game(tmp_path / "games" / "0-1-0001.sgf", ";B[ee];W[de];B[ff];W[]")
    (tmp_path / "logs" / "engine0-w0.log").write_text(ENGINE_LOG)
    return tmp_path


def test_a_log_splits_into_games_where_the_move_number_or_the_engine_starts_again(tmp_path):
    runs = read_log(match_dir(tmp_path) / "logs" / "engine0-w0.log")
    assert [[m.number for m in run] for run in runs] == [[1, 3], [1], [2, 4]]
    assert runs[0][1].move == "C7" and runs[0][1].playouts == 60 and runs[0][1].seconds == 0.8


def test_each_run_goes_to_the_finished_game_whose_moves_it_names(tmp_path):
    assigned, unmatched = assign(match_dir(tmp_path))
    assert sorted(assigned[0]) == ["0-1-0000", "0-1-0001"]
    assert [m.move for m in assigned[0]["0-1-0001"]] == ["D5", "pass"]
    assert unmatched == {0: 1}  # the interrupted game's E5 is counted nowhere


def test_the_command_prints_medians_and_writes_a_line_a_move(tmp_path, capsys):
    out = match_dir(tmp_path)
    assert main([str(out), "--write", str(tmp_path / "search")]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split()[:4] == ["engine0", "2", "4", "80"]  # 2 games, 4 moves, median of 40, 60, 100, 900
    # game, move number, move, playouts, seconds, and the chosen move's winrate where the log printed candidates
    assert (tmp_path / "search" / "engine0.txt").read_text().splitlines() == [
        "0-1-0000 1 C3 40 0.5 0.7500", "0-1-0000 3 C7 60 0.8 -", "0-1-0001 2 D5 900 0.9 -",
        "0-1-0001 4 pass 100 0.2 -"]


def test_a_directory_without_logs_is_a_clear_error(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert "no engine logs" in capsys.readouterr().err


def test_the_winrate_on_the_search_line_serves_where_no_candidates_follow(tmp_path):
    log = tmp_path / "engine0-w0.log"
    log.write_text("tabula: network x.onnx (1x8 agz, 9, fp32) on CPUExecutionProvider\n"
                   "tabula.search: move 1: E5 after 50 playouts (50 visits, 0 reused) in 0.02 s, winrate 48.5%, "
                   "2500 playouts/s, batch 4.0, cache hits 0, nodes 50\n")
    [[move]] = read_log(log)
    assert (move.move, move.playouts, move.winrate) == ("E5", 50, 0.485)


def test_a_run_that_ends_in_a_resignation_goes_to_the_game_it_ended(tmp_path):
    (tmp_path / "games").mkdir()
    (tmp_path / "logs").mkdir()
    game(tmp_path / "games" / "0-1-0000.sgf", ";B[cg];W[gc];B[cc]")
    game(tmp_path / "games" / "0-1-0001.sgf", ";B[ee];W[de];B[ff];W[dd]")
    (tmp_path / "logs" / "engine1-w0.log").write_text(
        "tabula.search: move 2: G7 after 40 playouts (40 visits, 0 reused) in 0.50 s, winrate 40.0%, nodes 40\n"
        "tabula.search: move 4: resign after 30 playouts (30 visits, 0 reused) in 0.10 s, winrate 3.0%, nodes 30\n")
    assigned, unmatched = assign(tmp_path)
    assert [m.move for m in assigned[1]["0-1-0000"]] == ["G7", "resign"]
    assert unmatched == {}
    # the same lines name no game that went on past move 3
    (tmp_path / "games" / "0-1-0000.sgf").unlink()
    assert assign(tmp_path) == ({}, {1: 1})
